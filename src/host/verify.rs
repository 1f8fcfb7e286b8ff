//! The body of `twill-verify-pipeline`: the [`crate::protocol`] verifier on
//! every function of the module, a diagnostic per pipelined loop (a remark
//! when proved, a warning otherwise), and the JSON report on request.

use std::ffi::{c_char, c_int};

use mlir_sys::MlirOperation;

use super::ffi::{self, TWILL_ERROR, TWILL_REMARK, TWILL_WARNING};
use crate::protocol::{self, read, Report, Verdict};

/// `--twill-verify-pipeline`.
///
/// # Safety
/// `module` must be a live operation and `options`/`len` a valid buffer;
/// the C++ shim guarantees both.
pub unsafe extern "C" fn verify_pipeline_body(
    module: MlirOperation,
    options: *const c_char,
    len: usize,
) -> c_int {
    const PASS: &str = "twill-verify-pipeline";
    // SAFETY: forwarded from the caller.
    let text = if options.is_null() {
        String::new()
    } else {
        String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(options as *const u8, len) })
            .into_owned()
    };
    // SAFETY: `module` is live.
    let loc = unsafe { mlir_sys::mlirOperationGetLocation(module) };
    let mut report_path = None;
    for line in text.lines().filter(|l| !l.is_empty()) {
        match line.split_once('=') {
            Some(("report", v)) if !v.is_empty() => report_path = Some(v.to_string()),
            Some(("report", _)) => {}
            _ => {
                ffi::emit(
                    loc,
                    TWILL_ERROR,
                    &format!("{PASS}: unknown option `{line}`"),
                );
                return 1;
            }
        }
    }
    let run = std::panic::catch_unwind(|| {
        read::functions(module)
            .iter()
            .flat_map(protocol::verify_function)
            .collect::<Vec<_>>()
    });
    let Ok(loops) = run else {
        ffi::emit(
            loc,
            TWILL_WARNING,
            &format!("{PASS}: internal error (a panic); nothing proved"),
        );
        return 1;
    };
    for l in &loops {
        let severity = if l.verdict == Verdict::Proved {
            TWILL_REMARK
        } else {
            TWILL_WARNING
        };
        tracing::debug!(function = %l.function, loop_loc = %l.loc, verdict = ?l.verdict, "pipeline verified");
        ffi::emit(
            loc,
            severity,
            &format!("{} [@{} loop {}]", l.summary(), l.function, l.loc),
        );
    }
    if let Some(path) = report_path {
        let report = Report {
            schema: protocol::SCHEMA,
            loops,
        };
        let json = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, json) {
            ffi::emit(
                loc,
                TWILL_ERROR,
                &format!("{PASS}: cannot write {path}: {e}"),
            );
            return 1;
        }
    }
    0
}
