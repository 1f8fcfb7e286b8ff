// Warp-specialized code: the TMA GEMM lowered by lower=force (a producer
// partition filling rings behind mbarriers, the default region running the
// async wgmma) is proved for trip counts 0..12, for both capture placements;
// with the consumer's release deleted, the producer hangs once it laps the
// ring (rule 5).
//
// RUN: for v in 3.6 3.9; do \
// RUN:   %twill-opt %inputs/triton36/gemm_sm90.before.mlir "--twill-schedule=lower=force scope=all arch=sm90 triton=$v" 2>/dev/null \
// RUN:     | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1; \
// RUN: done | FileCheck %s
// CHECK: remark: twill: pipeline proved safe: 4 rings (3, 3, 3, 3), trip counts 0..=12 [@matmul_tma_kernel
// CHECK: remark: twill: pipeline proved safe: 4 rings (3, 3, 3, 3), trip counts 0..=12 [@matmul_tma_kernel
//
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir "--twill-schedule=lower=force scope=all arch=sm90 triton=3.6" 2>/dev/null \
// RUN:   | grep -v '"ttng.arrive_barrier"' \
// RUN:   | %twill-opt - --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=RELEASE
// RELEASE: warning: twill: pipeline rejected: rule 5 (WaitWithoutArrival): ttng.wait_barrier
