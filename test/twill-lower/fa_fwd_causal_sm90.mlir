// The causal FA forward at 8 warps (real Triton 3.6.0 TTGIR of
// third_party/triton/tests/kernels/fa_fwd.py, "causal", captured just before
// Hopper warp specialization by Inputs/triton36/capture.py): two loops in
// one function, both marked warp_specialize, the K blocks left of the
// diagonal and then the diagonal block under its mask. Each becomes a ws op
// of its own (Triton joins every warp of the CTA at the end of each), each
// in two stages (PV a trip after its QK^T: waits 0 in the prologue, 1 and 0
// in the steady loop, 0 in the epilogue), and the verifier proves each
// after the one before it.

// RUN: %twill-opt %inputs/triton36/fa_fwd_causal_sm90.before.mlir --twill-schedule="lower=on scope=ws arch=sm90 triton=3.6 cache=off" 2>&1 | FileCheck %s

// CHECK: remark: twill: scheduled attn_fwd_general_kernel_loop1: {{.*}} lowered (a producer partition and the default region)
// CHECK: remark: twill: lowered to 1+1 partitions {{.*}}; proved by the pipeline verifier
// CHECK: remark: twill: scheduled attn_fwd_general_kernel_loop2: {{.*}} lowered (a producer partition and the default region)
// CHECK: remark: twill: lowered to 1+1 partitions {{.*}}; proved by the pipeline verifier

// CHECK: "ttg.warp_specialize"(
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 0
// CHECK: scf.for
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 1
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 0
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 0
// CHECK: "ttg.warp_specialize"(
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 0
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 1
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 0
// CHECK: "ttng.warp_group_dot_wait"{{.*}}pendings = 0
// CHECK-NOT: "ttg.warp_specialize"(
// CHECK-NOT: tt.warp_specialize
