// The verifier gate. Under lower=on the TMA GEMM is lowered in a clone of
// its function, the pipeline verifier proves the clone, and only then is
// the same lowering emitted; the report says it was verified. The verified
// module passes --twill-verify-pipeline on its own. Under lower=only (the
// hook's call before Triton's Hopper warp specialization) a loop that is
// not lowered keeps no attributes: the FA forward at 4 warps (its P would
// cross between two compute partitions) is skipped with the reason,
// untouched.

// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="lower=on scope=all arch=sm90 triton=3.6 report=%t.json" -o %t.mlir 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.json
// RUN: %twill-opt %t.mlir --twill-verify-pipeline 2>&1 | FileCheck %s --check-prefix=PROVED
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="lower=only scope=all arch=sm90 triton=3.9" 2>&1 | FileCheck %s --check-prefix=ONLY
// RUN: %twill-opt %inputs/triton36/fa_fwd_sm90_w4.before.mlir --twill-schedule="lower=only arch=sm90 triton=3.6 report=%t.fa.json" 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: FileCheck %s --check-prefix=FAREPORT --input-file=%t.fa.json

// CHECK: remark: twill: lowered to 1+1 partitions {{.*}}; proved by the pipeline verifier

// REPORT: "lowering": {
// REPORT-NEXT: "lowered": true,
// REPORT-NEXT: "verified": true,

// PROVED: remark: twill: pipeline proved safe
// PROVED-NOT: warning

// ONLY: remark: twill: lowered to 1+1 partitions {{.*}}; proved by the pipeline verifier
// ONLY: "ttg.warp_specialize.partitions"(%{{.*}}) ({
// ONLY-NOT: loop.stage

// REFUSED: remark: twill: skipped loop: lowering refused: `arith.truncf` of group 1 is read by group 2 (channels between partitions are not supported) (lower=only writes no attributes)
// REFUSED-NOT: ttg.warp_specialize"
// REFUSED-NOT: loop.stage
// REFUSED-NOT: tt.scheduled_max_stage

// FAREPORT: "decision": "skipped",
// FAREPORT-NEXT: "reason": "lowering_refused",

// ring=max: as deep as shared memory allows, proved the same way.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="lower=on ring=max scope=all arch=sm90 triton=3.6" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MAX
// MAX: remark: twill: lowered to 1+1 partitions (rings 6x2 tiles, 32768 B per slot, 196704 B shared; {{.*}}; proved by the pipeline verifier
