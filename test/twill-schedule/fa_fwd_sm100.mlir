// FlashAttention forward on sm_100 (B200 model, tensor memory). Input: real
// Triton 3.6.0 TTGIR of bench/kernels/fa_fwd.py for cuda:100 (head dim 128,
// BLOCK_M = BLOCK_N = 128, fp16, num_warps = 4, loop marked
// tt.warp_specialize), captured just before add_assign_latencies by
// Inputs/triton36/capture.py.
//
// Expected: a stage and a cluster on every top-level body op and a
// ttg.partition on each (Triton's warp specialization requires all of them),
// ttg.partition.stages with one entry per partition and the
// ttg.warp_specialize.tag without which Triton would recompute its own
// partitions; tt.self_latency = 1 on both MMAs. The partitions obey the
// colocation rules Triton can lower (frontend::lower::colocation): the loads
// with the local_allocs that store their tiles in a partition of their own,
// both MMAs in partition 1 (Triton's convention), and every tensor-memory
// access and softmax op in partition 0, the default region.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm100.before.mlir --twill-schedule="arch=sm100 report=%t.json" 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json
// CHECK: remark: twill: scheduled attn_fwd_kernel_loop1: I={{[0-9]+}} (~{{[0-9]+}} cycles) L={{[0-9]+}} stages={{[0-9]+}} partitions=3, 21 ops in the graph
// CHECK-SAME: proven optimal
// REPORT: "name": "attn_fwd_kernel_loop1",
// REPORT: "decision": "scheduled",
// REPORT: "warp_groups": 4,
// REPORT-NEXT: "partitions": {
// REPORT-NEXT: "code": "written",
// REPORT-NEXT: "count": 3,
// REPORT-NEXT: "text": "partitions=3"
// REPORT: "ops": 21,
// REPORT-NEXT: "proof": {
// REPORT-NEXT: "checker_accepted": true,
// REPORT-NEXT: "ii_proven": true,
// REPORT-NEXT: "length_proven": true,
// REPORT-NEXT: "under_partition_rules": true
// CHECK-LABEL: scf.for
// CHECK-NEXT:  "tt.descriptor_load"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32, ttg.partition = array<i32: 2>}
// CHECK-NEXT:  "ttg.local_alloc"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 2>}
// CHECK-NEXT:  "ttg.memdesc_trans"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 1>}
// CHECK-NEXT:  "ttng.tc_gen5_mma"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, tt.self_latency = 1 : i32, ttg.partition = array<i32: 1>}
// CHECK-NEXT:  "ttng.tmem_load"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK-NEXT:  "tt.reduce"
// CHECK:       }) {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK-COUNT-3: {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK-NEXT:  "tt.expand_dims"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK:       math.exp2 {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK:       "ttng.tmem_load"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK:       "tt.descriptor_load"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 2>}
// CHECK-NEXT:  "ttg.local_alloc"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 2>}
// CHECK:       "ttng.tmem_alloc"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK-NEXT:  "ttng.tmem_store"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, ttg.partition = array<i32: 0>}
// CHECK-NEXT:  "ttng.tc_gen5_mma"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, tt.self_latency = 1 : i32, ttg.partition = array<i32: 1>}
// CHECK-NEXT:  arith.addi {{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32, ttg.partition = array<i32: 2>}
// CHECK-NEXT:  scf.yield
// CHECK-NOT:   ttg.partition =
// CHECK-NEXT:  } {tt.scheduled_max_stage = {{[0-9]}} : i32, tt.warp_specialize, ttg.partition.stages = [0 : i32, 1 : i32, 0 : i32], ttg.warp_specialize.tag = 0 : i32}
// With partitions=false the schedule is still solved for warp specialization
// but only stages, clusters and tt.self_latency are written: Triton's own
// partition scheduling (which runs when the loop has no
// ttg.warp_specialize.tag) assigns the partitions around twill's stages.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm100.before.mlir --twill-schedule="arch=sm100 partitions=false" 2>&1 | FileCheck %s --check-prefix=NOPART
// NOPART: remark: twill: scheduled attn_fwd_kernel_loop1: {{.*}} partitions left to Triton (partitions=false)
// NOPART-NOT: ttg.partition
// NOPART: "ttng.tc_gen5_mma"{{.*}} {loop.cluster = {{[0-9]+}} : i32, loop.stage = {{[0-9]}} : i32, tt.self_latency = 1 : i32}
// NOPART-NOT: ttg.partition
// NOPART: } {tt.scheduled_max_stage = {{[0-9]}} : i32, tt.warp_specialize}
