// lower=force on the TMA GEMM (Triton 3.6 TTGIR of bench/kernels/matmul.py,
// num_warps=4, not marked tt.warp_specialize: scope=all): the loop becomes
// a ttg.warp_specialize with a one-warp producer partition (TMA copies into
// rings, docs/ws-lowering.md 3.4) and the default region running the wgmma
// asynchronously on the slots. Target: Inputs/triton36/gemm_sm90.lowered.mlir
// (hand-lowered, compiled by Triton 3.6 to a cubin).

// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="lower=force scope=all arch=sm90 triton=3.6 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="lower=force scope=all arch=sm90 triton=3.9" 2>/dev/null | FileCheck %s --check-prefix=V39

// CHECK: remark: twill: scheduled matmul_tma_kernel_loop1: {{.*}} lowered (a producer partition and the default region),
// CHECK: remark: twill: lowered to 1+1 partitions (rings [[D:[0-9]+]]x2 tiles, 32768 B per slot
// CHECK-NOT: loop.stage
// CHECK: %[[A:[0-9]+]] = "ttg.local_alloc"() : () -> !ttg.memdesc<[[D]]x128x64xf16, #shared, #smem, mutable>
// CHECK: %[[B:[0-9]+]] = "ttg.local_alloc"() : () -> !ttg.memdesc<[[D]]x128x64xf16, #shared, #smem, mutable>
// CHECK: %[[FULL:[0-9]+]] = "ttg.local_alloc"() : () -> !ttg.memdesc<[[D]]x1xi64,
// CHECK: %[[EMPTY:[0-9]+]] = "ttg.local_alloc"() : () -> !ttg.memdesc<[[D]]x1xi64,
// CHECK: %[[F0:[0-9]+]] = "ttg.memdesc_index"(%[[FULL]],
// CHECK-NEXT: "ttng.init_barrier"(%[[F0]]) {count = 1 : i32}
// CHECK: %[[E0:[0-9]+]] = "ttg.memdesc_index"(%[[EMPTY]],
// CHECK-NEXT: "ttng.init_barrier"(%[[E0]]) {count = 1 : i32}
// CHECK: %[[WS:[0-9]+]] = "ttg.warp_specialize"({{.*}}%[[A]], %[[B]], %[[FULL]], %[[EMPTY]]) ({

// The default region: wait for the slot, async wgmma on it, retire the
// previous one, release its slot (not on the first trip).
// CHECK: scf.for {{.*}} iter_args(%[[ACC:[a-z0-9]+]] = %cst, %[[IT:[a-z0-9]+]] = {{.*}})
// CHECK: %[[S:[0-9]+]] = arith.remui %[[IT]]
// CHECK: %[[PH:[0-9]+]] = arith.andi
// CHECK: %[[FB:[0-9]+]] = "ttg.memdesc_index"(%[[FULL]], %[[S]])
// CHECK-NEXT: "ttng.wait_barrier"(%[[FB]], %[[PH]], %true)
// CHECK-NEXT: %[[AS:[0-9]+]] = "ttg.memdesc_index"(%[[A]], %[[S]]) {{.*}} -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
// CHECK-NEXT: %[[BS:[0-9]+]] = "ttg.memdesc_index"(%[[B]], %[[S]])
// CHECK-NEXT: %[[BT:[0-9]+]] = "ttg.memdesc_trans"(%[[BS]]) {{.*}} -> !ttg.memdesc<64x128xf16, #shared1, #smem, mutable>
// CHECK-NEXT: %[[DOT:[0-9]+]] = "ttng.warp_group_dot"(%[[AS]], %[[BT]], %[[ACC]]) <{{{.*}}isAsync = true
// CHECK-NEXT: %[[W:[0-9]+]] = "ttng.warp_group_dot_wait"(%[[DOT]]) {pendings = 1 : i32}
// CHECK-NEXT: %[[REL:[0-9]+]] = arith.cmpi sgt, %[[IT]]
// CHECK: %[[EB:[0-9]+]] = "ttg.memdesc_index"(%[[EMPTY]],
// CHECK-NEXT: "ttng.arrive_barrier"(%[[EB]], %[[REL]]) {count = 1 : i32}
// CHECK: scf.yield %[[W]],
// CHECK-NEXT: } {tt.num_stages = 0 : i32, twill.lowered = "loop"}
// CHECK-NEXT: %[[FIN:[0-9]+]] = "ttng.warp_group_dot_wait"({{.*}}) {pendings = 0 : i32}
// CHECK-NEXT: "ttg.warp_yield"(%[[FIN]])

// The producer partition: wait for a free slot (parity ^1), expect the
// trip's bytes, two TMA copies.
// CHECK: "ttg.warp_specialize.partitions"() ({
// CHECK-NEXT: ^bb0(
// CHECK: scf.for
// CHECK: arith.xori
// CHECK-NEXT: "ttg.memdesc_index"
// CHECK-NEXT: "ttng.wait_barrier"
// CHECK-NEXT: %[[PF:[0-9]+]] = "ttg.memdesc_index"
// CHECK-NEXT: "ttng.barrier_expect"(%[[PF]], %true) {size = 32768 : i32}
// CHECK-NOT: tt.descriptor_load
// CHECK: "ttng.async_tma_copy_global_to_local"({{.*}}, %[[PF]], %{{[0-9]+}}, %true) {cache = 1 : i32, evict = 1 : i32, isVolatile = false}
// CHECK-NOT: tt.descriptor_load
// CHECK: "ttng.async_tma_copy_global_to_local"({{.*}}, %[[PF]], %{{[0-9]+}}, %true)
// CHECK: } {tt.num_stages = 0 : i32, twill.lowered = "loop"}
// CHECK-NEXT: "ttg.warp_return"()
// CHECK: }) {partitionNumWarps = array<i32: 1>, requestedRegisters = array<i32: 24>, twill.lowered = "depth [[D]]"}

// Barriers invalidated after it; the epilogue reads the ws op's result.
// CHECK: "ttng.inval_barrier"
// CHECK: arith.truncf %[[WS]]
// CHECK-NEXT: "ttg.convert_layout"
// CHECK-NEXT: "tt.descriptor_store"

// REPORT: "lowering": {
// REPORT-NEXT: "lowered": true,
// REPORT: "refused": null,
// REPORT-NEXT: "depth": [[D:[0-9]+]],
// REPORT-NEXT: "expect_bytes": 32768,

// Triton 3.9 takes the captures on ttg.warp_specialize.partitions and the
// TMA copy's operand segments.
// V39: "ttg.warp_specialize"() ({
// V39: "ttg.warp_specialize.partitions"(%{{.*}}) ({
// V39: "ttng.async_tma_copy_global_to_local"({{.*}}) {isVolatile = false, operandSegmentSizes = array<i32: 1, 2, 0, 1, 1, 1>}
