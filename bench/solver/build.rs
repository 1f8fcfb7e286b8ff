//! twill is linked with its default `mlir` feature (the product's build, so
//! that the dependencies are shared), hence against libMLIR.so. twill's
//! build.rs records the rpath to MLIR's libraries for its own binaries only
//! (link arguments do not pass to dependents): record it for this one too.

fn main() {
    println!("cargo:rerun-if-env-changed=MLIR_SYS_220_PREFIX");
    let prefix = std::env::var("MLIR_SYS_220_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-22".into());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{prefix}/lib");
}
