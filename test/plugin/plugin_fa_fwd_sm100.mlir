// The pass plugin: upstream mlir-opt (MLIR 22) loads libtwill.so, which
// registers the same Rust passes as twill-opt, and runs them through
// --pass-pipeline. The FileCheck lines are those of the twill-opt test of the
// same input, so both hosts must produce the same IR and remarks.

// RUN: %mlir-opt --allow-unregistered-dialect --load-pass-plugin=%twill-plugin --pass-pipeline='builtin.module(twill-schedule{arch=sm100 report=%t.json})' %inputs/triton36/fa_fwd_sm100.before.mlir 2>&1 | FileCheck %S/../twill-schedule/fa_fwd_sm100.mlir
// RUN: FileCheck %S/../twill-schedule/fa_fwd_sm100.mlir --check-prefix=REPORT --input-file=%t.json
// RUN: %mlir-opt --allow-unregistered-dialect --load-pass-plugin=%twill-plugin --pass-pipeline='builtin.module(twill-schedule{arch=sm90})' %inputs/two_loops_sm90.mlir 2>&1 | FileCheck %S/../twill-schedule/scope.mlir --check-prefix=WS
