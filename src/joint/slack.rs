//! A preference among optimal joint schedules: slack for the latencies of
//! asynchronous ops.
//!
//! The model gives every op a fixed latency. An *asynchronous* op (every
//! unit it occupies runs without its warp: a wgmma, a tcgen05.mma, a TMA
//! copy) really completes when its unit gets to it, later than modeled when
//! other work queues before it on the unit. What a late result costs depends on the
//! schedule: for two asynchronous ops u and w joined by a path of
//! dependences whose inner ops are synchronous (a softmax between QK^T and
//! PV), the schedule leaves
//!
//! ```text
//! slack(u, w) = M(w) - M(u) - max over such paths of sum(delay - I * distance)
//! ```
//!
//! cycles: u may complete that much later without delaying w (the ops
//! between are its group's own, issued when their operands arrive). The
//! *latency slack* of a schedule is the least slack(u, w) over all such
//! pairs u != w; streaming ops are not endpoints (their latency is hidden by
//! prefetching, section 5.3), TMA copies that are not streaming are (a TMA
//! reduction of the backward, a load the graph does not stream). The search returns, among the schedules of
//! optimal (I, L) with the fewest groups and crossings, one of largest
//! latency slack: on the Hopper FA forward, that puts QK^T of an iteration
//! before the group's PV of the previous one (FA3's intra-warpgroup order),
//! where the turn order of equal (I, L) leaves the softmax almost no slack.
//!
//! The search's constraint for slack S is M(w) >= M(u) + lag(u, w) + S for
//! every pair, with the lags of [`pairs`]; the reported value is measured by
//! the checker's own computation ([`crate::checker::latency_slack`]).

use crate::problem::Problem;

/// Two asynchronous ops joined through synchronous ones, and the longest
/// such path's sum of (delay - I * distance) at the given I.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlackPair {
    pub from: usize,
    pub to: usize,
    pub lag: i64,
}

/// Whether `v` is an endpoint of slack pairs: asynchronous and not
/// streaming.
pub fn endpoint(p: &Problem, v: usize) -> bool {
    p.ops[v].asynchronous && !p.ops[v].streaming
}

/// Every pair (u, w), u != w, of endpoints joined by a path whose inner ops
/// are not endpoints, with the longest path's lag at `ii` (Bellman-Ford from
/// each endpoint). A source whose paths are unbounded (a positive cycle
/// through synchronous ops: `ii` is below the recurrence bound) gives none.
pub fn pairs(p: &Problem, ii: u32) -> Vec<SlackPair> {
    let n = p.ops.len();
    let mut out = Vec::new();
    for u in (0..n).filter(|&u| endpoint(p, u)) {
        let mut best: Vec<Option<i64>> = vec![None; n];
        best[u] = Some(0);
        let mut settled = false;
        for _ in 0..=n {
            let mut changed = false;
            for e in &p.edges {
                // Paths leave u, then continue only through inner ops.
                if e.from != u && endpoint(p, e.from) {
                    continue;
                }
                let Some(at) = best[e.from] else { continue };
                // A path back into u ends there (not a pair).
                if e.to == u {
                    continue;
                }
                let w = at + e.delay as i64 - ii as i64 * e.distance as i64;
                if best[e.to].is_none_or(|b| w > b) {
                    best[e.to] = Some(w);
                    changed = true;
                }
            }
            if !changed {
                settled = true;
                break;
            }
        }
        if !settled {
            continue;
        }
        for w in (0..n).filter(|&w| w != u && endpoint(p, w)) {
            if let Some(lag) = best[w] {
                out.push(SlackPair {
                    from: u,
                    to: w,
                    lag,
                });
            }
        }
    }
    out
}

/// The latency slack of issue cycles `start` over `pairs`; `None` without
/// pairs.
pub fn of(pairs: &[SlackPair], start: &[u32]) -> Option<i64> {
    pairs
        .iter()
        .map(|q| start[q.to] as i64 - start[q.from] as i64 - q.lag)
        .min()
}

/// An upper bound on the latency slack of any schedule of length at most
/// `length`: every w issues by L - cycles(w), every u at 0 or later.
pub fn upper_bound(p: &Problem, pairs: &[SlackPair], length: u32) -> Option<i64> {
    pairs
        .iter()
        .map(|q| length as i64 - p.ops[q.to].cycles as i64 - q.lag)
        .min()
}
