// `ctas=N`: the loop is solved for N CTAs sharing each SM. Each CTA gets its
// share of the register file and of shared memory (Machine::sharing_sm:
// registers per warp in multiples of 256, the runtime's 1 KB per CTA
// reserved), and an iteration lasts at least N times the busiest unit's
// cycles (the CTAs share the units), so a load needs fewer iterations of
// lead. Input: the GEMM main loop of gemm_sm90.mlir (128x128x64 fp16 tiles,
// 4 warps; ~760 cycles per TMA load, I ~790 cycles: the loop is bound by
// shared-memory bandwidth, 80 KB of wgmma operand reads and TMA writes per
// iteration at 128 B/clk).

// Alone on the SM (the default): one iteration covers all but ~34 cycles
// of a load's time (loads are issued first), so loads run one iteration
// ahead.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all" 2>&1 | FileCheck %s --check-prefix=ONE
// ONE-LABEL: remark: twill: scheduled matmul_tma_kernel_loop1:
// ONE-SAME: stages=2
// ONE-SAME: descriptor_load_1 prefetch 1, descriptor_load_3 prefetch 1) [loads first: lead over the load time ~34 cycles]
// ONE-NOT: ctas=

// Two CTAs: an iteration takes ~1581 cycles with the SM shared, so the
// same one iteration of lead covers a load with ~825 cycles to spare.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=2" 2>&1 | FileCheck %s --check-prefix=TWO
// TWO-LABEL: remark: twill: scheduled matmul_tma_kernel_loop1:
// TWO-SAME: stages=2
// TWO-SAME: descriptor_load_1 prefetch 1, descriptor_load_3 prefetch 1) [loads first: lead over the load time ~825 cycles]
// TWO-SAME: [ctas=2: within 255 registers per thread and 115712 bytes of shared memory; an iteration ~1581 cycles with the SM shared]
// TWO-LABEL: scf.for
// TWO: "tt.descriptor_load"{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// TWO: "ttng.warp_group_dot"{{.*}}loop.stage = 1 : i32}
// TWO: } {tt.scheduled_max_stage = 1 : i32}

// Three CTAs: 168 registers per thread and 76800 bytes each. Loads first
// need three 32 KB buffers per operand pair (one more for the use in a
// later cluster): refused, Triton's schedule applies. Loads last need one
// buffer fewer and fit.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=3" 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: remark: twill: skipped loop: the prefetch buffers need 98304 bytes of shared memory, more than the 76800 of machine `h100`
// THREE-SAME: Triton's own schedule applies
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=3 loads=last" 2>&1 | FileCheck %s --check-prefix=LAST
// LAST-LABEL: remark: twill: scheduled matmul_tma_kernel_loop1:
// LAST-SAME: stages=2
// LAST-SAME: [ctas=3: within 168 registers per thread and 76800 bytes of shared memory; an iteration ~2372 cycles with the SM shared]

// More CTAs than an SM holds at 4 warps (64 warps): the loop is skipped
// with the reason; a count outside 1..=32 is a bad option.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=17" 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: remark: twill: skipped loop: ctas=17: 17 CTAs of 4 warps exceed the 64 warps / 32 CTAs an SM of `h100` holds; Triton's own schedule applies
// RUN: not %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=0" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: twill-schedule: ctas: expected 1..=32 CTAs per SM, got `0`

// A loop marked tt.warp_specialize (the GEMM of gemm_sm90_w4): Triton's
// partitions add warps to the module's ttg.num-warps that a CTA's share
// would not count, so `ctas` is refused there, with the reason.
// RUN: %twill-opt %inputs/triton36/gemm_sm90_w4.before.mlir --twill-schedule="arch=sm90 ctas=2" 2>&1 | FileCheck %s --check-prefix=WS
// WS: remark: twill: skipped loop: ctas=2: a CTA's share of the SM is not modeled for warp-specialized loops (their partitions add warps); Triton's own schedule applies
