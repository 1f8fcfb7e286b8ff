// Invalid pass options fail the pass with an error at the module that names
// the option and the accepted values; nothing is scheduled.

// RUN: not %twill-opt %s --twill-schedule="arch=sm75" 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 scope=some" 2>&1 | FileCheck %s --check-prefix=SCOPE
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 triton=three" 2>&1 | FileCheck %s --check-prefix=TRITON
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 encoding=fast" 2>&1 | FileCheck %s --check-prefix=ENCODING
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 timeout=0" 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 machine=/nonexistent/m.toml" 2>&1 | FileCheck %s --check-prefix=MACHINE
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 bogus=1" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 rotate=all" 2>&1 | FileCheck %s --check-prefix=ROTATE
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 stages=some" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 num-stages=65" 2>&1 | FileCheck %s --check-prefix=NUMSTAGES
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 unverifiable=maybe" 2>&1 | FileCheck %s --check-prefix=UNVERIFIABLE
// RUN: not %twill-opt %s --twill-schedule="arch=sm90 ties=shallower" 2>&1 | FileCheck %s --check-prefix=TIES
// RUN: not %twill-opt %s --twill-export-graph="arch=sm90" 2>&1 | FileCheck %s --check-prefix=DIR

// ARCH: invalid_options.mlir:[[@LINE+13]]:1: error: twill-schedule: arch: expected sm90 or sm100, got `sm75`
// SCOPE: error: twill-schedule: scope: expected ws or all, got `some`
// TRITON: error: twill-schedule: triton: expected a version such as 3.6, got `three`
// ENCODING: error: twill-schedule: unknown encoding `fast` (expected default, int or paper)
// TIMEOUT: error: twill-schedule: timeout: expected positive seconds, got `0.000000`
// MACHINE: error: twill-schedule: machine: /nonexistent/m.toml{{.*}}no bundled machine of that name and no such file
// UNKNOWN: error: <Pass-Options-Parser>: no such option bogus
// ROTATE: error: twill-schedule: rotate: expected `kernel` or `loop`, got `all`
// STAGES: error: twill-schedule: stages: expected `bound` or `free`, got `some`
// NUMSTAGES: error: twill-schedule: num-stages: expected 0..=64 (0: not given), got `65`
// UNVERIFIABLE: error: twill-schedule: unverifiable: expected `schedule` or `skip`, got `maybe`
// TIES: error: twill-schedule: ties: expected `deeper`, `twill` or `triton`, got `shallower`
// DIR: error: twill-export-graph: dir: a directory to write the graphs into is required
module {
}
