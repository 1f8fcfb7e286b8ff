// Diagnostics of --twill-schedule, checked with --verify-diagnostics: a
// remark on every loop considered (scheduled with I, L, stages and
// partitions; or skipped with the reason), and the pass never fails for a
// loop it cannot schedule. The ops follow Triton 3.6's TTGIR for sm_90 (see
// Inputs/triton36/gemm_sm90.before.mlir), reduced to what each case needs.

// RUN: %twill-opt %s --split-input-file --verify-diagnostics --twill-schedule="arch=sm90 scope=all" -o /dev/null

#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  // expected-remark @+1 {{twill: outside loops of @ok: ~0 cycles per CTA}}
  "tt.func"() <{function_type = (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared, #smem>, i32) -> (), sym_name = "ok"}> ({
  ^bb0(%a: !ttg.memdesc<128x64xf16, #shared, #smem>, %b: !ttg.memdesc<64x128xf16, #shared, #smem>, %n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    // expected-remark @+1 {{twill: scheduled ok_loop1: I=}}
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
      %d = "ttng.warp_group_dot"(%a, %b, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
      scf.yield %d : tensor<128x128xf32, #mma>
    }
    "tt.return"() : () -> ()
  }) : () -> ()
}

// -----

#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  // expected-remark @+1 {{twill: outside loops of @branchy: ~0 cycles per CTA}}
  "tt.func"() <{function_type = (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared, #smem>, i32, i1, !ttg.memdesc<1xi64, #shared, #smem, mutable>) -> (), sym_name = "branchy"}> ({
  ^bb0(%a: !ttg.memdesc<128x64xf16, #shared, #smem>, %b: !ttg.memdesc<64x128xf16, #shared, #smem>, %n: i32, %p: i1, %bar: !ttg.memdesc<1xi64, #shared, #smem, mutable>):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    // An `scf.if` is a node of the graph, but not one that synchronizes
    // through an mbarrier: its order against the body's other waits and
    // arrives could not be kept from outside it.
    // expected-remark @+1 {{twill: skipped loop: a synchronizing op (`ttng.wait_barrier`) under `scf.if` (at loc(}}
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
      %s = scf.if %p -> (tensor<128x128xf32, #mma>) {
        "ttng.wait_barrier"(%bar, %c0) : (!ttg.memdesc<1xi64, #shared, #smem, mutable>, i32) -> ()
        %d = "ttng.warp_group_dot"(%a, %b, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
        scf.yield %d : tensor<128x128xf32, #mma>
      } else {
        scf.yield %acc : tensor<128x128xf32, #mma>
      }
      scf.yield %s : tensor<128x128xf32, #mma>
    }
    "tt.return"() : () -> ()
  }) : () -> ()
}

// -----

module attributes {"ttg.num-warps" = 4 : i32} {
  // expected-remark @+1 {{twill: outside loops of @nested: ~0 cycles per CTA}}
  "tt.func"() <{function_type = (i32) -> (), sym_name = "nested"}> ({
  ^bb0(%n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    // expected-remark @+1 {{twill: skipped loop: not an innermost loop (it contains an scf.for)}}
    scf.for %i = %c0 to %n step %c1 : i32 {
      // expected-remark @+1 {{twill: skipped loop: no op of the body costs anything on this machine}}
      scf.for %j = %c0 to %n step %c1 : i32 {
        %x = arith.addi %i, %j : i32
      }
    }
    "tt.return"() : () -> ()
  }) : () -> ()
}

// -----

// A tile op whose element type the cost rule has no rate for is priced at
// the f32 rate rather than rejected.
#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  // expected-remark @+1 {{twill: outside loops of @f64: ~0 cycles per CTA}}
  "tt.func"() <{function_type = (tensor<128x64xf64, #blocked>, i32) -> (), sym_name = "f64"}> ({
  ^bb0(%x: tensor<128x64xf64, #blocked>, %n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    // expected-remark @+1 {{twill: scheduled f64_loop1: I=}}
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<128x64xf64, #blocked>) : i32 {
      %y = arith.addf %acc, %x : tensor<128x64xf64, #blocked>
      scf.yield %y : tensor<128x64xf64, #blocked>
    }
    "tt.return"() : () -> ()
  }) : () -> ()
}
