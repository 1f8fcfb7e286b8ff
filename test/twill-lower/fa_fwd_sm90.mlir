// lower=force on the FA forward (Triton 3.6 TTGIR of
// third_party/triton/tests/kernels/fa_fwd.py, num_warps=8): the producer
// partition carries the K/V row offset the loop advances (its own
// iteration argument beside the trip counter) and fills 2-slot rings; the
// default region issues both wgmmas asynchronously, waits for QK before
// the softmax reads it (pendings 0) and for PV before the trip ends (its
// A operand is the trip's P, in registers, passed through the wait), and
// releases the trip's own slot (held one trip). Triton 3.9 spells the
// region's barrier ttg.barrier.

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.6" 2>&1 | FileCheck %s

// CHECK: remark: twill: lowered to 1+1 partitions (rings 2x2 tiles, 65536 B per slot, {{.*}}; not verified (lower=force)
// CHECK: "ttg.warp_specialize"(
// CHECK: "ttng.wait_barrier"
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK-NEXT: "ttng.warp_group_dot_wait"({{.*}}) {pendings = 0 : i32}
// CHECK: "tt.reduce"
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.warp_group_dot_wait"(%{{[0-9]+}}, %{{[0-9]+}}) {pendings = 0 : i32}
// Eight warps are two warp groups, each waiting for its own wgmmas; one
// thread arrives for the region, after a barrier of its warps.
// CHECK-NEXT: "gpu.barrier"() : () -> ()
// CHECK: "ttng.arrive_barrier"
// CHECK: "ttg.warp_yield"
// The producer's loop: the trip counter and the carried offset.
// CHECK: scf.for {{.*}} iter_args(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (i32, i32)
// CHECK: "ttng.barrier_expect"({{.*}}) {size = 65536 : i32}
// CHECK-COUNT-2: "ttng.async_tma_copy_global_to_local"
// CHECK: scf.yield %{{[0-9]+}}, %{{[0-9]+}} : i32, i32
// CHECK: "ttg.warp_return"
// CHECK-NOT: loop.stage

// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.9" 2>/dev/null | FileCheck %s --check-prefix=V39
// V39: "ttg.barrier"() {addrSpace = 31 : i32} : () -> ()
