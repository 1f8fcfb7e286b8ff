// GEMM main loop on sm_100 (Blackwell, B200 model). Input: real Triton 3.6.0
// TTGIR of bench/kernels/matmul.py for cuda:100 (tcgen05 MMA into tensor
// memory), captured just before add_assign_latencies by
// Inputs/triton36/capture.py.
//
// Expected: the same stage structure as on Hopper, tt.self_latency = 1 on
// the MMA (without it Triton's pipeliner leaves it synchronous), and with
// ws=true on a scope=all loop no partitions, since Triton only
// warp-specializes loops marked tt.warp_specialize.

// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all" 2>&1 | FileCheck %s

// CHECK: remark: twill: scheduled matmul_tma_kernel_loop1: I={{[0-9]+}} (~{{5[0-9][0-9]}} cycles) L={{[0-9]+}} stages=3
// CHECK-LABEL: scf.for
// CHECK: "tt.descriptor_load"{{.*}}{loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32}
// CHECK: "ttng.tc_gen5_mma"{{.*}}{loop.cluster = {{[1-9][0-9]*}} : i32, loop.stage = 2 : i32, tt.self_latency = 1 : i32}
// CHECK-NOT: ttg.partition
// CHECK: } {tt.scheduled_max_stage = 2 : i32}
