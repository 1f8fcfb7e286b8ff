//! Build steps:
//!
//! * bundles every machine description under `machines/` into the binary, so
//!   that `--machine h100` works from any directory and adding a machine is a
//!   data change only;
//! * with the `mlir` feature: compiles the C++ pass shim under `passes/`
//!   against MLIR 22, merges Debian's `libMLIRCAPI*.a` archives into the
//!   `libMLIR-C.a` that mlir-sys links (Debian ships no libMLIR-C.so), and
//!   records an rpath to MLIR's shared libraries.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    bundle_machines();
    if env::var_os("CARGO_FEATURE_MLIR").is_some() {
        build_mlir_support();
    }
}

/// Prefix of the MLIR 22 installation (`.cargo/config.toml` sets it).
fn mlir_prefix() -> PathBuf {
    println!("cargo:rerun-if-env-changed=MLIR_SYS_220_PREFIX");
    env::var_os("MLIR_SYS_220_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/llvm-22"))
}

fn build_mlir_support() {
    let prefix = mlir_prefix();
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    merge_capi_archives(&lib, &out);
    println!("cargo:rustc-link-search=native={}", out.display());

    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    for f in ["passes/TwillPasses.cpp", "passes/TwillPasses.h"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    // A shim built by the top-level CMakeLists.txt (with MLIR's own flags)
    // replaces the cc build.
    println!("cargo:rerun-if-env-changed=TWILL_PASSES_LIB");
    if let Some(shim) = env::var_os("TWILL_PASSES_LIB").map(PathBuf::from) {
        let dir = shim.parent().expect("TWILL_PASSES_LIB is a file path");
        let name = shim
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix("lib"))
            .expect("TWILL_PASSES_LIB names a lib*.a archive");
        println!("cargo:rerun-if-changed={}", shim.display());
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static={name}");
        println!("cargo:rustc-link-lib=dylib=stdc++");
    } else {
        cc::Build::new()
            .cpp(true)
            .std("c++17")
            .file(root.join("passes/TwillPasses.cpp"))
            .include(root.join("passes"))
            // MLIR's headers are system headers here: their warnings are not ours.
            .flag("-isystem")
            .flag(include.to_str().expect("MLIR include path is UTF-8"))
            .flag("-fno-exceptions")
            .flag("-D_GNU_SOURCE")
            .flag("-D__STDC_CONSTANT_MACROS")
            .flag("-D__STDC_FORMAT_MACROS")
            .flag("-D__STDC_LIMIT_MACROS")
            .warnings(true)
            .compile("twill_passes");
    }
    if link_shared() {
        // The shim calls into libMLIR.so; MLIR's libraries are not on the
        // default loader path.
        println!("cargo:rustc-link-lib=dylib=MLIR");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    } else {
        // mlir-sys links the static MLIR and LLVM archives the shim needs.
        // The shared libraries left (Z3 and the like) are vendored next to
        // the binary; DT_RPATH rather than DT_RUNPATH, so that they also
        // serve the vendored libraries' own dependencies and win over
        // LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN");
        println!("cargo:rustc-link-arg-bins=-Wl,--disable-new-dtags");
    }
}

/// Whether MLIR is linked as shared libraries: mlir-sys's own switch,
/// `MLIR_SYS_LINK_SHARED` (`1`: shared; anything else: static, where the
/// static archives are installed).
fn link_shared() -> bool {
    println!("cargo:rerun-if-env-changed=MLIR_SYS_LINK_SHARED");
    env::var("MLIR_SYS_LINK_SHARED").is_ok_and(|v| v == "1")
}

/// Merges every `libMLIRCAPI*.a` of `lib` into `out/libMLIR-C.a`.
fn merge_capi_archives(lib: &Path, out: &Path) {
    let mut archives: Vec<PathBuf> = fs::read_dir(lib)
        .unwrap_or_else(|e| {
            panic!(
                "cannot read {} ({e}); install libmlir-22-dev or set MLIR_SYS_220_PREFIX",
                lib.display()
            )
        })
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libMLIRCAPI") && n.ends_with(".a"))
        })
        .collect();
    archives.sort();
    assert!(
        !archives.is_empty(),
        "no libMLIRCAPI*.a under {}; install libmlir-22-dev",
        lib.display()
    );
    let merged = out.join("libMLIR-C.a");
    let _ = fs::remove_file(&merged);
    let mut script = format!("CREATE {}\n", merged.display());
    for a in &archives {
        println!("cargo:rerun-if-changed={}", a.display());
        script.push_str(&format!("ADDLIB {}\n", a.display()));
    }
    script.push_str("SAVE\nEND\n");
    let ar = env::var("AR").unwrap_or_else(|_| "ar".to_string());
    let mut child = Command::new(&ar)
        .arg("-M")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{ar} -M` to merge the MLIR C API archives: {e}"));
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(script.as_bytes()).expect("write ar script");
    }
    let status = child.wait().expect("wait for ar");
    assert!(
        status.success(),
        "`{ar} -M` failed to merge the MLIR C API archives"
    );
}

fn bundle_machines() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dir = root.join("machines");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<(String, PathBuf)> = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    let mut out =
        String::from("/// Machine descriptions bundled at build time: (name, TOML text).\n");
    out.push_str("pub static BUNDLED_MACHINES: &[(&str, &str)] = &[\n");
    for (name, path) in &entries {
        println!("cargo:rerun-if-changed={}", path.display());
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bundled_machines.rs");
    fs::write(dest, out).expect("write bundled_machines.rs");
}
