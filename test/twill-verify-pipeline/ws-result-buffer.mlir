// Warp-specialized code with two compute partitions (hand-made, Triton 3.6
// spelling: the captures are the ws op's operands). A producer partition
// (1 warp) fills two 2-slot rings behind `full`/`empty`; the default region
// and a worker partition (4 warps) both consume every slot with an async
// wgmma and both release it (`empty` counts 2). The worker delivers its
// loop result through a result buffer: `local_store`, a barrier of its
// warps, an arrival on `done`; the default region waits on `done` and
// `local_load`s it into the ws op's results. Proved; each mutant below
// breaks the protocol once and is rejected by the rule it breaks
// (tests/verify_ws.rs mutates this file too).
//
// RUN: %twill-opt %s --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s
// CHECK: remark: twill: pipeline proved safe: 6 rings (2, 2, 2, 2, 1, 1), trip counts 0..=8 [@two_consumers
//
// The default region loads the result without waiting on `done`: the load
// races the worker's store (rule 10).
// RUN: grep -v 'loc("default_wait_done")' %s \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOWAIT
// NOWAIT: warning: twill: pipeline rejected: rule 10 (StoreRace): ttg.local_load @ loc("default_load_result") reads slot 0 before the store it reads happens before it
//
// The worker arrives on `done` before it stores: same race.
// RUN: sed -e '/loc("worker_store_result")/{h;d}' -e '/loc("worker_arrive_done")/G' %s \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: warning: twill: pipeline rejected: rule 10 (StoreRace): ttg.local_load @ loc("default_load_result")
//
// `done` initialized with count 2: the default region's wait never returns.
// RUN: sed 's/"ttng.init_barrier"(%dn) {count = 1 : i32}/"ttng.init_barrier"(%dn) {count = 2 : i32}/' %s \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=DONE2
// DONE2: warning: twill: pipeline rejected: rule 5 (WaitWithoutArrival): ttng.wait_barrier @ loc("default_wait_done")
//
// `empty` counting one arrival while both consumers release: the second
// release falls into the next phase (rule 6).
// RUN: sed '/loc("init_empty/s/{count = 2 : i32}/{count = 1 : i32}/' %s \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY1
// EMPTY1: warning: twill: pipeline rejected: rule 6 (PhaseOverrun): ttng.arrive_barrier @ loc("default_release")
//
// `empty` counting three: the producer hangs on it (rule 5).
// RUN: sed '/loc("init_empty/s/{count = 2 : i32}/{count = 3 : i32}/' %s \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY3
// EMPTY3: warning: twill: pipeline rejected:
// EMPTY3-SAME: rule 5 (WaitWithoutArrival): ttng.wait_barrier @ loc("producer_wait_empty")
//
// The default region also stores into the result buffer, before its wait
// on `done`: nothing orders the two stores (rule 10, write after write).
// RUN: sed 's|^\( *\)%d_true = arith.constant true$|&\n\1"ttg.local_store"(%d_fin, %res) : (!acc, !res) -> () loc("default_store_result")|' %s \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=WAW
// WAW: warning: twill: pipeline rejected: rule 10 (StoreRace): ttg.local_store @ loc("{{worker|default}}_store_result") writes slot 0 while the write of ttg.local_store @ loc("{{default|worker}}_store_result") may be in flight

#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
!acc = tensor<128x128xf32, #mma>
!desc = !tt.tensordesc<tensor<128x64xf16, #shared>>
!ring = !ttg.memdesc<2x128x64xf16, #shared, #smem, mutable>
!slot = !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
!slot_t = !ttg.memdesc<64x128xf16, #shared1, #smem, mutable>
!bars = !ttg.memdesc<2x1xi64, #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>, #smem, mutable>
!dones = !ttg.memdesc<1x1xi64, #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>, #smem, mutable>
!bar = !ttg.memdesc<1xi64, #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>, #smem, mutable>
!res = !ttg.memdesc<128x128xf32, #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}>, #smem, mutable>
module attributes {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 4 : i32, ttg.target = "cuda:90", "ttg.threads-per-warp" = 32 : i32} {
  "tt.func"() <{function_type = (!desc, !desc, i32, i32, i32) -> (), sym_name = "two_consumers", sym_visibility = "public"}> ({
  ^bb0(%arg0: !desc, %arg1: !desc, %arg2: i32, %arg3: i32, %arg4: i32):
    %c0_i32 = arith.constant 0 : i32
    %c1_i32 = arith.constant 1 : i32
    %c63_i32 = arith.constant 63 : i32
    %c64_i32 = arith.constant 64 : i32
    %cst = arith.constant dense<0.000000e+00> : !acc
    %0 = arith.addi %arg4, %c63_i32 : i32
    %n = arith.divsi %0, %c64_i32 : i32
    %a = "ttg.local_alloc"() : () -> !ring loc("a_ring")
    %b = "ttg.local_alloc"() : () -> !ring loc("b_ring")
    %full = "ttg.local_alloc"() : () -> !bars loc("full")
    %empty = "ttg.local_alloc"() : () -> !bars loc("empty")
    %done = "ttg.local_alloc"() : () -> !dones loc("done")
    %res = "ttg.local_alloc"() : () -> !res loc("result")
    %f0 = "ttg.memdesc_index"(%full, %c0_i32) : (!bars, i32) -> !bar
    "ttng.init_barrier"(%f0) {count = 1 : i32} : (!bar) -> ()
    %e0 = "ttg.memdesc_index"(%empty, %c0_i32) : (!bars, i32) -> !bar
    "ttng.init_barrier"(%e0) {count = 2 : i32} : (!bar) -> () loc("init_empty0")
    %f1 = "ttg.memdesc_index"(%full, %c1_i32) : (!bars, i32) -> !bar
    "ttng.init_barrier"(%f1) {count = 1 : i32} : (!bar) -> ()
    %e1 = "ttg.memdesc_index"(%empty, %c1_i32) : (!bars, i32) -> !bar
    "ttng.init_barrier"(%e1) {count = 2 : i32} : (!bar) -> () loc("init_empty1")
    %dn = "ttg.memdesc_index"(%done, %c0_i32) : (!dones, i32) -> !bar
    "ttng.init_barrier"(%dn) {count = 1 : i32} : (!bar) -> () loc("init_done")
    %ws:2 = "ttg.warp_specialize"(%c64_i32, %arg0, %arg2, %arg1, %arg3, %c0_i32, %n, %c1_i32, %a, %b, %full, %empty, %done, %res) ({
      %d_c0 = arith.constant 0 : i32
      %d_r:2 = scf.for %d_k = %c0_i32 to %n step %c1_i32 iter_args(%d_acc = %cst, %d_i = %d_c0) -> (!acc, i32) : i32 {
        %c1 = arith.constant 1 : i32
        %c2 = arith.constant 2 : i32
        %true = arith.constant true
        %s = arith.remsi %d_i, %c2 : i32
        %q = arith.divsi %d_i, %c2 : i32
        %ph = arith.andi %q, %c1 : i32
        %fb = "ttg.memdesc_index"(%full, %s) : (!bars, i32) -> !bar
        "ttng.wait_barrier"(%fb, %ph, %true) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (!bar, i32, i1) -> () loc("default_wait_full")
        %as = "ttg.memdesc_index"(%a, %s) : (!ring, i32) -> !slot
        %bs = "ttg.memdesc_index"(%b, %s) : (!ring, i32) -> !slot
        %bt = "ttg.memdesc_trans"(%bs) <{order = array<i32: 1, 0>}> : (!slot) -> !slot_t
        %dot = "ttng.warp_group_dot"(%as, %bt, %d_acc) <{inputPrecision = 0 : i32, isAsync = true, maxNumImpreciseAcc = 0 : i32}> : (!slot, !slot_t, !acc) -> !acc loc("default_wgmma")
        %dw = "ttng.warp_group_dot_wait"(%dot) {pendings = 1 : i32} : (!acc) -> !acc
        %rel = arith.cmpi sgt, %d_i, %d_c0 : i32
        %ip = arith.addi %d_i, %c1 : i32
        %sp = arith.remsi %ip, %c2 : i32
        %eb = "ttg.memdesc_index"(%empty, %sp) : (!bars, i32) -> !bar
        "ttng.arrive_barrier"(%eb, %rel) {count = 1 : i32} : (!bar, i1) -> () loc("default_release")
        %i1 = arith.addi %d_i, %c1 : i32
        scf.yield %dw, %i1 : !acc, i32
      } {tt.num_stages = 0 : i32}
      %d_fin = "ttng.warp_group_dot_wait"(%d_r#0) {pendings = 0 : i32} : (!acc) -> !acc
      %d_true = arith.constant true
      %d_db = "ttg.memdesc_index"(%done, %d_c0) : (!dones, i32) -> !bar
      "ttng.wait_barrier"(%d_db, %d_c0, %d_true) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (!bar, i32, i1) -> () loc("default_wait_done")
      %d_ld = "ttg.local_load"(%res) : (!res) -> !acc loc("default_load_result")
      "ttg.warp_yield"(%d_fin, %d_ld) : (!acc, !acc) -> ()
    }, {
      "ttg.warp_specialize.partitions"() ({
      ^bb0(%p_k64: i32, %p_ad: !desc, %p_m: i32, %p_bd: !desc, %p_n: i32, %p_lb: i32, %p_ub: i32, %p_st: i32, %p_a: !ring, %p_b: !ring, %p_full: !bars, %p_empty: !bars, %p_done: !dones, %p_res: !res):
        %p_c0 = arith.constant 0 : i32
        %p_r = scf.for %p_k = %p_lb to %p_ub step %p_st iter_args(%p_i = %p_c0) -> (i32) : i32 {
          %c1 = arith.constant 1 : i32
          %c2 = arith.constant 2 : i32
          %true = arith.constant true
          %s = arith.remsi %p_i, %c2 : i32
          %q = arith.divsi %p_i, %c2 : i32
          %ph0 = arith.andi %q, %c1 : i32
          %ph = arith.xori %ph0, %c1 : i32
          %eb = "ttg.memdesc_index"(%p_empty, %s) : (!bars, i32) -> !bar
          "ttng.wait_barrier"(%eb, %ph, %true) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (!bar, i32, i1) -> () loc("producer_wait_empty")
          %fb = "ttg.memdesc_index"(%p_full, %s) : (!bars, i32) -> !bar
          "ttng.barrier_expect"(%fb, %true) {size = 32768 : i32} : (!bar, i1) -> () loc("producer_expect")
          %off_k = arith.muli %p_k, %p_k64 : i32
          %as = "ttg.memdesc_index"(%p_a, %s) : (!ring, i32) -> !slot
          "ttng.async_tma_copy_global_to_local"(%p_ad, %p_m, %off_k, %fb, %as, %true) {cache = 1 : i32, evict = 1 : i32, isVolatile = false} : (!desc, i32, i32, !bar, !slot, i1) -> () loc("producer_copy_a")
          %bs = "ttg.memdesc_index"(%p_b, %s) : (!ring, i32) -> !slot
          "ttng.async_tma_copy_global_to_local"(%p_bd, %p_n, %off_k, %fb, %bs, %true) {cache = 1 : i32, evict = 1 : i32, isVolatile = false} : (!desc, i32, i32, !bar, !slot, i1) -> () loc("producer_copy_b")
          %i1 = arith.addi %p_i, %c1 : i32
          scf.yield %i1 : i32
        } {tt.num_stages = 0 : i32}
        "ttg.warp_return"() : () -> ()
      }, {
      ^bb0(%w_k64: i32, %w_ad: !desc, %w_m: i32, %w_bd: !desc, %w_n: i32, %w_lb: i32, %w_ub: i32, %w_st: i32, %w_a: !ring, %w_b: !ring, %w_full: !bars, %w_empty: !bars, %w_done: !dones, %w_res: !res):
        %w_c0 = arith.constant 0 : i32
        %w_cst = arith.constant dense<0.000000e+00> : !acc
        %w_r:2 = scf.for %w_k = %w_lb to %w_ub step %w_st iter_args(%w_acc = %w_cst, %w_i = %w_c0) -> (!acc, i32) : i32 {
          %c1 = arith.constant 1 : i32
          %c2 = arith.constant 2 : i32
          %true = arith.constant true
          %s = arith.remsi %w_i, %c2 : i32
          %q = arith.divsi %w_i, %c2 : i32
          %ph = arith.andi %q, %c1 : i32
          %fb = "ttg.memdesc_index"(%w_full, %s) : (!bars, i32) -> !bar
          "ttng.wait_barrier"(%fb, %ph, %true) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (!bar, i32, i1) -> () loc("worker_wait_full")
          %as = "ttg.memdesc_index"(%w_a, %s) : (!ring, i32) -> !slot
          %bs = "ttg.memdesc_index"(%w_b, %s) : (!ring, i32) -> !slot
          %bt = "ttg.memdesc_trans"(%bs) <{order = array<i32: 1, 0>}> : (!slot) -> !slot_t
          %dot = "ttng.warp_group_dot"(%as, %bt, %w_acc) <{inputPrecision = 0 : i32, isAsync = true, maxNumImpreciseAcc = 0 : i32}> : (!slot, !slot_t, !acc) -> !acc loc("worker_wgmma")
          %dw = "ttng.warp_group_dot_wait"(%dot) {pendings = 1 : i32} : (!acc) -> !acc
          %rel = arith.cmpi sgt, %w_i, %w_c0 : i32
          %ip = arith.addi %w_i, %c1 : i32
          %sp = arith.remsi %ip, %c2 : i32
          %eb = "ttg.memdesc_index"(%w_empty, %sp) : (!bars, i32) -> !bar
          "ttng.arrive_barrier"(%eb, %rel) {count = 1 : i32} : (!bar, i1) -> () loc("worker_release")
          %i1 = arith.addi %w_i, %c1 : i32
          scf.yield %dw, %i1 : !acc, i32
        } {tt.num_stages = 0 : i32}
        %w_fin = "ttng.warp_group_dot_wait"(%w_r#0) {pendings = 0 : i32} : (!acc) -> !acc
        "ttg.local_store"(%w_fin, %w_res) : (!acc, !res) -> () loc("worker_store_result")
        "gpu.barrier"() : () -> ()
        %w_true = arith.constant true
        %w_db = "ttg.memdesc_index"(%w_done, %w_c0) : (!dones, i32) -> !bar
        "ttng.arrive_barrier"(%w_db, %w_true) {count = 1 : i32} : (!bar, i1) -> () loc("worker_arrive_done")
        "ttg.warp_return"() : () -> ()
      }) : () -> ()
    }) {partitionNumWarps = array<i32: 1, 4>, requestedRegisters = array<i32: 24, 240>} : (i32, !desc, i32, !desc, i32, i32, i32, i32, !ring, !ring, !bars, !bars, !dones, !res) -> (!acc, !acc) loc("ws")
    "ttng.inval_barrier"(%f0) : (!bar) -> ()
    "ttng.inval_barrier"(%e0) : (!bar) -> ()
    "ttng.inval_barrier"(%f1) : (!bar) -> ()
    "ttng.inval_barrier"(%e1) : (!bar) -> ()
    "ttng.inval_barrier"(%dn) : (!bar) -> ()
    %sum = arith.addf %ws#0, %ws#1 : !acc
    "tt.return"() : () -> ()
  }) {noinline = false} : () -> ()
}
