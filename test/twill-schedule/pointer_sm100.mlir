// A pointer-load (cp.async) matmul on sm_100: each `tt.load`, with the mask
// it needs, fills a ring that a tcgen05 MMA reads. Input: real Triton 3.6.0
// TTGIR of third_party/triton/tests/kernels/pointer_matmul.py (64x128x32,
// num_warps=4, num_stages=4) for cuda:100, captured just before
// add_assign_latencies by Inputs/triton36/capture.py.
//
// The MMA reads its ring slot until the wait after the next MMA, and
// Triton's ring has the stage gap + 1 slots: a load issued before the MMA in
// the body would refill the slot the previous iteration's MMA still reads
// (the contract's slot rule; this loop was refused with
// `contract_violation` for it). So each load goes after its MMA (a later
// cluster). Free of the user's num_stages, it also goes one stage deeper,
// with its mask, to keep the lead the schedule assumed; under num_stages=4
// that stage would exceed the bound, and the loads go after the MMA without
// it, as Triton's own schedule places them.

// RUN: %twill-opt %inputs/triton36/pointer_matmul_sm100.before.mlir --twill-schedule="arch=sm100 scope=all num-stages=4 cache=off" 2>&1 | FileCheck %s --check-prefix=BOUND
// RUN: %twill-opt %inputs/triton36/pointer_matmul_sm100.before.mlir --twill-schedule="arch=sm100 scope=all num-stages=4 stages=free cache=off" 2>&1 | FileCheck %s --check-prefix=FREE

// BOUND: remark: twill: scheduled matmul_kernel_loop1: I={{[0-9]+}} {{.*}} stages=4 no partitions
// BOUND-LABEL: scf.for
// BOUND: arith.cmpi slt{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// BOUND: "tt.load"{{.*}}{loop.cluster = 1 : i32, loop.stage = 0 : i32}
// BOUND: "tt.load"{{.*}}{loop.cluster = 1 : i32, loop.stage = 0 : i32}
// BOUND: "ttng.tc_gen5_mma"{{.*}}{loop.cluster = 0 : i32, loop.stage = 3 : i32, tt.self_latency = 1 : i32}
// BOUND: } {tt.scheduled_max_stage = 3 : i32}

// FREE: remark: twill: scheduled matmul_kernel_loop1: I={{[0-9]+}} {{.*}} stages=6 no partitions
// FREE-LABEL: scf.for
// FREE: arith.cmpi slt{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// FREE: "tt.load"{{.*}}{loop.cluster = 1 : i32, loop.stage = 0 : i32}
// FREE: "tt.load"{{.*}}{loop.cluster = 1 : i32, loop.stage = 0 : i32}
// FREE: "ttng.tc_gen5_mma"{{.*}}{loop.cluster = 0 : i32, loop.stage = 5 : i32, tt.self_latency = 1 : i32}
// FREE: } {tt.scheduled_max_stage = 5 : i32}
