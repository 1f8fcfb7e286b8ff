//! `twill-opt`: an `mlir-opt`-style driver with every upstream dialect and
//! pass plus twill's `--twill-schedule` and `--twill-export-graph`.
//! Unregistered dialects (Triton's `tt`, `ttg`, `ttng`, ...) are allowed by
//! default; their types and attributes stay opaque and print verbatim.

fn main() {
    std::process::exit(twill::host::opt_main());
}
