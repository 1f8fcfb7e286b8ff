// `objective`: what the joint search optimizes after the minimum I.
// `length` (the default) is the paper's shortest L; `slack` keeps the stage
// count of the shortest schedule and, among schedules with that many stages,
// takes the one whose asynchronous ops (MMAs, non-streamed TMA copies) may
// complete latest before they delay one another, then the shortest L with
// that slack (src/joint/slack.rs). Only the default encoding implements it.

// Blackwell FA forward (the input of fa_fwd_sm100.mlir): the shortest
// schedule, L = 32, leaves the MMAs ~1449 cycles of slack; at the same I and
// 3 stages, L = 40 leaves ~2503. Under `length` the remark says nothing of
// the objective.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm100.before.mlir --twill-schedule="arch=sm100" 2>&1 | FileCheck %s --check-prefix=LENGTH
// LENGTH-LABEL: remark: twill: scheduled attn_fwd_kernel_loop1: I=20 (~2635 cycles) L=32 stages=3 partitions=3
// LENGTH-NOT: objective slack
// LENGTH-LABEL: scf.for
// LENGTH: } {tt.scheduled_max_stage = 2 : i32
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm100.before.mlir --twill-schedule="arch=sm100 objective=slack report=%t.slack.json" 2>&1 | FileCheck %s --check-prefix=SLACK
// RUN: FileCheck %s --check-prefix=SLACK-REPORT --input-file=%t.slack.json
// SLACK-LABEL: remark: twill: scheduled attn_fwd_kernel_loop1: I=20 (~2635 cycles) L=40 stages=3 partitions=3
// SLACK-SAME: (proven optimal under Triton's partition rules;
// SLACK-SAME: [objective slack: latency slack ~2503 cycles (the most at this I and stage count within its groups and crossings), the shortest L=32 has ~1449]
// SLACK-LABEL: scf.for
// SLACK: } {tt.scheduled_max_stage = 2 : i32
// SLACK-REPORT: "ii": 20,
// SLACK-REPORT-NEXT: "ii_cycles": 2635,
// SLACK-REPORT-NEXT: "length": 40,
// SLACK-REPORT: "stages": 3,
// SLACK-REPORT: "code": "written",
// SLACK-REPORT-NEXT: "count": 3,
// SLACK-REPORT: "under_partition_rules": true
// SLACK-REPORT: "objective": "slack",
// SLACK-REPORT-NEXT: "latency_slack": {
// SLACK-REPORT-NEXT: "cycles": 2503,
// SLACK-REPORT-NEXT: "proven": true,
// SLACK-REPORT-NEXT: "shortest_length": 32,
// SLACK-REPORT-NEXT: "shortest_length_slack_cycles": 1449

// Hopper FA backward (hd64): the dK/dV loop keeps I, L and its stages, but
// the slack between its wgmmas doubles; on sm90 every wgmma stays in the
// last stage (Triton's rule), which leaves the objective little to move.
// RUN: %twill-opt %inputs/triton36/fa_bwd_hd64_sm90.before.mlir --twill-schedule="arch=sm90 scope=all objective=slack report=%t.bwd.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=BWD --input-file=%t.bwd.json
// BWD: "name": "attn_bwd_kernel_loop1",
// BWD: "ii": 19,
// BWD-NEXT: "ii_cycles": 936,
// BWD-NEXT: "length": 19,
// BWD: "stages": 3,
// BWD: "latency_slack": {
// BWD-NEXT: "cycles": 197,
// BWD-NEXT: "proven": true,
// BWD-NEXT: "shortest_length": 19,
// BWD-NEXT: "shortest_length_slack_cycles": 99

// The GEMM main loop has one asynchronous op (its wgmma; the streamed loads
// are not endpoints): nothing to trade, L is the shortest.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all objective=slack report=%t.gemm.json" 2>&1 | FileCheck %s --check-prefix=GEMM
// RUN: FileCheck %s --check-prefix=GEMM-REPORT --input-file=%t.gemm.json
// GEMM-REPORT: "objective": "slack",
// GEMM-REPORT-NEXT: "latency_slack": null,
// GEMM-LABEL: remark: twill: scheduled matmul_tma_kernel_loop1: I=3 (~790 cycles) L=3 stages=2
// GEMM-SAME: [objective slack: no two asynchronous ops joined by dependences; L is the shortest]

// A bad value, and an encoding without the refinement, fail the pass.
// RUN: not %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all objective=fast" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: twill-schedule: unknown objective `fast` (expected length or slack)
// RUN: not %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all objective=slack encoding=int" 2>&1 | FileCheck %s --check-prefix=ENC
// ENC: error: twill-schedule: objective=slack needs encoding=default (the only encoding with the refinement)
