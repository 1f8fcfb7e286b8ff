// FlashAttention backward, head dim 64, on sm_90 (H100 model). Input: real
// Triton 3.6.0 TTGIR of bench/kernels/fa_bwd.py at the tutorial's 32-row
// steps, num_warps=4 (the configuration twill's model chooses), captured just
// before add_assign_latencies by Inputs/triton36/capture.py. Two loops, not
// marked tt.warp_specialize (scope=all). The dK/dV loop streams Q and dO
// through descriptors (TMA) and M and Delta through pointer loads (tt.load,
// which Triton pipelines as cp.async); the dQ loop streams K and V through
// descriptors.

// Default (`loads=auto`): the dK/dV loop mixes the two kinds of load, so
// every load of the kernel goes last in the body, one stage deeper than the
// modeled depth (Triton's own rotation: the same lead and buffers as loads
// first). The dQ loop, with descriptor loads only, is rotated with it (its
// remark names the mixed loop); kernels without a mixed loop keep loads
// first (gemm_sm90.mlir).
// RUN: %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all report=%t.json" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: FileCheck %s --check-prefix=AUTO-REPORT --input-file=%t.json
// AUTO: remark: twill: scheduled attn_bwd_kernel_loop1: I={{[0-9]+}} (~{{[0-9]+}} cycles) L={{[0-9]+}} stages=3 no partitions
// AUTO-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1+1, load_{{[0-9]+}} prefetch 1+1, descriptor_load_{{[0-9]+}} prefetch 1+1, load_{{[0-9]+}} prefetch 1+1)
// AUTO-SAME: [loads last: lead over the load time ~{{[0-9]+}} cycles] [loads=auto: descriptor and pointer loads mixed, all last, one stage deeper]
// AUTO: remark: twill: scheduled attn_bwd_kernel_loop2: {{.*}} stages=3
// AUTO-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1+1, descriptor_load_{{[0-9]+}} prefetch 1+1)
// AUTO-SAME: [loads last: lead over the load time ~{{[0-9]+}} cycles] [loads=auto: attn_bwd_kernel_loop1 of this kernel mixes descriptor and pointer loads, all last, one stage deeper]
// AUTO-LABEL: scf.for
// AUTO: "tt.descriptor_load"{{.*}}{loop.cluster = [[LOADS:1]] : i32, loop.stage = 0 : i32}
// AUTO: "tt.load"{{.*}}{loop.cluster = [[LOADS]] : i32, loop.stage = 0 : i32}
// AUTO: "ttng.warp_group_dot"{{.*}}{loop.cluster = 0 : i32, loop.stage = 2 : i32}
// AUTO: "tt.descriptor_load"{{.*}}{loop.cluster = [[LOADS]] : i32, loop.stage = 0 : i32}
// AUTO: "tt.load"{{.*}}{loop.cluster = [[LOADS]] : i32, loop.stage = 0 : i32}
// AUTO: } {tt.scheduled_max_stage = 2 : i32}
// AUTO-LABEL: scf.for
// AUTO: "tt.descriptor_load"{{.*}}{loop.cluster = [[DQ:1]] : i32, loop.stage = 0 : i32}
// AUTO: "tt.descriptor_load"{{.*}}{loop.cluster = [[DQ]] : i32, loop.stage = 0 : i32}
// AUTO: "ttng.warp_group_dot"{{.*}}{loop.cluster = 0 : i32, loop.stage = 2 : i32}
// AUTO: } {tt.scheduled_max_stage = 2 : i32}
// In the report, the rotation's stage is in each load's `extra` and
// `rotated_by` names the mixed loop.
// AUTO-REPORT: "name": "attn_bwd_kernel_loop1",
// AUTO-REPORT: "stages": 3,
// AUTO-REPORT: "op": "load_{{[0-9]+}}",
// AUTO-REPORT-NEXT: "depth": 1,
// AUTO-REPORT-NEXT: "extra": 1,
// AUTO-REPORT-NEXT: "last": true
// AUTO-REPORT: "placement": "last",
// AUTO-REPORT-NEXT: "lead_cycles": {{[0-9]+}},
// AUTO-REPORT-NEXT: "rotated_by": "attn_bwd_kernel_loop1"
// AUTO-REPORT: "name": "attn_bwd_kernel_loop2",
// AUTO-REPORT: "stages": 3,
// AUTO-REPORT: "placement": "last",
// AUTO-REPORT-NEXT: "lead_cycles": {{[0-9]+}},
// AUTO-REPORT-NEXT: "rotated_by": "attn_bwd_kernel_loop1"

// `rotate=loop`: only the mixed loop is rotated; the dQ loop keeps its
// loads first at the modeled depth.
// RUN: %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all rotate=loop" 2>&1 | FileCheck %s --check-prefix=LOOP
// LOOP: remark: twill: scheduled attn_bwd_kernel_loop1: {{.*}} stages=3
// LOOP-SAME: [loads=auto: descriptor and pointer loads mixed, all last, one stage deeper]
// LOOP: remark: twill: scheduled attn_bwd_kernel_loop2: {{.*}} stages=2
// LOOP-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1, descriptor_load_{{[0-9]+}} prefetch 1)
// LOOP-SAME: [loads first: lead over the load time ~{{[0-9]+}} cycles]
// LOOP-NOT: loads=auto
// LOOP-LABEL: scf.for
// LOOP: } {tt.scheduled_max_stage = 2 : i32}
// LOOP-LABEL: scf.for
// LOOP: "tt.descriptor_load"{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// LOOP: "ttng.warp_group_dot"{{.*}}{loop.cluster = 1 : i32, loop.stage = 1 : i32}
// LOOP: } {tt.scheduled_max_stage = 1 : i32}

// `loads=first`: every streaming load one iteration ahead, first in the body.
// RUN: %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all loads=first" 2>&1 | FileCheck %s
// CHECK: remark: twill: scheduled attn_bwd_kernel_loop1: I={{[0-9]+}} (~{{[0-9]+}} cycles) L={{[0-9]+}} stages=2 no partitions
// CHECK-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1, load_{{[0-9]+}} prefetch 1, descriptor_load_{{[0-9]+}} prefetch 1, load_{{[0-9]+}} prefetch 1)
// CHECK-SAME: [loads first: lead over the load time ~{{[0-9]+}} cycles]
// CHECK: remark: twill: scheduled attn_bwd_kernel_loop2: {{.*}} stages=2
// CHECK-SAME: [loads first: lead over the load time ~{{[0-9]+}} cycles]
// CHECK-LABEL: scf.for
// CHECK: "tt.descriptor_load"{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// CHECK: "tt.load"{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// CHECK: "ttng.warp_group_dot"{{.*}}{loop.cluster = 1 : i32, loop.stage = 1 : i32}
// CHECK: } {tt.scheduled_max_stage = 1 : i32}

// The pointer loads apart from the descriptor loads
// (`pointer-loads=last pointer-prefetch=1`): in the dK/dV loop M and Delta
// (and their address computation) go last in the body, one stage earlier so
// that they stay as far ahead of their use as the model needs; Q and dO stay
// first at the modeled depth, so the loop gets a third stage. The dQ loop,
// with descriptor loads only, is unchanged. The remark names the mixed
// placement and each load's depth.
// RUN: %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all pointer-loads=last pointer-prefetch=1" 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: remark: twill: scheduled attn_bwd_kernel_loop1: {{.*}} stages=3
// SPLIT-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1, load_{{[0-9]+}} prefetch 1+1, descriptor_load_{{[0-9]+}} prefetch 1, load_{{[0-9]+}} prefetch 1+1)
// SPLIT-SAME: [loads first and last: lead over the load time ~{{[0-9]+}} cycles]
// SPLIT: remark: twill: scheduled attn_bwd_kernel_loop2: {{.*}} stages=2
// SPLIT-SAME: [loads first: lead over the load time
// SPLIT-LABEL: scf.for
// SPLIT-NEXT: arith.addi {{.*}}{loop.cluster = [[DESC:0]] : i32, loop.stage = 1 : i32}
// SPLIT-NEXT: "tt.descriptor_load"{{.*}}{loop.cluster = [[DESC]] : i32, loop.stage = 1 : i32}
// SPLIT-NEXT: "ttg.local_alloc"{{.*}}{loop.cluster = [[BODY:1]] : i32, loop.stage = 2 : i32}
// SPLIT-NEXT: "tt.addptr"{{.*}}{loop.cluster = [[PTR:2]] : i32, loop.stage = 0 : i32}
// SPLIT-NEXT: "tt.splat"{{.*}}{loop.cluster = [[PTR]] : i32, loop.stage = 0 : i32}
// SPLIT-NEXT: "tt.addptr"{{.*}}{loop.cluster = [[PTR]] : i32, loop.stage = 0 : i32}
// SPLIT-NEXT: "tt.load"{{.*}}{loop.cluster = [[PTR]] : i32, loop.stage = 0 : i32}
// SPLIT: "ttng.warp_group_dot"{{.*}}{loop.cluster = [[BODY]] : i32, loop.stage = 2 : i32}
// SPLIT: "tt.descriptor_load"{{.*}}{loop.cluster = [[DESC]] : i32, loop.stage = 1 : i32}
// SPLIT: "tt.load"{{.*}}{loop.cluster = [[PTR]] : i32, loop.stage = 0 : i32}
// SPLIT: } {tt.scheduled_max_stage = 2 : i32}
// SPLIT-LABEL: scf.for
// SPLIT: "tt.descriptor_load"{{.*}}{loop.cluster = 0 : i32, loop.stage = 0 : i32}
// SPLIT: } {tt.scheduled_max_stage = 1 : i32}

// Every load last with one more stage (Triton's own structure) but the
// pointer loads first at the modeled depth: the complement.
// RUN: %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all loads=last prefetch=1 pointer-loads=first pointer-prefetch=0" 2>&1 | FileCheck %s --check-prefix=COMP
// COMP: remark: twill: scheduled attn_bwd_kernel_loop1: {{.*}} stages=3
// COMP-SAME: (proven optimal; descriptor_load_{{[0-9]+}} prefetch 1+1, load_{{[0-9]+}} prefetch 1, descriptor_load_{{[0-9]+}} prefetch 1+1, load_{{[0-9]+}} prefetch 1)
// COMP-SAME: [loads first and last:
// COMP: remark: twill: scheduled attn_bwd_kernel_loop2: {{.*}} stages=3
// COMP-SAME: [loads last: lead over the load time ~{{[0-9]+}} cycles]

// A bad placement names the option.
// RUN: not %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all pointer-loads=middle" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: pointer-loads: expected `first` or `last`, got `middle`
