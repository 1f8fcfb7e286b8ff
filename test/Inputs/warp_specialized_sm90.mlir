// Loops inside a ttg.warp_specialize op: what Triton's Hopper warp
// specialization (add_hopper_warpspec, which Triton 3.6 and 3.9 run before
// the scheduling point on sm90) leaves of a loop marked tt.warp_specialize:
// one copy per partition, none marked. scope=ws says so for each loop and
// leaves it untouched; scope=all schedules each one. The loop bodies are
// those of Inputs/two_loops_sm90.mlir; the ttg.warp_specialize structure
// (a default region, then ttg.warp_specialize.partitions with one region
// per partition) is trimmed to what the pass looks at.
#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32, "ttg.num-ctas" = 1 : i32, "ttg.threads-per-warp" = 32 : i32} {
  "tt.func"() <{function_type = (!tt.tensordesc<tensor<128x64xf16, #shared>>, !tt.tensordesc<tensor<128x64xf16, #shared>>, i32) -> (), sym_name = "ws_partitions", sym_visibility = "public"}> ({
  ^bb0(%a: !tt.tensordesc<tensor<128x64xf16, #shared>> loc("a"), %b: !tt.tensordesc<tensor<128x64xf16, #shared>> loc("b"), %n: i32 loc("n")):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c64 = arith.constant 64 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    "ttg.warp_specialize"() ({
        %d0 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
          %off = arith.muli %k, %c64 : i32
          %x = "tt.descriptor_load"(%a, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
          %xs = "ttg.local_alloc"(%x) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
          %y = "tt.descriptor_load"(%b, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
          %ys = "ttg.local_alloc"(%y) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
          %yt = "ttg.memdesc_trans"(%ys) <{order = array<i32: 1, 0>}> : (!ttg.memdesc<128x64xf16, #shared, #smem>) -> !ttg.memdesc<64x128xf16, #shared1, #smem>
          %d = "ttng.warp_group_dot"(%xs, %yt, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
          scf.yield %d : tensor<128x128xf32, #mma>
        } loc("default_loop")
      "ttg.warp_yield"() : () -> ()
    }, {
      "ttg.warp_specialize.partitions"() ({
          %p0 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
            %off = arith.muli %k, %c64 : i32
            %x = "tt.descriptor_load"(%a, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
            %xs = "ttg.local_alloc"(%x) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
            %y = "tt.descriptor_load"(%b, %c0, %off) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
            %ys = "ttg.local_alloc"(%y) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
            %yt = "ttg.memdesc_trans"(%ys) <{order = array<i32: 1, 0>}> : (!ttg.memdesc<128x64xf16, #shared, #smem>) -> !ttg.memdesc<64x128xf16, #shared1, #smem>
            %d = "ttng.warp_group_dot"(%xs, %yt, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
            scf.yield %d : tensor<128x128xf32, #mma>
          } loc("partition_loop")
        "ttg.warp_return"() : () -> ()
      }) : () -> ()
    }) : () -> ()
    "tt.return"() : () -> ()
  }) : () -> ()
}
