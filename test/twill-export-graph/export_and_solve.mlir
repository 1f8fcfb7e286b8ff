// --twill-export-graph writes each candidate loop's dependence graph as TOML
// that `twill solve` reads, so any schedule the pass makes can be reproduced
// (and studied) with the CLI. Input: real Triton 3.6.0 TTGIR of
// bench/kernels/fa_fwd.py for cuda:90 (Inputs/triton36/capture.py).

// RUN: rm -rf %t && %twill-opt %inputs/triton36/fa_fwd_sm90.before.mlir --twill-export-graph="dir=%t arch=sm90" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: FileCheck %s --check-prefix=GRAPH < %t/attn_fwd_kernel_loop1.toml
// RUN: %twill solve %t/attn_fwd_kernel_loop1.toml --machine h100 --u 30 --groups 2 | FileCheck %s --check-prefix=SOLVE

// REMARK: remark: twill: wrote {{.*}}attn_fwd_kernel_loop1.toml (18 ops, 24 edges)

// GRAPH: name = "attn_fwd_kernel_loop1"
// GRAPH: {{\[\[op\]\]}}
// GRAPH-NEXT: name = "descriptor_load_0"
// GRAPH-NEXT: cost = { class = "tma_load", shape = [128, 128], dtype = "f16" }
// GRAPH-NEXT: memory = { smem = 32768 }
// GRAPH-NEXT: variable_latency = true
// GRAPH-NEXT: streaming = true
// GRAPH: name = "warp_group_dot_3"
// GRAPH-NEXT: cost = { class = "mma", shape = [128, 128, 128], dtype = "f16" }
// GRAPH: warp_group = true
// GRAPH-NEXT: last_stage = true
// GRAPH: name = "exp2_11"
// GRAPH-NEXT: cost = { class = "exp", shape = [128, 128], dtype = "f32" }
// GRAPH: {{\[\[edge\]\]}}
// GRAPH-NEXT: from = "descriptor_load_0"
// GRAPH-NEXT: to = "warp_group_dot_3"
// GRAPH-NEXT: blocking = true
// GRAPH: from = "warp_group_dot_24"
// GRAPH-NEXT: to = "mulf_19"
// GRAPH-NEXT: distance = 1

// SOLVE: I = {{[0-9]+}}  L = {{[0-9]+}}  stages = 1
// SOLVE: optimal: proven
// SOLVE: last-stage window: `warp_group_dot_3` and `warp_group_dot_24` share the last stage
