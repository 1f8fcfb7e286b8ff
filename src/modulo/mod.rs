//! Optimal modulo scheduling: the minimum initiation interval I, a modulo
//! schedule M and its minimum length L at that I.
//!
//! I starts at MII = max(ResMII, RecMII) and goes up one at a time; at each I
//! the time-indexed ZLP of [`zlp`] either proves that no schedule exists (the
//! I joins the certificate) or returns one of minimum length. Every schedule
//! is validated by the independent [`crate::checker`] before it is returned.

pub mod heuristic;
pub mod mii;
pub mod zlp;

use std::time::Instant;

use serde::{Deserialize, Serialize};
use tracing::{debug, info};

use crate::checker;
use crate::problem::{Problem, Schedule};
use zlp::ZlpOutcome;

/// Why an initiation interval is known to be infeasible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum Infeasibility {
    /// Below ResMII: some unit is oversubscribed whatever the schedule.
    ResMii {
        unit: String,
        demand: u64,
        capacity: u32,
    },
    /// Below ResMII: the ops' own traffic on a bandwidth unit exceeds what
    /// it moves in I cycles (raw machine cycles: `demand` > `budget`, the
    /// budget at the largest refuted I).
    Bandwidth {
        unit: String,
        demand: u64,
        budget: u64,
    },
    /// Below RecMII: a dependence cycle needs more than I cycles per iteration.
    RecMii,
    /// The ZLP at this I is infeasible (solver proof).
    Zlp,
    /// The modulo-scheduling query of the SMT encoding is unsatisfiable at
    /// this I (the modulo rules plus last-stage pins; solver proof).
    ModuloSmt,
    /// Last-stage pins put `first` and `second` in one stage: `second`
    /// issues at least `path` cycles after `first` and both issue within one
    /// window of I cycles; sharing a single-instance unit adds the rows of
    /// `second` that must not wrap onto `first`.
    LastStageWindow {
        first: String,
        second: String,
        path: u32,
    },
    /// Last-stage pins put `ops` ops (those a pinned op reaches along paths
    /// of non-negative lag) into one window of I cycles, and the modulo
    /// problem restricted to them has no schedule inside it (solver proof).
    LastStageWindowSmt { ops: u32 },
}

impl std::fmt::Display for Infeasibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Infeasibility::ResMii {
                unit,
                demand,
                capacity,
            } => write!(
                f,
                "ResMII: {unit} is busy {demand} cycles per iteration with capacity {capacity}"
            ),
            Infeasibility::Bandwidth {
                unit,
                demand,
                budget,
            } => write!(
                f,
                "ResMII: bandwidth {unit} carries {demand} raw cycles of traffic per iteration, over its budget of {budget}"
            ),
            Infeasibility::RecMii => write!(
                f,
                "RecMII: a dependence cycle has total delay above I times its iteration distance"
            ),
            Infeasibility::Zlp => write!(f, "the modulo-scheduling ZLP is infeasible"),
            Infeasibility::ModuloSmt => write!(
                f,
                "no modulo schedule satisfies the last-stage pins (SMT proof)"
            ),
            Infeasibility::LastStageWindow { first, second, path } => write!(
                f,
                "last-stage window: `{first}` and `{second}` share the last stage and `{second}` issues {path} cycles after `{first}`"
            ),
            Infeasibility::LastStageWindowSmt { ops } => write!(
                f,
                "last-stage window: the {ops} ops that last-stage pins put into one window of I cycles have no modulo schedule there (SMT unsat)"
            ),
        }
    }
}

/// One entry of the optimality certificate: every I in [from, to] is
/// infeasible for the stated reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refuted {
    pub from: u32,
    pub to: u32,
    #[serde(flatten)]
    pub why: Infeasibility,
}

impl std::fmt::Display for Refuted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.from == self.to {
            write!(f, "I = {}: {}", self.from, self.why)
        } else {
            write!(f, "I in [{}, {}]: {}", self.from, self.to, self.why)
        }
    }
}

/// Result of the modulo-scheduling search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuloResult {
    pub schedule: Schedule,
    pub res_mii: u32,
    pub rec_mii: u32,
    /// Every I below the answer, with the reason it is infeasible; when
    /// `ii_proven`, this covers 1..I-1 completely.
    pub certificate: Vec<Refuted>,
    /// I is proven minimal.
    pub ii_proven: bool,
    /// L is proven minimal at this I.
    pub length_proven: bool,
    pub seconds: f64,
}

/// Options of the search.
#[derive(Debug, Clone, Copy)]
pub struct SearchOptions {
    /// Total time budget in seconds.
    pub timeout: f64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { timeout: 60.0 }
    }
}

/// Why the search produced no schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchError {
    /// A distance-0 dependence cycle with positive delay.
    NoRecurrenceBound,
    /// The time budget ran out before any schedule was found.
    Timeout { last_ii: u32 },
    /// The independent checker rejected a solver schedule (a bug, reported
    /// instead of emitting a wrong schedule).
    CheckerRejected(Vec<checker::Violation>),
    /// No schedule up to the search cap (cannot happen for loaded graphs).
    Exhausted { cap: u32 },
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchError::NoRecurrenceBound => {
                write!(f, "a dependence cycle of distance 0 has positive delay")
            }
            SearchError::Timeout { last_ii } => {
                write!(f, "timed out at I = {last_ii} before finding a schedule")
            }
            SearchError::CheckerRejected(v) => {
                write!(
                    f,
                    "internal error: the checker rejected the solver's schedule:"
                )?;
                for x in v {
                    write!(f, "\n  {x}")?;
                }
                Ok(())
            }
            SearchError::Exhausted { cap } => write!(f, "no modulo schedule with I <= {cap}"),
        }
    }
}

impl std::error::Error for SearchError {}

/// Finds the minimum I and a minimum-length modulo schedule at it.
pub fn schedule(p: &Problem, opts: SearchOptions) -> Result<ModuloResult, SearchError> {
    let started = Instant::now();
    let res = mii::res_mii(p);
    let rec = mii::rec_mii(p).ok_or(SearchError::NoRecurrenceBound)?;
    let mut certificate = lower_bound_certificate(p, res, rec);
    let cap = search_cap(p);
    let mut ii_proven = true;
    let mut ii = res.max(rec);
    info!(
        res_mii = res,
        rec_mii = rec,
        ops = p.ops.len(),
        edges = p.edges.len(),
        "modulo search"
    );
    while ii <= cap {
        let left = opts.timeout - started.elapsed().as_secs_f64();
        if left <= 0.0 {
            return Err(SearchError::Timeout { last_ii: ii });
        }
        let t0 = Instant::now();
        let outcome = zlp::solve_at(p, ii, left);
        debug!(
            ii,
            horizon = zlp::horizon(p, ii),
            seconds = t0.elapsed().as_secs_f64(),
            ?outcome,
            "zlp"
        );
        match outcome {
            ZlpOutcome::Infeasible => {
                certificate.push(Refuted {
                    from: ii,
                    to: ii,
                    why: Infeasibility::Zlp,
                });
            }
            ZlpOutcome::Unknown(why) => {
                debug!(ii, why, "zlp gave up; I no longer proven minimal");
                ii_proven = false;
            }
            ZlpOutcome::Feasible { schedule, optimal } => {
                let violations = checker::check(p, &schedule);
                if !violations.is_empty() {
                    return Err(SearchError::CheckerRejected(violations));
                }
                return Ok(ModuloResult {
                    schedule,
                    res_mii: res,
                    rec_mii: rec,
                    certificate,
                    ii_proven,
                    length_proven: optimal,
                    seconds: started.elapsed().as_secs_f64(),
                });
            }
        }
        ii += 1;
    }
    Err(SearchError::Exhausted { cap })
}

/// The certificate entries below MII: [1, ResMII-1] refuted by the
/// bottleneck unit, [ResMII, RecMII-1] by a recurrence.
pub fn lower_bound_certificate(p: &Problem, res: u32, rec: u32) -> Vec<Refuted> {
    let mut certificate = Vec::new();
    if res > 1 {
        // The unit that defines ResMII refutes every smaller I.
        let f = (0..p.capacity.len())
            .max_by_key(|&f| (p.unit_bound(f), std::cmp::Reverse(f)))
            .unwrap_or(0);
        let slot_bound = u32::try_from(p.unit_bound(f)).unwrap_or(u32::MAX).max(1);
        let bandwidth = (0..p.units.len())
            .filter(|&b| p.bandwidth[b])
            .max_by_key(|&b| (p.bandwidth_ii(b, p.fixed_traffic(b)), std::cmp::Reverse(b)));
        let why = match bandwidth {
            Some(b) if p.bandwidth_mii() > slot_bound => Infeasibility::Bandwidth {
                unit: p.units[b].clone(),
                demand: p.fixed_traffic(b),
                budget: p.bandwidth_budget(b, res - 1),
            },
            _ => Infeasibility::ResMii {
                unit: p.units[f].clone(),
                demand: p.occupancy(f),
                capacity: p.capacity[f],
            },
        };
        certificate.push(Refuted {
            from: 1,
            to: res - 1,
            why,
        });
    }
    if rec > res {
        certificate.push(Refuted {
            from: res,
            to: rec - 1,
            why: Infeasibility::RecMii,
        });
    }
    certificate
}

/// A lower bound on I from last-stage pins, with its witnesses: every op
/// reachable from a pinned op along distance-0 edges is in the last stage
/// too, so for two such ops a -> b with longest distance-0 path P,
/// P <= M(b) - M(a) <= I - 1. If both hold a single-instance unit, with a
/// using it first at row ra and b using it at the contiguous rows
/// [rb0, rb1] with rb0 <= ra, b's rows land at offsets
/// [M(b) - M(a) + rb0 - ra, M(b) - M(a) + rb1 - ra] from a's row, a range
/// that starts inside (0, I) and must not reach I: I >= P + rb1 - ra + 1.
/// Returns (bound, a, b, P) for the largest bound above 1.
pub fn last_stage_bound(p: &Problem) -> Option<(u32, usize, usize, u32)> {
    let n = p.ops.len();
    if !p.ops.iter().any(|o| o.last_stage) {
        return None;
    }
    // Longest distance-0 paths (the distance-0 subgraph is acyclic).
    const NONE: i64 = i64::MIN / 4;
    let mut path = vec![vec![NONE; n]; n];
    for (a, row) in path.iter_mut().enumerate() {
        row[a] = 0;
    }
    for _ in 0..n {
        let mut changed = false;
        for e in p.edges.iter().filter(|e| e.distance == 0) {
            for row in path.iter_mut() {
                if row[e.from] > NONE {
                    let via = row[e.from] + i64::from(e.delay);
                    if via > row[e.to] {
                        row[e.to] = via;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let in_last: Vec<bool> = (0..n)
        .map(|v| (0..n).any(|q| p.ops[q].last_stage && path[q][v] > NONE))
        .collect();
    let mut best: Option<(u32, usize, usize, u32)> = None;
    for a in (0..n).filter(|&a| in_last[a]) {
        for b in (0..n).filter(|&b| b != a && in_last[b]) {
            let pab = path[a][b];
            if pab <= NONE || pab < 0 {
                continue;
            }
            let mut bound = pab + 1;
            for f in (0..p.capacity.len()).filter(|&f| p.capacity[f] == 1) {
                let rows_a: Vec<usize> = (0..p.ops[a].rrt.len())
                    .filter(|&r| p.ops[a].rrt[r][f] > 0)
                    .collect();
                let rows_b: Vec<usize> = (0..p.ops[b].rrt.len())
                    .filter(|&r| p.ops[b].rrt[r][f] > 0)
                    .collect();
                let (Some(&ra), Some(&rb0), Some(&rb1)) =
                    (rows_a.first(), rows_b.first(), rows_b.last())
                else {
                    continue;
                };
                let contiguous = rows_b.len() == rb1 - rb0 + 1;
                if contiguous && rb0 <= ra && pab + rb0 as i64 - ra as i64 >= 1 {
                    bound = bound.max(pab + rb1 as i64 - ra as i64 + 1);
                }
            }
            let bound = u32::try_from(bound).unwrap_or(u32::MAX);
            if best.is_none_or(|(x, ..)| bound > x) {
                best = Some((bound, a, b, pab as u32));
            }
        }
    }
    best.filter(|&(x, ..)| x > 1)
}

/// An I at which a schedule certainly exists, bounding every search.
pub fn search_cap(p: &Problem) -> u32 {
    // The distance-0 subgraph is acyclic (the loaders reject its cycles), so
    // ops can run one after another in topological order, each starting after
    // its predecessor ends and its distance-0 delays elapse: such a sequential
    // iteration ends by L_seq <= sum cycles + sum delays. With I >= L_seq +
    // max delay no two copies overlap and every loop-carried edge is met, so
    // the search below ends by this cap.
    // A bandwidth unit's budget grows with I: by the I at which the ops'
    // own traffic and every possible crossing fit, it binds no schedule.
    let delays = p.edges.iter().map(|e| e.delay as u64).sum::<u64>();
    let cap = p.ops.iter().map(|o| o.cycles as u64).sum::<u64>() + 2 * delays + 1;
    let crossings: u64 = p.crossing_charges().iter().map(|c| c.2).sum();
    let bandwidth = (0..p.units.len())
        .filter(|&f| p.bandwidth[f])
        .map(|f| {
            let own = p.fixed_traffic(f);
            p.bandwidth_ii(
                f,
                own + if p.crossing_unit == Some(f) {
                    crossings
                } else {
                    0
                },
            )
        })
        .max()
        .unwrap_or(1);
    u32::try_from(cap.max(u64::from(bandwidth))).unwrap_or(u32::MAX)
}
