//! The MLIR hosts of twill's passes: the C ABI that the C++ shim under
//! `passes/` calls, the `mlirGetPassPluginInfo` entry point of the
//! `mlir-opt --load-pass-plugin` library, and the `twill-opt` driver's main.
//!
//! Both hosts register the same three passes: `twill-schedule` and
//! `twill-export-graph`, whose bodies are [`crate::frontend`] (extraction),
//! the solver core, and [`crate::backend`] (write-back); and
//! `twill-verify-pipeline`, the independent [`crate::protocol`] verifier.

pub mod ffi;
mod lower;
pub mod passes;
pub mod verify;

use std::ffi::{c_char, c_int, CString};

use ffi::TwillPassCallbacks;

/// The pass bodies handed to the C++ shim.
pub(crate) static CALLBACKS: TwillPassCallbacks = TwillPassCallbacks {
    schedule: passes::schedule_body,
    export_graph: passes::export_graph_body,
    verify_pipeline: verify::verify_pipeline_body,
};

/// Runs `twill-opt` (MlirOptMain with every upstream dialect and pass plus
/// twill's) on the process arguments; returns the exit code.
pub fn opt_main() -> i32 {
    // `RUST_LOG=twill=debug twill-opt ...` shows the passes' tracing on
    // stderr (warnings only by default). The plugin leaves logging to its host.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let args: Vec<CString> = std::env::args_os()
        .map(|a| {
            CString::new(a.into_encoded_bytes()).unwrap_or_else(|_| c"<invalid argument>".into())
        })
        .collect();
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    argv.push(std::ptr::null_mut());
    // SAFETY: argv holds argc valid NUL-terminated strings (and a trailing
    // null) that outlive the call; CALLBACKS is 'static.
    unsafe { ffi::twillOptMain(args.len() as c_int, argv.as_mut_ptr(), &CALLBACKS) }
}

/// The plugin's registration callback (called by MLIR's `PassPlugin`).
extern "C" fn register_plugin_passes() {
    // SAFETY: CALLBACKS is 'static.
    unsafe { ffi::twillRegisterPasses(&CALLBACKS) }
}

/// MLIR's `PassPluginLibraryInfo` (mlir/Tools/Plugins/PassPlugin.h).
#[repr(C)]
pub struct PassPluginLibraryInfo {
    pub api_version: u32,
    pub plugin_name: *const c_char,
    pub plugin_version: *const c_char,
    pub register_pass_registry_callbacks: extern "C" fn(),
}

/// `MLIR_PLUGIN_API_VERSION` of MLIR 22.
const MLIR_PLUGIN_API_VERSION: u32 = 1;

/// Entry point of the pass plugin: `mlir-opt-22 --load-pass-plugin=libtwill.so
/// --pass-pipeline='builtin.module(twill-schedule{arch=sm90})'`.
#[no_mangle]
pub extern "C" fn mlirGetPassPluginInfo() -> PassPluginLibraryInfo {
    PassPluginLibraryInfo {
        api_version: MLIR_PLUGIN_API_VERSION,
        plugin_name: c"twill".as_ptr(),
        plugin_version: concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char,
        register_pass_registry_callbacks: register_plugin_passes,
    }
}
