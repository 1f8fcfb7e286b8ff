// Triton's own pipelines (Triton 3.6.0 and 3.9.0, cuda:90, captured by
// test/Inputs/pipelined/capture.py) are proved safe for every trip count:
// cp.async rings behind async wgmma (the tutorial-style matmul), TMA rings
// with mbarrier phases (the GEMM, both loops of the causal FA forward, and
// the FA backward whose dK/dV loop mixes TMA and cp.async loads), and twill's
// TMA schedules.
//
// RUN: for f in ptr_matmul_128x64x64_stock tma_gemm_stock tma_gemm_twill fa_fwd_causal_stock fa_bwd_hd64_stock fa_bwd_hd64_twill; do \
// RUN:   for v in 36 39; do \
// RUN:     %twill-opt %inputs/pipelined/${f}_triton$v.mlir --twill-verify-pipeline -o /dev/null 2>&1; \
// RUN:   done; \
// RUN: done | FileCheck %s
//
// CHECK-NOT: rejected
// CHECK-NOT: not verified
// ptr_matmul: one loop, two rings of 4 (num_stages 4, wgmma + 1)
// CHECK: remark: twill: pipeline proved safe: 2 rings (4, 4), trip counts 0..={{[0-9]+}} [@matmul_kernel loop
// CHECK: remark: twill: pipeline proved safe: 2 rings (4, 4), trip counts 0..={{[0-9]+}} [@matmul_kernel loop
// tma_gemm (stock, twill; each on 3.6 and 3.9): A, B and the barrier ring
// CHECK-COUNT-4: remark: twill: pipeline proved safe: 3 rings (3, 3, 3), trip counts 0..={{[0-9]+}} [@matmul_tma_kernel
// fa_fwd_causal: two loops each
// CHECK-COUNT-4: remark: twill: pipeline proved safe: 4 rings (3, 3, 3, 3), trip counts 0..={{[0-9]+}} [@attn_fwd_general_kernel
// fa_bwd_hd64 (stock and twill, each on 3.6 and 3.9): the dK/dV and dQ loops
// CHECK: remark: twill: pipeline proved safe: 6 rings {{.*}} [@attn_bwd_kernel
// CHECK: remark: twill: pipeline proved safe: 3 rings {{.*}} [@attn_bwd_kernel
// CHECK-NOT: rejected
// CHECK-NOT: not verified
