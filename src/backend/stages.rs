//! Triton's own stage assignment at a `num_stages`, as far as a decision
//! can be compared with it: whether the attributes twill would write give
//! the code Triton's `assign_latencies` and `schedule_loops` give by
//! themselves (docs/triton-contract.md 1.1 and 1.7).
//!
//! At `num_stages` S, Triton gives a load that feeds an MMA through shared
//! memory (and no other load) a latency of S - 1, puts it and its address
//! arithmetic in stage 0 and everything else in the last stage S - 1, with
//! the loads in the last cluster, after the ops that read them (1.1's
//! reference form, `test/Inputs/triton36/gemm_sm90.triton_schedule.mlir`).
//! A decision with exactly that shape, and no partitions, compiles to
//! Triton's own code.

use super::{mma_reading, users_of, LoopDecision, LOADS, MMA_V5};
use crate::frontend::LoopIr;

/// Whether `d` is Triton's own assignment of `ir` at `num_stages`: every
/// pipelined load (one whose first use is in a later stage) feeds an MMA
/// from shared memory and is read by no other load (no indirection, which
/// Triton divides the latency by); the loads and the ops that only feed
/// them (their address arithmetic, which Triton's `scheduleDependencies`
/// puts with them) sit in stage 0, in clusters after every other op; every
/// other op sits in stage `num_stages` - 1; no partitions are written; no
/// tcgen05 MMA result is read in the loop ([`mma_read_in_loop`]). Anything
/// else is reported as twill's own schedule.
pub fn is_tritons_assignment(ir: &LoopIr, d: &LoopDecision, num_stages: u32) -> bool {
    if num_stages < 2 || d.max_stage + 1 != num_stages || d.partitions() > 0 {
        return false;
    }
    if d.ops.iter().any(|o| !o.partition.is_empty()) || mma_read_in_loop(ir) {
        return false;
    }
    let users = users_of(ir);
    let is_load = |i: usize| LOADS.contains(&ir.ops[i].name.as_str());
    let loads: Vec<usize> = (0..ir.ops.len())
        .filter(|&i| is_load(i) && users[i].iter().any(|&u| d.ops[u].stage > d.ops[i].stage))
        .collect();
    let loads_as_triton = !loads.is_empty()
        && loads.iter().all(|&l| {
            mma_reading(ir, &users, l).is_some() && !users[l].iter().any(|&u| is_load(u))
        });
    if !loads_as_triton {
        return false;
    }
    let side = load_side(&users, &loads);
    let latest_other = (0..ir.ops.len())
        .filter(|&i| !side[i])
        .map(|i| d.ops[i].cluster)
        .max();
    (0..ir.ops.len()).all(|i| {
        if side[i] {
            d.ops[i].stage == 0 && latest_other.is_none_or(|c| d.ops[i].cluster > c)
        } else {
            d.ops[i].stage == num_stages - 1
        }
    })
}

/// Whether a tcgen05 MMA's result is read in the loop (a `ttng.tmem_load`
/// in the body, as in attention): Triton then gives the MMA a latency of its
/// own (`tt.latency` 1, or 2 in a warp-specialized loop) and its readers
/// later stages, which this comparison does not model.
fn mma_read_in_loop(ir: &LoopIr) -> bool {
    let has = |names: &[&str]| ir.ops.iter().any(|o| names.contains(&o.name.as_str()));
    has(MMA_V5) && has(&["ttng.tmem_load"])
}

/// The loads and the body ops whose every use is on their side (what
/// feeds only them).
fn load_side(users: &[Vec<usize>], loads: &[usize]) -> Vec<bool> {
    let mut side: Vec<bool> = (0..users.len()).map(|i| loads.contains(&i)).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..users.len() {
            if !side[i] && !users[i].is_empty() && users[i].iter().all(|&u| side[u]) {
                side[i] = true;
                changed = true;
            }
        }
    }
    side
}

/// Whether the back end puts load `op` of `ir` after its tcgen05 reader,
/// one stage deeper than its prefetch ([`super::decide`]'s ring rule on
/// sm100 when no partitions are written): a load that feeds a tcgen05 MMA
/// from shared memory. The stage bound counts that stage before the solve.
pub fn feeds_tcgen05(ir: &LoopIr, op: usize) -> bool {
    let users = users_of(ir);
    mma_reading(ir, &users, op).is_some_and(|m| MMA_V5.contains(&ir.ops[m].name.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::OpDecision;

    /// The GEMM's decision from (stage, cluster) per body op, in body
    /// order: muli, load A, alloc A, load B, alloc B, trans, wgmma.
    fn decision(at: [(u32, u32); 7]) -> LoopDecision {
        let ops: Vec<OpDecision> = at
            .iter()
            .map(|&(stage, cluster)| OpDecision {
                stage,
                cluster,
                partition: Vec::new(),
                self_latency: false,
            })
            .collect();
        LoopDecision {
            max_stage: ops.iter().map(|o| o.stage).max().unwrap(),
            ops,
            partition_stages: Vec::new(),
            anchor_stores: false,
            moved_last: Vec::new(),
        }
    }

    /// Triton 3.6's own schedule of this loop at num_stages=3
    /// (docs/triton-contract.md 1.1).
    const TRITON_3: [(u32, u32); 7] = [(0, 2), (0, 2), (2, 0), (0, 2), (2, 0), (2, 0), (2, 0)];

    #[test]
    fn tritons_reference_schedule_is_recognized_at_its_num_stages_only() {
        let ir = crate::frontend::lower::tests::gemm();
        let d = decision(TRITON_3);
        assert!(is_tritons_assignment(&ir, &d, 3));
        assert!(!is_tritons_assignment(&ir, &d, 2));
        assert!(!is_tritons_assignment(&ir, &d, 4));
    }

    #[test]
    fn another_placement_is_twills_own() {
        let ir = crate::frontend::lower::tests::gemm();
        // The loads first in the body (twill's `loads=first`): the use in a
        // later cluster gets one more buffer than Triton's.
        let first = [(0, 0), (0, 0), (2, 1), (0, 0), (2, 1), (2, 1), (2, 1)];
        assert!(!is_tritons_assignment(&ir, &decision(first), 3));
        // An alloc a stage early.
        let mut early = TRITON_3;
        early[2] = (1, 0);
        assert!(!is_tritons_assignment(&ir, &decision(early), 3));
        // Partitions written (sm90 anchors).
        let mut anchored = decision(TRITON_3);
        anchored.anchor_stores = true;
        anchored.ops[1].partition = vec![0];
        assert!(!is_tritons_assignment(&ir, &anchored, 3));
        // Nothing pipelined: one stage is not compared here.
        assert!(!is_tritons_assignment(&ir, &decision([(0, 0); 7]), 1));
    }
}
