// lower=force on the sub-tiled FA forward at 4 warps (Triton 3.6 TTGIR of
// third_party/triton/tests/kernels/fa_fwd.py, SUBTILE, before Hopper warp
// specialization): the schedule puts each 64-row half on a compute group
// of its own, so the loop becomes the default region (half 0), one 4-warp
// compute partition (half 1) and the producer. Both compute partitions read
// the K and V rings, so each `empty` counts two arrivals. Each half runs in
// two stages (its PV a trip after its QK^T, as the FA forward at 8 warps:
// test/twill-lower/fa_fwd_sm90.mlir). The worker recomputes
// the tensors it needs from captured scalars (partitions capture no
// tensors), and after its loop stores its accumulator, row sums and maxima
// into result buffers, a barrier of its warps, and one arrival on `done`;
// the default region waits for `done` and loads them for the code after
// the loop. Registers: 240 for the worker, 24 for the producer (the
// default region gets what is left).

// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90_w4.before.mlir --twill-schedule="lower=force arch=sm90 triton=3.6 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// CHECK: remark: twill: scheduled attn_fwd_general_kernel_loop1: {{.*}} lowered (a producer partition, the default region and 1 compute partitions),
// CHECK: remark: twill: lowered to 1+2 partitions (rings 2x2 tiles, 65536 B per slot, 3 result buffers, {{[0-9]+}} B shared; producer 1 warp, 24 registers); not verified (lower=force)
// Before the ws op: `done` count 1 (one worker delivers), then per slot
// and ring (K, V) `full` count 1 and `empty` count 2 (two compute
// partitions arrive).
// CHECK: "ttng.init_barrier"({{.*}}) {count = 1 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 1 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 2 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 1 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 2 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 1 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 2 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 1 : i32}
// CHECK: "ttng.init_barrier"({{.*}}) {count = 2 : i32}
// CHECK-NOT: "ttng.init_barrier"
// CHECK: "ttg.warp_specialize"(
// The default region: half 0's prologue, loop and epilogue, then the
// worker's results.
// CHECK: scf.if
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.arrive_barrier"({{.*}}) {count = 1 : i32}
// CHECK: scf.for
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK-NEXT: "ttng.warp_group_dot_wait"({{.*}}) {pendings = 1 : i32}
// CHECK: scf.if
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.wait_barrier"
// CHECK-COUNT-3: "ttg.local_load"
// CHECK-NEXT: "ttg.warp_yield"
// The worker: the tensors it needs recomputed from captured scalars; half
// 1's loop, its results stored.
// CHECK: "ttg.warp_specialize.partitions"() ({
// CHECK-NEXT: ^bb0(
// CHECK: "tt.splat"
// CHECK: scf.for
// CHECK: "ttng.wait_barrier"
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.warp_group_dot"({{.*}}isAsync = true
// CHECK: "ttng.arrive_barrier"({{.*}}) {count = 1 : i32}
// CHECK: twill.lowered = "loop"
// CHECK: scf.if
// CHECK-COUNT-3: "ttg.local_store"
// CHECK-NEXT: "gpu.barrier"
// CHECK: "ttng.arrive_barrier"
// CHECK-NEXT: "ttg.warp_return"
// The producer: K, then V.
// CHECK: "ttng.barrier_expect"({{.*}}) {size = 32768 : i32}
// CHECK: "ttng.async_tma_copy_global_to_local"
// CHECK: "ttng.barrier_expect"({{.*}}) {size = 32768 : i32}
// CHECK: "ttng.async_tma_copy_global_to_local"
// CHECK: partitionNumWarps = array<i32: 4, 1>, requestedRegisters = array<i32: 240, 24>
// After it, every barrier is invalidated, `done` too.
// CHECK-COUNT-9: "ttng.inval_barrier"

// REPORT: "partitions": {
// REPORT-NEXT: "code": "lowered",
// REPORT-NEXT: "count": 3,
// REPORT: "lowering": {
// REPORT-NEXT: "lowered": true,
// REPORT: "compute_partitions": 2

// Under lower=on the same lowering is proved by the pipeline verifier
// (the result buffers by its store rule) before it is emitted, and the
// emitted module is proved again on its own.
// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90_w4.before.mlir --twill-schedule="lower=on arch=sm90 triton=3.6" -o %t.mlir 2>&1 | FileCheck %s --check-prefix=ON
// RUN: %twill-opt %t.mlir --twill-verify-pipeline 2>&1 | FileCheck %s --check-prefix=PROVED
// ON: remark: twill: lowered to 1+2 partitions {{.*}}; proved by the pipeline verifier
// PROVED: remark: twill: pipeline proved safe
// PROVED-NOT: warning
