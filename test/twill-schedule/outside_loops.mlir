// The estimate of a kernel's code outside its loops (one remark per
// function, for twill_triton.configure): the critical path of the ops before,
// between and after the loops, each op taking its unit occupancy plus latency
// on the H100 model (machines/h100.toml), and the regions of a
// ttg.warp_specialize counted concurrently (the slowest). Also the per-unit
// cycles of one iteration that every loop's remark carries.

// RUN: %twill-opt %s --split-input-file --twill-schedule="arch=sm90 scope=all report=%t.json" -o /dev/null 2>&1 | FileCheck %s
// Each split is a run of its own: the report holds the last one's records.
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json

// A prologue load (128x64 f16 = 16 KB: 16384 / 64 B/clk + 500 latency = 756
// cycles), the loop, and an epilogue chain: a 128x128 f32 multiply (16384 /
// 128 = 128), its truncation to f16 (16384 / 256 = 64) and the store of the
// f16 tile (32 KB / 64 = 512): 704. A second load that nothing waits for
// (64x64 f16: 128 + 500 = 628) is shorter than the chain it runs beside.
// 756 + 704 = 1460.

// CHECK-LABEL: remark: twill: scheduled prologue_epilogue_loop1:
// CHECK-SAME: [units per iteration: SMEM 384, TC 512 cycles]
// CHECK: remark: twill: outside loops of @prologue_epilogue: ~1460 cycles per CTA

#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  "tt.func"() <{function_type = (!tt.tensordesc<tensor<128x64xf16, #shared>>, !tt.tensordesc<tensor<64x64xf16, #shared>>, !tt.tensordesc<tensor<128x128xf16, #shared>>, !ttg.memdesc<64x128xf16, #shared1, #smem>, i32) -> (), sym_name = "prologue_epilogue"}> ({
  ^bb0(%a: !tt.tensordesc<tensor<128x64xf16, #shared>>, %s: !tt.tensordesc<tensor<64x64xf16, #shared>>, %o: !tt.tensordesc<tensor<128x128xf16, #shared>>, %b: !ttg.memdesc<64x128xf16, #shared1, #smem>, %n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    %scale = arith.constant dense<5.000000e-01> : tensor<128x128xf32, #mma>
    %x = "tt.descriptor_load"(%a, %c0, %c0) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<128x64xf16, #shared>>, i32, i32) -> tensor<128x64xf16, #blocked>
    %xs = "ttg.local_alloc"(%x) : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>
    %side = "tt.descriptor_load"(%s, %c0, %c0) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<64x64xf16, #shared>>, i32, i32) -> tensor<64x64xf16, #blocked>
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
      %d = "ttng.warp_group_dot"(%xs, %b, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
      scf.yield %d : tensor<128x128xf32, #mma>
    }
    %m = arith.mulf %r, %scale : tensor<128x128xf32, #mma>
    %h = arith.truncf %m : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma>
    "tt.descriptor_store"(%o, %c0, %c0, %h) : (!tt.tensordesc<tensor<128x128xf16, #shared>>, i32, i32, tensor<128x128xf16, #mma>) -> ()
    "tt.return"() : () -> ()
  }) : () -> ()
}

// -----

// Warp-specialized: the code before the ttg.warp_specialize (a 64x64 f16
// load: 628), then its regions at the same time: the default region's
// epilogue (a 128x128 f32 multiply, 128) and the partition's (the
// truncation to f16, 64, and the store of the tile, 512): the partition's 576.
// 628 + 576 = 1204.

// CHECK-LABEL: remark: loc("default_loop"): twill: scheduled concurrent_regions_loop1:
// CHECK: remark: loc("partition_loop"): twill: scheduled concurrent_regions_loop2:
// CHECK: remark: twill: outside loops of @concurrent_regions: ~1204 cycles per CTA
// REPORT: "name": "concurrent_regions_loop1",
// REPORT: "warp_specialize": 0,
// REPORT: "decision": "scheduled",
// REPORT: "name": "concurrent_regions_loop2",
// REPORT: "warp_specialize": 0,
// REPORT: "decision": "scheduled",
// REPORT: "functions": [
// REPORT-NEXT: {
// REPORT-NEXT: "function": "concurrent_regions",
// REPORT-NEXT: "location": "{{.*}}",
// REPORT-NEXT: "outside_cycles": 1204,
// REPORT-NEXT: "outside_error": null

#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  "tt.func"() <{function_type = (!tt.tensordesc<tensor<64x64xf16, #shared>>, !tt.tensordesc<tensor<128x128xf16, #shared>>, !ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, i32) -> (), sym_name = "concurrent_regions"}> ({
  ^bb0(%s: !tt.tensordesc<tensor<64x64xf16, #shared>>, %o: !tt.tensordesc<tensor<128x128xf16, #shared>>, %a: !ttg.memdesc<128x64xf16, #shared, #smem>, %b: !ttg.memdesc<64x128xf16, #shared1, #smem>, %n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    %scale = arith.constant dense<5.000000e-01> : tensor<128x128xf32, #mma>
    %side = "tt.descriptor_load"(%s, %c0, %c0) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.tensordesc<tensor<64x64xf16, #shared>>, i32, i32) -> tensor<64x64xf16, #blocked>
    "ttg.warp_specialize"() ({
        %d0 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
          %d = "ttng.warp_group_dot"(%a, %b, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
          scf.yield %d : tensor<128x128xf32, #mma>
        } loc("default_loop")
        %m = arith.mulf %d0, %scale : tensor<128x128xf32, #mma>
      "ttg.warp_yield"() : () -> ()
    }, {
      "ttg.warp_specialize.partitions"() ({
          %p0 = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
            %d = "ttng.warp_group_dot"(%a, %b, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x64xf16, #shared, #smem>, !ttg.memdesc<64x128xf16, #shared1, #smem>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
            scf.yield %d : tensor<128x128xf32, #mma>
          } loc("partition_loop")
          %h = arith.truncf %p0 : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma>
          "tt.descriptor_store"(%o, %c0, %c0, %h) : (!tt.tensordesc<tensor<128x128xf16, #shared>>, i32, i32, tensor<128x128xf16, #mma>) -> ()
        "ttg.warp_return"() : () -> ()
      }) : () -> ()
    }) : () -> ()
    "tt.return"() : () -> ()
  }) : () -> ()
}
