// FlashAttention forward on sm_90 (H100 model). Input: real Triton 3.6.0
// TTGIR of bench/kernels/fa_fwd.py (head dim 128, BLOCK_M = BLOCK_N = 128,
// fp16, num_warps = 8, loop marked tt.warp_specialize), captured just before
// add_assign_latencies by Inputs/triton36/capture.py. At num_warps = 8
// Triton 3.6's Hopper warp specialization does nothing, so twill writes the
// software pipeline only (partitions: see fa_fwd_sm90_ws.mlir).
//
// Expected: every top-level body op carries loop.stage and loop.cluster, the
// yield none; both wgmmas in the last stage (Triton 3.6 cannot predicate a
// wgmma elsewhere), so the QK^T of the next iteration cannot overlap the
// softmax (the FA3 pipeline is out of reach of 3.6); the K and V loads one
// stage ahead, both first in the body (cluster 0).

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="arch=sm90" 2>&1 | FileCheck %s

// CHECK: remark: twill: scheduled attn_fwd_kernel_loop1: I={{[0-9]+}} (~{{[0-9]+}} cycles) L={{[0-9]+}} stages=2 no partitions (Triton's Hopper warp specialization needs num_warps=4), 18 ops in the graph
// CHECK-SAME: proven optimal; descriptor_load_0 prefetch 1, descriptor_load_20 prefetch 1
// CHECK-LABEL: scf.for
// CHECK-NEXT:  "tt.descriptor_load"{{.*}} {loop.cluster = [[LOADK:0]] : i32, loop.stage = 0 : i32}
// CHECK-NEXT:  "ttg.local_alloc"{{.*}} {loop.cluster = [[QK:[1-9][0-9]*]] : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "ttg.memdesc_trans"{{.*}} {loop.cluster = [[QK]] : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "ttng.warp_group_dot"{{.*}} {loop.cluster = [[QK]] : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.reduce"
// CHECK:       }) {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.mulf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.maxnumf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.mulf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.expand_dims"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.broadcast"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.subf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  math.exp2 {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.subf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  math.exp2 {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.mulf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.reduce"
// CHECK:       }) {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.addf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.expand_dims"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.broadcast"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.mulf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "tt.descriptor_load"{{.*}} {loop.cluster = [[LOADK]] : i32, loop.stage = 0 : i32}
// CHECK-NEXT:  "ttg.local_alloc"{{.*}} {loop.cluster = [[PV:[0-9]+]] : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.truncf {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "ttg.convert_layout"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  "ttng.warp_group_dot"{{.*}} {loop.cluster = [[PV]] : i32, loop.stage = 1 : i32}
// CHECK-NEXT:  arith.addi {{.*}} {loop.cluster = [[LOADK]] : i32, loop.stage = 0 : i32}
// CHECK-NEXT:  scf.yield
// CHECK-NOT:   loop.stage
// CHECK-NEXT:  } {tt.scheduled_max_stage = 1 : i32, tt.warp_specialize}

// One more stage of prefetch does not fit: (2 + 2) buffers of two 32 KB tiles
// exceed the H100's 227 KB of shared memory, so the loop is left to Triton
// rather than handed over in a form that fails at launch.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="arch=sm90 prefetch=1" 2>&1 | FileCheck %s --check-prefix=SMEM
// SMEM: remark: twill: skipped loop: the prefetch buffers need 262144 bytes of shared memory, more than the 232448 of machine `h100` (prefetch=1 extra stages)
// SMEM-NOT: loop.stage
