//! Declarations of `passes/TwillPasses.h`.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int};

use mlir_sys::{MlirLocation, MlirOperation};

/// A pass body: the module, and the options as `key=value` lines.
pub type TwillPassBody =
    unsafe extern "C" fn(op: MlirOperation, options: *const c_char, len: usize) -> c_int;

#[repr(C)]
pub struct TwillPassCallbacks {
    pub schedule: TwillPassBody,
    pub export_graph: TwillPassBody,
    pub verify_pipeline: TwillPassBody,
}

pub const TWILL_REMARK: c_int = 0;
pub const TWILL_WARNING: c_int = 1;
pub const TWILL_ERROR: c_int = 2;

extern "C" {
    pub fn twillRegisterPasses(callbacks: *const TwillPassCallbacks);
    pub fn twillEmitDiagnostic(
        loc: MlirLocation,
        severity: c_int,
        message: *const c_char,
        len: usize,
    );
    pub fn twillOptMain(
        argc: c_int,
        argv: *mut *mut c_char,
        callbacks: *const TwillPassCallbacks,
    ) -> c_int;
}

/// Emits a diagnostic at `loc` through MLIR's diagnostic engine.
pub fn emit(loc: MlirLocation, severity: c_int, message: &str) {
    // SAFETY: the pointer/length pair describes `message`, alive for the call.
    unsafe {
        twillEmitDiagnostic(
            loc,
            severity,
            message.as_ptr() as *const c_char,
            message.len(),
        )
    }
}
