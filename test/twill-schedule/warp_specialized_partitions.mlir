// A loop Triton has already warp-specialized (one copy per partition inside
// a ttg.warp_specialize op, none marked tt.warp_specialize, as Triton's
// Hopper warp specialization leaves it before the scheduling point): under
// scope=ws each copy is skipped with a remark that says why; scope=all
// schedules each copy as a loop of its own, stages only. Either way the
// remark ends with the number of the ttg.warp_specialize the loop belongs to
// (loops with the same number run concurrently). Input:
// Inputs/warp_specialized_sm90.mlir (see that file for provenance).

// RUN: %twill-opt %inputs/warp_specialized_sm90.mlir --twill-schedule="arch=sm90 report=%t.json" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: FileCheck %s --check-prefix=WS-REPORT --input-file=%t.json
// RUN: %twill-opt %inputs/warp_specialized_sm90.mlir --twill-schedule="arch=sm90 scope=all" 2>&1 | FileCheck %s --check-prefix=ALL

// WS: remark: loc("default_loop"): twill: skipped loop: inside a ttg.warp_specialize partition: Triton's own warp specialization already split this loop
// WS-SAME: scope=all schedules each partition's loop; Triton's own schedule applies [warp_specialize #0]
// WS: remark: loc("partition_loop"): twill: skipped loop: inside a ttg.warp_specialize partition
// WS-NOT: loop.stage
// WS-NOT: tt.scheduled_max_stage
// WS: "tt.return"
// The report: no name (not extracted), the function, the partitions' tag.
// WS-REPORT: "index": 0,
// WS-REPORT-NEXT: "name": null,
// WS-REPORT-NEXT: "function": "ws_partitions",
// WS-REPORT-NEXT: "location": "loc(\"default_loop\")",
// WS-REPORT-NEXT: "warp_specialize": 0,
// WS-REPORT-NEXT: "decision": "skipped",
// WS-REPORT-NEXT: "reason": "not_extracted",
// WS-REPORT: "index": 1,
// WS-REPORT: "warp_specialize": 0,
// WS-REPORT-NEXT: "decision": "skipped",
// WS-REPORT-NEXT: "reason": "not_extracted",

// ALL: remark: loc("default_loop"): twill: scheduled ws_partitions_loop1: I={{[0-9]+}}
// ALL-SAME: no partitions (the loop is not marked tt.warp_specialize)
// ALL-SAME: [resource bound ~{{[0-9]+}} cycles, L ~{{[0-9]+}} cycles] [units per iteration: {{.*}} cycles] [warp_specialize #0]
// ALL: remark: loc("partition_loop"): twill: scheduled ws_partitions_loop2: I={{[0-9]+}}
// ALL-SAME: [warp_specialize #0]
// ALL-LABEL: "ttg.warp_specialize"
// ALL: "ttng.warp_group_dot"{{.*}}loop.stage = 1 : i32
// ALL: } {tt.scheduled_max_stage = 1 : i32}
// ALL: "ttg.warp_specialize.partitions"
// ALL: "ttng.warp_group_dot"{{.*}}loop.stage = 1 : i32
// ALL: } {tt.scheduled_max_stage = 1 : i32}
// ALL-NOT: async_task_id
