// lower=force on a loop outside the lowering's shape: the sub-tiled FA
// forward, whose schedule has two compute groups (one per sub-tile; the
// lowering builds one compute partition so far). The loop keeps today's
// attributes and the remark says why.

// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.6 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// CHECK: remark: twill: scheduled attn_fwd_general_kernel_loop1:
// CHECK: remark: twill: lowering refused: 2 compute groups (one is supported); the schedule is written as attributes
// CHECK-NOT: ttg.warp_specialize"
// CHECK: loop.stage
// CHECK: tt.scheduled_max_stage

// REPORT: "lowering": {
// REPORT-NEXT: "lowered": false,
// REPORT: "refused": {
// REPORT-NEXT: "code": "compute_groups",
// REPORT-NEXT: "detail": 2
