// lower=force on the FA forward (Triton 3.6 TTGIR of
// third_party/triton/tests/kernels/fa_fwd.py, num_warps=8): the producer
// partition carries the K/V row offset the loop advances (its own
// iteration argument beside the trip counter) and fills 2-slot rings, K and
// V each with its own barriers. The default region runs in two stages: PV
// (its A operand the trip's P, in registers) is issued one trip later,
// right after the next QK^T, so the softmax runs while it is on the tensor
// core (the wait before the softmax keeps it in flight: pendings 1); PV is
// waited for before the accumulator is rescaled. A prologue (QK^T and the
// softmax of the first iteration) and an epilogue (the last PV) run under
// `scf.if lb < ub`. K's slot is released once QK^T retired, V's (the
// previous trip's) once PV retired. Triton 3.9 spells the region's barrier
// ttg.barrier.

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.6" 2>&1 | FileCheck %s

// CHECK: remark: twill: lowered to 1+1 partitions (rings 2x2 tiles, 65536 B per slot, {{.*}}; not verified (lower=force)
// Q, stored from registers before the loop, is read by QK^T's wgmma: one
// proxy fence before the ws op.
// CHECK: "ttng.fence_async_shared"() {bCluster = false} : () -> ()
// CHECK-NEXT: "ttg.warp_specialize"(
// The prologue: stage 0 of the first iteration.
// CHECK: %[[GO:[0-9]+]] = arith.cmpi slt
// CHECK-NEXT: scf.if %[[GO]]
// CHECK: "ttng.wait_barrier"
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK-NEXT: "ttng.warp_group_dot_wait"({{.*}}) {pendings = 0 : i32}
// Eight warps are two warp groups, each waiting for its own wgmmas; one
// thread arrives for the region, after a barrier of its warps.
// CHECK-NEXT: "gpu.barrier"() : () -> ()
// CHECK: "ttng.arrive_barrier"
// CHECK: "tt.reduce"
// CHECK: } else {
// CHECK: "ub.poison"
// The loop: QK^T of this trip, PV of the previous one (V's own full wait
// first), the softmax under PV.
// CHECK: scf.for
// CHECK: "ttng.wait_barrier"
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.wait_barrier"
// CHECK-NEXT: "ttng.warp_group_dot"(%arg{{.*}}isAsync = true
// CHECK-NEXT: "ttng.warp_group_dot_wait"(%{{[0-9]+}}, %{{[0-9]+}}) {pendings = 1 : i32}
// CHECK-NEXT: "gpu.barrier"() : () -> ()
// CHECK: "ttng.arrive_barrier"
// CHECK: "tt.reduce"
// CHECK: "ttng.warp_group_dot_wait"(%{{[0-9]+}}#1, %arg{{[0-9]+}}) {pendings = 0 : i32}
// CHECK-NEXT: "gpu.barrier"() : () -> ()
// CHECK: "ttng.arrive_barrier"
// CHECK: arith.mulf %{{[0-9]+}}#0
// CHECK: twill.lowered = "loop"
// The epilogue: the last PV.
// CHECK: scf.if %[[GO]]
// CHECK: "ttng.wait_barrier"
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK-NEXT: "ttng.warp_group_dot_wait"({{.*}}) {pendings = 0 : i32}
// CHECK: "ttg.warp_yield"
// The producer's loop: the trip counter and the carried offset; K, then V.
// CHECK: scf.for {{.*}} iter_args(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (i32, i32)
// CHECK: "ttng.barrier_expect"({{.*}}) {size = 32768 : i32}
// CHECK: "ttng.async_tma_copy_global_to_local"
// CHECK: "ttng.wait_barrier"
// CHECK: "ttng.barrier_expect"({{.*}}) {size = 32768 : i32}
// CHECK: "ttng.async_tma_copy_global_to_local"
// CHECK: scf.yield %{{[0-9]+}}, %{{[0-9]+}} : i32, i32
// CHECK: "ttg.warp_return"
// CHECK-NOT: loop.stage

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.9" 2>/dev/null | FileCheck %s --check-prefix=V39
// V39: "ttg.barrier"() {addrSpace = 31 : i32} : () -> ()

// Under lower=on it is proved before it is emitted, and again on its own.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="lower=on arch=sm90 triton=3.6" -o %t.mlir 2>&1 | FileCheck %s --check-prefix=ON
// RUN: %twill-opt %t.mlir --twill-verify-pipeline 2>&1 | FileCheck %s --check-prefix=PROVED
// ON: remark: twill: lowered to 1+1 partitions {{.*}}; proved by the pipeline verifier
// PROVED: remark: twill: pipeline proved safe: 6 rings (2, 2, 2, 2, 2, 2), trip counts 0..=8
