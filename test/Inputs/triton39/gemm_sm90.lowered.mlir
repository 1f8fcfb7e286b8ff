#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#blocked1 = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
#loc = loc("/work/main/bench/kernels/matmul.py":22:0)
#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#shared1 = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = true, elementBitWidth = 16}>
#smem = #ttg.shared_memory
#bar = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#loc31 = loc("a_desc"(#loc))
#loc32 = loc("b_desc"(#loc))
#loc33 = loc("c_desc"(#loc))
#loc34 = loc("M"(#loc))
#loc35 = loc("N"(#loc))
#loc36 = loc("K"(#loc))
module attributes {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 4 : i32, ttg.target = "cuda:90", "ttg.threads-per-warp" = 32 : i32} {
  tt.func public @matmul_tma_kernel(%a_desc: !tt.tensordesc<128x64xf16, #shared> loc("a_desc"(#loc)), %a_desc_0: i32 loc("a_desc"(#loc)), %a_desc_1: i32 loc("a_desc"(#loc)), %a_desc_2: i64 loc("a_desc"(#loc)), %a_desc_3: i64 loc("a_desc"(#loc)), %b_desc: !tt.tensordesc<128x64xf16, #shared> loc("b_desc"(#loc)), %b_desc_4: i32 loc("b_desc"(#loc)), %b_desc_5: i32 loc("b_desc"(#loc)), %b_desc_6: i64 loc("b_desc"(#loc)), %b_desc_7: i64 loc("b_desc"(#loc)), %c_desc: !tt.tensordesc<128x128xf16, #shared> loc("c_desc"(#loc)), %c_desc_8: i32 loc("c_desc"(#loc)), %c_desc_9: i32 loc("c_desc"(#loc)), %c_desc_10: i64 loc("c_desc"(#loc)), %c_desc_11: i64 loc("c_desc"(#loc)), %M: i32 {tt.divisibility = 16 : i32} loc("M"(#loc)), %N: i32 {tt.divisibility = 16 : i32} loc("N"(#loc)), %K: i32 {tt.divisibility = 16 : i32} loc("K"(#loc))) attributes {noinline = false} {
    %c8_i32 = arith.constant 8 : i32 loc(#loc1)
    %c128_i32 = arith.constant 128 : i32 loc(#loc1)
    %c64_i32 = arith.constant 64 : i32 loc(#loc1)
    %c0_i32 = arith.constant 0 : i32 loc(#loc2)
    %c1_i32 = arith.constant 1 : i32 loc(#loc2)
    %c127_i32 = arith.constant 127 : i32 loc(#loc1)
    %c63_i32 = arith.constant 63 : i32 loc(#loc37)
    %acc = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma> loc(#loc61)
    %pid = tt.get_program_id x : i32 loc(#loc39)
    %tiles_m = arith.addi %M, %c127_i32 : i32 loc(#loc62)
    %tiles_m_12 = arith.divsi %tiles_m, %c128_i32 : i32 loc(#loc63)
    %tiles_n = arith.addi %N, %c127_i32 : i32 loc(#loc64)
    %tiles_n_13 = arith.divsi %tiles_n, %c128_i32 : i32 loc(#loc65)
    %tiles_per_group = arith.muli %tiles_n_13, %c8_i32 : i32 loc(#loc42)
    %group = arith.divsi %pid, %tiles_per_group : i32 loc(#loc43)
    %first_m = arith.muli %group, %c8_i32 : i32 loc(#loc44)
    %group_rows = arith.subi %tiles_m_12, %first_m : i32 loc(#loc45)
    %group_rows_14 = arith.minsi %group_rows, %c8_i32 : i32 loc(#loc46)
    %pid_m = arith.remsi %pid, %tiles_per_group : i32 loc(#loc47)
    %pid_m_15 = arith.remsi %pid_m, %group_rows_14 : i32 loc(#loc48)
    %pid_m_16 = arith.addi %first_m, %pid_m_15 : i32 loc(#loc49)
    %pid_n = arith.divsi %pid_m, %group_rows_14 : i32 loc(#loc50)
    %off_m = arith.muli %pid_m_16, %c128_i32 : i32 loc(#loc51)
    %off_n = arith.muli %pid_n, %c128_i32 : i32 loc(#loc52)
    %0 = arith.addi %K, %c63_i32 : i32 loc(#loc53)
    %1 = arith.divsi %0, %c64_i32 : i32 loc(#loc54)
    %a_ring = ttg.local_alloc : () -> !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable>
    %b_ring = ttg.local_alloc : () -> !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable>
    %full = ttg.local_alloc : () -> !ttg.memdesc<4x1xi64, #bar, #smem, mutable>
    %empty = ttg.local_alloc : () -> !ttg.memdesc<4x1xi64, #bar, #smem, mutable>
    %cs0 = arith.constant 0 : i32
    %f0 = ttg.memdesc_index %full[%cs0] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %f0, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %e0 = ttg.memdesc_index %empty[%cs0] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %e0, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %cs1 = arith.constant 1 : i32
    %f1 = ttg.memdesc_index %full[%cs1] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %f1, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %e1 = ttg.memdesc_index %empty[%cs1] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %e1, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %cs2 = arith.constant 2 : i32
    %f2 = ttg.memdesc_index %full[%cs2] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %f2, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %e2 = ttg.memdesc_index %empty[%cs2] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %e2, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %cs3 = arith.constant 3 : i32
    %f3 = ttg.memdesc_index %full[%cs3] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %f3, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %e3 = ttg.memdesc_index %empty[%cs3] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %e3, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %acc_17 = ttg.warp_specialize(%a_desc, %b_desc, %a_ring, %b_ring, %full, %empty, %off_m, %off_n, %1) attributes {requestedRegisters = array<i32: 24>}
    default {
      %t = arith.constant true
      %cDm1 = arith.constant 3 : i32
      %cD = arith.constant 4 : i32
      %r:2 = scf.for %k = %c0_i32 to %1 step %c1_i32 iter_args(%acc_19 = %acc, %i = %c0_i32) -> (tensor<128x128xf32, #mma>, i32) : i32 {
        %s = arith.remsi %i, %cD : i32
        %q = arith.divsi %i, %cD : i32
        %ph = arith.andi %q, %c1_i32 : i32
        %fb = ttg.memdesc_index %full[%s] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
        ttng.wait_barrier %fb, %ph, %t : !ttg.memdesc<1xi64, #bar, #smem, mutable>
        %as = ttg.memdesc_index %a_ring[%s] : !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
        %bs = ttg.memdesc_index %b_ring[%s] : !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
        %bt = ttg.memdesc_trans %bs {order = array<i32: 1, 0>} : !ttg.memdesc<128x64xf16, #shared, #smem, mutable> -> !ttg.memdesc<64x128xf16, #shared1, #smem, mutable>
        %d = ttng.warp_group_dot %as, %bt, %acc_19 {inputPrecision = 0 : i32, isAsync = true} : !ttg.memdesc<128x64xf16, #shared, #smem, mutable> * !ttg.memdesc<64x128xf16, #shared1, #smem, mutable> -> tensor<128x128xf32, #mma>
        %dw = ttng.warp_group_dot_wait %d {pendings = 1 : i32} : tensor<128x128xf32, #mma>
        %rel = arith.cmpi sgt, %i, %c0_i32 : i32
        %ip = arith.addi %i, %cDm1 : i32
        %sp = arith.remsi %ip, %cD : i32
        %eb = ttg.memdesc_index %empty[%sp] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
        ttng.arrive_barrier %eb, 1, %rel : !ttg.memdesc<1xi64, #bar, #smem, mutable>
        %i1 = arith.addi %i, %c1_i32 : i32
        scf.yield %dw, %i1 : tensor<128x128xf32, #mma>, i32
      } {tt.num_stages = 0 : i32}
      %fin = ttng.warp_group_dot_wait %r#0 {pendings = 0 : i32} : tensor<128x128xf32, #mma>
      ttg.warp_yield %fin : tensor<128x128xf32, #mma>
    }
    partition0(%pa: !tt.tensordesc<128x64xf16, #shared>, %pb: !tt.tensordesc<128x64xf16, #shared>, %par: !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable>, %pbr: !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable>, %pf: !ttg.memdesc<4x1xi64, #bar, #smem, mutable>, %pe: !ttg.memdesc<4x1xi64, #bar, #smem, mutable>, %pm: i32, %pn: i32, %pu: i32) num_warps(1) {
      %t = arith.constant true
      %z = arith.constant 0 : i32
      %o = arith.constant 1 : i32
      %c64 = arith.constant 64 : i32
      %cD = arith.constant 4 : i32
      %r = scf.for %k = %z to %pu step %o iter_args(%i = %z) -> (i32) : i32 {
        %s = arith.remsi %i, %cD : i32
        %q = arith.divsi %i, %cD : i32
        %ph0 = arith.andi %q, %o : i32
        %ph = arith.xori %ph0, %o : i32
        %eb = ttg.memdesc_index %pe[%s] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
        ttng.wait_barrier %eb, %ph, %t : !ttg.memdesc<1xi64, #bar, #smem, mutable>
        %fb = ttg.memdesc_index %pf[%s] : !ttg.memdesc<4x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
        ttng.barrier_expect %fb, 32768, %t : !ttg.memdesc<1xi64, #bar, #smem, mutable>
        %off_k = arith.muli %k, %c64 : i32
        %as = ttg.memdesc_index %par[%s] : !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
        ttng.async_tma_copy_global_to_local %pa[%pm, %off_k] %as, %fb, %t : !tt.tensordesc<128x64xf16, #shared>, !ttg.memdesc<1xi64, #bar, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
        %bs = ttg.memdesc_index %pbr[%s] : !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
        ttng.async_tma_copy_global_to_local %pb[%pn, %off_k] %bs, %fb, %t : !tt.tensordesc<128x64xf16, #shared>, !ttg.memdesc<1xi64, #bar, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
        %i1 = arith.addi %i, %o : i32
        scf.yield %i1 : i32
      } {tt.num_stages = 0 : i32}
      ttg.warp_return
    } : (!tt.tensordesc<128x64xf16, #shared>, !tt.tensordesc<128x64xf16, #shared>, !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable>, !ttg.memdesc<4x128x64xf16, #shared, #smem, mutable>, !ttg.memdesc<4x1xi64, #bar, #smem, mutable>, !ttg.memdesc<4x1xi64, #bar, #smem, mutable>, i32, i32, i32) -> tensor<128x128xf32, #mma>
    %2 = arith.truncf %acc_17 : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma> loc(#loc28)
    %3 = ttg.convert_layout %2 : tensor<128x128xf16, #mma> -> tensor<128x128xf16, #blocked1> loc(#loc29)
    tt.descriptor_store %c_desc[%off_m, %off_n], %3 : !tt.tensordesc<128x128xf16, #shared>, tensor<128x128xf16, #blocked1> loc(#loc29)
    tt.return loc(#loc30)
  } loc(#loc)
} loc(#loc)
#loc1 = loc(unknown)
#loc2 = loc("/work/main/bench/kernels/matmul.py":52:22)
#loc3 = loc("/work/main/bench/kernels/matmul.py":52:33)
#loc4 = loc("/work/venvs/triton36/lib/python3.11/site-packages/triton/language/standard.py":129:31)
#loc5 = loc("/work/main/bench/kernels/matmul.py":51:19)
#loc6 = loc("/work/main/bench/kernels/matmul.py":36:24)
#loc7 = loc("/work/venvs/triton36/lib/python3.11/site-packages/triton/language/standard.py":43:17)
#loc8 = loc("/work/main/bench/kernels/matmul.py":37:25)
#loc9 = loc("/work/venvs/triton36/lib/python3.11/site-packages/triton/language/standard.py":43:30)
#loc10 = loc("/work/main/bench/kernels/matmul.py":38:25)
#loc11 = loc("/work/main/bench/kernels/matmul.py":39:32)
#loc12 = loc("/work/main/bench/kernels/matmul.py":40:19)
#loc13 = loc("/work/main/bench/kernels/matmul.py":41:22)
#loc14 = loc("/work/main/bench/kernels/matmul.py":42:31)
#loc15 = loc("/work/main/bench/kernels/matmul.py":42:40)
#loc16 = loc("/work/main/bench/kernels/matmul.py":43:30)
#loc17 = loc("/work/main/bench/kernels/matmul.py":43:49)
#loc18 = loc("/work/main/bench/kernels/matmul.py":43:23)
#loc19 = loc("/work/main/bench/kernels/matmul.py":44:39)
#loc20 = loc("/work/main/bench/kernels/matmul.py":46:20)
#loc21 = loc("/work/main/bench/kernels/matmul.py":47:20)
#loc22 = loc("/work/main/bench/kernels/matmul.py":53:20)
#loc23 = loc("/work/main/bench/kernels/matmul.py":54:24)
#loc24 = loc("/work/main/bench/kernels/matmul.py":55:24)
#loc25 = loc("/work/main/bench/kernels/matmul.py":56:24)
#loc26 = loc("/work/main/bench/kernels/matmul.py":56:29)
#loc27 = loc("/work/main/bench/kernels/matmul.py":56:8)
#loc28 = loc("/work/main/bench/kernels/matmul.py":59:40)
#loc29 = loc("/work/main/bench/kernels/matmul.py":59:33)
#loc30 = loc("/work/main/bench/kernels/matmul.py":59:4)
#loc37 = loc(callsite(#loc1 at #loc3))
#loc38 = loc("acc"(#loc5))
#loc39 = loc("pid"(#loc6))
#loc40 = loc("tiles_m"(#loc8))
#loc41 = loc("tiles_n"(#loc10))
#loc42 = loc("tiles_per_group"(#loc11))
#loc43 = loc("group"(#loc12))
#loc44 = loc("first_m"(#loc13))
#loc45 = loc("group_rows"(#loc14))
#loc46 = loc("group_rows"(#loc15))
#loc47 = loc("pid_m"(#loc16))
#loc48 = loc("pid_m"(#loc17))
#loc49 = loc("pid_m"(#loc18))
#loc50 = loc("pid_n"(#loc19))
#loc51 = loc("off_m"(#loc20))
#loc52 = loc("off_n"(#loc21))
#loc53 = loc(callsite(#loc7 at #loc3))
#loc54 = loc(callsite(#loc9 at #loc3))
#loc55 = loc("acc"(#loc2))
#loc56 = loc("off_k"(#loc22))
#loc57 = loc("a"(#loc23))
#loc58 = loc("b"(#loc24))
#loc59 = loc("acc"(#loc25))
#loc60 = loc("acc"(#loc26))
#loc61 = loc(callsite(#loc4 at #loc38))
#loc62 = loc(callsite(#loc7 at #loc40))
#loc63 = loc(callsite(#loc9 at #loc40))
#loc64 = loc(callsite(#loc7 at #loc41))
#loc65 = loc(callsite(#loc9 at #loc41))
