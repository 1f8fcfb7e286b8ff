//! Lower bounds on the initiation interval: ResMII and RecMII.

use crate::problem::Problem;

/// Resource-constrained lower bound: for every unit, the total occupancy of
/// one iteration divided by the unit's capacity, rounded up; for every
/// bandwidth unit, the I whose budget holds the ops' own traffic
/// ([`Problem::bandwidth_mii`]); at least 1.
pub fn res_mii(p: &Problem) -> u32 {
    let mii = (0..p.capacity.len())
        .map(|f| p.unit_bound(f))
        .max()
        .unwrap_or(1);
    (mii.max(1).min(u64::from(u32::MAX)) as u32).max(p.bandwidth_mii())
}

/// Whether the dependence graph with weights d - I*delta has a cycle of
/// positive weight (then no schedule with this I satisfies the dependences).
pub fn has_positive_cycle(p: &Problem, ii: u32) -> bool {
    let n = p.ops.len();
    const NONE: i64 = i64::MIN / 4;
    let mut dist = vec![vec![NONE; n]; n];
    for e in &p.edges {
        let w = e.delay as i64 - ii as i64 * e.distance as i64;
        if w > dist[e.from][e.to] {
            dist[e.from][e.to] = w;
        }
    }
    for k in 0..n {
        for i in 0..n {
            if dist[i][k] == NONE {
                continue;
            }
            for j in 0..n {
                if dist[k][j] == NONE {
                    continue;
                }
                let w = dist[i][k] + dist[k][j];
                if w > dist[i][j] {
                    dist[i][j] = w;
                }
            }
            if dist[i][i] > 0 {
                return true;
            }
        }
    }
    (0..n).any(|i| dist[i][i] > 0)
}

/// Recurrence-constrained lower bound: the smallest I >= 1 without a
/// positive cycle. `None` when no I works (a distance-0 cycle with positive
/// delay, which the loaders reject).
pub fn rec_mii(p: &Problem) -> Option<u32> {
    let total: u64 = p.edges.iter().map(|e| e.delay as u64).sum();
    let mut hi = u32::try_from(total.max(1)).unwrap_or(u32::MAX);
    if has_positive_cycle(p, hi) {
        return None;
    }
    let mut lo = 1u32;
    if !has_positive_cycle(p, lo) {
        return Some(1);
    }
    // Invariant: lo has a positive cycle, hi has none.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if has_positive_cycle(p, mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}
