//! `twill-opt`: an `mlir-opt`-style driver with the upstream dialects Triton's
//! exported loops use (arith, cf, func, math, scf, ub), the upstream
//! transformation passes, and twill's `--twill-schedule`,
//! `--twill-export-graph` and `--twill-verify-pipeline`. Registering only
//! these keeps the statically linked binary of the wheel small
//! (docs/wheel.md); `mlir-opt-22 --load-pass-plugin` offers twill's passes
//! next to every upstream one.
//! Unregistered dialects (Triton's `tt`, `ttg`, `ttng`, ...) are allowed by
//! default; their types and attributes stay opaque and print verbatim.

fn main() {
    std::process::exit(twill::host::opt_main());
}
