// mbarrier operations and the asynchronous copies they guard keep their
// program order: a producer partition's loop (as Triton's Hopper warp
// specialization leaves it) waits for a slot to be free, arms the slot's
// "full" barrier and copies a tile into it, for K and then V. No SSA value
// links the wait to the copy, so the machine rules mark these ops `ordered`
// and the front end chains them with ordering-only edges of delay 0 (and
// from the last back to the first across iterations). Each copy is priced
// by its destination tile (128x128 f16 = 32 KB: 512 cycles on the TMA), not
// by the barrier operand in front of it.

// RUN: rm -rf %t && %twill-opt %s --twill-export-graph="dir=%t arch=sm90 scope=all" -o /dev/null
// RUN: FileCheck %s --check-prefix=GRAPH < %t/producer_loop1.toml
// RUN: FileCheck %s --check-prefix=CONSUMER < %t/consumer_loop1.toml
// RUN: %twill-opt %s --twill-schedule="arch=sm90 scope=all" 2>&1 | FileCheck %s --check-prefix=SCHED

// GRAPH: name = "async_tma_copy_global_to_local_{{[0-9]+}}"
// GRAPH-NEXT: cost = { class = "tma_load", shape = [128, 128], dtype = "f16" }
// GRAPH: {{\[\[edge\]\]}}
// GRAPH-NEXT: from = "wait_barrier_[[W1:[0-9]+]]"
// GRAPH-NEXT: to = "barrier_expect_[[E1:[0-9]+]]"
// GRAPH-NEXT: delay = 0
// GRAPH-NEXT: order = true
// GRAPH: from = "barrier_expect_[[E1]]"
// GRAPH-NEXT: to = "async_tma_copy_global_to_local_[[C1:[0-9]+]]"
// GRAPH: from = "async_tma_copy_global_to_local_[[C1]]"
// GRAPH-NEXT: to = "wait_barrier_[[W2:[0-9]+]]"
// GRAPH-NEXT: delay = 0
// GRAPH: from = "async_tma_copy_global_to_local_[[C2:[0-9]+]]"
// GRAPH-NEXT: to = "wait_barrier_[[W1]]"
// GRAPH-NEXT: delay = 1
// GRAPH-NEXT: distance = 1

// The consumer side: wait until the slot is full, multiply out of it, and
// release it. The wgmma reads the slot between the two barrier ops, so it
// starts after the wait (delay 0) and completes before the arrive (no
// delay given: the wgmma's own cycles), even though no SSA value links them.
// CONSUMER: from = "wait_barrier_[[CW:[0-9]+]]"
// CONSUMER-NEXT: to = "warp_group_dot_[[D:[0-9]+]]"
// CONSUMER-NEXT: delay = 0
// CONSUMER-NEXT: order = true
// CONSUMER: from = "warp_group_dot_[[D]]"
// CONSUMER-NEXT: to = "warp_group_dot_[[D]]"
// CONSUMER: from = "warp_group_dot_[[D]]"
// CONSUMER-NEXT: to = "arrive_barrier_{{[0-9]+}}"
// CONSUMER-NEXT: order = true

// Both copies fit one initiation interval of the TMA (1024 cycles): one
// stage, every op in program order.
// SCHED: remark: twill: scheduled producer_loop1: I={{[0-9]+}} (~1024 cycles) L={{[0-9]+}} stages=1
// SCHED-SAME: [units per iteration: ALU 4, SMEM 512, TMA 1024 cycles]
// SCHED-LABEL: scf.for
// SCHED: "ttng.wait_barrier"{{.*}}loop.stage = 0
// SCHED: "ttng.barrier_expect"{{.*}}loop.stage = 0
// SCHED: "ttng.async_tma_copy_global_to_local"{{.*}}loop.stage = 0
// SCHED: "ttng.wait_barrier"{{.*}}loop.stage = 0
// SCHED: "ttng.barrier_expect"{{.*}}loop.stage = 0
// SCHED: "ttng.async_tma_copy_global_to_local"{{.*}}loop.stage = 0
// SCHED: tt.scheduled_max_stage = 0

#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  "tt.func"() <{function_type = (!tt.tensordesc<tensor<128x128xf16, #shared1>>, !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, !ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, !ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, i32) -> (), sym_name = "producer"}> ({
  ^bb0(%desc: !tt.tensordesc<tensor<128x128xf16, #shared1>>, %empty: !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, %full: !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, %kbuf: !ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, %vbuf: !ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, %n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %true = arith.constant true
    scf.for %k = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %k, %c2 : i32
      %phase = arith.divsi %k, %c2 : i32
      %ek = "ttg.memdesc_index"(%empty, %slot) : (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, i32) -> !ttg.memdesc<1xi64, #shared, #smem, mutable>
      "ttng.wait_barrier"(%ek, %phase) <{operandSegmentSizes = array<i32: 1, 1, 0, 0>}> : (!ttg.memdesc<1xi64, #shared, #smem, mutable>, i32) -> ()
      %fk = "ttg.memdesc_index"(%full, %slot) : (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, i32) -> !ttg.memdesc<1xi64, #shared, #smem, mutable>
      "ttng.barrier_expect"(%fk, %true) <{size = 32768 : i32}> : (!ttg.memdesc<1xi64, #shared, #smem, mutable>, i1) -> ()
      %bk = "ttg.memdesc_index"(%kbuf, %slot) : (!ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, i32) -> !ttg.memdesc<128x128xf16, #shared1, #smem, mutable>
      "ttng.async_tma_copy_global_to_local"(%desc, %k, %c0, %fk, %bk, %true) <{cache = 1 : i32, evict = 1 : i32, isVolatile = false}> : (!tt.tensordesc<tensor<128x128xf16, #shared1>>, i32, i32, !ttg.memdesc<1xi64, #shared, #smem, mutable>, !ttg.memdesc<128x128xf16, #shared1, #smem, mutable>, i1) -> ()
      %ev = "ttg.memdesc_index"(%empty, %slot) : (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, i32) -> !ttg.memdesc<1xi64, #shared, #smem, mutable>
      "ttng.wait_barrier"(%ev, %phase) <{operandSegmentSizes = array<i32: 1, 1, 0, 0>}> : (!ttg.memdesc<1xi64, #shared, #smem, mutable>, i32) -> ()
      %fv = "ttg.memdesc_index"(%full, %slot) : (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, i32) -> !ttg.memdesc<1xi64, #shared, #smem, mutable>
      "ttng.barrier_expect"(%fv, %true) <{size = 32768 : i32}> : (!ttg.memdesc<1xi64, #shared, #smem, mutable>, i1) -> ()
      %bv = "ttg.memdesc_index"(%vbuf, %slot) : (!ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, i32) -> !ttg.memdesc<128x128xf16, #shared1, #smem, mutable>
      "ttng.async_tma_copy_global_to_local"(%desc, %k, %c0, %fv, %bv, %true) <{cache = 1 : i32, evict = 1 : i32, isVolatile = false}> : (!tt.tensordesc<tensor<128x128xf16, #shared1>>, i32, i32, !ttg.memdesc<1xi64, #shared, #smem, mutable>, !ttg.memdesc<128x128xf16, #shared1, #smem, mutable>, i1) -> ()
      scf.yield
    }
    "tt.return"() : () -> ()
  }) : () -> ()
  "tt.func"() <{function_type = (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, !ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, !ttg.memdesc<128x128xf16, #shared1, #smem>, i32) -> (), sym_name = "consumer"}> ({
  ^bb0(%empty: !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, %full: !ttg.memdesc<2x1xi64, #shared, #smem, mutable>, %kbuf: !ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, %q: !ttg.memdesc<128x128xf16, #shared1, #smem>, %n: i32):
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
      %slot = arith.remsi %k, %c2 : i32
      %phase = arith.divsi %k, %c2 : i32
      %fk = "ttg.memdesc_index"(%full, %slot) : (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, i32) -> !ttg.memdesc<1xi64, #shared, #smem, mutable>
      "ttng.wait_barrier"(%fk, %phase) <{operandSegmentSizes = array<i32: 1, 1, 0, 0>}> : (!ttg.memdesc<1xi64, #shared, #smem, mutable>, i32) -> ()
      %bk = "ttg.memdesc_index"(%kbuf, %slot) : (!ttg.memdesc<2x128x128xf16, #shared1, #smem, mutable>, i32) -> !ttg.memdesc<128x128xf16, #shared1, #smem, mutable>
      %d = "ttng.warp_group_dot"(%q, %bk, %acc) <{inputPrecision = 0 : i32, isAsync = false, maxNumImpreciseAcc = 0 : i32}> : (!ttg.memdesc<128x128xf16, #shared1, #smem>, !ttg.memdesc<128x128xf16, #shared1, #smem, mutable>, tensor<128x128xf32, #mma>) -> tensor<128x128xf32, #mma>
      %ek = "ttg.memdesc_index"(%empty, %slot) : (!ttg.memdesc<2x1xi64, #shared, #smem, mutable>, i32) -> !ttg.memdesc<1xi64, #shared, #smem, mutable>
      "ttng.arrive_barrier"(%ek) <{count = 128 : i32}> : (!ttg.memdesc<1xi64, #shared, #smem, mutable>) -> ()
      scf.yield %d : tensor<128x128xf32, #mma>
    }
    "tt.return"() : () -> ()
  }) : () -> ()
}
