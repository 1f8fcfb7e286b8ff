// A kernel's loops are solved at once (`jobs`: by default one per core, at
// most the loops), then finished and written one by one in order; the
// answer does not depend on it. A loop solved ahead gets the least share
// of the kernel's budget it can get (the budget over the kernel's loops);
// where that budget decided something (a search cut short, no schedule, an
// evaluation of Triton's schedule left undecided) and its turn brings it
// more, it is solved again with its share.
//
// The input: the causal sub-tiled FA forward of
// third_party/triton/tests/kernels/fa_fwd.py (two loops, each with Triton's
// own schedule) as the hook hands it over on cuda:90 with Triton 3.6.0
// (`TWILL_DUMP_DIR=D python -m bench.compile.coverage`, then `twill-opt
// D/attn_fwd_general_kernel-cuda90-*/input.mlir --mlir-print-op-generic`).
// Within 2M units its first loop leaves most of its 1M share; the second,
// solved ahead with 1M, runs out of it and is solved again with 2M.
// RUN: %twill-opt %inputs/triton36/fa_fwd_causal_subtile_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 triton=3.6 scope=all num-stages=3 budget=2 jobs=1 report=%t.one.json" -o %t.one.mlir 2>&1 | FileCheck %s --check-prefix=REMARKS
// RUN: env RUST_LOG=twill=debug %twill-opt %inputs/triton36/fa_fwd_causal_subtile_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 triton=3.6 scope=all num-stages=3 budget=2 jobs=2 report=%t.two.json" -o %t.two.mlir 2>&1 | FileCheck %s --check-prefixes=AHEAD,REMARKS
// RUN: diff %t.one.mlir %t.two.mlir
// RUN: grep -v seconds %t.one.json > %t.one.txt
// RUN: grep -v seconds %t.two.json > %t.two.txt
// RUN: diff %t.one.txt %t.two.txt
// The default budget: both loops keep their answers from ahead.
// RUN: %twill-opt %inputs/triton36/fa_fwd_causal_subtile_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 triton=3.6 scope=all num-stages=3 jobs=1" -o %t.default.one.mlir 2>/dev/null
// RUN: env RUST_LOG=twill=debug %twill-opt %inputs/triton36/fa_fwd_causal_subtile_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 triton=3.6 scope=all num-stages=3 jobs=2" -o %t.default.two.mlir 2>&1 | FileCheck %s --check-prefix=DEFAULT
// RUN: diff %t.default.one.mlir %t.default.two.mlir
// RUN: not %twill-opt %inputs/triton36/fa_fwd_causal_subtile_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 jobs=300" 2>&1 | FileCheck %s --check-prefix=BAD

// AHEAD: loop{{.*}}attn_fwd_general_kernel_loop1{{.*}}share{{.*}}1000000{{.*}}ahead{{.*}}true
// AHEAD: loop{{.*}}attn_fwd_general_kernel_loop2{{.*}}share{{.*}}2000000{{.*}}ahead{{.*}}false
// REMARKS: remark: twill: skipped loop: Triton's own schedule is as good in twill's model: I=45
// REMARKS: remark: twill: skipped loop: no schedule: the work budget (2000000 z3 resource units) ran out
// DEFAULT: loop{{.*}}attn_fwd_general_kernel_loop1{{.*}}share{{.*}}8000000{{.*}}ahead{{.*}}true
// DEFAULT: loop{{.*}}attn_fwd_general_kernel_loop2{{.*}}ahead{{.*}}true
// BAD: twill-schedule: jobs: expected 0 to 256, got `300`
