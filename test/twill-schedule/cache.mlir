// The schedule cache (`cache=DIR`, or TWILL_CACHE_DIR): a second run on the
// same module takes each loop's schedule from the cache, checks it again and
// writes the same module; the remark and the report say so. Another option
// is another key; a corrupt entry is ignored (with a warning) and the loop
// solved again; `cache=off`, and no option and no variable, mean no cache.
// Input: the GEMM of gemm_sm90.mlir (real Triton 3.6.0 TTGIR).

// RUN: rm -rf %t && mkdir -p %t
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all cache=%t/cache report=%t/cold.json" -o %t/cold.mlir 2>&1 | FileCheck %s --check-prefix=COLD
// RUN: ls %t/cache/loops | FileCheck %s --check-prefix=ENTRY
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all cache=%t/cache report=%t/warm.json" -o %t/warm.mlir 2>&1 | FileCheck %s --check-prefix=WARM
// RUN: diff %t/cold.mlir %t/warm.mlir
// RUN: FileCheck %s --check-prefix=REPORT-COLD --input-file=%t/cold.json
// RUN: FileCheck %s --check-prefix=REPORT-WARM --input-file=%t/warm.json

// The variable names the cache where the option does not; `cache=off` wins.
// RUN: env TWILL_CACHE_DIR=%t/cache %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARM
// RUN: env TWILL_CACHE_DIR=%t/cache %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all cache=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COLD
// RUN: env -u TWILL_CACHE_DIR %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COLD

// Another option that can change the schedule: another key, solved again.
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all u=20 cache=%t/cache" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COLD
// RUN: ls %t/cache/loops | wc -l | FileCheck %s --check-prefix=TWO

// A truncated entry: ignored with a warning, solved again, replaced.
// RUN: for f in %t/cache/loops/*.json; do head -c 100 $f > $f.cut && mv $f.cut $f; done
// RUN: env RUST_LOG=warn %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all cache=%t/cache" -o %t/again.mlir 2>&1 | FileCheck %s --check-prefixes=CORRUPT,COLD
// RUN: diff %t/cold.mlir %t/again.mlir
// RUN: %twill-opt %inputs/triton36/gemm_sm90.before.mlir --twill-schedule="arch=sm90 scope=all cache=%t/cache" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARM

// CORRUPT: WARN{{.*}}ignoring the cache entry {{.*}}.json: {{.*}}EOF
// COLD: remark: twill: scheduled matmul_tma_kernel_loop1: I={{[0-9]+}} (~790 cycles)
// COLD-NOT: from the cache
// ENTRY: {{^[0-9a-f]{64}\.json$}}
// WARM: remark: twill: scheduled matmul_tma_kernel_loop1: I={{[0-9]+}} (~790 cycles) {{.*}}; from the cache)
// REPORT-COLD: "cached": false
// REPORT-WARM: "cached": true
// TWO: 2
