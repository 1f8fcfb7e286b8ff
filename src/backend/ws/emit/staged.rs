//! A two-stage compute part ([`crate::backend::ws::stages`]): a prologue
//! under `scf.if lb < ub` runs stage 0 of the first iteration, the steady
//! loop (from `lb + step`) runs stage 0 of iteration t and stage 1 of
//! iteration t - 1, and an epilogue under the same condition runs stage 1
//! of the last iteration.

use std::collections::HashMap;

use mlir_sys::*;

use super::{
    arg, clone_into, new_loop, remapped, thread_barrier, trip, wait, At, Shared, WaitPoint,
};
use crate::backend::ws::stages::{release_after, Staging};
use crate::backend::ws::waits::InFlight;
use crate::backend::ws::{ComputePart, LowerSkip, WsPlan};
use crate::frontend::mlir::type_text;

type Map = HashMap<usize, MlirValue>;

/// The old loop's pieces the three sections read.
struct Old<'a> {
    body: &'a [MlirOperation],
    block: MlirBlock,
    term: MlirOperation,
}

impl Old<'_> {
    fn iter_arg(&self, k: usize) -> MlirValue {
        arg(self.block, 1 + k as isize)
    }
    fn yielded(&self, k: usize) -> MlirValue {
        // SAFETY: the yield has one operand per iteration argument.
        unsafe { mlirOperationGetOperand(self.term, k as isize) }
    }
    fn result(&self, op: usize, r: usize) -> MlirValue {
        // SAFETY: `op` is a body op with result `r`.
        unsafe { mlirOperationGetResult(self.body[op], r as isize) }
    }
    fn key(&self, op: usize, r: usize) -> usize {
        self.result(op, r).ptr as usize
    }
}

/// Emits the part's prologue, steady loop and epilogue at `at`; returns
/// the values of the part's carried iteration arguments after the loop.
#[allow(clippy::too_many_arguments)]
pub(super) fn staged_loop(
    at: &At,
    for_op: MlirOperation,
    body: &[MlirOperation],
    plan: &WsPlan,
    part: &ComputePart,
    st: &Staging,
    sh: &Shared,
    map: &Map,
) -> Result<Vec<MlirValue>, LowerSkip> {
    // SAFETY: the body's block ends in its `scf.yield`.
    let old_block = unsafe { mlirOperationGetBlock(body[0]) };
    let old = Old {
        body,
        block: old_block,
        term: unsafe { mlirBlockGetTerminator(old_block) },
    };
    // SAFETY: `for_op` is live; operands 0..3 are its bounds, 3 + k the
    // initial value of iteration argument k.
    let operand = |k: usize| remapped(unsafe { mlirOperationGetOperand(for_op, k as isize) }, map);
    let (lb, ub, step) = (operand(0), operand(1), operand(2));
    let init = |k: usize| operand(3 + k);
    let early: Vec<usize> = (part.carried.iter().copied())
        .filter(|&k| st.late_arg(k).is_none())
        .collect();
    let late: Vec<usize> = (part.carried.iter().copied())
        .filter(|&k| st.late_arg(k).is_some())
        .collect();
    let i1 = at.b.ty("i1")?;
    let slt = ("predicate", "2 : i64".to_string());
    let cond = at.val("arith.cmpi", &[lb, ub], i1, &[slt])?;
    let pro = prologue(at, &old, plan, part, st, sh, map, (lb, cond), &early, &init)?;
    // The steady loop: trips 1.. of the counter.
    let lb1 = at.arith("addi", lb, step)?;
    let mut inits = pro;
    inits.push(at.i32(1)?);
    let (lp, blk) = new_loop(at.b, [lb1, ub, step], &inits)?;
    at.add_op(lp);
    steady(
        &At {
            b: at.b,
            block: blk,
        },
        &old,
        plan,
        part,
        st,
        sh,
        map,
        &early,
    )?;
    // SAFETY: the loop's results: the early arguments, the carries, the
    // counter.
    let res = |p: usize| unsafe { mlirOperationGetResult(lp, p as isize) };
    let n_early = early.len();
    let carried: Vec<MlirValue> = (0..st.carries.len()).map(|c| res(n_early + c)).collect();
    let it_end = res(n_early + st.carries.len());
    let epi = epilogue(
        at, &old, plan, st, sh, map, cond, &carried, it_end, &late, &init,
    )?;
    Ok(part
        .carried
        .iter()
        .map(|k| match early.iter().position(|e| e == k) {
            Some(p) => res(p),
            None => epi[late.iter().position(|l| l == k).expect("late")],
        })
        .collect())
}

/// `scf.if cond` with then/else blocks built by the closures, each
/// returning the values it yields; the if's results.
fn guarded(
    at: &At,
    cond: MlirValue,
    types: &[MlirType],
    then: impl FnOnce(&At) -> Result<Vec<MlirValue>, LowerSkip>,
    other: impl FnOnce(&At) -> Result<Vec<MlirValue>, LowerSkip>,
) -> Result<Vec<MlirValue>, LowerSkip> {
    let mut regions = Vec::new();
    for build in [
        Box::new(then) as Box<dyn FnOnce(&At) -> Result<Vec<MlirValue>, LowerSkip>>,
        Box::new(other),
    ] {
        // SAFETY: the block moves into the region, the region into the op.
        let (region, blk) = unsafe {
            let blk = mlirBlockCreate(0, std::ptr::null(), std::ptr::null());
            let region = mlirRegionCreate();
            mlirRegionAppendOwnedBlock(region, blk);
            (region, blk)
        };
        let inner = At {
            b: at.b,
            block: blk,
        };
        let out = build(&inner)?;
        inner.add("scf.yield", &out, &[], &[])?;
        regions.push(region);
    }
    let op = at.b.op("scf.if", &[cond], types, &[], regions)?;
    at.add_op(op);
    // SAFETY: the op has one result per type.
    Ok((0..types.len())
        .map(|r| unsafe { mlirOperationGetResult(op, r as isize) })
        .collect())
}

fn types_of(vals: &[MlirValue]) -> Vec<MlirType> {
    // SAFETY: the values are live.
    vals.iter()
        .map(|&v| unsafe { mlirValueGetType(v) })
        .collect()
}

/// Stage 0 of the first iteration: the early arguments and the carries it
/// hands to the loop (with no trip: the initial values and poison).
#[allow(clippy::too_many_arguments)]
fn prologue(
    at: &At,
    old: &Old,
    plan: &WsPlan,
    part: &ComputePart,
    st: &Staging,
    sh: &Shared,
    map: &Map,
    (lb, cond): (MlirValue, MlirValue),
    early: &[usize],
    init: &dyn Fn(usize) -> MlirValue,
) -> Result<Vec<MlirValue>, LowerSkip> {
    let inits: Vec<MlirValue> = early.iter().map(|&k| init(k)).collect();
    let carry_types: Vec<MlirType> = (st.carries.iter())
        .map(|&(op, r)| unsafe { mlirValueGetType(old.result(op, r)) })
        .collect();
    let mut types = types_of(&inits);
    types.extend(&carry_types);
    let then = |a: &At| {
        let mut m = map.clone();
        m.insert(arg(old.block, 0).ptr as usize, lb);
        for &k in &part.carried {
            m.insert(old.iter_arg(k).ptr as usize, init(k));
        }
        let it = a.i32(0)?;
        let s = wait_full(a, plan, sh, &m, it, false)?;
        bind_slots(a, old, plan, sh, &mut m, s)?;
        let mut issued = HashMap::new();
        let rel = release_after(&st.prologue, &st.early, &st.early_readers);
        let mut after = |w: usize, a: &At, m: &Map| match Some(w) == rel {
            true => arrive_empty(a, plan, part, sh, m, s, false),
            false => Ok(()),
        };
        run(
            a,
            old,
            &st.early,
            &st.prologue,
            st,
            &mut m,
            &mut issued,
            &mut after,
        )?;
        if rel.is_none() {
            arrive_empty(a, plan, part, sh, &m, s, false)?;
        }
        Ok(handed_on(old, st, early, &m))
    };
    let other = |a: &At| {
        let mut out = inits.clone();
        for &ty in &carry_types {
            out.push(a.val("ub.poison", &[], ty, &[])?);
        }
        Ok(out)
    };
    guarded(at, cond, &types, then, other)
}

/// One steady trip: stage 0 of iteration t with stage 1 of iteration
/// t - 1 issued after stage 0's first wgmma. Each stage's slots are
/// released as soon as their readers retired: the first stage's of this
/// trip, the second's of the previous one.
#[allow(clippy::too_many_arguments)]
fn steady(
    at: &At,
    old: &Old,
    plan: &WsPlan,
    part: &ComputePart,
    st: &Staging,
    sh: &Shared,
    map: &Map,
    early: &[usize],
) -> Result<(), LowerSkip> {
    let blk = at.block;
    let n_early = early.len();
    let it = arg(blk, (1 + n_early + st.carries.len()) as isize);
    let mut m = map.clone();
    m.insert(arg(old.block, 0).ptr as usize, arg(blk, 0));
    for (p, &k) in early.iter().enumerate() {
        m.insert(old.iter_arg(k).ptr as usize, arg(blk, 1 + p as isize));
    }
    let s = wait_full(at, plan, sh, &m, it, false)?;
    bind_slots(at, old, plan, sh, &mut m, s)?;
    let one = at.i32(1)?;
    let prev = at.arith("subi", it, one)?;
    let (s_prev, _) = trip(at, prev, plan.depth)?;
    // Stage 1's bindings: the carried values and the previous slot.
    let mut late_binds: Vec<(usize, MlirValue)> = (st.carries.iter().enumerate())
        .map(|(c, &(op, r))| (old.key(op, r), arg(blk, (1 + n_early + c) as isize)))
        .collect();
    late_binds.extend(slot_views_at(at, old, plan, sh, &m, s_prev)?);
    let kernel = st.kernel();
    let rel_early = release_after(&st.steady, &kernel, &st.early_readers);
    let rel_late = release_after(&st.steady, &kernel, &st.late_readers);
    let mut after = |w: usize, a: &At, m: &Map| {
        if Some(w) == rel_early {
            arrive_empty(a, plan, part, sh, m, s, false)?;
        }
        if Some(w) == rel_late {
            arrive_empty(a, plan, part, sh, m, s_prev, true)?;
        }
        Ok(())
    };
    let mut issued = HashMap::new();
    let mut waits = 0;
    for (p, &i) in kernel.iter().enumerate() {
        waits += waits_before(
            at,
            old,
            st,
            &st.steady,
            (waits, p),
            &mut m,
            &issued,
            &mut after,
        )?;
        if st.late.contains(&i) {
            if st.late.first() == Some(&i) {
                wait_full(at, plan, sh, &m, prev, true)?;
            }
            let saved: Vec<(usize, Option<MlirValue>)> = (late_binds.iter())
                .map(|&(k, v)| (k, m.insert(k, v)))
                .collect();
            issue(at, old, i, st, &mut m, &mut issued)?;
            for (k, v) in saved {
                match v {
                    Some(v) => m.insert(k, v),
                    None => m.remove(&k),
                };
            }
        } else {
            issue(at, old, i, st, &mut m, &mut issued)?;
        }
    }
    waits_before(
        at,
        old,
        st,
        &st.steady,
        (waits, kernel.len()),
        &mut m,
        &issued,
        &mut after,
    )?;
    if rel_early.is_none() {
        arrive_empty(at, plan, part, sh, &m, s, false)?;
    }
    if rel_late.is_none() {
        arrive_empty(at, plan, part, sh, &m, s_prev, true)?;
    }
    let mut next = handed_on(old, st, early, &m);
    next.push(at.arith("addi", it, one)?);
    at.add("scf.yield", &next, &[], &[])?;
    Ok(())
}

/// The waits of `points` placed before position `p` (the first being
/// wait number `n`), each followed by `after(its number)`; how many.
#[allow(clippy::too_many_arguments)]
fn waits_before(
    at: &At,
    old: &Old,
    st: &Staging,
    points: &[WaitPoint],
    (n, p): (usize, usize),
    m: &mut Map,
    issued: &HashMap<usize, MlirValue>,
    after: &mut dyn FnMut(usize, &At, &Map) -> Result<(), LowerSkip>,
) -> Result<usize, LowerSkip> {
    let mut k = 0;
    for w in points.iter().filter(|w| w.before == p) {
        staged_wait(at, old, w, st, m, issued)?;
        after(n + k, at, m)?;
        k += 1;
    }
    Ok(k)
}

/// One thread arrives on the `empty` barrier of slot `s` of the ring
/// groups of one stage (`late`), after a barrier of the partition's warps
/// when it has several warp groups.
fn arrive_empty(
    at: &At,
    plan: &WsPlan,
    part: &ComputePart,
    sh: &Shared,
    m: &Map,
    s: MlirValue,
    late: bool,
) -> Result<(), LowerSkip> {
    if part.warps > 4 {
        thread_barrier(at, plan)?;
    }
    let t = at.i1(true)?;
    let count = ("count", "1 : i32".to_string());
    for (g, group) in plan.groups.iter().enumerate() {
        if group.late == late {
            let empty = at.index(remapped(sh.empty[g], m), s, sh.barrier)?;
            at.add(
                "ttng.arrive_barrier",
                &[empty, t],
                &[],
                std::slice::from_ref(&count),
            )?;
        }
    }
    Ok(())
}

/// What a trip's stage 0 hands to the next trip: the early iteration
/// arguments' next values, then the values stage 1 will read.
fn handed_on(old: &Old, st: &Staging, early: &[usize], m: &Map) -> Vec<MlirValue> {
    let args = early.iter().map(|&k| remapped(old.yielded(k), m));
    let carries = (st.carries.iter()).map(|&(op, r)| remapped(old.result(op, r), m));
    args.chain(carries).collect()
}

/// Stage 1 of the last iteration (no trip: the initial values).
#[allow(clippy::too_many_arguments)]
fn epilogue(
    at: &At,
    old: &Old,
    plan: &WsPlan,
    st: &Staging,
    sh: &Shared,
    map: &Map,
    cond: MlirValue,
    carried: &[MlirValue],
    it_end: MlirValue,
    late: &[usize],
    init: &dyn Fn(usize) -> MlirValue,
) -> Result<Vec<MlirValue>, LowerSkip> {
    let inits: Vec<MlirValue> = late.iter().map(|&k| init(k)).collect();
    let types = types_of(&inits);
    let then = |a: &At| {
        let mut m = map.clone();
        for (c, &(op, r)) in st.carries.iter().enumerate() {
            m.insert(old.key(op, r), carried[c]);
        }
        let one = a.i32(1)?;
        let prev = a.arith("subi", it_end, one)?;
        let s = wait_full(a, plan, sh, &m, prev, true)?;
        bind_slots(a, old, plan, sh, &mut m, s)?;
        let mut issued = HashMap::new();
        run(
            a,
            old,
            &st.late,
            &st.epilogue,
            st,
            &mut m,
            &mut issued,
            &mut |_, _, _| Ok(()),
        )?;
        Ok(late.iter().map(|&k| remapped(old.yielded(k), &m)).collect())
    };
    guarded(at, cond, &types, then, |_| Ok(inits.clone()))
}

/// Clones `seq` with its waits, each followed by `after(its number)`.
#[allow(clippy::too_many_arguments)]
fn run(
    at: &At,
    old: &Old,
    seq: &[usize],
    points: &[WaitPoint],
    st: &Staging,
    m: &mut Map,
    issued: &mut HashMap<usize, MlirValue>,
    after: &mut dyn FnMut(usize, &At, &Map) -> Result<(), LowerSkip>,
) -> Result<(), LowerSkip> {
    let mut n = 0;
    for (p, &i) in seq.iter().enumerate() {
        n += waits_before(at, old, st, points, (n, p), m, issued, after)?;
        issue(at, old, i, st, m, issued)?;
    }
    waits_before(at, old, st, points, (n, seq.len()), m, issued, after)?;
    Ok(())
}

/// Clones body op `i`; a wgmma becomes asynchronous and its register A
/// operand, as issued, is kept for the wait that retires it.
fn issue(
    at: &At,
    old: &Old,
    i: usize,
    st: &Staging,
    m: &mut Map,
    issued: &mut HashMap<usize, MlirValue>,
) -> Result<(), LowerSkip> {
    let c = clone_into(at, old.body[i], m)?;
    if crate::frontend::mlir::op_name(c) != crate::backend::WGMMA {
        return Ok(());
    }
    let async_attr = at.b.attr("true")?;
    // SAFETY: `c` is the cloned wgmma; operand 0 is its A operand.
    unsafe {
        mlirOperationSetInherentAttributeByName(
            c,
            crate::backend::mlir::string_ref("isAsync"),
            async_attr,
        );
        issued.insert(i, mlirOperationGetOperand(c, 0));
    }
    if let Some(&(k, _)) = st.late_args.iter().find(|a| a.1 == i) {
        m.insert(old.iter_arg(k).ptr as usize, old_mapped(old, i, m));
    }
    Ok(())
}

fn old_mapped(old: &Old, d: usize, m: &Map) -> MlirValue {
    remapped(old.result(d, 0), m)
}

/// A `warp_group_dot_wait` passing this trip's in-flight wgmma results
/// through, with the register A operands (as issued) of those it retires.
fn staged_wait(
    at: &At,
    old: &Old,
    w: &WaitPoint,
    st: &Staging,
    m: &mut Map,
    issued: &HashMap<usize, MlirValue>,
) -> Result<(), LowerSkip> {
    let mut keys: Vec<Option<usize>> = Vec::new();
    let mut vals: Vec<MlirValue> = Vec::new();
    for &d in &w.through {
        keys.push(Some(d));
        vals.push(old_mapped(old, d, m));
    }
    for f in &w.retire {
        let InFlight::Dot(d) = *f else {
            return Err(LowerSkip::Emit(
                "a staged part carries no wgmma in flight".into(),
            ));
        };
        if let Some(&a) = issued.get(&d) {
            if !type_text(a).starts_with("!ttg.memdesc") && !vals.iter().any(|v| v.ptr == a.ptr) {
                keys.push(None);
                vals.push(a);
            }
        }
    }
    let tys = types_of(&vals);
    let pend = ("pendings", format!("{} : i32", w.pendings));
    let op = at.add("ttng.warp_group_dot_wait", &vals, &tys, &[pend])?;
    for (j, key) in keys.iter().enumerate() {
        let Some(d) = *key else { continue };
        // SAFETY: one result per operand.
        let r = unsafe { mlirOperationGetResult(op, j as isize) };
        m.insert(old.key(d, 0), r);
        if let Some(&(k, _)) = st.late_args.iter().find(|a| a.1 == d) {
            m.insert(old.iter_arg(k).ptr as usize, r);
        }
    }
    Ok(())
}

/// Waits on `full` for the copies of trip counter `it` into the ring
/// groups of one stage (`late`); returns the slot.
fn wait_full(
    at: &At,
    plan: &WsPlan,
    sh: &Shared,
    m: &Map,
    it: MlirValue,
    late: bool,
) -> Result<MlirValue, LowerSkip> {
    let (s, ph) = trip(at, it, plan.depth)?;
    let t = at.i1(true)?;
    for (g, group) in plan.groups.iter().enumerate() {
        if group.late == late {
            let full = at.index(remapped(sh.full[g], m), s, sh.barrier)?;
            wait(at, full, ph, t)?;
        }
    }
    Ok(s)
}

/// Binds every load's alloc to its ring's slot `s`.
fn bind_slots(
    at: &At,
    old: &Old,
    plan: &WsPlan,
    sh: &Shared,
    m: &mut Map,
    s: MlirValue,
) -> Result<(), LowerSkip> {
    for (k, v) in slot_views_at(at, old, plan, sh, m, s)? {
        m.insert(k, v);
    }
    Ok(())
}

/// (alloc result key, view of slot `s`) of every load.
fn slot_views_at(
    at: &At,
    old: &Old,
    plan: &WsPlan,
    sh: &Shared,
    m: &Map,
    s: MlirValue,
) -> Result<Vec<(usize, MlirValue)>, LowerSkip> {
    let mut out = Vec::new();
    for (k, l) in plan.loads.iter().enumerate() {
        let slot = at.index(remapped(sh.rings[k], m), s, sh.slots[k])?;
        out.push((old.key(l.alloc, 0), slot));
    }
    Ok(out)
}
