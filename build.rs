//! Bundles every machine description under `machines/` into the binary, so
//! that `--machine h100` works from any directory and adding a machine is a
//! data change only.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
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
