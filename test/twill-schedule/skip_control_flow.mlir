// A loop with control flow in its body is left to Triton: one remark names
// the loop and the offending op's location, and nothing is written. Input:
// real Triton 3.6.0 TTGIR (cuda:90) of a block-sparse GEMM
// (Inputs/triton36/test_kernels.py) whose loop keeps an scf.if around the
// second load and the wgmma; captured before add_assign_latencies by
// Inputs/triton36/capture.py.

// RUN: %twill-opt %inputs/triton36/loop_with_if_sm90.before.mlir --twill-schedule="arch=sm90 scope=all" 2>&1 | FileCheck %s

// CHECK: test_kernels.py:43:22: remark: twill: skipped loop: control flow inside the loop body (`scf.if`) (at loc("{{.*}}test_kernels.py":45:11)); Triton's own schedule applies
// CHECK-NOT: loop.stage
// CHECK-NOT: loop.cluster
// CHECK-NOT: tt.scheduled_max_stage
