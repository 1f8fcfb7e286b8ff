//! A greedy modulo list scheduler: a quick, valid but not necessarily
//! optimal modulo schedule at a given I, used only as an upper bound on the
//! minimum length Len(M) (the joint search asks one SAT query over a length
//! range that provably contains Algorithm 1's range at that I, instead of
//! first solving the modulo problem exactly).
//!
//! Every op gets a lower bound on its issue cycle, initially the longest
//! path to it over all edges weighted d - I*delta (what the dependences
//! alone allow). Ops are placed in the order of these bounds (ties: a
//! topological order of the distance-0 edges), each at the earliest cycle
//! that satisfies every dependence with the ops already placed, in both
//! directions, and finds its reservation-table rows free in the modular
//! reservation table; the first I candidate cycles cover every residue. When
//! an op's window is empty because a successor was placed too early, that
//! successor's bound is raised, the bounds are closed under the dependences
//! again and the placement restarts (a bounded number of times). The
//! scheduler gives up (None) rather than search; the caller validates what
//! it returns with [`crate::checker`].

use crate::problem::{Problem, Schedule};

/// A modulo schedule at `ii`, or None when the greedy placement fails.
pub fn schedule(p: &Problem, ii: u32) -> Option<Schedule> {
    let n = p.ops.len();
    if ii == 0 {
        return None;
    }
    let iv = ii as i64;
    let lag = |e: &crate::problem::ProblemEdge| e.delay as i64 - iv * e.distance as i64;
    if p.edges.iter().any(|e| e.from == e.to && lag(e) > 0) {
        return None;
    }
    let topo = topological_order(p)?;
    let mut rank = vec![0usize; n];
    for (k, &v) in topo.iter().enumerate() {
        rank[v] = k;
    }
    let mut lower = close(p, iv, vec![0i64; n])?;
    'attempt: for _ in 0..4 * n + 4 {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&v| (lower[v], rank[v]));
        let mut start: Vec<Option<i64>> = vec![None; n];
        let mut table = vec![vec![0u32; p.capacity.len()]; ii as usize];
        for &v in &order {
            let mut earliest = lower[v];
            // The placed successor that bounds v from above, with its edge.
            let mut latest: Option<(i64, usize, i64)> = None;
            for e in p.edges.iter().filter(|e| e.from != e.to) {
                if e.to == v {
                    if let Some(mu) = start[e.from] {
                        earliest = earliest.max(mu + lag(e));
                    }
                } else if e.from == v {
                    if let Some(mw) = start[e.to] {
                        let bound = mw - lag(e);
                        if latest.is_none_or(|(b, _, _)| bound < b) {
                            latest = Some((bound, e.to, lag(e)));
                        }
                    }
                }
            }
            let op = &p.ops[v];
            let free = |t: i64| {
                op.rrt.iter().enumerate().all(|(c, row)| {
                    let r = (t + c as i64).rem_euclid(iv) as usize;
                    row.iter()
                        .enumerate()
                        .all(|(f, &k)| table[r][f] + k <= p.capacity[f])
                })
            };
            // The first I cycles from `earliest` cover every residue.
            let slot = (earliest..earliest + iv).find(|&t| free(t))?;
            if let Some((bound, w, l)) = latest {
                if bound < slot {
                    // w went too early: it must follow v's first free cycle.
                    let mut raised = lower.clone();
                    raised[w] = raised[w].max(slot + l);
                    lower = close(p, iv, raised)?;
                    continue 'attempt;
                }
            }
            for (c, row) in op.rrt.iter().enumerate() {
                let r = (slot + c as i64).rem_euclid(iv) as usize;
                for (f, &k) in row.iter().enumerate() {
                    table[r][f] += k;
                }
            }
            start[v] = Some(slot);
        }
        let start: Vec<u32> = start
            .into_iter()
            .map(|s| s.and_then(|t| u32::try_from(t).ok()))
            .collect::<Option<_>>()?;
        // Last-stage pins are not steered for: give up when one is broken.
        let last = start.iter().map(|&s| s / ii).max().unwrap_or(0);
        if p.ops
            .iter()
            .zip(&start)
            .any(|(o, &s)| o.last_stage && s / ii != last)
        {
            return None;
        }
        return Some(Schedule::tight(p, ii, start));
    }
    None
}

/// The least bounds >= `lower` closed under every edge (M(v) >= M(u) + d -
/// I*delta); None when a positive cycle makes them unbounded.
fn close(p: &Problem, iv: i64, lower: Vec<i64>) -> Option<Vec<i64>> {
    p.longest_paths_from(lower, |e| {
        (e.from != e.to).then(|| e.delay as i64 - iv * e.distance as i64)
    })
}

/// Kahn's order of the distance-0 edges (ties by op index); None on a cycle.
fn topological_order(p: &Problem) -> Option<Vec<usize>> {
    let n = p.ops.len();
    let mut indegree = vec![0usize; n];
    for e in p.edges.iter().filter(|e| e.distance == 0 && e.from != e.to) {
        indegree[e.to] += 1;
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for e in p
            .edges
            .iter()
            .filter(|e| e.distance == 0 && e.from == v && e.to != v)
        {
            indegree[e.to] -= 1;
            if indegree[e.to] == 0 {
                ready.insert(e.to);
            }
        }
    }
    (order.len() == n).then_some(order)
}
