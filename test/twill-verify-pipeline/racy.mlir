// The pipelines Triton built from twill's schedules of the tutorial-style
// pointer-load matmul before the asynchronous-reader fix (frozen fixtures, see
// test/Inputs/pipelined/capture.py): the cp.async for iteration i + 2 is
// issued before the wgmma wait of iteration i, into the slot of a 3-slot ring
// that the wgmma of iteration i - 1 still reads. Rejected by rule 1, naming
// the copy, the ring and slot, and the in-flight reader; and the JSON report
// says the same.
//
// RUN: %twill-opt %inputs/pipelined/ptr_matmul_128x64x64_twill_racy_triton36.mlir --twill-verify-pipeline="report=%t.json" -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: %twill-opt %inputs/pipelined/ptr_matmul_128x64x64_twill_racy_triton39.mlir --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s
// RUN: %twill-opt %inputs/pipelined/ptr_matmul_128x256x64_twill_racy_triton36.mlir --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s
// RUN: %twill-opt %inputs/pipelined/ptr_matmul_128x256x64_twill_racy_triton39.mlir --twill-verify-pipeline -o /dev/null 2>&1 | FileCheck %s
//
// CHECK: warning: twill: pipeline rejected: {{.*}}rule 1 (WriteWhileRead): ttg.async_copy_global_to_local @ loc("a"({{.*}}pointer_matmul.py":37:{{[0-9]+}})) writes slot {{[0-9]}} of loc("a"({{.*}})) while ttng.warp_group_dot @ loc("acc"({{.*}}pointer_matmul.py":39:{{[0-9]+}})) may still read it
//
// JSON: "schema": "twill.pipeline-verify/1"
// JSON: "verdict": "rejected"
// JSON: "rule": "write-while-read"
// JSON-NEXT: "buffer": "loc(\"a\"(
// JSON-NEXT: "slot": 0
// JSON-NEXT: "op": "ttg.async_copy_global_to_local @ loc(\"a\"(
// JSON-NEXT: "other": "ttng.warp_group_dot @ loc(\"acc\"(
// JSON-NEXT: "trip_counts": [
// JSON-NEXT: 2
// JSON-NEXT: ],
// JSON-NEXT: "iteration": 1,
