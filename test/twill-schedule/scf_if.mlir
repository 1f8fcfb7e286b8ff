// Loops whose body holds `scf.if`s are scheduled: each `if` is one node of
// the graph, priced by the ops of its costlier branch, and gets its stage
// and cluster as any other op (Triton's pipeliner stages an `if` as one
// op).
//
// 1. The persistent TMA GEMM (third_party/triton/tests/kernels/
//    persistent_matmul.py), real Triton 3.6.0 TTGIR for cuda:90 after
//    Triton's own schedule_loops (Inputs/triton36/capture.py): one loop over
//    (tile, k) steps, the tile's set-up under a scalar `if` (folded: no tile
//    work) and the epilogue (downcast and TMA store of C, the accumulator
//    reset) under a second one, which uses the wgmma's result and lands in
//    its stage, the last.
// RUN: %twill-opt %inputs/triton36/persistent_tma_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all num-stages=3 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// CHECK: remark: twill: scheduled persistent_tma_kernel_loop2: {{.*}}stages=3 {{.*}}4 ops in the graph
// CHECK-LABEL: scf.for
// CHECK-LABEL: scf.for
// CHECK: scf.if
// CHECK: } {loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32}
// CHECK: "tt.descriptor_load"{{.*}}loop.stage = 0 : i32
// CHECK: "tt.descriptor_load"{{.*}}loop.stage = 0 : i32
// CHECK: "ttng.warp_group_dot"{{.*}}{loop.cluster = [[DOT:[0-9]+]] : i32, loop.stage = 2 : i32}
// CHECK: scf.if
// CHECK: "tt.descriptor_store"
// CHECK: } else {
// CHECK: } {loop.cluster = [[DOT]] : i32, loop.stage = 2 : i32}
// CHECK: } {tt.scheduled_max_stage = 2 : i32}

// REPORT: "name": "persistent_tma_kernel_loop2",
// REPORT: "decision": "scheduled",
// REPORT-NEXT: "reason": null,
// REPORT: "ops": 4,

// 2. A block-sparse GEMM (Inputs/triton36/test_kernels.py) whose `if`
//    guards the load of B and the wgmma: the `if` is one synchronous node
//    holding both (a warp-group op, so in the last stage under Triton 3.6's
//    sm90 rule), after the load of A it uses.
// RUN: %twill-opt %inputs/triton36/loop_with_if_sm90.before.mlir --twill-schedule="arch=sm90 scope=all" 2>&1 | FileCheck %s --check-prefix=GUARD

// GUARD: remark: twill: scheduled loop_with_if_kernel_loop1: {{.*}}stages=2 {{.*}}2 ops in the graph
// GUARD-LABEL: scf.for
// GUARD: "tt.load"{{.*}}loop.stage = 0 : i32
// GUARD: scf.if
// GUARD: "ttng.warp_group_dot"
// GUARD: } {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// GUARD: } {tt.scheduled_max_stage = 1 : i32}
