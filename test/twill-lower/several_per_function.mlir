// lower=on lowers every loop of a function it can, each to a ws op of its
// own: Triton joins every warp of the CTA at the end of each ws op, and the
// verifier proves each after the ones before it. A loop inside an existing
// ws op's partitions keeps the attributes (ws ops cannot nest). A loop
// still marked tt.warp_specialize beside a lowered one loses the mark, so
// that Triton's Hopper warp specialization does not act on the function.

// RUN: %twill-opt %inputs/two_loops_sm90.mlir --twill-schedule="lower=on scope=all groups=1 cache=off" 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: %twill-opt %inputs/two_loops_sm90.mlir --twill-schedule="lower=on scope=all groups=1 cache=off" -o %t.mlir
// RUN: %twill-opt %t.mlir --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROVED
// RUN: %twill-opt %inputs/two_marked_loops_sm90.mlir --twill-schedule="lower=only scope=all groups=1 cache=off" 2>&1 | FileCheck %s --check-prefix=UNMARK
// RUN: %twill-opt %inputs/warp_specialized_sm90.mlir --twill-schedule="lower=force scope=all groups=1" 2>&1 | FileCheck %s --check-prefix=NESTED

// TWO: remark: loc("ws_loop"): twill: lowered to 1+1 partitions {{.*}} proved by the pipeline verifier
// TWO: remark: loc("plain_loop"): twill: lowered to 1+1 partitions {{.*}} proved by the pipeline verifier
// TWO-COUNT-2: "ttg.warp_specialize"(
// TWO-NOT: "ttg.warp_specialize"(

// PROVED-COUNT-2: twill: pipeline proved safe: {{.*}} trip counts 0..=12

// UNMARK: remark: loc("ws_loop"): twill: lowered to 1+1 partitions {{.*}} proved by the pipeline verifier
// UNMARK: remark: loc("pointer_loop"): twill: skipped loop: lowering refused: `tt.load` in the variable-latency group {{.*}}; tt.warp_specialize removed: its function holds twill's warp-specialized code
// UNMARK: "ttg.warp_specialize"(
// UNMARK-NOT: tt.warp_specialize
// UNMARK: "tt.return"

// NESTED-COUNT-2: twill: lowering refused: the loop is inside a ttg.warp_specialize (ws ops cannot nest)
// NESTED-NOT: twill: lowered to
