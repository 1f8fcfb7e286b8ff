// GEMM main loop on sm_100 (Blackwell, B200 model). Input: real Triton 3.6.0
// TTGIR of bench/kernels/matmul.py for cuda:100 (tcgen05 MMA into tensor
// memory), captured just before add_assign_latencies by
// Inputs/triton36/capture.py.
//
// Expected: tt.self_latency = 1 on the MMA (without it Triton's pipeliner
// leaves it synchronous); the loads after the MMA in the body (a later
// cluster), one stage deeper than their lead needs: the tcgen05 MMA reads
// its ring slot until the wait after the next MMA, and Triton's ring has the
// stage gap + 1 slots, so a load ahead of the MMA would refill the slot the
// previous iteration's MMA still reads; and with ws=true on a scope=all loop
// no partitions, since Triton only warp-specializes loops marked
// tt.warp_specialize.

// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all" 2>&1 | FileCheck %s

// CHECK: remark: twill: scheduled matmul_tma_kernel_loop1: I={{[0-9]+}} (~{{5[0-9][0-9]}} cycles) L={{[0-9]+}} stages=4 {{.*}}descriptor_load_1 prefetch 2+1, descriptor_load_3 prefetch 2+1) [loads last
// CHECK-LABEL: scf.for
// CHECK: "tt.descriptor_load"{{.*}}{loop.cluster = 1 : i32, loop.stage = 0 : i32}
// CHECK: "ttng.tc_gen5_mma"{{.*}}{loop.cluster = 0 : i32, loop.stage = 3 : i32, tt.self_latency = 1 : i32}
// CHECK-NOT: ttg.partition
// CHECK: } {tt.scheduled_max_stage = 3 : i32}
