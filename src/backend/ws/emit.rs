//! Building the warp-specialized form of a [`WsPlan`] in place of its
//! `scf.for`. Triton's ops are unregistered in `twill-opt`, so every op is
//! built generically (name, operands, result types, attributes, regions);
//! inherent attributes of new Triton ops go in the attribute dictionary,
//! which Triton's parser accepts (docs/ws-lowering.md, 2.3). Body ops are
//! cloned (locations and properties kept) and their operands remapped.

use std::collections::HashMap;

mod staged;

use mlir_sys::*;

use super::waits::{InFlight, WaitPoint};
use super::{types, ComputePart, Emitted, LowerSkip, WsPlan};
use crate::backend::mlir::{body_ops, string_ref};
use crate::frontend::mlir::{
    enclosing, enclosing_function, has_attr, nested_ops, op_name, remove_attr, type_text,
};

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

/// Values of the new code: the barrier arrays, the rings, the result
/// buffers (per compute part) and the types.
struct Shared {
    rings: Vec<MlirValue>,
    /// Per ring group (`WsPlan::groups`): its `full` and `empty` arrays.
    full: Vec<MlirValue>,
    empty: Vec<MlirValue>,
    /// A one-barrier array the workers arrive on once their results are
    /// stored (None: no worker delivers results).
    done: Option<MlirValue>,
    results: Vec<Vec<MlirValue>>,
    barrier: MlirType,
    slots: Vec<MlirType>,
}

/// Slot, phase and the counter of one trip: `(slot, parity)`.
fn trip(at: &At, it: MlirValue, depth: u32) -> Result<(MlirValue, MlirValue), LowerSkip> {
    let (d, one) = (at.i32(i64::from(depth))?, at.i32(1)?);
    let s = at.arith("remui", it, d)?;
    let q = at.arith("divui", it, d)?;
    Ok((s, at.arith("andi", q, one)?))
}

fn wait(at: &At, bar: MlirValue, phase: MlirValue, pred: MlirValue) -> Result<(), LowerSkip> {
    let seg = ("operandSegmentSizes", "array<i32: 1, 1, 1, 0>".to_string());
    at.add("ttng.wait_barrier", &[bar, phase, pred], &[], &[seg])?;
    Ok(())
}

/// Lowers `for_op` as `plan` says: returns the `ttg.warp_specialize` op
/// that replaced it and what the emitter added to the plan.
pub fn emit(
    for_op: MlirOperation,
    plan: &WsPlan,
    ops: usize,
) -> Result<(MlirOperation, Emitted), LowerSkip> {
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
    let (shared, mut prelude) = b.prelude(plan)?;
    if reads_outside_buffer(for_op, &body) {
        // A buffer the code before the loop wrote (FA's Q, stored from
        // registers: the generic proxy) is read by a wgmma (the async
        // proxy): one fence before the ws op. Left to Triton, 3.9 fences
        // before every trip's first wgmma.
        let fence = ("bCluster", "false".to_string());
        prelude.push(b.op("ttng.fence_async_shared", &[], &[], &[fence], Vec::new())?);
    }
    let caps = captures(&b, for_op, &body, plan, &shared)?;
    let emitted = caps.emitted()?;
    // The buffers the loop reads from before it (FA's Q) stay live through
    // the ws op, beside its rings and the initial values' buffers.
    let total = plan.smem_bytes + emitted.init_bytes + outside_buffer_bytes(for_op, &body);
    if total > plan.smem_capacity {
        // SAFETY: the ops are detached; users go before the ops they use
        // (each list is in def-use order, the initial values' allocs use
        // only the function's values).
        unsafe {
            for op in caps.init_allocs.into_iter().chain(prelude).rev() {
                mlirOperationDestroy(op);
            }
        }
        return Err(LowerSkip::SharedMemory {
            bytes: total,
            capacity: plan.smem_capacity,
        });
    }
    prelude.extend(caps.init_allocs.iter().copied());
    let mut partitions = Vec::new();
    for j in 1..plan.parts.len() {
        partitions.push(compute_region(
            &b,
            for_op,
            &body,
            plan,
            j,
            &shared,
            Some(&caps),
        )?);
    }
    partitions.push(producer_region(
        &b,
        for_op,
        &body,
        plan,
        &shared,
        &caps.values,
    )?);
    let default = compute_region(&b, for_op, &body, plan, 0, &shared, None)?;
    let ws = ws_op(&b, for_op, plan, &caps.values, default, partitions)?;
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
    Ok((ws, emitted))
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
        let (mut full, mut empty) = (Vec::new(), Vec::new());
        for _ in &plan.groups {
            full.push(at.val("ttg.local_alloc", &[], arrays, &[])?);
            empty.push(at.val("ttg.local_alloc", &[], arrays, &[])?);
        }
        let mut results = Vec::new();
        for part in &plan.parts {
            let mut bufs = Vec::new();
            for (_, ty) in &part.results {
                bufs.push(at.val("ttg.local_alloc", &[], self.ty(ty)?, &[])?);
            }
            results.push(bufs);
        }
        let workers = plan.parts.iter().filter(|p| !p.results.is_empty()).count();
        let done = if workers == 0 {
            None
        } else {
            let done = at.val("ttg.local_alloc", &[], self.ty(&types::barriers(1))?, &[])?;
            let bar = at.index(done, at.i32(0)?, barrier)?;
            let count = ("count", format!("{workers} : i32"));
            at.add("ttng.init_barrier", &[bar], &[], &[count])?;
            Some(done)
        };
        for s in 0..plan.depth {
            let i = at.i32(i64::from(s))?;
            let pairs = (plan.groups.iter().enumerate())
                .flat_map(|(g, r)| [(full[g], plan.full_count), (empty[g], r.empty_count)]);
            for (array, count) in pairs {
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
            done,
            results,
            barrier,
            slots,
        };
        Ok((shared, ops))
    }
}

/// Why the loop cannot become a ws op where it is: inside another
/// `ttg.warp_specialize` (ws ops cannot nest). Several ws ops in one
/// function are fine: Triton joins every warp of the CTA at the end of each,
/// and the verifier checks each after the ones before it. A loop of the
/// function still marked `tt.warp_specialize` beside twill's ws op is
/// unmarked after the pass ([`unmark_beside_lowered`]).
fn function_conflict(for_op: MlirOperation) -> Option<&'static str> {
    enclosing(for_op, |n| n == "ttg.warp_specialize")
        .map(|_| "the loop is inside a ttg.warp_specialize (ws ops cannot nest)")
}

/// Removes `tt.warp_specialize` from every loop of a function that holds a
/// ws op twill lowered (outside any ws op): Triton's Hopper warp
/// specialization, which runs after the lowering, would act on that
/// function. Returns the unmarked loops; they take the attribute route.
pub fn unmark_beside_lowered(module: MlirOperation) -> Vec<MlirOperation> {
    let mut all = Vec::new();
    nested_ops(module, &mut all);
    let lowered: Vec<MlirOperation> = all
        .iter()
        .filter(|&&o| op_name(o) == "ttg.warp_specialize" && has_attr(o, MARKER))
        .filter_map(|&o| enclosing_function(o))
        .collect();
    let mut out = Vec::new();
    for &o in &all {
        let beside = enclosing_function(o).is_some_and(|f| lowered.iter().any(|g| g.ptr == f.ptr));
        if beside
            && op_name(o) == "scf.for"
            && has_attr(o, "tt.warp_specialize")
            && enclosing(o, |n| n == "ttg.warp_specialize").is_none()
        {
            remove_attr(o, "tt.warp_specialize");
            out.push(o);
        }
    }
    out
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
    // The ring barriers slot by slot (`full`, then `empty`), then `done`.
    let rings = sh.full.iter().zip(&sh.empty).flat_map(|(&f, &e)| [f, e]);
    let mut arrays = vec![(plan.depth, rings.collect::<Vec<_>>())];
    arrays.extend(sh.done.map(|done| (1, vec![done])));
    for (slots, group) in arrays {
        for s in 0..slots {
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
            for &array in &group {
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
    }
    Ok(())
}

/// Whether a wgmma of the loop reads a shared-memory buffer defined
/// before the loop.
fn reads_outside_buffer(for_op: MlirOperation, body: &[MlirOperation]) -> bool {
    body.iter().any(|&op| {
        op_name(op) == crate::backend::WGMMA
            && outside_operands(op, for_op)
                .iter()
                .any(|&v| type_text(v).starts_with("!ttg.memdesc"))
    })
}

/// Bytes of the distinct shared-memory buffers defined before `for_op`
/// that its body reads.
fn outside_buffer_bytes(for_op: MlirOperation, body: &[MlirOperation]) -> u64 {
    let mut seen = Vec::new();
    let mut bytes = 0;
    for &op in body {
        for v in outside_operands(op, for_op) {
            if seen.contains(&v.ptr) {
                continue;
            }
            seen.push(v.ptr);
            let m = types::MemDesc::parse(&type_text(v));
            bytes += m.and_then(|m| m.bytes()).unwrap_or(0);
        }
    }
    bytes
}

/// Whether `v` is defined within `for_op`, at any depth.
fn within(v: MlirValue, for_op: MlirOperation) -> bool {
    // SAFETY: `v` is live; parents are walked up to the top.
    unsafe {
        let mut op = if mlirValueIsAOpResult(v) {
            mlirOpResultGetOwner(v)
        } else {
            mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v))
        };
        while !op.ptr.is_null() {
            if op.ptr == for_op.ptr {
                return true;
            }
            op = mlirOperationGetParentOperation(op);
        }
        false
    }
}

/// Values defined outside `for_op` that `op` or an op nested in it reads.
fn outside_operands(op: MlirOperation, for_op: MlirOperation) -> Vec<MlirValue> {
    let mut all = vec![op];
    nested_ops(op, &mut all);
    let mut out = Vec::new();
    for o in all {
        // SAFETY: the ops are live.
        unsafe {
            for k in 0..mlirOperationGetNumOperands(o) {
                let v = mlirOperationGetOperand(o, k);
                if !within(v, for_op) {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// Captures `v`, or (a tensor) the ops that recompute it from captured
/// scalars, appended to `chain` in def-use order.
fn capture_or_remat(
    v: MlirValue,
    caps: &mut Vec<MlirValue>,
    chain: &mut Vec<MlirOperation>,
) -> Result<(), LowerSkip> {
    let ty = type_text(v);
    if types::capturable(&ty) {
        if !caps.iter().any(|w| w.ptr == v.ptr) {
            caps.push(v);
        }
        return Ok(());
    }
    // SAFETY: `v` is live.
    let def = unsafe {
        if !mlirValueIsAOpResult(v) {
            return Err(LowerSkip::TensorCapture(ty));
        }
        mlirOpResultGetOwner(v)
    };
    if chain.iter().any(|o| o.ptr == def.ptr) {
        return Ok(());
    }
    // SAFETY: `def` is live.
    let regions = unsafe { mlirOperationGetNumRegions(def) };
    if !super::partition::recomputable(&op_name(def)) || regions != 0 {
        return Err(LowerSkip::TensorCapture(ty));
    }
    // SAFETY: as above.
    for k in 0..unsafe { mlirOperationGetNumOperands(def) } {
        capture_or_remat(unsafe { mlirOperationGetOperand(def, k) }, caps, chain)?;
    }
    chain.push(def);
    Ok(())
}

/// What the partition regions take from outside the ws op.
struct Captures {
    /// One list, every partition region takes them all.
    values: Vec<MlirValue>,
    /// Ops a worker clones to recompute the outside tensors it reads.
    remat: Vec<MlirOperation>,
    /// Initial values of tensors a worker carries that it cannot
    /// recompute (a result of the code before the loop, such as an
    /// earlier loop's accumulator), each with the read-only buffer that
    /// holds it: the worker loads it before its loop.
    inits: Vec<(MlirValue, MlirValue)>,
    /// The `local_alloc`s of those buffers, detached, for before the ws op.
    init_allocs: Vec<MlirOperation>,
}

impl Captures {
    fn emitted(&self) -> Result<Emitted, LowerSkip> {
        let mut init_bytes = 0;
        for &(v, _) in &self.inits {
            let ty = type_text(v);
            let buf = types::init_buffer(&ty).and_then(|t| types::MemDesc::parse(&t));
            init_bytes += buf.and_then(|m| m.bytes()).ok_or(LowerSkip::Type(ty))?;
        }
        Ok(Emitted {
            init_buffers: self.inits.len() as u32,
            init_bytes,
        })
    }
}

/// Captures `v` or its recomputation, or nothing (`Ok(false)`) when it is
/// a tensor that cannot be recomputed; a failed attempt adds nothing.
fn try_capture(
    v: MlirValue,
    caps: &mut Vec<MlirValue>,
    chain: &mut Vec<MlirOperation>,
) -> Result<bool, LowerSkip> {
    let (mut c, mut ch) = (caps.clone(), chain.clone());
    match capture_or_remat(v, &mut c, &mut ch) {
        Ok(()) => {
            (*caps, *chain) = (c, ch);
            Ok(true)
        }
        Err(LowerSkip::TensorCapture(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The partitions' captures: the outside values the producer's and the
/// worker compute parts' ops read, the loop bounds, the initial values of
/// what they carry (or the read-only buffers holding them), the rings, the
/// barrier arrays and the result buffers (in that order, no repeats); and
/// the ops that recompute the tensors among them.
fn captures(
    b: &Builder,
    for_op: MlirOperation,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
) -> Result<Captures, LowerSkip> {
    let (mut out, mut chain) = (Vec::new(), Vec::new());
    let producer = plan
        .producer_ops
        .iter()
        .copied()
        .chain(plan.loads.iter().map(|l| l.load));
    let workers = plan
        .parts
        .iter()
        .skip(1)
        .flat_map(|p| p.ops.iter().copied());
    for i in producer.chain(workers) {
        for v in outside_operands(body[i], for_op) {
            capture_or_remat(v, &mut out, &mut chain)?;
        }
    }
    // SAFETY: operands 0..3 are the bounds, 3 + k the initial value of
    // iteration argument k.
    let operand = |k: usize| unsafe { mlirOperationGetOperand(for_op, k as isize) };
    for k in 0..3 {
        capture_or_remat(operand(k), &mut out, &mut chain)?;
    }
    for &k in &plan.producer_carried {
        capture_or_remat(operand(3 + k), &mut out, &mut chain)?;
    }
    let (mut inits, mut init_allocs): (Vec<(MlirValue, MlirValue)>, Vec<MlirOperation>) =
        (Vec::new(), Vec::new());
    for &k in plan.parts.iter().skip(1).flat_map(|p| p.carried.iter()) {
        let v = operand(3 + k);
        if try_capture(v, &mut out, &mut chain)? || inits.iter().any(|&(w, _)| w.ptr == v.ptr) {
            continue;
        }
        let ty = type_text(v);
        let Some(buf_ty) = types::init_buffer(&ty) else {
            return Err(LowerSkip::TensorCapture(ty));
        };
        let alloc = b.op("ttg.local_alloc", &[v], &[b.ty(&buf_ty)?], &[], Vec::new())?;
        // SAFETY: the op was built with one result.
        let buf = unsafe { mlirOperationGetResult(alloc, 0) };
        out.push(buf);
        inits.push((v, buf));
        init_allocs.push(alloc);
    }
    let mut shared: Vec<MlirValue> = sh.rings.clone();
    for (&f, &e) in sh.full.iter().zip(&sh.empty) {
        shared.extend([f, e]);
    }
    shared.extend(sh.done);
    shared.extend(sh.results.iter().flatten().copied());
    for v in shared {
        capture_or_remat(v, &mut out, &mut chain)?;
    }
    Ok(Captures {
        values: out,
        remat: chain,
        inits,
        init_allocs,
    })
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
    for (g, group) in plan.groups.iter().enumerate() {
        let empty = at.index(remapped(sh.empty[g], map), s, sh.barrier)?;
        wait(at, empty, free, t)?;
        let full = at.index(remapped(sh.full[g], map), s, sh.barrier)?;
        let size = ("size", format!("{} : i32", group.expect_bytes));
        at.add("ttng.barrier_expect", &[full, t], &[], &[size])?;
        if g == 0 {
            for &i in &plan.producer_ops {
                clone_into(at, body[i], map)?;
            }
        }
        for &k in &group.loads {
            copy(at, body, plan, sh, map, (k, s, full, t))?;
        }
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

/// The TMA copy of load `k` into slot `s`, landing on `full` (`t`: true).
fn copy(
    at: &At,
    body: &[MlirOperation],
    plan: &WsPlan,
    sh: &Shared,
    map: &HashMap<usize, MlirValue>,
    (k, s, full, t): (usize, MlirValue, MlirValue, MlirValue),
) -> Result<(), LowerSkip> {
    let l = &plan.loads[k];
    let slot = at.index(remapped(sh.rings[k], map), s, sh.slots[k])?;
    // SAFETY: a descriptor load's operands are the descriptor, then its
    // coordinates.
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
    Ok(())
}

/// A partition's entry block: arguments of the captures' types (none for
/// the default region, which reads outside values directly).
fn entry_block(b: &Builder, caps: &[MlirValue]) -> (MlirRegion, MlirBlock) {
    // SAFETY: captures are live values; the block moves into the region.
    unsafe {
        let tys: Vec<MlirType> = caps.iter().map(|&v| mlirValueGetType(v)).collect();
        let locs = vec![b.loc; tys.len()];
        let blk = mlirBlockCreate(tys.len() as isize, tys.as_ptr(), locs.as_ptr());
        let region = mlirRegionCreate();
        mlirRegionAppendOwnedBlock(region, blk);
        (region, blk)
    }
}

/// Compute part `j`'s region: its loop on the ring slots and its final
/// wait; the default region (j = 0) then collects the workers' results and
/// yields the loop's, a worker stores its results and arrives on `done`.
/// `caps`: what a worker takes from outside (None: the default region,
/// which reads outside values directly).
fn compute_region(
    b: &Builder,
    for_op: MlirOperation,
    body: &[MlirOperation],
    plan: &WsPlan,
    j: usize,
    sh: &Shared,
    caps: Option<&Captures>,
) -> Result<MlirRegion, LowerSkip> {
    let part = &plan.parts[j];
    let (region, entry) = entry_block(b, caps.map_or(&[], |c| &c.values));
    let at = At { b, block: entry };
    let mut map: HashMap<usize, MlirValue> = HashMap::new();
    if let Some(caps) = caps {
        for (k, v) in caps.values.iter().enumerate() {
            map.insert(v.ptr as usize, arg(entry, k as isize));
        }
        for &op in &caps.remat {
            clone_into(&at, op, &mut map)?;
        }
        for &(v, buf) in &caps.inits {
            // SAFETY: `v` is live.
            let ty = unsafe { mlirValueGetType(v) };
            let loaded = at.val("ttg.local_load", &[remapped(buf, &map)], ty, &[])?;
            map.insert(v.ptr as usize, loaded);
        }
    }
    // SAFETY: `for_op` is live; operands 0..3 are its bounds, 3 + k the
    // initial value of iteration argument k.
    if let Some(st) = &part.staging {
        let results = staged::staged_loop(&at, for_op, body, plan, part, st, sh, &map)?;
        return finish_region(&at, for_op, plan, part, sh, &map, results, j).map(|()| region);
    }
    let operand = |k: usize| remapped(unsafe { mlirOperationGetOperand(for_op, k as isize) }, &map);
    let mut inits: Vec<MlirValue> = part.carried.iter().map(|&k| operand(3 + k)).collect();
    inits.push(at.i32(0)?);
    let (lp, blk) = new_loop(b, [operand(0), operand(1), operand(2)], &inits)?;
    at.add_op(lp);
    // SAFETY: the old body block's arguments: iv, then the iter args.
    let old = unsafe { mlirOperationGetBlock(body[0]) };
    map.insert(arg(old, 0).ptr as usize, arg(blk, 0));
    for (p, &k) in part.carried.iter().enumerate() {
        map.insert(
            arg(old, 1 + k as isize).ptr as usize,
            arg(blk, 1 + p as isize),
        );
    }
    let it = arg(blk, inits.len() as isize);
    let trip = At { b, block: blk };
    consumer_trip(&trip, body, plan, part, sh, &mut map, it)?;
    // SAFETY: the new loop's results: the carried values, then the counter.
    let mut results: Vec<MlirValue> = (0..part.carried.len())
        .map(|p| unsafe { mlirOperationGetResult(lp, p as isize) })
        .collect();
    final_wait(&at, part, &mut results)?;
    finish_region(&at, for_op, plan, part, sh, &map, results, j)?;
    Ok(region)
}

/// After the part's loop: the default region (j = 0) collects the
/// workers' results and yields the loop's; a worker delivers its own.
#[allow(clippy::too_many_arguments)]
fn finish_region(
    at: &At,
    for_op: MlirOperation,
    plan: &WsPlan,
    part: &ComputePart,
    sh: &Shared,
    map: &HashMap<usize, MlirValue>,
    results: Vec<MlirValue>,
    j: usize,
) -> Result<(), LowerSkip> {
    if j == 0 {
        let out = collect_results(at, for_op, plan, sh, &results)?;
        at.add("ttg.warp_yield", &out, &[], &[])?;
    } else {
        deliver_results(at, plan, part, sh, map, &results, j)?;
        at.add("ttg.warp_return", &[], &[], &[])?;
    }
    Ok(())
}

/// After the loop, `wait {pendings = 0}` on the wgmmas still in flight;
/// `results` then name the waited values.
fn final_wait(at: &At, part: &ComputePart, results: &mut [MlirValue]) -> Result<(), LowerSkip> {
    let pos = |k: usize| part.carried.iter().position(|&c| c == k).expect("carried");
    let waited: Vec<usize> = part.waits.carried.iter().map(|&(_, k)| pos(k)).collect();
    if waited.is_empty() {
        return Ok(());
    }
    let vals: Vec<MlirValue> = waited.iter().map(|&p| results[p]).collect();
    // SAFETY: the values are live.
    let tys: Vec<MlirType> = vals
        .iter()
        .map(|&v| unsafe { mlirValueGetType(v) })
        .collect();
    let fin = at.add(
        "ttng.warp_group_dot_wait",
        &vals,
        &tys,
        &[("pendings", "0 : i32".to_string())],
    )?;
    for (q, &p) in waited.iter().enumerate() {
        results[p] = unsafe { mlirOperationGetResult(fin, q as isize) };
    }
    Ok(())
}

/// The ws op's results in the loop's order: the default region's own, and
/// the workers' from their result buffers once `done` completed.
fn collect_results(
    at: &At,
    for_op: MlirOperation,
    plan: &WsPlan,
    sh: &Shared,
    own: &[MlirValue],
) -> Result<Vec<MlirValue>, LowerSkip> {
    // SAFETY: `for_op` is live.
    let n = unsafe { mlirOperationGetNumResults(for_op) } as usize;
    let mut out: Vec<Option<MlirValue>> = vec![None; n];
    for (p, &k) in plan.parts[0].carried.iter().enumerate() {
        out[k] = Some(own[p]);
    }
    if let Some(done) = sh.done {
        let (zero, t) = (at.i32(0)?, at.i1(true)?);
        let bar = at.index(done, zero, sh.barrier)?;
        wait(at, bar, zero, t)?;
        for (j, part) in plan.parts.iter().enumerate().skip(1) {
            for (r, &(k, _)) in part.results.iter().enumerate() {
                // SAFETY: result k of the old loop has the tensor's type.
                let ty = unsafe { mlirValueGetType(mlirOperationGetResult(for_op, k as isize)) };
                out[k] = Some(at.val("ttg.local_load", &[sh.results[j][r]], ty, &[])?);
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(k, v)| {
            v.ok_or_else(|| LowerSkip::Emit(format!("no partition delivers loop result {k}")))
        })
        .collect()
}

/// A worker stores its loop results into its buffers; after a barrier of
/// its warps one thread arrives on `done`.
fn deliver_results(
    at: &At,
    plan: &WsPlan,
    part: &ComputePart,
    sh: &Shared,
    map: &HashMap<usize, MlirValue>,
    results: &[MlirValue],
    j: usize,
) -> Result<(), LowerSkip> {
    let Some(done) = sh.done else {
        return Ok(());
    };
    if part.results.is_empty() {
        return Ok(());
    }
    for (r, &(k, _)) in part.results.iter().enumerate() {
        let p = part.carried.iter().position(|&c| c == k).expect("carried");
        let buf = remapped(sh.results[j][r], map);
        at.add("ttg.local_store", &[results[p], buf], &[], &[])?;
    }
    thread_barrier(at, plan)?;
    let (zero, t) = (at.i32(0)?, at.i1(true)?);
    let bar = at.index(remapped(done, map), zero, sh.barrier)?;
    at.add(
        "ttng.arrive_barrier",
        &[bar, t],
        &[],
        &[("count", "1 : i32".to_string())],
    )?;
    Ok(())
}

/// A barrier of the partition's warps (Triton-version spelling).
fn thread_barrier(at: &At, plan: &WsPlan) -> Result<(), LowerSkip> {
    let (name, attrs) = &plan.thread_barrier;
    let attrs: Vec<(&str, String)> = attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    at.add(name, &[], &[], &attrs)?;
    Ok(())
}

/// One compute trip of `part` at counter `it`.
fn consumer_trip(
    at: &At,
    body: &[MlirOperation],
    plan: &WsPlan,
    part: &ComputePart,
    sh: &Shared,
    map: &mut HashMap<usize, MlirValue>,
    it: MlirValue,
) -> Result<(), LowerSkip> {
    let (s, ph) = trip(at, it, plan.depth)?;
    let (zero, one, t) = (at.i32(0)?, at.i32(1)?, at.i1(true)?);
    if part.waits.reads_slots {
        let full = at.index(remapped(sh.full[0], map), s, sh.barrier)?;
        wait(at, full, ph, t)?;
    }
    for (k, l) in plan.loads.iter().enumerate() {
        let slot = at.index(remapped(sh.rings[k], map), s, sh.slots[k])?;
        // SAFETY: the alloc has one result.
        map.insert(
            unsafe { mlirOperationGetResult(body[l.alloc], 0) }.ptr as usize,
            slot,
        );
    }
    let points = &part.waits.points;
    for (p, &i) in part.ops.iter().enumerate() {
        for w in points.iter().filter(|w| w.before == p) {
            wait_point(at, body, w, map)?;
        }
        let c = clone_into(at, body[i], map)?;
        if part.dots.contains(&i) {
            let async_attr = at.b.attr("true")?;
            // SAFETY: `c` is the cloned wgmma.
            unsafe {
                mlirOperationSetInherentAttributeByName(c, string_ref("isAsync"), async_attr)
            };
        }
    }
    for w in points.iter().filter(|w| w.before == part.ops.len()) {
        wait_point(at, body, w, map)?;
    }
    if part.waits.reads_slots {
        let empty = remapped(sh.empty[0], map);
        release(at, plan, part, empty, sh.barrier, it, zero, s)?;
    }
    let next = at.arith("addi", it, one)?;
    yield_trip(at, body, map, next, part)
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

/// Releases a slot once the part's readers retired: the previous trip's
/// (its wgmmas retired at this trip's end wait) when the part holds a slot
/// two trips, else this trip's.
#[allow(clippy::too_many_arguments)]
fn release(
    at: &At,
    plan: &WsPlan,
    part: &ComputePart,
    empty_array: MlirValue,
    barrier: MlirType,
    it: MlirValue,
    zero: MlirValue,
    current: MlirValue,
) -> Result<(), LowerSkip> {
    let count = ("count", "1 : i32".to_string());
    if part.warps > 4 {
        // One thread arrives for the partition: every warp group's wgmmas
        // must have retired (each waited for its own) before it does.
        thread_barrier(at, plan)?;
    }
    if part.waits.hold == 1 {
        let t = at.i1(true)?;
        let empty = at.index(empty_array, current, barrier)?;
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
    let prev = at.arith("remui", at.arith("addi", it, back)?, d)?;
    let empty = at.index(empty_array, prev, barrier)?;
    at.add("ttng.arrive_barrier", &[empty, rel], &[], &[count])?;
    Ok(())
}

/// The part's carried values as the old yield gives them, plus the
/// counter.
fn yield_trip(
    at: &At,
    body: &[MlirOperation],
    map: &HashMap<usize, MlirValue>,
    next: MlirValue,
    part: &ComputePart,
) -> Result<(), LowerSkip> {
    // SAFETY: the terminator follows the last body op.
    let term = unsafe { mlirOperationGetNextInBlock(*body.last().expect("a body")) };
    if op_name(term) != "scf.yield" {
        return Err(LowerSkip::Emit(
            "the loop body does not end in scf.yield".into(),
        ));
    }
    // SAFETY: the yield has one operand per iteration argument.
    let mut values: Vec<MlirValue> = part
        .carried
        .iter()
        .map(|&k| remapped(unsafe { mlirOperationGetOperand(term, k as isize) }, map))
        .collect();
    values.push(next);
    at.add("scf.yield", &values, &[], &[])?;
    Ok(())
}

/// The `ttg.warp_specialize` op: 3.6 takes the captures as its operands,
/// 3.9 on its `ttg.warp_specialize.partitions` op.
fn ws_op(
    b: &Builder,
    for_op: MlirOperation,
    plan: &WsPlan,
    caps: &[MlirValue],
    default: MlirRegion,
    partitions: Vec<MlirRegion>,
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
        partitions,
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
    let workers = &plan.parts[1..];
    let list = |v: Vec<u32>| {
        let v: Vec<String> = v.iter().map(u32::to_string).collect();
        format!("array<i32: {}>", v.join(", "))
    };
    let mut warps: Vec<u32> = workers.iter().map(|p| p.warps).collect();
    warps.push(plan.producer_warps);
    let mut regs: Vec<u32> = workers.iter().map(|p| p.registers.unwrap_or(0)).collect();
    regs.push(plan.producer_registers);
    let attrs = [
        ("partitionNumWarps", list(warps)),
        ("requestedRegisters", list(regs)),
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
