// FlashAttention forward on sm_90 with num_warps = 4, the only warp count at
// which Triton 3.6's Hopper warp specialization acts. Input: real Triton
// 3.6.0 TTGIR of bench/kernels/fa_fwd.py captured by
// Inputs/triton36/capture.py just before add_hopper_warpspec (which runs
// before the scheduling point on sm_90, and which is where partitions must be
// decided).
//
// Expected: the async_task_id anchors that Hopper warp specialization
// propagates from, all of them (it crashes on partial anchors): {0} on both
// loads, {1, 2} on both wgmmas and on every store of the function (the
// epilogue stores are outside the loop); other ops carry no task id.

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90_w4.before.mlir --twill-schedule="arch=sm90" 2>&1 | FileCheck %s

// CHECK: remark: twill: scheduled attn_fwd_kernel_loop1: {{.*}} stages=2 partitions=3, 18 ops in the graph
// CHECK-LABEL: scf.for
// CHECK-NEXT:  "tt.descriptor_load"{{.*}} {async_task_id = array<i32: 0>, loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32}
// CHECK-NEXT:  "ttg.local_alloc"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "ttg.memdesc_trans"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "ttng.warp_group_dot"{{.*}} {async_task_id = array<i32: 1, 2>, loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK:       "tt.descriptor_load"{{.*}} {async_task_id = array<i32: 0>, loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32}
// CHECK:       "ttng.warp_group_dot"{{.*}} {async_task_id = array<i32: 1, 2>, loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.addi {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32}
// CHECK:       } {tt.scheduled_max_stage = 1 : i32, tt.warp_specialize}
// CHECK:       "tt.store"{{.*}} {async_task_id = array<i32: 1, 2>}
// CHECK:       "tt.descriptor_store"{{.*}} {async_task_id = array<i32: 1, 2>}
