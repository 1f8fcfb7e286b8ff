//! A compute partition in two stages (docs/ws-lowering.md 3.4, step 7):
//! its accumulating wgmma whose A operand the trip computes in registers
//! (FA's PV) is issued one trip later, right after the partition's first
//! wgmma of the next trip (QK^T), so that the partition's own work between
//! them (the softmax) runs while that wgmma is on the tensor core, as
//! FA3's intra-warpgroup overlap does. MLIR-free.
//!
//! Trip t of the steady loop runs stage 0 of iteration t and stage 1 of
//! iteration t - 1. What stage 1 reads from stage 0 of its iteration is
//! carried one trip; what stage 0 reads from stage 1 of the previous
//! iteration (the accumulator, through its iteration argument) is made
//! earlier in the same trip. A prologue runs stage 0 of the first
//! iteration and an epilogue stage 1 of the last, each under
//! `scf.if lb < ub`, so every trip count, 0 included, runs each op once
//! per iteration.

use std::collections::BTreeSet;

use super::waits::{self, InFlight, WaitPoint};
use crate::backend::{SMEM_VIEWS, WGMMA};
use crate::frontend::{LoopIr, ValueSrc};

/// The two stages of a compute partition and their waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staging {
    /// Stage-0 ops, program order.
    pub early: Vec<usize>,
    /// Stage-1 ops (the deferred wgmmas and the views only they read),
    /// program order.
    pub late: Vec<usize>,
    /// The steady trip: `early[..after]`, then `late`, then the rest.
    pub after: usize,
    /// Values (op, result) stage 1 reads from stage 0 of its iteration:
    /// carried one trip.
    pub carries: Vec<(usize, usize)>,
    /// Iteration arguments the deferred wgmmas yield: (argument, wgmma).
    pub late_args: Vec<(usize, usize)>,
    /// The ops of each stage that read a ring slot (views excepted): a
    /// stage's slots are released once these ran and, wgmmas, retired.
    pub early_readers: Vec<usize>,
    pub late_readers: Vec<usize>,
    /// Waits of the prologue (positions in `early`), the steady trip
    /// (positions in [`Staging::kernel`]) and the epilogue (in `late`).
    pub prologue: Vec<WaitPoint>,
    pub steady: Vec<WaitPoint>,
    pub epilogue: Vec<WaitPoint>,
}

impl Staging {
    /// The steady trip's ops in issue order.
    pub fn kernel(&self) -> Vec<usize> {
        let mut k = self.early[..self.after].to_vec();
        k.extend(&self.late);
        k.extend(&self.early[self.after..]);
        k
    }

    /// The wgmma a late iteration argument carries.
    pub fn late_arg(&self, k: usize) -> Option<usize> {
        self.late_args.iter().find(|a| a.0 == k).map(|a| a.1)
    }
}

/// The staging of a part's `ops` (program order), whose ring slots are
/// the results of `allocs`; None when no wgmma can be deferred (the part
/// then runs in one stage).
pub fn plan(ir: &LoopIr, ops: &[usize], allocs: &BTreeSet<usize>) -> Option<Staging> {
    let dots: Vec<usize> = ops
        .iter()
        .copied()
        .filter(|&i| ir.ops[i].name == WGMMA)
        .collect();
    let first = *dots.first()?;
    let users = readers(ir);
    let mut late_args = Vec::new();
    for &d in &dots[1..] {
        if let Some(k) = deferrable(ir, &users, d) {
            late_args.push((k, d));
        }
    }
    if late_args.is_empty() {
        return None;
    }
    let mut late: BTreeSet<usize> = late_args.iter().map(|a| a.1).collect();
    // Views whose every reader is late go with them (their slot is the
    // previous trip's).
    loop {
        let more: Vec<usize> = ops
            .iter()
            .copied()
            .filter(|i| !late.contains(i) && SMEM_VIEWS.contains(&ir.ops[*i].name.as_str()))
            .filter(|&i| !users[i].is_empty() && users[i].iter().all(|u| late.contains(u)))
            .collect();
        if more.is_empty() {
            break;
        }
        late.extend(more);
    }
    let early: Vec<usize> = ops.iter().copied().filter(|i| !late.contains(i)).collect();
    let after = early.iter().position(|&i| i == first)? + 1;
    let carries = carries(ir, &late, allocs)?;
    // Stage 0 reads a late argument only after the deferred wgmma is
    // issued in the trip.
    for (p, &i) in early.iter().enumerate() {
        let o = &ir.ops[i];
        let reads_late = (o.operands.iter().chain(&o.region_uses))
            .any(|v| matches!(v.src, ValueSrc::IterArg(k) if late_args.iter().any(|a| a.0 == k)));
        if reads_late && p < after {
            return None;
        }
    }
    // The ring slots are waited for in stage 0 (the previous trip's slot
    // is then complete for stage 1).
    if !waits::slot_readers(ir, &early, allocs).ok()?.1 {
        return None;
    }
    let late: Vec<usize> = late.into_iter().collect();
    let dot = |src: ValueSrc| match src {
        ValueSrc::Op { op, .. } if ir.ops[op].name == WGMMA => Some(InFlight::Dot(op)),
        _ => None,
    };
    let steady_resolve = |src: ValueSrc| match src {
        ValueSrc::IterArg(k) => late_args
            .iter()
            .find(|a| a.0 == k)
            .map(|a| InFlight::Dot(a.1)),
        other => dot(other),
    };
    let early_readers = waits::slot_reading(ir, &early, allocs).0;
    let late_readers = waits::slot_reading(ir, &late, allocs).0;
    let mut s = Staging {
        early,
        late,
        after,
        carries,
        late_args: late_args.clone(),
        early_readers,
        late_readers,
        prologue: Vec::new(),
        steady: Vec::new(),
        epilogue: Vec::new(),
    };
    s.prologue = waits::straight(ir, &s.early, &dot);
    s.steady = waits::straight(ir, &s.kernel(), &steady_resolve);
    s.epilogue = waits::straight(ir, &s.late, &dot);
    Some(s)
}

/// The wait of `points` (in order) after which the slots `readers` read
/// can be released: every reader issued before it, and every wgmma among
/// them retired by it or an earlier wait. None: after the sequence's end.
pub fn release_after(points: &[WaitPoint], seq: &[usize], readers: &[usize]) -> Option<usize> {
    let retired_by = |r: usize| (points.iter()).position(|p| p.retire.contains(&InFlight::Dot(r)));
    let mut at = 0;
    for &r in readers {
        let w = match retired_by(r) {
            Some(w) => w,
            None => {
                let p = seq.iter().position(|&x| x == r)?;
                points.iter().position(|w| w.before > p)?
            }
        };
        at = at.max(w);
    }
    Some(at)
}

/// Readers of each body op's results among the body ops.
fn readers(ir: &LoopIr) -> Vec<Vec<usize>> {
    let mut users = vec![Vec::new(); ir.ops.len()];
    for (j, op) in ir.ops.iter().enumerate() {
        for v in op.operands.iter().chain(&op.region_uses) {
            if let ValueSrc::Op { op: i, .. } = v.src {
                if !users[i].contains(&j) {
                    users[i].push(j);
                }
            }
        }
    }
    users
}

/// The iteration argument wgmma `d` accumulates into, when `d` can be
/// deferred: its A operand is computed in the trip, its result is read by
/// nothing but the yield (once), and it reads no iteration argument or
/// induction variable.
fn deferrable(ir: &LoopIr, users: &[Vec<usize>], d: usize) -> Option<usize> {
    if !waits::computes_a(ir, d) || !users[d].is_empty() {
        return None;
    }
    let mine = |y: &&crate::frontend::IrValue| matches!(y.src, ValueSrc::Op { op, .. } if op == d);
    let carried: Vec<usize> = (ir.yields.iter().enumerate())
        .filter(|(_, y)| mine(y))
        .map(|(k, _)| k)
        .collect();
    let o = &ir.ops[d];
    let direct = o
        .operands
        .iter()
        .chain(&o.region_uses)
        .all(|v| !matches!(v.src, ValueSrc::IterArg(_) | ValueSrc::InductionVar));
    match carried.as_slice() {
        [k] if direct => Some(*k),
        _ => None,
    }
}

/// The values late ops read from early ops (allocs excepted: stage 1
/// takes the previous trip's slot); None when a late op reads an
/// iteration argument or the induction variable.
fn carries(
    ir: &LoopIr,
    late: &BTreeSet<usize>,
    allocs: &BTreeSet<usize>,
) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    for &i in late {
        let o = &ir.ops[i];
        for v in o.operands.iter().chain(&o.region_uses) {
            match v.src {
                ValueSrc::Op { op, result } if !late.contains(&op) && !allocs.contains(&op) => {
                    // A carried view of a slot would outlive its slot's trip.
                    if v.ty.starts_with("!ttg.memdesc") {
                        return None;
                    }
                    if !out.contains(&(op, result)) {
                        out.push((op, result));
                    }
                }
                ValueSrc::IterArg(_) | ValueSrc::InductionVar => return None,
                _ => {}
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ws::partition::tests::{op, v};

    const T: &str = "tensor<128x128xf16, #blocked>";
    const S: &str = "!ttg.memdesc<128x128xf16, #shared, #smem>";
    const ACC: &str = "tensor<128x128xf32, #mma>";
    const ROW: &str = "tensor<128xf32, #ttg.slice<{dim = 1, parent = #mma}>>";
    const P: &str = "tensor<128x128xf16, #mma>";
    const PA: &str = "tensor<128x128xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>";

    /// An FA forward body: K and V loads into shared memory, QK^T, a
    /// reduction, the accumulator's rescale, P, and PV accumulating into
    /// iteration argument 0 (`pv_read`: PV's result is also read by an op
    /// of the body).
    fn fa(pv_read: bool) -> LoopIr {
        let r = |op: usize| ValueSrc::Op { op, result: 0 };
        let mut ops = vec![
            op(
                "tt.descriptor_load",
                vec![v(ValueSrc::Outside(0), "desc")],
                T,
            ),
            op("ttg.local_alloc", vec![v(r(0), T)], S),
            op(
                "tt.descriptor_load",
                vec![v(ValueSrc::Outside(1), "desc")],
                T,
            ),
            op("ttg.local_alloc", vec![v(r(2), T)], S),
            op("ttg.memdesc_trans", vec![v(r(1), S)], S),
            op(
                WGMMA,
                vec![
                    v(ValueSrc::Outside(2), S),
                    v(r(4), S),
                    v(ValueSrc::Outside(3), ACC),
                ],
                ACC,
            ),
            op("tt.reduce", vec![v(r(5), ACC)], ROW),
            op(
                "arith.mulf",
                vec![v(ValueSrc::IterArg(0), ACC), v(r(6), ROW)],
                ACC,
            ),
            op("arith.truncf", vec![v(r(5), ACC)], P),
            op("ttg.convert_layout", vec![v(r(8), P)], PA),
            op(WGMMA, vec![v(r(9), PA), v(r(3), S), v(r(7), ACC)], ACC),
        ];
        if pv_read {
            ops.push(op("arith.addf", vec![v(r(10), ACC), v(r(10), ACC)], ACC));
        }
        LoopIr {
            name: "fa".into(),
            location: "loc(\"loop\")".into(),
            warp_specialize: true,
            num_warps: 4,
            ops,
            yields: vec![v(r(10), ACC)],
            triton_max_stage: None,
        }
    }

    #[test]
    fn pv_is_issued_a_trip_later_after_the_next_qk() {
        let ir = fa(false);
        let allocs = BTreeSet::from([1, 3]);
        let st = plan(&ir, &[4, 5, 6, 7, 8, 9, 10], &allocs).expect("staged");
        assert_eq!(
            (st.early.clone(), st.late.clone()),
            (vec![4, 5, 6, 7, 8, 9], vec![10])
        );
        assert_eq!(st.kernel(), vec![4, 5, 10, 6, 7, 8, 9]);
        // P and the rescaled accumulator are carried to the next trip; PV's
        // result is iteration argument 0, read by the next rescale.
        assert_eq!(st.carries, vec![(9, 0), (7, 0)]);
        assert_eq!(st.late_args, vec![(0, 10)]);
        assert_eq!(
            (st.early_readers.clone(), st.late_readers.clone()),
            (vec![5], vec![10])
        );
        // The loop: QK^T retired before the reduction with PV in flight,
        // PV before the rescale; nothing crosses the back edge.
        let w = |before, d: usize, through: Vec<usize>, pendings| WaitPoint {
            before,
            retire: vec![InFlight::Dot(d)],
            through,
            pendings,
        };
        assert_eq!(
            st.steady,
            vec![w(3, 5, vec![5, 10], 1), w(4, 10, vec![10], 0)]
        );
        assert_eq!(st.prologue, vec![w(2, 5, vec![5], 0)]);
        assert_eq!(st.epilogue, vec![w(1, 10, vec![10], 0)]);
        // K's slot is released after the first wait, V's after the second.
        assert_eq!(
            release_after(&st.steady, &st.kernel(), &st.early_readers),
            Some(0)
        );
        assert_eq!(
            release_after(&st.steady, &st.kernel(), &st.late_readers),
            Some(1)
        );
    }

    #[test]
    fn a_wgmma_whose_result_the_trip_reads_is_not_deferred() {
        let ir = fa(true);
        let allocs = BTreeSet::from([1, 3]);
        assert_eq!(plan(&ir, &[4, 5, 6, 7, 8, 9, 10, 11], &allocs), None);
    }

    #[test]
    fn a_single_wgmma_is_not_deferred() {
        let mut ir = fa(false);
        ir.ops.truncate(6);
        ir.yields = vec![v(ValueSrc::Op { op: 5, result: 0 }, ACC)];
        assert_eq!(plan(&ir, &[4, 5], &BTreeSet::from([1])), None);
    }
}
