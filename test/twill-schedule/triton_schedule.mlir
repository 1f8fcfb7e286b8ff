// Never worse than Triton: a loop that carries Triton's own schedule (the
// FA forward of fa_fwd_sm90.mlir after Triton's assign_latencies and
// schedule_loops, as the Python hook hands it over) gets that schedule
// evaluated in twill's model next to twill's, in the remark and in the
// report. Where twill's search is cut short by a tiny work budget and stops
// at a larger I than Triton's stages reach, the loop keeps Triton's
// schedule (`triton_better`): its attributes are left as Triton wrote them.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all ties=twill report=%t.json" -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all budget=0.05 report=%t.small.json" 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: FileCheck %s --check-prefix=SMALL-REPORT --input-file=%t.small.json
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all budget=0.05" -o %t.kept.mlir 2>/dev/null
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir -o %t.input.mlir
// RUN: diff %t.kept.mlir %t.input.mlir
// With ties=triton a tie in twill's model (I=32 both) keeps Triton's
// schedule too (`triton_as_good`): nothing predicts a gain.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all ties=triton report=%t.tie.json" -o %t.tie.mlir 2>&1 | FileCheck %s --check-prefix=TIE
// RUN: FileCheck %s --check-prefix=TIE-REPORT --input-file=%t.tie.json
// RUN: diff %t.tie.mlir %t.input.mlir
// By default (ties=deeper) the tie keeps Triton's here too: its three
// stages prefetch the K and V loads further ahead than twill's two.
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all report=%t.deeper.json" -o %t.deeper.mlir 2>&1 | FileCheck %s --check-prefix=DEEPER
// RUN: FileCheck %s --check-prefix=TIE-REPORT --input-file=%t.deeper.json
// RUN: diff %t.deeper.mlir %t.input.mlir
// Within a small budget (0.3M units: twill's I=32 proven, then a quarter
// of it for Triton's stages) the evaluation's own search stops at I=32
// undecided; twill's schedule moved to Triton's stages by whole Is passes
// the checker, which decides the tie without that search: Triton's is
// kept (`triton_as_good`, I=32 both). Under ties=twill twill's is kept,
// Triton's I given next to it. (An undecided tie, `triton_may_tie`, is
// unit-tested in driver.rs.)
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all budget=0.3 report=%t.witness.json" -o %t.witness.mlir 2>&1 | FileCheck %s --check-prefix=DEEPER
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.witness.json
// RUN: diff %t.witness.mlir %t.input.mlir
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90.triton_schedule.mlir --twill-schedule="arch=sm90 scope=all budget=0.3 ties=twill" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WITNESS-TWILL

// CHECK: remark: twill: scheduled attn_fwd_kernel_loop1: I=32 (~3748 cycles)
// CHECK-SAME: proven optimal
// CHECK-SAME: [Triton's schedule: 3 stages, I=32 (~3748 cycles) in twill's model]
// REPORT: "triton": {
// REPORT-NEXT: "stages": 3,
// REPORT-NEXT: "ii": 32,
// REPORT-NEXT: "ii_cycles": 3748,
// REPORT-NEXT: "at_least": 32

// SMALL: remark: twill: skipped loop: Triton's own schedule is better in twill's model: I=32 (~3748 cycles, 3 stages) against twill's I={{[0-9]+}}
// SMALL-REPORT: "decision": "skipped",
// SMALL-REPORT: "reason": "triton_better",

// The kept module is the input printed back: Triton's attributes unchanged.

// TIE: remark: twill: skipped loop: Triton's own schedule is as good in twill's model: I=32 (~3748 cycles, 3 stages), the I of twill's schedule; ties=triton keeps Triton's
// TIE-REPORT: "decision": "skipped",
// TIE-REPORT: "reason": "triton_as_good",

// DEEPER: remark: twill: skipped loop: Triton's own schedule is as good in twill's model: I=32 (~3748 cycles, 3 stages), the I of twill's schedule; its loads prefetch further ahead (3 stages against twill's 2); ties=deeper keeps the deeper pipeline

// WITNESS-TWILL: remark: twill: scheduled attn_fwd_kernel_loop1: I=32
// WITNESS-TWILL-SAME: proven optimal
// WITNESS-TWILL-SAME: [Triton's schedule: 3 stages, I=32 (~3748 cycles) in twill's model]
