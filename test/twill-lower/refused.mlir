// lower=force on a loop outside the lowering's shape: the FA forward at 4
// warps, whose schedule splits the softmax and the PV wgmma between two
// compute groups (P would cross between their partitions through a
// channel, which the lowering does not build yet). The loop keeps today's
// attributes and the remark says why.

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90_w4.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.6 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// CHECK: remark: twill: scheduled attn_fwd_kernel_loop1:
// CHECK: remark: twill: lowering refused: `arith.truncf` of group 1 is read by group 2 (channels between partitions are not supported); the schedule is written as attributes
// CHECK-NOT: ttg.warp_specialize"
// CHECK: loop.stage
// CHECK: tt.scheduled_max_stage

// REPORT: "lowering": {
// REPORT-NEXT: "lowered": false,
// REPORT: "refused": {
// REPORT-NEXT: "code": "channel",
// REPORT-NEXT: "detail": "`arith.truncf` of group 1 is read by group 2"

// The sub-tiled FA forward at 8 warps: two compute groups, each a partition
// of the module's 8 warps, would leave 112 registers per thread (it spilled
// on the GPU): refused, the attributes written.
// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="lower=on arch=sm90 triton=3.6" 2>&1 | FileCheck %s --check-prefix=WIDE
// WIDE: remark: twill: lowering refused: 2 compute groups (one, or several of one warp group each, are supported); the schedule is written as attributes
// WIDE-NOT: ttg.warp_specialize"
// WIDE: loop.stage
