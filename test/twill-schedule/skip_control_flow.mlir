// A loop with control flow in its body is left to Triton: one remark names
// the loop and the offending op's location, and nothing is written. Input:
// real Triton 3.6.0 TTGIR (cuda:90) of a block-sparse GEMM
// (Inputs/triton36/test_kernels.py) whose loop keeps an scf.if around the
// second load and the wgmma; captured before add_assign_latencies by
// Inputs/triton36/capture.py.

// RUN: %twill-opt %inputs/triton36/loop_with_if_sm90.before.mlir --twill-schedule="arch=sm90 scope=all report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// CHECK: test_kernels.py:43:22: remark: twill: skipped loop: control flow inside the loop body (`scf.if`) (at loc("{{.*}}test_kernels.py":45:11)); Triton's own schedule applies
// CHECK-NOT: loop.stage
// CHECK-NOT: loop.cluster
// CHECK-NOT: tt.scheduled_max_stage
// REPORT: "name": "loop_with_if_kernel_loop1",
// REPORT: "decision": "skipped",
// REPORT-NEXT: "reason": "not_lowered",
// REPORT-NEXT: "text": "control flow inside the loop body (`scf.if`) (at loc(\"{{.*}}test_kernels.py\":45:11))",
// REPORT-NEXT: "bounds": null,
// REPORT: "schedule": null,
