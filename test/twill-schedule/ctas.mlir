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
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all report=%t.one.json" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: FileCheck %s --check-prefix=ONE-REPORT --input-file=%t.one.json
// ONE-LABEL: remark: twill: scheduled matmul_tma_kernel_loop1:
// ONE-SAME: descriptor_load_1 prefetch 1, descriptor_load_3 prefetch 1) [loads first: lead over the load time ~34 cycles]
// ONE-NOT: ctas=
// ONE-REPORT: "stages": 2,
// ONE-REPORT: "op": "descriptor_load_1",
// ONE-REPORT-NEXT: "depth": 1,
// ONE-REPORT: "op": "descriptor_load_3",
// ONE-REPORT-NEXT: "depth": 1,
// ONE-REPORT: "placement": "first",
// ONE-REPORT-NEXT: "lead_cycles": 34,
// ONE-REPORT: "ctas": 1,
// ONE-REPORT-NEXT: "sharing": null

// Two CTAs: an iteration takes ~1581 cycles with the SM shared, so the
// same one iteration of lead covers a load with ~825 cycles to spare.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=2 report=%t.two.json" 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: FileCheck %s --check-prefix=TWO-REPORT --input-file=%t.two.json
// TWO-LABEL: remark: twill: scheduled matmul_tma_kernel_loop1:
// TWO-SAME: [ctas=2: within 255 registers per thread and 115712 bytes of shared memory; an iteration ~1581 cycles with the SM shared]
// TWO-REPORT: "stages": 2,
// TWO-REPORT: "depth": 1,
// TWO-REPORT: "depth": 1,
// TWO-REPORT: "placement": "first",
// TWO-REPORT-NEXT: "lead_cycles": 825,
// TWO-REPORT: "ctas": 2,
// TWO-REPORT-NEXT: "sharing": {
// TWO-REPORT-NEXT: "regs_per_thread": 255,
// TWO-REPORT-NEXT: "smem_bytes": 115712,
// TWO-REPORT-NEXT: "iteration_cycles": 1581
// TWO-LABEL: scf.for
// TWO: "tt.descriptor_load"{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// TWO: "ttng.warp_group_dot"{{.*}}loop.stage = 1 : i32}
// TWO: } {tt.scheduled_max_stage = 1 : i32}

// Three CTAs: 168 registers per thread and 76800 bytes each. Loads first
// need three 32 KB buffers per operand pair (one more for the use in a
// later cluster): refused, Triton's schedule applies. Loads last need one
// buffer fewer and fit.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=3 report=%t.three.json" 2>&1 | FileCheck %s --check-prefix=THREE
// RUN: FileCheck %s --check-prefix=THREE-REPORT --input-file=%t.three.json
// THREE: remark: twill: skipped loop: the prefetch buffers need 98304 bytes of shared memory, more than the 76800 of machine `h100`
// THREE-SAME: Triton's own schedule applies
// THREE-REPORT: "decision": "skipped",
// THREE-REPORT-NEXT: "reason": "shared_memory_exceeded",
// THREE-REPORT-NEXT: "text": "the prefetch buffers need 98304 bytes of shared memory, more than the 76800 of machine `h100` (prefetch=0 extra stages)",
// THREE-REPORT-NEXT: "bounds": null,
// THREE-REPORT: "schedule": null,
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=3 loads=last report=%t.last.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=LAST --input-file=%t.last.json
// LAST: "decision": "scheduled",
// LAST: "stages": 2,
// LAST: "placement": "last",
// LAST: "ctas": 3,
// LAST-NEXT: "sharing": {
// LAST-NEXT: "regs_per_thread": 168,
// LAST-NEXT: "smem_bytes": 76800,
// LAST-NEXT: "iteration_cycles": 2372

// More CTAs than an SM holds at 4 warps (64 warps): the loop is skipped
// with the reason; a count outside 1..=32 is a bad option.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=17 report=%t.many.json" 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: FileCheck %s --check-prefix=MANY-REPORT --input-file=%t.many.json
// MANY: remark: twill: skipped loop: ctas=17: 17 CTAs of 4 warps exceed the 64 warps / 32 CTAs an SM of `h100` holds; Triton's own schedule applies
// MANY-REPORT: "reason": "ctas_unfit",
// RUN: not %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all ctas=0" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: twill-schedule: ctas: expected 1..=32 CTAs per SM, got `0`

// A loop marked tt.warp_specialize (the GEMM of gemm_sm90_w4): Triton's
// partitions add warps to the module's ttg.num-warps that a CTA's share
// would not count, so `ctas` is refused there, with the reason.
// RUN: %twill-opt %inputs/triton36/gemm_sm90_w4.before.mlir --twill-schedule="arch=sm90 ctas=2 report=%t.ws.json" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: FileCheck %s --check-prefix=WS-REPORT --input-file=%t.ws.json
// WS: remark: twill: skipped loop: ctas=2: a CTA's share of the SM is not modeled for warp-specialized loops (their partitions add warps); Triton's own schedule applies
// WS-REPORT: "reason": "ctas_warp_specialized",
