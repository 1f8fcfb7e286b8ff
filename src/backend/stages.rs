//! Triton's own stage assignment at a `num_stages`, as far as a decision
//! can be compared with it: whether the attributes twill would write give
//! the code Triton's `assign_latencies` and `schedule_loops` give by
//! themselves (docs/triton-contract.md 1.1 and 1.7).
//!
//! At `num_stages` S, Triton gives a load that feeds an MMA through shared
//! memory (and no other load) a latency of S - 1, puts it in stage 0 and
//! everything else in the last stage S - 1, with the loads in the last
//! cluster, after the ops that read them (1.1's reference form). A
//! decision with exactly that shape, and no partitions, compiles to
//! Triton's own code.

use super::{mma_reading, users_of, LoopDecision, LOADS, MMA_V5};
use crate::frontend::LoopIr;

/// Whether `d` is Triton's own assignment of `ir` at `num_stages`: every
/// pipelined load (one whose first use is in a later stage) feeds an MMA
/// from shared memory, is read by no other load (no indirection, which
/// Triton divides the latency by), sits in stage 0 in a cluster after every
/// other op; every other op sits in stage `num_stages` - 1; no partitions
/// are written. Anything else is reported as twill's own schedule.
pub fn is_tritons_assignment(ir: &LoopIr, d: &LoopDecision, num_stages: u32) -> bool {
    if num_stages < 2 || d.max_stage + 1 != num_stages || d.partitions() > 0 {
        return false;
    }
    if d.ops.iter().any(|o| !o.partition.is_empty()) {
        return false;
    }
    let users = users_of(ir);
    let last = num_stages - 1;
    let pipelined = |i: usize| {
        LOADS.contains(&ir.ops[i].name.as_str())
            && users[i].iter().any(|&u| d.ops[u].stage > d.ops[i].stage)
    };
    let loads: Vec<usize> = (0..ir.ops.len()).filter(|&i| pipelined(i)).collect();
    if loads.is_empty() {
        return false;
    }
    let others_last = (0..ir.ops.len())
        .filter(|i| !loads.contains(i))
        .all(|i| d.ops[i].stage == last);
    let latest_other = (0..ir.ops.len())
        .filter(|i| !loads.contains(i))
        .map(|i| d.ops[i].cluster)
        .max()
        .unwrap_or(0);
    let loads_as_triton = loads.iter().all(|&l| {
        d.ops[l].stage == 0
            && d.ops[l].cluster > latest_other
            && mma_reading(ir, &users, l).is_some()
            && !users[l]
                .iter()
                .any(|&u| LOADS.contains(&ir.ops[u].name.as_str()))
    });
    others_last && loads_as_triton
}

/// Whether the back end puts load `op` of `ir` after its tcgen05 reader,
/// one stage deeper than its prefetch ([`super::decide`]'s ring rule on
/// sm100 when no partitions are written): a load that feeds a tcgen05 MMA
/// from shared memory. The stage bound counts that stage before the solve.
pub fn feeds_tcgen05(ir: &LoopIr, op: usize) -> bool {
    let users = users_of(ir);
    mma_reading(ir, &users, op).is_some_and(|m| MMA_V5.contains(&ir.ops[m].name.as_str()))
}
