// lower=force on a loop outside the lowering's shape: the FA forward, whose
// K/V loads address through a loop-carried offset (the producer partition
// does not rebuild carried values yet). The loop keeps today's attributes
// and the remark says why.

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.6 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// CHECK: remark: twill: scheduled attn_fwd_kernel_loop1:
// CHECK: remark: twill: lowering refused: a load depends on a loop-carried value; the schedule is written as attributes
// CHECK-NOT: ttg.warp_specialize"
// CHECK: loop.stage
// CHECK: tt.scheduled_max_stage

// REPORT: "lowering": {
// REPORT-NEXT: "lowered": false,
// REPORT: "refused": {
// REPORT-NEXT: "code": "shape",
// REPORT-NEXT: "detail": "a load depends on a loop-carried value"
