// The sub-tiled FlashAttention forward on sm_90 (H100 model): two 64-row
// halves of the Q tile per iteration, so four warp_group_dots. Input: real
// Triton 3.6.0 TTGIR of bench/kernels/fa_fwd.py, configuration "subtile"
// (head dim 128, BLOCK_M = BLOCK_N = 128, fp16, num_warps = 8), captured just
// before add_assign_latencies by Inputs/triton36/capture.py.
//
// Triton 3.6 pipelines a wgmma only in the last stage, so all four dots are
// pinned there; every op they reach along the iteration's dependences then
// shares that stage, and the I below 45 are refuted by the last-stage
// window relaxation (a small modulo problem over those 34 ops) instead of a
// proof at the full horizon (40 s before; it fell back in the Triton hook).
//
// Expected: proven I = 45 with the K and V loads one stage ahead, the four
// dots and the softmax of both halves in the last stage.

// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="arch=sm90" 2>&1 | FileCheck %s

// CHECK: remark: twill: scheduled attn_fwd_general_kernel_loop1: I=45 (~{{[0-9]+}} cycles) L=45 stages=2 no partitions (Triton's Hopper warp specialization needs num_warps=4), 36 ops in the graph
// CHECK-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1, descriptor_load_{{[0-9]+}} prefetch 1)
// CHECK-LABEL: scf.for
// CHECK:       "tt.descriptor_load"{{.*}} {loop.cluster = 0 : i32, loop.stage = 0 : i32}
// CHECK:       "ttng.warp_group_dot"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK:       "ttng.warp_group_dot"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK:       math.exp2 {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK:       "tt.descriptor_load"{{.*}} {loop.cluster = 0 : i32, loop.stage = 0 : i32}
// CHECK:       "ttng.warp_group_dot"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK:       "ttng.warp_group_dot"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// CHECK:       scf.yield
// CHECK-NOT:   loop.stage
// CHECK:       tt.scheduled_max_stage = 1 : i32

// The certificate, from the graph the pass exports: I in [36, 44] refuted by
// the window relaxation (ResMII is 36: the tensor core is busy 36 cycles).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-export-graph="arch=sm90 dir=%t" -o /dev/null
// RUN: %twill solve %t/attn_fwd_general_kernel_loop1.toml --machine h100 --u 30 | FileCheck %s --check-prefix=CERT
// CERT: I = 45  L = 45
// CERT: optimal: proven
// CERT: I in [1, 35]: ResMII
// CERT: I in [36, 44]: last-stage window: the 34 ops that last-stage pins put into one window of I cycles have no modulo schedule there (SMT unsat)

// Order within a stage: by default (order=program) the prefetched loads form
// cluster 0 and every other op cluster 1, so Triton emits them in program
// order; order=slot gives one cluster per slot of the modulo schedule.
// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="arch=sm90" 2>&1 | FileCheck %s --check-prefix=PROG
// PROG-LABEL: scf.for
// PROG-NOT:   loop.cluster = {{[2-9]}}
// PROG:       scf.yield
// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="arch=sm90 order=slot" 2>&1 | FileCheck %s --check-prefix=SLOT
// SLOT-LABEL: scf.for
// SLOT:       loop.cluster = {{[1-9][0-9]}} : i32

// Prefetched loads last in the body (loads=last): the loads take the last
// cluster instead of cluster 0 (one shared-memory buffer fewer per load).
// RUN: %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="arch=sm90 loads=last" 2>&1 | FileCheck %s --check-prefix=LAST
// LAST-LABEL: scf.for
// LAST:       "tt.descriptor_load"{{.*}} {loop.cluster = 1 : i32, loop.stage = 0 : i32}
// LAST:       "ttng.warp_group_dot"{{.*}} {loop.cluster = 0 : i32, loop.stage = 1 : i32}
// RUN: not %twill-opt %inputs/triton36/fa_fwd_subtile_sm90.before.mlir --twill-schedule="arch=sm90 loads=middle" 2>&1 | FileCheck %s --check-prefix=BADLOADS
// BADLOADS: loads: expected `auto`, `first` or `last`, got `middle`
