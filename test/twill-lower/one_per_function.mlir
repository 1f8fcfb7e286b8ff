// lower=force lowers at most one loop per function: a second loop of a
// function that already holds a ttg.warp_specialize keeps the attributes
// (two ws ops in one function, or one nested in another, are outside the
// supported shape), and so do loops inside an existing ws op's partitions.

// RUN: %twill-opt %inputs/two_loops_sm90.mlir --twill-schedule="lower=force scope=all groups=1" 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: %twill-opt %inputs/warp_specialized_sm90.mlir --twill-schedule="lower=force scope=all groups=1" 2>&1 | FileCheck %s --check-prefix=NESTED

// TWO: remark: loc("ws_loop"): twill: lowered to 1+1 partitions
// TWO: remark: loc("plain_loop"): twill: lowering refused: the function already has a ttg.warp_specialize (one per function is supported); the schedule is written as attributes
// TWO-COUNT-1: "ttg.warp_specialize"(
// TWO-NOT: "ttg.warp_specialize"(
// TWO: tt.scheduled_max_stage

// NESTED-COUNT-2: twill: lowering refused: the function already has a ttg.warp_specialize
// NESTED-NOT: twill: lowered to
