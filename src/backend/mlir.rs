//! Writing a [`LoopDecision`] onto the MLIR loop it was computed for.

use mlir_sys::*;

use super::{Arch, LoopDecision, STORES};
use crate::frontend::mlir::{block_ops, enclosing_function, nested_ops, op_name};

pub(crate) fn string_ref(s: &str) -> MlirStringRef {
    MlirStringRef {
        data: s.as_ptr() as *const _,
        length: s.len(),
    }
}

/// Parses `text` as an attribute in `op`'s context and sets it as the
/// discardable attribute `name`.
fn set(op: MlirOperation, name: &str, text: &str) -> Result<(), String> {
    // SAFETY: `op` is live; the strings outlive the calls.
    unsafe {
        let ctx = mlirOperationGetContext(op);
        let attr = mlirAttributeParseGet(ctx, string_ref(text));
        if attr.ptr.is_null() {
            return Err(format!("cannot build attribute `{text}`"));
        }
        mlirOperationSetDiscardableAttributeByName(op, string_ref(name), attr);
    }
    Ok(())
}

/// The top-level ops of the loop body, terminator excluded.
pub fn body_ops(for_op: MlirOperation) -> Vec<MlirOperation> {
    // SAFETY: reading the first block of the loop's region.
    let mut ops = unsafe {
        let region = mlirOperationGetRegion(for_op, 0);
        block_ops(mlirRegionGetFirstBlock(region))
    };
    if ops.last().is_some_and(|&t| op_name(t) == "scf.yield") {
        ops.pop();
    }
    ops
}

/// Writes `d` onto `for_op`: `loop.stage` and `loop.cluster` (i32) on every
/// top-level body op, `tt.scheduled_max_stage` on the loop, partitions when
/// warp-specialized (see [`super`]), and `tt.self_latency` on MMAv5 ops.
pub fn write(for_op: MlirOperation, d: &LoopDecision, arch: Arch, tag: u32) -> Result<(), String> {
    let ops = body_ops(for_op);
    if ops.len() != d.ops.len() {
        return Err(format!(
            "the loop has {} body ops but the decision covers {}",
            ops.len(),
            d.ops.len()
        ));
    }
    let ids = |p: &[u32]| {
        let list: Vec<String> = p.iter().map(u32::to_string).collect();
        format!("array<i32: {}>", list.join(", "))
    };
    for (&op, od) in ops.iter().zip(&d.ops) {
        set(op, "loop.stage", &format!("{} : i32", od.stage))?;
        set(op, "loop.cluster", &format!("{} : i32", od.cluster))?;
        if !od.partition.is_empty() {
            let name = match arch {
                Arch::Sm90 => "async_task_id",
                Arch::Sm100 => "ttg.partition",
            };
            set(op, name, &ids(&od.partition))?;
            if arch == Arch::Sm100 {
                // Triton's verifier wants the partition on every op nested
                // in a partitioned op (a tt.reduce combiner, say).
                let mut nested = Vec::new();
                nested_ops(op, &mut nested);
                for n in nested {
                    set(n, name, &ids(&od.partition))?;
                }
            }
        }
        if od.self_latency {
            set(op, "tt.self_latency", "1 : i32")?;
        }
    }
    set(
        for_op,
        "tt.scheduled_max_stage",
        &format!("{} : i32", d.max_stage),
    )?;
    if !d.partition_stages.is_empty() {
        let stages: Vec<String> = d
            .partition_stages
            .iter()
            .map(|s| format!("{s} : i32"))
            .collect();
        set(
            for_op,
            "ttg.partition.stages",
            &format!("[{}]", stages.join(", ")),
        )?;
        set(for_op, "ttg.warp_specialize.tag", &format!("{tag} : i32"))?;
    }
    if d.anchor_stores {
        // Every store of the enclosing function is a consumer anchor.
        if let Some(func) = enclosing_function(for_op) {
            let mut all = Vec::new();
            nested_ops(func, &mut all);
            for op in all {
                if STORES.contains(&op_name(op).as_str()) {
                    set(op, "async_task_id", "array<i32: 1, 2>")?;
                }
            }
        }
    }
    Ok(())
}
