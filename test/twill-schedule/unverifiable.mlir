// unverifiable=skip (the hook's default): a loop Triton warp-specializes on
// sm100 is left to Triton before it is solved, since the pipeline verifier
// does not model the code Triton builds from it (tcgen05 commits, tensor
// memory) and a verifying host would replace its schedule by Triton's own.
// The FA forward (marked tt.warp_specialize) is skipped with reason
// `unverifiable` and left as it was; the GEMM (not marked) is scheduled as
// without the option. The pass's default (`schedule`) solves both
// (fa_fwd_sm100.mlir, gemm_sm100.mlir).
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm100.before.mlir --twill-schedule="arch=sm100 unverifiable=skip report=%t.json" --mlir-print-op-generic 2>%t.err | FileCheck %s --check-prefix=IR
// RUN: FileCheck %s --input-file=%t.err
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json
// RUN: %twill-opt %inputs/triton36/gemm_sm100.before.mlir --twill-schedule="arch=sm100 scope=all unverifiable=skip stages=free" 2>&1 >/dev/null | FileCheck %s --check-prefix=GEMM
// CHECK: remark: twill: skipped loop: Triton warp-specializes this loop on sm100, and the pipeline verifier does not model the code it builds
// CHECK-SAME: (unverifiable=schedule solves it)
// IR-NOT: loop.stage
// IR-NOT: ttg.partition
// REPORT: "decision": "skipped",
// REPORT-NEXT: "reason": "unverifiable",
// GEMM: remark: twill: scheduled matmul_tma_kernel_loop1
