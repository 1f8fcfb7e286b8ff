// Two GEMM main loops in one kernel, both marked tt.warp_specialize (as
// `tl.range(..., warp_specialize=True)` marks them); the second also adds a
// loads its A tile through pointers (`tt.load`, cp.async), which the lowering's
// TMA producer does not issue (it refuses the loop). The loop
// bodies follow Triton 3.6's TTGIR for a TMA matmul on sm_90 at the point
// where add_assign_latencies would run (see triton36/gemm_sm90.before.mlir,
// captured by triton36/capture.py), trimmed to the ops that matter.
#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32, "ttg.num-ctas" = 1 : i32, "ttg.threads-per-warp" = 32 : i32} {
  "tt.func"() <{function_type = (!tt.tensordesc<tensor<128x64xf16, #shared>>, !tt.tensordesc<tensor<128x64xf16, #shared>>, i32, !tt.ptr<f16>) -> (), sym_name = "two_marked_loops", sym_visibility = "public"}> ({
  ^bb0(%a: !tt.tensordesc<tensor<128x64xf16, #shared>> loc("a"), %b: !tt.tensordesc<tensor<128x64xf16, #shared>> loc("b"), %n: i32 loc("n"), %p: !tt.ptr<f16> loc("p")):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c64 = arith.constant 64 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    %r1 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
      %off = arith.muli %k, %c64 : i32
      %x = "tt.descriptor_load"(%a, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
      %xs = "ttg.local_alloc"(%x) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
      %y = "tt.descriptor_load"(%b, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
      %ys = "ttg.local_alloc"(%y) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
      %yt = "ttg.memdesc_trans"(%ys) <{order = array<i32: 1, 0>}> : (!ttg.memdesc<128x64xf16, #shared, #smem>) -> !ttg.memdesc<64x128xf16, #shared1, #smem>
      %d = "ttng.warp_group_dot"(%xs, %yt, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
      scf.yield %d : tensor<128x128xf32, #mma>
    } {tt.warp_specialize} loc("ws_loop")
    %ptrs = "tt.splat"(%p) : (!tt.ptr<f16>) -> tensor<128x64x!tt.ptr<f16>, #blocked>
    %r2 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %r1) -> (tensor<128x128xf32, #mma>) : i32 {
      %off = arith.muli %k, %c64 : i32
      %x = "tt.load"(%ptrs) <{boundaryCheck = array<i32>, cache = 1 : i32, evict = 1 : i32, isVolatile = false, operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<128x64x!tt.ptr<f16>, #blocked>) -> tensor<128x64xf16, #blocked>
      %xs = "ttg.local_alloc"(%x) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
      %y = "tt.descriptor_load"(%b, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
      %ys = "ttg.local_alloc"(%y) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
      %yt = "ttg.memdesc_trans"(%ys) <{order = array<i32: 1, 0>}> : (!ttg.memdesc<128x64xf16, #shared, #smem>) -> !ttg.memdesc<64x128xf16, #shared1, #smem>
      %d = "ttng.warp_group_dot"(%xs, %yt, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
      scf.yield %d : tensor<128x128xf32, #mma>
    } {tt.warp_specialize} loc("pointer_loop")
    "tt.return"() : () -> ()
  }) : () -> ()
}
