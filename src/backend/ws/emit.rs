//! Building the warp-specialized form of a [`WsPlan`] in place of its
//! `scf.for`. Triton's ops are unregistered in `twill-opt`, so every op is
//! built generically (name, operands, result types, attributes, regions);
//! inherent attributes of new Triton ops go in the attribute dictionary,
//! which Triton's parser accepts (docs/ws-lowering.md, 2.3). Body ops are
//! cloned (locations and properties kept) and their operands remapped.

use std::collections::HashMap;

use mlir_sys::*;

use super::waits::{InFlight, WaitPoint};
use super::{types, LowerSkip, WsPlan};
use crate::backend::mlir::{body_ops, string_ref};
use crate::frontend::mlir::{enclosing_function, has_attr, nested_ops, op_name, type_text};

/// Marker on the ws op and its loops (discardable; survives Triton).
const MARKER: &str = "twill.lowered";

/// Builds ops at one location.
struct Builder {
    ctx: MlirContext,
    loc: MlirLocation,
}

impl Builder {
    fn ty(&self, text: &str) -> Result<MlirType, LowerSkip> {
        // SAFETY: the context is live; the string outlives the call.
        let t = unsafe { mlirTypeParseGet(self.ctx, string_ref(text)) };
        (!t.ptr.is_null())
            .then_some(t)
            .ok_or_else(|| LowerSkip::Type(text.to_string()))
    }

    fn attr(&self, text: &str) -> Result<MlirAttribute, LowerSkip> {
        // SAFETY: as `ty`.
        let a = unsafe { mlirAttributeParseGet(self.ctx, string_ref(text)) };
        (!a.ptr.is_null())
            .then_some(a)
            .ok_or_else(|| LowerSkip::Emit(format!("cannot build attribute `{text}`")))
    }

    /// A detached op; `attrs` are (name, attribute text).
    fn op(
        &self,
        name: &str,
        operands: &[MlirValue],
        results: &[MlirType],
        attrs: &[(&str, String)],
        regions: Vec<MlirRegion>,
    ) -> Result<MlirOperation, LowerSkip> {
        let mut named = Vec::with_capacity(attrs.len());
        for (n, text) in attrs {
            let a = self.attr(text)?;
            // SAFETY: identifiers are uniqued in the live context.
            named.push(unsafe {
                mlirNamedAttributeGet(mlirIdentifierGet(self.ctx, string_ref(n)), a)
            });
        }
        // SAFETY: every array outlives `mlirOperationCreate`, which copies
        // them; the regions' ownership moves into the op.
        unsafe {
            let mut state = mlirOperationStateGet(string_ref(name), self.loc);
            mlirOperationStateAddOperands(&mut state, operands.len() as isize, operands.as_ptr());
            mlirOperationStateAddResults(&mut state, results.len() as isize, results.as_ptr());
            mlirOperationStateAddAttributes(&mut state, named.len() as isize, named.as_ptr());
            mlirOperationStateAddOwnedRegions(&mut state, regions.len() as isize, regions.as_ptr());
            Ok(mlirOperationCreate(&mut state))
        }
    }
}

/// Appends ops to one block.
struct At<'a> {
    b: &'a Builder,
    block: MlirBlock,
}

impl At<'_> {
    fn add(
        &self,
        name: &str,
        operands: &[MlirValue],
        results: &[MlirType],
        attrs: &[(&str, String)],
    ) -> Result<MlirOperation, LowerSkip> {
        let op = self.b.op(name, operands, results, attrs, Vec::new())?;
        // SAFETY: the block is live and takes ownership of the new op.
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
        Ok(op)
    }

    /// One result of a new op.
    fn val(
        &self,
        name: &str,
        operands: &[MlirValue],
        ty: MlirType,
        attrs: &[(&str, String)],
    ) -> Result<MlirValue, LowerSkip> {
        let op = self.add(name, operands, &[ty], attrs)?;
        // SAFETY: the op was built with one result.
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }

    fn i32(&self, v: i64) -> Result<MlirValue, LowerSkip> {
        let ty = self.b.ty("i32")?;
        self.val(
            "arith.constant",
            &[],
            ty,
            &[("value", format!("{v} : i32"))],
        )
    }

    fn i1(&self, v: bool) -> Result<MlirValue, LowerSkip> {
        let ty = self.b.ty("i1")?;
        self.val("arith.constant", &[], ty, &[("value", format!("{v}"))])
    }

    fn arith(&self, name: &str, a: MlirValue, c: MlirValue) -> Result<MlirValue, LowerSkip> {
        // SAFETY: `a` is live.
        let ty = unsafe { mlirValueGetType(a) };
        self.val(&format!("arith.{name}"), &[a, c], ty, &[])
    }

    /// `ttg.memdesc_index %array[%i]` of type `ty`.
    fn index(&self, array: MlirValue, i: MlirValue, ty: MlirType) -> Result<MlirValue, LowerSkip> {
        self.val("ttg.memdesc_index", &[array, i], ty, &[])
    }
}

/// Values of the new code: the barrier arrays, the rings and the types.
struct Shared {
    rings: Vec<MlirValue>,
    full: MlirValue,
    empty: MlirValue,
    barrier: MlirType,
    slots: Vec<MlirType>,
}

/// Slot, phase and the counter of one trip: `(slot, parity)`.
fn trip(at: &At, it: MlirValue, depth: u32) -> Result<(MlirValue, MlirValue), LowerSkip> {
    let (d, one) = (at.i32(i64::from(depth))?, at.i32(1)?);
    let s = at.arith("remsi", it, d)?;
    let q = at.arith("divsi", it, d)?;
    Ok((s, at.arith("andi", q, one)?))
}

fn wait(at: &At, bar: MlirValue, phase: MlirValue, pred: MlirValue) -> Result<(), LowerSkip> {
    let seg = ("operandSegmentSizes", "array<i32: 1, 1, 1, 0>".to_string());
    at.add("ttng.wait_barrier", &[bar, phase, pred], &[], &[seg])?;
    Ok(())
}

/// Lowers `for_op` as `plan` says: returns the `ttg.warp_specialize` op
/// that replaced it.
pub fn emit(for_op: MlirOperation, plan: &WsPlan, ops: usize) -> Result<MlirOperation, LowerSkip> {
    let body = body_ops(for_op);
    if body.len() != ops {
        return Err(LowerSkip::Emit(format!(
            "the loop has {} body ops, the plan {ops}",
            body.len()
        )));
    }
    if let Some(why) = function_conflict(for_op) {
        return Err(LowerSkip::Shape(why.into()));
    }
    // SAFETY: `for_op` is a live `scf.for` in a block.
    let (ctx, loc, block) = unsafe {
        (
            mlirOperationGetContext(for_op),
            mlirOperationGetLocation(for_op),
            mlirOperationGetBlock(for_op),
        )
    };
    let b = Builder { ctx, loc };
    let (shared, prelude) = b.prelude(plan)?;
    let captures = captures(for_op, &body, plan, &shared);
    let producer = producer_region(&b, for_op, &body, plan, &shared, &captures)?;
    let default = default_region(&b, for_op, &body, plan, &shared)?;
    let ws = ws_op(&b, for_op, plan, &captures, default, producer)?;
    // SAFETY: every op is detached and moves into the function's block;
    // the old loop's results are replaced before it is erased.
    unsafe {
        for op in prelude {
            mlirBlockInsertOwnedOperationBefore(block, for_op, op);
        }
        mlirBlockInsertOwnedOperationBefore(block, for_op, ws);
        for r in 0..mlirOperationGetNumResults(for_op) {
            mlirValueReplaceAllUsesOfWith(
                mlirOperationGetResult(for_op, r),
                mlirOperationGetResult(ws, r),
            );
        }
        mlirOperationDestroy(for_op);
    }
    invalidate(&b, block, ws, plan, &shared)?;
    Ok(ws)
}

impl Builder {
    /// The rings, the barrier arrays and their `init_barrier`s, detached.
    fn prelude(&self, plan: &WsPlan) -> Result<(Shared, Vec<MlirOperation>), LowerSkip> {
        // Every type first: nothing is built when one does not parse.
        let parse = |text: String| self.ty(&text);
        let ring_types: Vec<MlirType> =
            (plan.loads.iter().map(|l| parse(l.ring.text()))).collect::<Result<_, _>>()?;
        let slots: Vec<MlirType> =
            (plan.loads.iter().map(|l| parse(l.slot.text()))).collect::<Result<_, _>>()?;
        let arrays = self.ty(&types::barriers(plan.depth))?;
        let barrier = self.ty(&types::barrier())?;
        // SAFETY: a temporary block, destroyed below once emptied.
        let tmp = unsafe { mlirBlockCreate(0, std::ptr::null(), std::ptr::null()) };
        let at = At {
            b: self,
            block: tmp,
        };
        let mut rings = Vec::new();
        for &ty in &ring_types {
            rings.push(at.val("ttg.local_alloc", &[], ty, &[])?);
        }
        let full = at.val("ttg.local_alloc", &[], arrays, &[])?;
        let empty = at.val("ttg.local_alloc", &[], arrays, &[])?;
        for s in 0..plan.depth {
            let i = at.i32(i64::from(s))?;
            for (array, count) in [(full, plan.full_count), (empty, plan.empty_count)] {
                let bar = at.index(array, i, barrier)?;
                at.add(
                    "ttng.init_barrier",
                    &[bar],
                    &[],
                    &[("count", format!("{count} : i32"))],
                )?;
            }
        }
        let ops = crate::frontend::mlir::block_ops(tmp);
        // SAFETY: the temporary block owns the ops; detach them all.
        unsafe {
            for &op in &ops {
                mlirOperationRemoveFromParent(op);
            }
            mlirBlockDestroy(tmp);
        }
        let shared = Shared {
            rings,
            full,
            empty,
            barrier,
            slots,
        };
        Ok((shared, ops))
    }
}

/// Why the function holding `for_op` cannot take a lowered loop: another
/// loop marked `tt.warp_specialize` (Hopper WS would then act on the
/// function), or a `ttg.warp_specialize` already (ws ops cannot nest, and
/// several in one function are not verified).
fn function_conflict(for_op: MlirOperation) -> Option<&'static str> {
    let func = enclosing_function(for_op)?;
    let mut all = Vec::new();
    nested_ops(func, &mut all);
    for op in all {
        let name = op_name(op);
        if name == "ttg.warp_specialize" {
            return Some(
                "the function already has a ttg.warp_specialize (one per function is supported)",
            );
        }
        if op.ptr != for_op.ptr && name == "scf.for" && has_attr(op, "tt.warp_specialize") {
            return Some("another loop of the function is marked tt.warp_specialize (Hopper WS would then act on the function)");
        }
    }
    None
}

/// `inval_barrier` on every barrier, after the ws op.
fn invalidate(
    b: &Builder,
    block: MlirBlock,
    ws: MlirOperation,
    plan: &WsPlan,
    sh: &Shared,
) -> Result<(), LowerSkip> {
    let mut after = ws;
    let mut put = |op: MlirOperation| {
        // SAFETY: `after` is in `block`; the op is detached.
        unsafe { mlirBlockInsertOwnedOperationAfter(block, after, op) };
        after = op;
    };
    let i32t = b.ty("i32")?;
    for s in 0..plan.depth {
        let c = b.op(
            "arith.constant",
            &[],
            &[i32t],
            &[("value", format!("{s} : i32"))],
            Vec::new(),
        )?;
        put(c);
        // SAFETY: the constant has one result.
        let i = unsafe { mlirOperationGetResult(c, 0) };
        for array in [sh.full, sh.empty] {
            let bar = b.op(
                "ttg.memdesc_index",
                &[array, i],
                &[sh.barrier],
                &[],
                Vec::new(),
            )?;
            put(bar);
            let v = unsafe { mlirOperationGetResult(bar, 0) };
            put(b.op("ttng.inval_barrier", &[v], &[], &[], Vec::new())?);
        }
    }
    Ok(())
}

/// Whether `v` is defined inside `for_op` (a body result or a block
/// argument of its body).
fn inside(v: MlirValue, body: &[MlirOperation], for_op: MlirOperation) -> bool {
    // SAFETY: `v` is live; owners are compared by pointer.
    unsafe {
        if mlirValueIsAOpResult(v) {
            let owner = mlirOpResultGetOwner(v);
            body.iter().any(|o| o.ptr == owner.ptr)
        } else {
            let blk = mlirBlockArgumentGetOwner(v);
            mlirBlockGetParentOperation(blk).ptr == for_op.ptr
        }
    }
}

/// The producer's captures: the outside values its ops read, the loop
/// bounds, the rings and the barrier arrays (in that order, no repeats).
fn captures(
    for_op: MlirOperation,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
) -> Vec<MlirValue> {
    let mut out: Vec<MlirValue> = Vec::new();
    let mut push = |v: MlirValue| {
        if !out.iter().any(|w| w.ptr == v.ptr) {
            out.push(v);
        }
    };
    let producer = plan
        .producer_ops
        .iter()
        .copied()
        .chain(plan.loads.iter().map(|l| l.load));
    for i in producer {
        // SAFETY: body ops are live.
        unsafe {
            for k in 0..mlirOperationGetNumOperands(body[i]) {
                let v = mlirOperationGetOperand(body[i], k);
                if !inside(v, body, for_op) {
                    push(v);
                }
            }
        }
    }
    for k in 0..3 {
        push(unsafe { mlirOperationGetOperand(for_op, k) });
    }
    // The initial values of the iteration arguments the producer carries.
    for &k in &plan.producer_carried {
        push(unsafe { mlirOperationGetOperand(for_op, 3 + k as isize) });
    }
    sh.rings.iter().copied().for_each(&mut push);
    push(sh.full);
    push(sh.empty);
    out
}

/// Clones body op `op` into `at` with its operands remapped through `map`;
/// memdesc results viewing a remapped (mutable) buffer become mutable.
fn clone_into(
    at: &At,
    op: MlirOperation,
    map: &mut HashMap<usize, MlirValue>,
) -> Result<MlirOperation, LowerSkip> {
    // SAFETY: `op` is live; the clone is detached until appended.
    unsafe {
        let c = mlirOperationClone(op);
        let mut viewed = false;
        for k in 0..mlirOperationGetNumOperands(c) {
            let old = mlirOperationGetOperand(c, k);
            if let Some(&new) = map.get(&(old.ptr as usize)) {
                viewed |= type_text(old) != type_text(new);
                mlirOperationSetOperand(c, k, new);
            }
        }
        for r in 0..mlirOperationGetNumResults(c) {
            let res = mlirOperationGetResult(c, r);
            if viewed && type_text(res).starts_with("!ttg.memdesc") {
                mlirValueSetType(res, at.b.ty(&types::mutable_view(&type_text(res)))?);
            }
            map.insert(mlirOperationGetResult(op, r).ptr as usize, res);
        }
        mlirBlockAppendOwnedOperation(at.block, c);
        Ok(c)
    }
}

/// A new `scf.for` over the old loop's bounds with `inits` (the last one
/// the trip counter): the op and its body block.
fn new_loop(
    b: &Builder,
    bounds: [MlirValue; 3],
    inits: &[MlirValue],
) -> Result<(MlirOperation, MlirBlock), LowerSkip> {
    // SAFETY: values are live; the region and block move into the op.
    unsafe {
        let mut arg_types = vec![mlirValueGetType(bounds[0])];
        arg_types.extend(inits.iter().map(|&v| mlirValueGetType(v)));
        let locs = vec![b.loc; arg_types.len()];
        let blk = mlirBlockCreate(arg_types.len() as isize, arg_types.as_ptr(), locs.as_ptr());
        let region = mlirRegionCreate();
        mlirRegionAppendOwnedBlock(region, blk);
        let mut operands = bounds.to_vec();
        operands.extend_from_slice(inits);
        let attrs = [
            ("tt.num_stages", "0 : i32".to_string()),
            (MARKER, "\"loop\"".to_string()),
        ];
        let op = b.op("scf.for", &operands, &arg_types[1..], &attrs, vec![region])?;
        Ok((op, blk))
    }
}

fn arg(blk: MlirBlock, k: isize) -> MlirValue {
    // SAFETY: callers ask for arguments the block was built with.
    unsafe { mlirBlockGetArgument(blk, k) }
}

/// The producer: waits for a free slot, expects the trip's bytes and
/// issues one TMA copy per load.
fn producer_region(
    b: &Builder,
    for_op: MlirOperation,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
    caps: &[MlirValue],
) -> Result<MlirRegion, LowerSkip> {
    // SAFETY: captures are live values; the block moves into the region.
    let (region, entry) = unsafe {
        let tys: Vec<MlirType> = caps.iter().map(|&v| mlirValueGetType(v)).collect();
        let locs = vec![b.loc; tys.len()];
        let blk = mlirBlockCreate(tys.len() as isize, tys.as_ptr(), locs.as_ptr());
        let region = mlirRegionCreate();
        mlirRegionAppendOwnedBlock(region, blk);
        (region, blk)
    };
    let mut map: HashMap<usize, MlirValue> = HashMap::new();
    for (k, v) in caps.iter().enumerate() {
        map.insert(v.ptr as usize, arg(entry, k as isize));
    }
    let at = At { b, block: entry };
    // SAFETY: operands 0..3 of `for_op` are its bounds, all captured.
    let bounds =
        [0, 1, 2].map(|k| map[&(unsafe { mlirOperationGetOperand(for_op, k) }.ptr as usize)]);
    let zero = at.i32(0)?;
    // SAFETY: operand 3 + k of `for_op` is the initial value of its
    // iteration argument k, captured.
    let mut inits = vec![zero];
    inits.extend(
        (plan.producer_carried.iter()).map(|&k| {
            map[&(unsafe { mlirOperationGetOperand(for_op, 3 + k as isize) }.ptr as usize)]
        }),
    );
    let (lp, blk) = new_loop(b, bounds, &inits)?;
    at.add_op(lp);
    // SAFETY: the old body's block arguments are the induction variable,
    // then the iteration arguments.
    let old = unsafe { mlirOperationGetBlock(body[0]) };
    map.insert(arg(old, 0).ptr as usize, arg(blk, 0));
    for (j, &k) in plan.producer_carried.iter().enumerate() {
        map.insert(
            arg(old, 1 + k as isize).ptr as usize,
            arg(blk, 2 + j as isize),
        );
    }
    producer_trip(&At { b, block: blk }, body, plan, sh, &mut map, arg(blk, 1))?;
    at.add("ttg.warp_return", &[], &[], &[])?;
    Ok(region)
}

impl At<'_> {
    fn add_op(&self, op: MlirOperation) {
        // SAFETY: the block takes ownership of the detached op.
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
    }
}

/// `v` as `map` renames it (the value itself where it does not).
fn remapped(v: MlirValue, map: &HashMap<usize, MlirValue>) -> MlirValue {
    map.get(&(v.ptr as usize)).copied().unwrap_or(v)
}

/// One producer trip at counter `it`.
fn producer_trip(
    at: &At,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
    map: &mut HashMap<usize, MlirValue>,
    it: MlirValue,
) -> Result<(), LowerSkip> {
    let (s, ph) = trip(at, it, plan.depth)?;
    let (one, t) = (at.i32(1)?, at.i1(true)?);
    let free = at.arith("xori", ph, one)?;
    let empty = at.index(remapped(sh.empty, map), s, sh.barrier)?;
    wait(at, empty, free, t)?;
    let full = at.index(remapped(sh.full, map), s, sh.barrier)?;
    let size = ("size", format!("{} : i32", plan.expect_bytes));
    at.add("ttng.barrier_expect", &[full, t], &[], &[size])?;
    for &i in &plan.producer_ops {
        clone_into(at, body[i], map)?;
    }
    for (k, l) in plan.loads.iter().enumerate() {
        let slot = at.index(remapped(sh.rings[k], map), s, sh.slots[k])?;
        // SAFETY: a descriptor load's operands are the descriptor, then
        // its coordinates.
        let mut operands: Vec<MlirValue> = unsafe {
            (0..mlirOperationGetNumOperands(body[l.load]))
                .map(|j| remapped(mlirOperationGetOperand(body[l.load], j), map))
                .collect()
        };
        let coords = operands.len() - 1;
        operands.extend([full, slot, t]);
        let attrs = if plan.captures_on_partitions {
            vec![
                ("isVolatile", "false".to_string()),
                (
                    "operandSegmentSizes",
                    format!("array<i32: 1, {coords}, 0, 1, 1, 1>"),
                ),
            ]
        } else {
            vec![
                ("cache", "1 : i32".to_string()),
                ("evict", "1 : i32".to_string()),
                ("isVolatile", "false".to_string()),
            ]
        };
        at.add(
            "ttng.async_tma_copy_global_to_local",
            &operands,
            &[],
            &attrs,
        )?;
    }
    let mut next = vec![at.arith("addi", it, one)?];
    // SAFETY: the old body block's terminator is its `scf.yield`, one
    // operand per iteration argument.
    let old_yield = unsafe { mlirBlockGetTerminator(mlirOperationGetBlock(body[0])) };
    for &k in &plan.producer_carried {
        next.push(remapped(
            unsafe { mlirOperationGetOperand(old_yield, k as isize) },
            map,
        ));
    }
    at.add("scf.yield", &next, &[], &[])?;
    Ok(())
}

/// The default region: the compute group's loop on the ring slots, its
/// final wait and `warp_yield`.
fn default_region(
    b: &Builder,
    for_op: MlirOperation,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
) -> Result<MlirRegion, LowerSkip> {
    // SAFETY: the block moves into the region.
    let (region, entry) = unsafe {
        let blk = mlirBlockCreate(0, std::ptr::null(), std::ptr::null());
        let region = mlirRegionCreate();
        mlirRegionAppendOwnedBlock(region, blk);
        (region, blk)
    };
    let at = At { b, block: entry };
    // SAFETY: `for_op` is live; operands 0..3 are its bounds.
    let n = unsafe { mlirOperationGetNumOperands(for_op) };
    let operand = |k| unsafe { mlirOperationGetOperand(for_op, k) };
    let mut inits: Vec<MlirValue> = (3..n).map(operand).collect();
    inits.push(at.i32(0)?);
    let (lp, blk) = new_loop(b, [operand(0), operand(1), operand(2)], &inits)?;
    at.add_op(lp);
    let mut map: HashMap<usize, MlirValue> = HashMap::new();
    // SAFETY: the old body block's arguments: iv, then the iter args.
    unsafe {
        let old = mlirOperationGetBlock(body[0]);
        for k in 0..mlirBlockGetNumArguments(old) {
            map.insert(mlirBlockGetArgument(old, k).ptr as usize, arg(blk, k));
        }
    }
    let it = arg(blk, inits.len() as isize);
    let waited = consumer_trip(&At { b, block: blk }, body, plan, sh, &mut map, it)?;
    // SAFETY: the new loop's results: the old ones, then the counter.
    let results: Vec<MlirValue> = (0..n - 3)
        .map(|k| unsafe { mlirOperationGetResult(lp, k) })
        .collect();
    let in_flight: Vec<MlirValue> = waited.iter().map(|&k| results[k]).collect();
    let mut out = results.clone();
    if !in_flight.is_empty() {
        let tys: Vec<MlirType> = in_flight
            .iter()
            .map(|&v| unsafe { mlirValueGetType(v) })
            .collect();
        let fin = at.add(
            "ttng.warp_group_dot_wait",
            &in_flight,
            &tys,
            &[("pendings", "0 : i32".to_string())],
        )?;
        for (j, &k) in waited.iter().enumerate() {
            out[k] = unsafe { mlirOperationGetResult(fin, j as isize) };
        }
    }
    at.add("ttg.warp_yield", &out, &[], &[])?;
    Ok(region)
}

/// One compute trip at counter `it`; returns the loop results that carry
/// the wgmma (still in flight at the loop's end).
fn consumer_trip(
    at: &At,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
    map: &mut HashMap<usize, MlirValue>,
    it: MlirValue,
) -> Result<Vec<usize>, LowerSkip> {
    let (s, ph) = trip(at, it, plan.depth)?;
    let (zero, one, t) = (at.i32(0)?, at.i32(1)?, at.i1(true)?);
    let full = at.index(sh.full, s, sh.barrier)?;
    wait(at, full, ph, t)?;
    for (k, l) in plan.loads.iter().enumerate() {
        let slot = at.index(sh.rings[k], s, sh.slots[k])?;
        // SAFETY: the alloc has one result.
        map.insert(
            unsafe { mlirOperationGetResult(body[l.alloc], 0) }.ptr as usize,
            slot,
        );
    }
    let points = &plan.waits.points;
    for (p, &i) in plan.consumer_ops.iter().enumerate() {
        for w in points.iter().filter(|w| w.before == p) {
            wait_point(at, body, w, map)?;
        }
        let c = clone_into(at, body[i], map)?;
        if plan.dots.contains(&i) {
            let async_attr = at.b.attr("true")?;
            // SAFETY: `c` is the cloned wgmma.
            unsafe {
                mlirOperationSetInherentAttributeByName(c, string_ref("isAsync"), async_attr)
            };
        }
    }
    for w in points
        .iter()
        .filter(|w| w.before == plan.consumer_ops.len())
    {
        wait_point(at, body, w, map)?;
    }
    release(at, plan, sh, it, zero, s)?;
    let next = at.arith("addi", it, one)?;
    yield_trip(at, body, map, next, plan)
}

/// A `warp_group_dot_wait`: the results of this trip's wgmmas it passes
/// through, and the register A operands of those it retires (their
/// registers live until then); later uses take its results.
fn wait_point(
    at: &At,
    body: &[MlirOperation],
    w: &WaitPoint,
    map: &mut HashMap<usize, MlirValue>,
) -> Result<(), LowerSkip> {
    // SAFETY: body ops are live; their clones are in `map`.
    unsafe {
        let mut old: Vec<MlirValue> = w
            .through
            .iter()
            .map(|&d| mlirOperationGetResult(body[d], 0))
            .collect();
        for f in &w.retire {
            if let InFlight::Dot(d) = *f {
                let a = mlirOperationGetOperand(body[d], 0);
                if !type_text(a).starts_with("!ttg.memdesc") && !old.iter().any(|v| v.ptr == a.ptr)
                {
                    old.push(a);
                }
            }
        }
        let new: Vec<MlirValue> = old.iter().map(|&v| remapped(v, map)).collect();
        let tys: Vec<MlirType> = new.iter().map(|&v| mlirValueGetType(v)).collect();
        let pend = ("pendings", format!("{} : i32", w.pendings));
        let op = at.add("ttng.warp_group_dot_wait", &new, &tys, &[pend])?;
        for (j, v) in old.iter().enumerate() {
            map.insert(v.ptr as usize, mlirOperationGetResult(op, j as isize));
        }
    }
    Ok(())
}

/// Releases a slot once its readers retired: the previous trip's (its
/// wgmmas retired at this trip's end wait) when a slot is held two trips,
/// else this trip's.
fn release(
    at: &At,
    plan: &WsPlan,
    sh: &Shared,
    it: MlirValue,
    zero: MlirValue,
    current: MlirValue,
) -> Result<(), LowerSkip> {
    let count = ("count", format!("{} : i32", plan.empty_count));
    if plan.compute_warps > 4 {
        // One thread arrives for the region: every warp group's wgmmas
        // must have retired (each waited for its own) before it does.
        let (name, attrs) = &plan.thread_barrier;
        let attrs: Vec<(&str, String)> =
            attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        at.add(name, &[], &[], &attrs)?;
    }
    if plan.waits.hold == 1 {
        let t = at.i1(true)?;
        let empty = at.index(sh.empty, current, sh.barrier)?;
        at.add("ttng.arrive_barrier", &[empty, t], &[], &[count])?;
        return Ok(());
    }
    let i1 = at.b.ty("i1")?;
    let rel = at.val(
        "arith.cmpi",
        &[it, zero],
        i1,
        &[("predicate", "4 : i64".to_string())],
    )?;
    let back = at.i32(i64::from(plan.depth - 1))?;
    let d = at.i32(i64::from(plan.depth))?;
    let prev = at.arith("remsi", at.arith("addi", it, back)?, d)?;
    let empty = at.index(sh.empty, prev, sh.barrier)?;
    at.add("ttng.arrive_barrier", &[empty, rel], &[], &[count])?;
    Ok(())
}

/// The old yield remapped, plus the counter; the positions that yield
/// wgmmas still in flight.
fn yield_trip(
    at: &At,
    body: &[MlirOperation],
    map: &HashMap<usize, MlirValue>,
    next: MlirValue,
    plan: &WsPlan,
) -> Result<Vec<usize>, LowerSkip> {
    // SAFETY: the terminator follows the last body op.
    let term = unsafe { mlirOperationGetNextInBlock(*body.last().expect("a body")) };
    if op_name(term) != "scf.yield" {
        return Err(LowerSkip::Emit(
            "the loop body does not end in scf.yield".into(),
        ));
    }
    let mut values = Vec::new();
    let waited = plan.waits.carried.iter().map(|&(_, k)| k).collect();
    // SAFETY: the yield's operands are live.
    unsafe {
        for k in 0..mlirOperationGetNumOperands(term) {
            let v = mlirOperationGetOperand(term, k);
            values.push(remapped(v, map));
        }
    }
    values.push(next);
    at.add("scf.yield", &values, &[], &[])?;
    Ok(waited)
}

/// The `ttg.warp_specialize` op: 3.6 takes the captures as its operands,
/// 3.9 on its `ttg.warp_specialize.partitions` op.
fn ws_op(
    b: &Builder,
    for_op: MlirOperation,
    plan: &WsPlan,
    caps: &[MlirValue],
    default: MlirRegion,
    producer: MlirRegion,
) -> Result<MlirOperation, LowerSkip> {
    let (outer, inner): (&[MlirValue], &[MlirValue]) = if plan.captures_on_partitions {
        (&[], caps)
    } else {
        (caps, &[])
    };
    let partitions = b.op(
        "ttg.warp_specialize.partitions",
        inner,
        &[],
        &[],
        vec![producer],
    )?;
    // SAFETY: the block and region move into the ws op.
    let holder = unsafe {
        let blk = mlirBlockCreate(0, std::ptr::null(), std::ptr::null());
        mlirBlockAppendOwnedOperation(blk, partitions);
        let region = mlirRegionCreate();
        mlirRegionAppendOwnedBlock(region, blk);
        region
    };
    // SAFETY: `for_op` is live.
    let results: Vec<MlirType> = unsafe {
        (0..mlirOperationGetNumResults(for_op))
            .map(|r| mlirValueGetType(mlirOperationGetResult(for_op, r)))
            .collect()
    };
    let attrs = [
        (
            "partitionNumWarps",
            format!("array<i32: {}>", plan.producer_warps),
        ),
        (
            "requestedRegisters",
            format!("array<i32: {}>", plan.producer_registers),
        ),
        (MARKER, format!("\"depth {}\"", plan.depth)),
    ];
    b.op(
        "ttg.warp_specialize",
        outer,
        &results,
        &attrs,
        vec![default, holder],
    )
}
