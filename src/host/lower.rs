//! The lowering's gate: a loop is replaced by twill's warp-specialized code
//! only after the independent pipeline verifier ([`crate::protocol`]) has
//! proved that code. The host composes the two; the lowering
//! ([`crate::backend::ws`]) and the verifier share no code.
//!
//! The lowering is first built in a clone of the loop's function and
//! verified there; only a proved clone lets the same lowering be built in
//! the module. The clone is dropped either way, so a refusal leaves the
//! module exactly as it was (the loop then takes the attribute route).

use mlir_sys::{
    mlirAttributeIsAInteger, mlirIntegerAttrGetValueInt, mlirOperationClone, mlirOperationDestroy,
    mlirOperationGetAttributeByName, mlirOperationGetParentOperation, MlirOperation,
};

use crate::backend::mlir::string_ref;
use crate::backend::ws::emit::emit;
use crate::backend::ws::{Emitted, LowerSkip, WsPlan};
use crate::frontend::mlir::{enclosing_function, nested_ops, op_name};
use crate::protocol::{self, Verdict};

/// Lowers `for_op` as `plan` says; with `gated`, only when the verifier
/// proves the lowered function (else [`LowerSkip::NotVerified`]).
pub fn lower(
    for_op: MlirOperation,
    plan: &WsPlan,
    ops: usize,
    gated: bool,
) -> Result<Emitted, LowerSkip> {
    if gated {
        verify_in_clone(for_op, plan, ops)?;
    }
    emit(for_op, plan, ops).map(|(_, e)| e)
}

/// Lowers the loop in a clone of its function and runs the verifier on the
/// clone: Ok when every report is `proved`.
fn verify_in_clone(for_op: MlirOperation, plan: &WsPlan, ops: usize) -> Result<(), LowerSkip> {
    let not_verified = |why: &str| LowerSkip::NotVerified(why.to_string());
    let func =
        enclosing_function(for_op).ok_or_else(|| not_verified("the loop is in no function"))?;
    let index = loops(func)
        .iter()
        .position(|l| l.ptr == for_op.ptr)
        .ok_or_else(|| not_verified("the loop is not in its function's walk"))?;
    // SAFETY: `func` is live; the clone is detached and destroyed below.
    let clone = unsafe { mlirOperationClone(func) };
    let warps = module_warps(func);
    let verdict = match loops(clone).get(index) {
        None => Err(not_verified("the clone lost the loop")),
        Some(&copy) => emit(copy, plan, ops).and_then(|_| verdict(clone, warps)),
    };
    // SAFETY: the clone was never attached to a block.
    unsafe { mlirOperationDestroy(clone) };
    verdict
}

/// Every `scf.for` under `op`, in pre-order.
fn loops(op: MlirOperation) -> Vec<MlirOperation> {
    let mut all = Vec::new();
    nested_ops(op, &mut all);
    all.retain(|&o| op_name(o) == "scf.for");
    all
}

/// `ttg.num-warps` of the module around `op`, if any.
fn module_warps(op: MlirOperation) -> Option<u32> {
    let mut o = op;
    // SAFETY: walking the parents of a live op.
    unsafe {
        while !o.ptr.is_null() {
            let a = mlirOperationGetAttributeByName(o, string_ref("ttg.num-warps"));
            if !a.ptr.is_null() && mlirAttributeIsAInteger(a) {
                return Some(mlirIntegerAttrGetValueInt(a) as u32);
            }
            o = mlirOperationGetParentOperation(o);
        }
    }
    None
}

/// The verifier's verdict on a lowered function (detached: `warps` are
/// its module's).
fn verdict(func: MlirOperation, warps: Option<u32>) -> Result<(), LowerSkip> {
    let reports: Vec<_> = protocol::read::functions_with(func, warps)
        .iter()
        .flat_map(protocol::verify_function)
        .collect();
    if reports.is_empty() {
        return Err(LowerSkip::NotVerified(
            "the verifier found no warp-specialized code to check".into(),
        ));
    }
    for r in &reports {
        tracing::debug!(target: "twill", verdict = ?r.verdict, "lowering verified");
        if r.verdict != Verdict::Proved {
            return Err(LowerSkip::NotVerified(r.summary()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use mlir_sys::*;

    use super::*;
    use crate::driver::{schedule_loop, LoopJob};
    use crate::frontend::mlir::{find_loops, Scope};
    use crate::host::passes::ScheduleOptions;
    use crate::machine::Machine;

    /// Capture `name`, parsed in a context with every upstream dialect
    /// (Triton's ops unregistered, as in `twill-opt`).
    fn module(name: &str) -> (MlirContext, MlirModule) {
        let path = format!(
            "{}/test/Inputs/triton36/{name}.before.mlir",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).unwrap();
        // SAFETY: a fresh context and registry; the text outlives the parse.
        unsafe {
            let registry = mlirDialectRegistryCreate();
            mlirRegisterAllDialects(registry);
            let ctx = mlirContextCreateWithRegistry(registry, false);
            mlirDialectRegistryDestroy(registry);
            mlirContextSetAllowUnregisteredDialects(ctx, true);
            mlirContextLoadAllAvailableDialects(ctx);
            let m = mlirModuleCreateParse(
                ctx,
                MlirStringRef {
                    data: text.as_ptr() as *const _,
                    length: text.len(),
                },
            );
            assert!(!m.ptr.is_null(), "the capture parses");
            (ctx, m)
        }
    }

    fn ws_ops(module: MlirOperation) -> usize {
        let mut all = Vec::new();
        nested_ops(module, &mut all);
        all.iter()
            .filter(|&&o| op_name(o) == "ttg.warp_specialize")
            .count()
    }

    fn gate(mutate: impl FnOnce(&mut WsPlan)) -> (Result<Emitted, LowerSkip>, usize) {
        gate_on("gemm_sm90", mutate)
    }

    /// Schedules the first loop of capture `name` under `lower=on`, handing
    /// the gate the plan as `mutate` leaves it: what the gate answered, and
    /// the ws ops the module holds afterwards.
    fn gate_on(
        name: &str,
        mutate: impl FnOnce(&mut WsPlan),
    ) -> (Result<Emitted, LowerSkip>, usize) {
        let (ctx, m) = module(name);
        // SAFETY: the module is live until destroyed below.
        let body = unsafe { mlirModuleGetOperation(m) };
        let o = ScheduleOptions::parse("lower=on\nscope=all\narch=sm90\ntriton=3.6").unwrap();
        let machine = Machine::select("h100").unwrap();
        let found = find_loops(body, Scope::All);
        let ir = found[0].ir.as_ref().unwrap();
        let lo = o.loop_options();
        let job = LoopJob::new(ir, &machine, &lo);
        let mut answer = None;
        let (op, n) = (found[0].op, ir.ops.len());
        let _ = schedule_loop(
            &job,
            |_| Ok(()),
            |p| {
                let mut plan = p.clone();
                mutate(&mut plan);
                let r = lower(op, &plan, n, true);
                answer = Some(r.clone());
                r
            },
        );
        let count = ws_ops(body);
        // SAFETY: destroyed once, after the last use.
        unsafe {
            mlirModuleDestroy(m);
            mlirContextDestroy(ctx);
        }
        (answer.expect("the loop reached the lowering"), count)
    }

    #[test]
    fn a_proved_lowering_is_emitted() {
        let (answer, ws) = gate(|_| {});
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(ws, 1);
    }

    #[test]
    fn a_lowering_the_verifier_rejects_is_never_emitted() {
        for mutate in [
            (|p: &mut WsPlan| p.full_count += 1) as fn(&mut WsPlan),
            |p: &mut WsPlan| p.parts[0].waits.points[0].pendings += 1,
            |p: &mut WsPlan| p.depth = 1,
        ] {
            let (answer, ws) = gate(mutate);
            let Err(LowerSkip::NotVerified(why)) = &answer else {
                panic!("not refused by the verifier: {answer:?}");
            };
            assert!(why.contains("rule"), "{why}");
            assert_eq!(ws, 0, "the module is left as it was");
        }
    }

    /// The FA forward at 8 warps is proved with the barrier of its two warp
    /// groups before a release, and refused without it.
    #[test]
    fn two_warp_groups_release_after_their_barrier() {
        let (answer, ws) = gate_on("fa_fwd_sm90", |_| {});
        assert_eq!((answer, ws), (Ok(Emitted::default()), 1));
        let (answer, ws) = gate_on("fa_fwd_sm90", |p| p.parts[0].warps = 4);
        assert!(
            matches!(&answer, Err(LowerSkip::NotVerified(why)) if why.contains("rule")),
            "{answer:?}"
        );
        assert_eq!(ws, 0);
    }

    /// The sub-tiled FA forward at 4 warps: two compute partitions read
    /// the rings and the worker delivers its results through buffers. The
    /// verifier proves it, and rejects `empty` counting one arrival too
    /// few or too many, and `full` waiting for an arrival nobody makes.
    #[test]
    fn two_compute_partitions_are_proved_before_emission() {
        let (answer, ws) = gate_on("fa_fwd_subtile_sm90_w4", |p| {
            // K and V (two stages) with barriers of their own, each read by
            // both compute partitions.
            let empties: Vec<u32> = p.groups.iter().map(|g| g.empty_count).collect();
            assert_eq!((p.parts.len(), empties), (2, vec![2, 2]));
            assert_eq!(p.parts[1].results.len(), 3);
            assert_eq!(p.parts[1].registers, Some(240));
        });
        assert_eq!((answer, ws), (Ok(Emitted::default()), 1));
        for mutate in [
            (|p: &mut WsPlan| p.groups[0].empty_count = 1) as fn(&mut WsPlan),
            |p: &mut WsPlan| p.groups[1].empty_count = 3,
            |p: &mut WsPlan| p.full_count = 2,
        ] {
            let (answer, ws) = gate_on("fa_fwd_subtile_sm90_w4", mutate);
            assert!(
                matches!(&answer, Err(LowerSkip::NotVerified(why)) if why.contains("rule")),
                "{answer:?}"
            );
            assert_eq!(ws, 0);
        }
    }
}
