// The plugin registers both passes with their options in mlir-opt's
// registry, and the pipeline round-trips with the options it was given.

// RUN: %mlir-opt --load-pass-plugin=%twill-plugin --help | FileCheck %s --check-prefix=HELP
// RUN: %mlir-opt --allow-unregistered-dialect --load-pass-plugin=%twill-plugin --pass-pipeline='builtin.module(twill-schedule{arch=sm100 timeout=5})' --dump-pass-pipeline %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPE

// HELP: --twill-export-graph
// HELP: --twill-schedule
// HELP-DAG: --arch=
// HELP-DAG: --scope=
// HELP-DAG: --triton=
// HELP-DAG: --report=
// PIPE: twill-schedule{arch=sm100 budget=1.600000e+01 cache= ctas=1 encoding=default groups=0 jobs=0 loads=auto lower=off machine= num-stages=0 objective=length order=program partitions=true pointer-loads= pointer-prefetch=-1 prefetch=0 report= ring=schedule rotate=kernel scope=ws stages=bound ties=deeper timeout=5.000000e+00 triton=3.6 u=30 unverifiable=schedule ws=true}
module {
}
