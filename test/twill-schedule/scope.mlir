// Under the default scope=ws only loops marked tt.warp_specialize are
// scheduled; the other loop is left untouched with a remark. scope=all
// schedules both. Input: Inputs/two_loops_sm90.mlir (two GEMM main loops in
// Triton 3.6 sm_90 TTGIR, see that file for provenance).

// RUN: %twill-opt %inputs/two_loops_sm90.mlir --twill-schedule="arch=sm90" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: %twill-opt %inputs/two_loops_sm90.mlir --twill-schedule="arch=sm90 scope=all" 2>&1 | FileCheck %s --check-prefix=ALL

// WS: remark: loc("ws_loop"): twill: scheduled two_loops_loop1: I={{[0-9]+}}
// WS-SAME: stages=2 partitions=3
// WS: remark: loc("plain_loop"): twill: skipped loop: not marked tt.warp_specialize
// WS-LABEL: scf.for
// WS: "tt.descriptor_load"{{.*}}{async_task_id = array<i32: 0>, loop.cluster = {{[0-9]+}} : i32, loop.stage = 0 : i32}
// WS: "ttng.warp_group_dot"{{.*}}{async_task_id = array<i32: 1, 2>, loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// WS: } {tt.scheduled_max_stage = 1 : i32, tt.warp_specialize}
// WS-LABEL: scf.for
// WS-NOT: loop.stage
// WS-NOT: async_task_id
// WS: "tt.return"

// ALL: remark: loc("ws_loop"): twill: scheduled two_loops_loop1
// ALL: remark: loc("plain_loop"): twill: scheduled two_loops_loop2
// ALL-SAME: no partitions (the loop is not marked tt.warp_specialize)
// ALL-LABEL: scf.for
// ALL: } {tt.scheduled_max_stage = 1 : i32, tt.warp_specialize}
// ALL-LABEL: scf.for
// ALL-NOT: async_task_id
// ALL: "ttng.warp_group_dot"{{.*}}{loop.cluster = {{[0-9]+}} : i32, loop.stage = 1 : i32}
// ALL: } {tt.scheduled_max_stage = 1 : i32}
