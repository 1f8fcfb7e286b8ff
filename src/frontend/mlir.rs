//! Reading candidate loops out of an MLIR module (generic-form TTGIR with
//! Triton's dialects unregistered) into [`LoopIr`], through melior and the
//! MLIR C API. Nothing here prices, solves or writes: see [`super::lower`]
//! and [`crate::backend`].

use std::collections::{HashMap, HashSet};

use melior::ir::{Location, Type};
use mlir_sys::*;

use super::lower::CONTROL_FLOW;
use super::{IrOp, IrValue, LoopIr, Straight, ValueSrc};

/// Which loops are candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Loops that carry `tt.warp_specialize`.
    WarpSpecialized,
    /// Every innermost `scf.for`.
    All,
}

/// A `scf.for` seen in the module and what became of it.
pub struct FoundLoop {
    pub op: MlirOperation,
    /// Inside a `ttg.warp_specialize` op: its number in the module (0 for
    /// the first such op, in pre-order). Loops with the same number run
    /// concurrently, one per partition.
    pub warp_specialize: Option<usize>,
    /// The loop's IR when it is a candidate; why not otherwise.
    pub ir: Result<LoopIr, String>,
    /// Part of warp-specialized code twill lowered (`twill.lowered`).
    pub lowered_by_twill: bool,
}

pub(crate) fn string_ref(s: MlirStringRef) -> String {
    if s.data.is_null() {
        return String::new();
    }
    // SAFETY: MLIR string refs point at `length` valid bytes.
    let bytes = unsafe { std::slice::from_raw_parts(s.data as *const u8, s.length) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// The op's name, e.g. `scf.for`.
pub(crate) fn op_name(op: MlirOperation) -> String {
    // SAFETY: `op` is a live operation.
    unsafe { string_ref(mlirIdentifierStr(mlirOperationGetName(op))) }
}

pub(crate) fn location_text(op: MlirOperation) -> String {
    // SAFETY: `op` is live; the location outlives the call.
    unsafe { Location::from_raw(mlirOperationGetLocation(op)).to_string() }
}

pub(crate) fn type_text(v: MlirValue) -> String {
    // SAFETY: `v` is a live value.
    unsafe { Type::from_raw(mlirValueGetType(v)).to_string() }
}

/// Operations of the first block of region `r` of `op`, in order.
pub(crate) fn block_ops(block: MlirBlock) -> Vec<MlirOperation> {
    let mut out = Vec::new();
    // SAFETY: walking a live block's operation list.
    unsafe {
        let mut o = mlirBlockGetFirstOperation(block);
        while !o.ptr.is_null() {
            out.push(o);
            o = mlirOperationGetNextInBlock(o);
        }
    }
    out
}

fn regions(op: MlirOperation) -> Vec<MlirRegion> {
    // SAFETY: `op` is live.
    unsafe {
        (0..mlirOperationGetNumRegions(op))
            .map(|i| mlirOperationGetRegion(op, i))
            .collect()
    }
}

fn blocks(r: MlirRegion) -> Vec<MlirBlock> {
    let mut out = Vec::new();
    // SAFETY: walking a live region's block list.
    unsafe {
        let mut b = mlirRegionGetFirstBlock(r);
        while !b.ptr.is_null() {
            out.push(b);
            b = mlirBlockGetNextInRegion(b);
        }
    }
    out
}

/// Every op nested (at any depth) in `op`'s regions, in pre-order.
pub(crate) fn nested_ops(op: MlirOperation, out: &mut Vec<MlirOperation>) {
    for r in regions(op) {
        for b in blocks(r) {
            for o in block_ops(b) {
                out.push(o);
                nested_ops(o, out);
            }
        }
    }
}

pub(crate) fn has_attr(op: MlirOperation, name: &str) -> bool {
    // SAFETY: `op` is live; the string ref points into `name` for the call.
    unsafe {
        let a = mlirOperationGetAttributeByName(
            op,
            MlirStringRef {
                data: name.as_ptr() as *const _,
                length: name.len(),
            },
        );
        !a.ptr.is_null()
    }
}

/// Removes the attribute `name` of `op` (nothing where it has none).
pub(crate) fn remove_attr(op: MlirOperation, name: &str) {
    // SAFETY: `op` is live; the string ref points into `name` for the call.
    unsafe {
        mlirOperationRemoveAttributeByName(
            op,
            MlirStringRef {
                data: name.as_ptr() as *const _,
                length: name.len(),
            },
        );
    }
}

pub(crate) fn int_attr(op: MlirOperation, name: &str) -> Option<i64> {
    // SAFETY: as in has_attr; the attribute is checked to be an integer.
    unsafe {
        let a = mlirOperationGetAttributeByName(
            op,
            MlirStringRef {
                data: name.as_ptr() as *const _,
                length: name.len(),
            },
        );
        (!a.ptr.is_null() && mlirAttributeIsAInteger(a)).then(|| mlirIntegerAttrGetValueInt(a))
    }
}

/// The nearest op enclosing `op` whose name satisfies `is`, if any.
pub(crate) fn enclosing(op: MlirOperation, is: impl Fn(&str) -> bool) -> Option<MlirOperation> {
    // SAFETY: walking the parents of a live operation; a null parent ends it.
    unsafe {
        let mut p = mlirOperationGetParentOperation(op);
        while !p.ptr.is_null() {
            if is(&op_name(p)) {
                return Some(p);
            }
            p = mlirOperationGetParentOperation(p);
        }
    }
    None
}

/// Whether ops named `name` are functions (Triton's `tt.func`, `func.func`).
fn is_function(name: &str) -> bool {
    matches!(name, "tt.func" | "func.func")
}

/// The function that encloses `op`, if any.
pub(crate) fn enclosing_function(op: MlirOperation) -> Option<MlirOperation> {
    enclosing(op, is_function)
}

/// Every `scf.for` under `root` in pre-order, each either extracted as a
/// candidate or with the reason it is not one.
pub fn find_loops(root: MlirOperation, scope: Scope) -> Vec<FoundLoop> {
    let mut all = Vec::new();
    nested_ops(root, &mut all);
    let num_warps = all
        .iter()
        .copied()
        .chain(std::iter::once(root))
        .find_map(|o| int_attr(o, "ttg.num-warps"))
        .unwrap_or(4)
        .clamp(1, 1024) as u32;
    let ws_ops: Vec<MlirOperation> = all
        .iter()
        .copied()
        .filter(|&o| op_name(o) == "ttg.warp_specialize")
        .collect();
    let mut kernel = String::new();
    let mut found = Vec::new();
    let mut count = 0usize;
    for &op in &all {
        let name = op_name(op);
        if is_function(&name) {
            kernel = symbol_name(op);
            count = 0;
        }
        if name != "scf.for" {
            continue;
        }
        count += 1;
        let mut inner = Vec::new();
        nested_ops(op, &mut inner);
        // In a region of a ttg.warp_specialize (its default region or a
        // partition): one partition's share of a loop Triton has already
        // warp-specialized, running concurrently with the others.
        let warp_specialize = enclosing(op, |n| n == "ttg.warp_specialize")
            .and_then(|w| ws_ops.iter().position(|&o| o.ptr == w.ptr));
        let lowered_by_twill = has_attr(op, "twill.lowered");
        let ir = if lowered_by_twill {
            Err(
                "lowered by twill: it runs as a partition of twill's warp-specialized code"
                    .to_string(),
            )
        } else if inner.iter().any(|&o| op_name(o) == "scf.for") {
            Err("not an innermost loop (it contains an scf.for)".to_string())
        } else if scope == Scope::WarpSpecialized && warp_specialize.is_some() {
            Err(
                "inside a ttg.warp_specialize partition: Triton's own warp specialization \
                 already split this loop (on sm90 it runs before twill); scope=all schedules \
                 each partition's loop"
                    .to_string(),
            )
        } else if scope == Scope::WarpSpecialized && !has_attr(op, "tt.warp_specialize") {
            Err("not marked tt.warp_specialize (scope=ws; scope=all schedules it)".to_string())
        } else {
            let label = if kernel.is_empty() {
                "loop".to_string()
            } else {
                kernel.clone()
            };
            extract(op, format!("{label}_loop{count}"), num_warps)
        };
        found.push(FoundLoop {
            op,
            warp_specialize,
            ir,
            lowered_by_twill,
        });
    }
    found
}

/// Extracts one `scf.for` (single-block body) into a [`LoopIr`].
fn extract(for_op: MlirOperation, name: String, num_warps: u32) -> Result<LoopIr, String> {
    let body_region = regions(for_op);
    let body_blocks = body_region.first().map(|r| blocks(*r)).unwrap_or_default();
    let [body] = body_blocks[..] else {
        return Err(format!(
            "the loop body has {} blocks, expected 1",
            body_blocks.len()
        ));
    };
    let ops = block_ops(body);
    let Some((&terminator, body_ops)) = ops.split_last() else {
        return Err("the loop body is empty".to_string());
    };
    if op_name(terminator) != "scf.yield" {
        return Err(format!(
            "the loop body ends in `{}`, not scf.yield",
            op_name(terminator)
        ));
    }

    let mut reader = Reader::default();
    // SAFETY: reading the arguments of a live block.
    unsafe {
        for a in 0..mlirBlockGetNumArguments(body) {
            let src = if a == 0 {
                ValueSrc::InductionVar
            } else {
                ValueSrc::IterArg(a as usize - 1)
            };
            reader
                .sources
                .insert(mlirBlockGetArgument(body, a).ptr, src);
        }
    }
    let ir_ops = reader.read(body_ops);
    // SAFETY: reading the terminator's operands.
    let yields = unsafe {
        (0..mlirOperationGetNumOperands(terminator))
            .map(|k| reader.resolve(mlirOperationGetOperand(terminator, k), &HashSet::new()))
            .collect()
    };
    Ok(LoopIr {
        name,
        location: location_text(for_op),
        warp_specialize: has_attr(for_op, "tt.warp_specialize"),
        num_warps,
        ops: ir_ops,
        yields,
        triton_max_stage: int_attr(for_op, "tt.scheduled_max_stage")
            .and_then(|s| u32::try_from(s).ok()),
    })
}

type ValueKey = *const std::ffi::c_void;

/// Reads a run of ops of one block into [`IrOp`]s: where each operand
/// comes from (an earlier op of the run, a block argument registered in
/// `sources`, or outside) and what the ops' regions use.
#[derive(Default)]
struct Reader {
    sources: HashMap<ValueKey, ValueSrc>,
    outside: HashMap<ValueKey, usize>,
}

impl Reader {
    fn resolve(&mut self, v: MlirValue, local: &HashSet<ValueKey>) -> IrValue {
        let src = if let Some(s) = self.sources.get(&v.ptr) {
            *s
        } else if local.contains(&v.ptr) {
            ValueSrc::Local
        } else {
            let n = self.outside.len();
            ValueSrc::Outside(*self.outside.entry(v.ptr).or_insert(n))
        };
        IrValue {
            src,
            ty: type_text(v),
        }
    }

    /// The ops of `ops` (in order, one block), each result registered as
    /// that op's.
    fn read(&mut self, ops: &[MlirOperation]) -> Vec<IrOp> {
        // SAFETY: reading results of live ops.
        unsafe {
            for (i, &op) in ops.iter().enumerate() {
                for r in 0..mlirOperationGetNumResults(op) {
                    self.sources.insert(
                        mlirOperationGetResult(op, r).ptr,
                        ValueSrc::Op {
                            op: i,
                            result: r as usize,
                        },
                    );
                }
            }
        }
        let empty = HashSet::new();
        ops.iter().map(|&op| self.read_op(op, &empty)).collect()
    }

    /// One op: its operands (resolved against `local`, the values defined
    /// inside the op that holds it, if any), results, what its regions use
    /// from outside it, and for an `scf.if` its branches.
    fn read_op(&mut self, op: MlirOperation, local: &HashSet<ValueKey>) -> IrOp {
        // SAFETY: reading operands, results and nested ops of a live op.
        unsafe {
            let operands: Vec<IrValue> = (0..mlirOperationGetNumOperands(op))
                .map(|k| self.resolve(mlirOperationGetOperand(op, k), local))
                .collect();
            let results: Vec<String> = (0..mlirOperationGetNumResults(op))
                .map(|k| type_text(mlirOperationGetResult(op, k)))
                .collect();
            let mut inner = Vec::new();
            nested_ops(op, &mut inner);
            // Values defined inside the op's regions, and those of the op
            // that holds it.
            let mut inside = local.clone();
            for &o in std::iter::once(&op).chain(&inner) {
                if o.ptr != op.ptr {
                    for r in 0..mlirOperationGetNumResults(o) {
                        inside.insert(mlirOperationGetResult(o, r).ptr);
                    }
                }
                for r in regions(o) {
                    for b in blocks(r) {
                        for a in 0..mlirBlockGetNumArguments(b) {
                            inside.insert(mlirBlockGetArgument(b, a).ptr);
                        }
                    }
                }
            }
            let mut region_uses = Vec::new();
            for &o in &inner {
                for k in 0..mlirOperationGetNumOperands(o) {
                    let v = mlirOperationGetOperand(o, k);
                    if !inside.contains(&v.ptr) {
                        region_uses.push(self.resolve(v, &inside));
                    }
                }
            }
            let name = op_name(op);
            let branches = if name == "scf.if" {
                self.branches(op, &inside)
            } else {
                Vec::new()
            };
            IrOp {
                name,
                location: location_text(op),
                operands,
                results,
                region_uses,
                nested: inner.iter().map(|&o| op_name(o)).collect(),
                triton_stage: int_attr(op, "loop.stage").and_then(|s| u32::try_from(s).ok()),
                branches,
            }
        }
    }

    /// The ops of each region of `if_op` ([`IrOp::branches`]).
    fn branches(&mut self, if_op: MlirOperation, inside: &HashSet<ValueKey>) -> Vec<Vec<IrOp>> {
        let mut out = Vec::new();
        for r in regions(if_op) {
            let mut ops = Vec::new();
            for b in blocks(r) {
                for o in block_ops(b) {
                    ops.push(o);
                    nested_ops(o, &mut ops);
                }
            }
            let read = ops
                .into_iter()
                .filter(|&o| !matches!(op_name(o).as_str(), "scf.yield" | "scf.if"))
                // Ops inside a tile op's own regions (a reduction's
                // combiner) belong to it.
                .filter(|&o| {
                    enclosing(o, |_| true).is_none_or(|p| {
                        p.ptr == if_op.ptr || matches!(op_name(p).as_str(), "scf.if")
                    })
                })
                .map(|o| self.read_op(o, inside))
                .collect();
            out.push(read);
        }
        out
    }
}

/// The code of function `func` outside its loops ([`Straight`]): runs of
/// top-level ops between loops, and for a `ttg.warp_specialize` whose
/// partitions hold loops, each region's own code, concurrently. Other
/// control flow (an `scf.if`, a loop) ends a run and counts nothing.
pub fn outside_loops(func: MlirOperation, num_warps: u32) -> Vec<Straight> {
    let name = symbol_name(func);
    let mut out = Vec::new();
    for r in regions(func) {
        for b in blocks(r) {
            straight(b, &name, num_warps, &mut out);
        }
    }
    out
}

fn straight(block: MlirBlock, name: &str, num_warps: u32, out: &mut Vec<Straight>) {
    let mut run: Vec<MlirOperation> = Vec::new();
    let flush = |run: &mut Vec<MlirOperation>, out: &mut Vec<Straight>| {
        if run.is_empty() {
            return;
        }
        let ops = Reader::default().read(run);
        out.push(Straight::Code(LoopIr {
            name: format!("{name}_outside{}", out.len()),
            location: location_text(run[0]),
            warp_specialize: false,
            num_warps,
            ops,
            yields: Vec::new(),
            triton_max_stage: None,
        }));
        run.clear();
    };
    for op in block_ops(block) {
        let n = op_name(op);
        let mut inner = Vec::new();
        nested_ops(op, &mut inner);
        let nested: Vec<String> = inner.iter().map(|&o| op_name(o)).collect();
        let control = std::iter::once(&n)
            .chain(&nested)
            .any(|x| CONTROL_FLOW.contains(&x.as_str()));
        if !control {
            run.push(op);
            continue;
        }
        flush(&mut run, out);
        // The op and the holder of its partition regions.
        let warp_specialize = matches!(
            n.as_str(),
            "ttg.warp_specialize" | "ttg.warp_specialize.partitions"
        );
        if warp_specialize && nested.iter().any(|x| x == "scf.for") {
            let mut each = Vec::new();
            for r in regions(op) {
                let mut code = Vec::new();
                for b in blocks(r) {
                    straight(b, name, num_warps, &mut code);
                }
                each.push(code);
            }
            out.push(Straight::Concurrent(each));
        }
    }
    flush(&mut run, out);
}

/// The `sym_name` of a function op ("" when it has none).
pub(crate) fn symbol_name(op: MlirOperation) -> String {
    // SAFETY: reading the symbol name attribute of a live op.
    unsafe {
        let a = mlirOperationGetAttributeByName(
            op,
            MlirStringRef {
                data: c"sym_name".as_ptr(),
                length: 8,
            },
        );
        if !a.ptr.is_null() && mlirAttributeIsAString(a) {
            string_ref(mlirStringAttrGetValue(a))
        } else {
            String::new()
        }
    }
}
