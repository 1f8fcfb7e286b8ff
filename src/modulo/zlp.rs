//! Optimal modulo scheduling at a fixed initiation interval, as a
//! time-indexed 0-1 program in the structured style of Eichenberger and
//! Davidson ("Efficient formulation for optimal modulo schedulers", PLDI 1997).
//!
//! Variables: x[v][t] = 1 iff op v issues at cycle t of its iteration, for
//! t in [0, T - cycles(v)], with T a horizon that provably contains an optimal
//! schedule if any schedule exists at this I (see [`horizon`]).
//!
//! * assignment:  sum_t x[v][t] = 1
//! * modulo capacity: for each unit f and residue r in [0, I):
//!   sum over v, t, c with (t + c) mod I = r of rrt[v][c][f] * x[v][t] <= cap(f)
//! * structured dependences, for (u, v, d, delta) with lag = d - I*delta and
//!   every t: sum_{tau >= t} x[u][tau] + sum_{tau < t + lag} x[v][tau] <= 1
//!   (if u issues at or after t, v cannot issue before t + lag). These are
//!   the facet-defining form; no big-M appears anywhere.
//! * length: L >= sum_t (t + cycles(v)) x[v][t]
//!
//! Objective: minimize L, then the sum of issue cycles (lexicographically,
//! by weighting L with one more than the largest possible sum).

use good_lp::{
    constraint,
    solvers::highs::{highs, HighsPresolveType},
    variable, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel,
    Variable,
};
use tracing::debug;

use crate::problem::{Problem, Schedule};

/// Outcome of one ZLP at a fixed I.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZlpOutcome {
    /// A schedule; `optimal` when its length is proven minimal at this I.
    Feasible { schedule: Schedule, optimal: bool },
    /// Proven: no modulo schedule with this I exists.
    Infeasible,
    /// The solver gave up (time limit) without a schedule.
    Unknown(String),
}

/// A horizon T such that, if any modulo schedule with initiation interval
/// `ii` exists, one of minimum length has every op complete by T.
///
/// Proof sketch: keep the residues r_v = M(v) mod I of any valid schedule and
/// write M(v) = r_v + I*k_v. Resource use depends on residues only, and each
/// edge becomes a difference constraint k_v - k_u >= w_e with
/// w_e = ceil((d - I*delta - r_v + r_u) / I) <= ceil((d - I*delta + I - 1) / I) =: W_e.
/// The system is feasible (the schedule solves it), so it has no positive
/// cycle and its longest-path solution from a virtual source (k >= 0) is
/// valid, with k_v = the longest w-path into v <= the longest W-path into v
/// when the W-graph has no positive cycle (else: a longest path is simple,
/// so k_v <= K = the sum of the |V| - 1 largest positive W_e). Hence
/// M(v) <= I - 1 + I*K and every op completes by T = I - 1 + I*K + max
/// cycles. A minimum-length schedule is no longer than this one, and can be
/// shifted to start at 0.
///
/// Last-stage pins add difference constraints k_v - k_w >= 0 (pinned v,
/// every w): zero-weight edges into pinned ops, from every op. They do not
/// raise the bound: the least solution is the longest w-path over original
/// and pin edges, and any path leaving a pinned op v, v -> ... -> x, weighs
/// at most 0, since the pin edge x -> v closes it into a cycle and the
/// feasible system has no positive cycle. So a longest path gains nothing
/// after its first pin edge, and its part before that edge is a path of
/// original edges (weighing at most the longest W-path from the source).
/// When the W-graph has a positive cycle the sum bound holds as before
/// (zero-weight edges add nothing to it).
pub fn horizon(p: &Problem, ii: u32) -> u64 {
    let iv = ii as i64;
    let bound = |e: &crate::problem::ProblemEdge| -> i64 {
        let lag = e.delay as i64 - iv * e.distance as i64;
        (lag + iv - 1).div_euclid(iv) + i64::from((lag + iv - 1).rem_euclid(iv) != 0)
    };
    let n = p.ops.len();
    // Longest W-paths from a virtual source.
    // A self-dependence relates an op to itself: its k-difference is 0 and
    // its w = ceil((d - I*delta) / I) <= 0 in any feasible system (residues
    // cancel), so it never lengthens a path; W would overestimate it.
    let arcs: Vec<(usize, usize, i64)> = p
        .edges
        .iter()
        .filter(|e| e.from != e.to)
        .map(|e| (e.from, e.to, bound(e)))
        .collect();
    let kmax = if let Some(k) = longest_from(n, &arcs, None) {
        k.iter().copied().max().unwrap_or(0)
    } else {
        let mut w: Vec<i64> = p
            .edges
            .iter()
            .filter(|e| e.from != e.to)
            .map(bound)
            .filter(|&x| x > 0)
            .collect();
        w.sort_unstable_by(|a, b| b.cmp(a));
        w.iter().take(n.saturating_sub(1)).sum()
    };
    let max_cycles = p.ops.iter().map(|o| o.cycles as i64).max().unwrap_or(0);
    (iv - 1 + iv * kmax + max_cycles).max(1) as u64
}

/// Longest paths from `source`, or from a virtual source joined to every
/// node with weight 0 when `None` (unreachable nodes: 0); `None` when a
/// positive cycle makes them unbounded.
fn longest_from(n: usize, arcs: &[(usize, usize, i64)], source: Option<usize>) -> Option<Vec<i64>> {
    const UNREACHED: i64 = i64::MIN / 4;
    let mut dist = match source {
        None => vec![0i64; n],
        Some(s) => {
            let mut d = vec![UNREACHED; n];
            d[s] = 0;
            d
        }
    };
    for _ in 0..=n {
        let mut changed = false;
        for &(u, v, w) in arcs {
            if dist[u] > UNREACHED && dist[u] + w > dist[v] {
                dist[v] = dist[u] + w;
                changed = true;
            }
        }
        if !changed {
            return Some(dist.into_iter().map(|d| d.max(0)).collect());
        }
    }
    None
}

/// A short first horizon: the length of an as-soon-as-possible schedule that
/// ignores resources, plus two intervals of slack (the proven [`horizon`] if
/// the dependences alone admit no schedule at this I).
pub fn first_horizon(p: &Problem, ii: u32) -> u64 {
    let n = p.ops.len();
    let Some(s) = p.longest_paths(|e| Some(e.delay as i64 - ii as i64 * e.distance as i64)) else {
        return horizon(p, ii);
    };
    let end = (0..n)
        .map(|v| s[v] + p.ops[v].cycles as i64)
        .max()
        .unwrap_or(0);
    (end + 2 * ii as i64).max(1) as u64
}

/// Solves the modulo-scheduling ZLP at initiation interval `ii`.
///
/// A first solve uses a short horizon; a schedule found there is optimal
/// over every horizon (any schedule no longer than the short horizon fits in
/// it, and longer ones are worse). Only when the short horizon admits no
/// schedule are longer horizons tried, up to [`horizon`], where infeasibility
/// is a proof.
pub fn solve_at(p: &Problem, ii: u32, time_limit: f64) -> ZlpOutcome {
    assert!(ii >= 1);
    // A self-dependence is satisfied by every schedule or by none.
    for e in p.edges.iter().filter(|e| e.from == e.to) {
        if e.delay as i64 > ii as i64 * e.distance as i64 {
            return ZlpOutcome::Infeasible;
        }
    }
    let started = std::time::Instant::now();
    let full = horizon(p, ii);
    let mut t = first_horizon(p, ii).min(full);
    loop {
        let left = time_limit - started.elapsed().as_secs_f64();
        if left <= 0.0 {
            return ZlpOutcome::Unknown("time limit".into());
        }
        match solve_with_horizon(p, ii, t, left) {
            ZlpOutcome::Infeasible if t < full => t = (t * 2).min(full),
            other => return other,
        }
    }
}

/// The ZLP at `ii` with start times restricted to finish by `horizon`.
///
/// HiGHS's presolve occasionally ends in a bare solver error on tiny
/// infeasible models (found by the property tests); the model is then
/// solved again without presolve, which answers them.
///
/// HiGHS can also stop with a solution and a positive MIP gap (good_lp
/// reports `GapLimit`, not `Optimal`) although the gap is set to zero: the
/// objective weighs the length by n * horizon, so a gap within HiGHS's
/// tolerances is not a proof. The length is then proven minimal the direct
/// way: the same model with horizon L - 1 (every op ends by L - 1) is
/// solved, and its infeasibility is the proof (a shorter schedule found
/// there replaces the first and is checked the same way).
pub fn solve_with_horizon(p: &Problem, ii: u32, horizon: u64, time_limit: f64) -> ZlpOutcome {
    let started = std::time::Instant::now();
    let left = || time_limit - started.elapsed().as_secs_f64();
    let mut best = match solve_retrying(p, ii, horizon, time_limit) {
        ZlpOutcome::Feasible {
            schedule,
            optimal: false,
        } => schedule,
        other => return other,
    };
    while best.length > 0 && left() > 0.0 {
        let cap = best.length as u64 - 1;
        debug!(
            ii,
            horizon,
            length = best.length,
            "ZLP solution without an optimality status; trying length <= {cap}"
        );
        // A length cap is a horizon: every op ends by the schedule's length.
        match solve_retrying(p, ii, cap, left()) {
            ZlpOutcome::Infeasible => {
                return ZlpOutcome::Feasible {
                    schedule: best,
                    optimal: true,
                }
            }
            ZlpOutcome::Feasible { schedule, optimal } => {
                debug_assert!(schedule.length < best.length);
                if optimal {
                    return ZlpOutcome::Feasible { schedule, optimal };
                }
                best = schedule;
            }
            ZlpOutcome::Unknown(_) => break,
        }
    }
    ZlpOutcome::Feasible {
        schedule: best,
        optimal: false,
    }
}

/// [`solve_model`] with presolve, and again without it when HiGHS fails.
fn solve_retrying(p: &Problem, ii: u32, horizon: u64, time_limit: f64) -> ZlpOutcome {
    let started = std::time::Instant::now();
    match solve_model(p, ii, horizon, time_limit, true) {
        ZlpOutcome::Unknown(why) if why.contains("HiGHS error while solving") => {
            debug!(
                ii,
                horizon, why, "HiGHS failed with presolve; solving without"
            );
            let left = time_limit - started.elapsed().as_secs_f64();
            solve_model(p, ii, horizon, left, false)
        }
        other => other,
    }
}

fn solve_model(p: &Problem, ii: u32, horizon: u64, time_limit: f64, presolve: bool) -> ZlpOutcome {
    let n = p.ops.len();
    if n == 0 {
        return ZlpOutcome::Feasible {
            schedule: Schedule {
                ii,
                start: vec![],
                length: 0,
            },
            optimal: true,
        };
    }
    let mut vars = ProblemVariables::new();
    // x[v][t] for t in 0..=last[v]
    let mut x: Vec<Vec<Variable>> = Vec::with_capacity(n);
    for op in &p.ops {
        let last = horizon.saturating_sub(op.cycles as u64);
        x.push((0..=last).map(|_| vars.add(variable().binary())).collect());
    }
    let length = vars.add(variable().integer().min(0).max(horizon as f64));
    let starts: Vec<Expression> = x
        .iter()
        .map(|xs| {
            xs.iter()
                .enumerate()
                .map(|(t, &v)| (t as f64) * v)
                .sum::<Expression>()
        })
        .collect();
    let weight = (n as f64) * (horizon as f64) + 1.0;
    let objective: Expression = weight * length + starts.iter().cloned().sum::<Expression>();
    let mut model = highs(vars.minimise(objective));
    model.set_verbose(false);
    if !presolve {
        model = model.set_presolve(HighsPresolveType::Off);
    }
    let mut model = match model
        .set_time_limit(time_limit.max(0.01))
        .set_threads(1)
        .set_mip_rel_gap(0.0)
        .and_then(|m| m.set_mip_abs_gap(0.0))
    {
        Ok(m) => m,
        Err(e) => return ZlpOutcome::Unknown(e.to_string()),
    };

    for xs in &x {
        let one: Expression = xs.iter().copied().sum();
        model.add_constraint(constraint!(one == 1.0));
    }
    // Modulo capacity.
    for (f, &cap) in p.capacity.iter().enumerate() {
        let mut rows: Vec<Expression> = vec![Expression::from(0.0); ii as usize];
        let mut used = vec![false; ii as usize];
        for (v, op) in p.ops.iter().enumerate() {
            if op.rrt.iter().all(|row| row[f] == 0) {
                continue;
            }
            for (t, &var) in x[v].iter().enumerate() {
                let mut per_residue = vec![0u32; ii as usize];
                for (c, row) in op.rrt.iter().enumerate() {
                    per_residue[(t + c) % ii as usize] += row[f];
                }
                for (r, &k) in per_residue.iter().enumerate() {
                    if k > 0 {
                        rows[r] += (k as f64) * var;
                        used[r] = true;
                    }
                }
            }
        }
        for (r, row) in rows.into_iter().enumerate() {
            if used[r] {
                model.add_constraint(constraint!(row <= cap as f64));
            }
        }
    }
    // Structured dependences.
    for e in p.edges.iter().filter(|e| e.from != e.to) {
        let lag = e.delay as i64 - ii as i64 * e.distance as i64;
        let (xu, xv) = (&x[e.from], &x[e.to]);
        let first = 0.max(1 - lag);
        for t in first..xu.len() as i64 {
            let end_v = (t + lag).min(xv.len() as i64); // tau < t + lag
            if end_v <= 0 {
                continue;
            }
            let lhs: Expression = xu[t as usize..].iter().copied().sum::<Expression>()
                + xv[..end_v as usize].iter().copied().sum::<Expression>();
            model.add_constraint(constraint!(lhs <= 1.0));
        }
    }
    // Last-stage pins: stage(w) <= stage(v) for pinned v and every other w,
    // with stage(v) = sum over t of floor(t / I) x[v][t].
    if p.ops.iter().any(|o| o.last_stage) {
        let stage: Vec<Expression> = x
            .iter()
            .map(|xs| {
                xs.iter()
                    .enumerate()
                    .map(|(t, &var)| ((t as u64 / ii as u64) as f64) * var)
                    .sum()
            })
            .collect();
        for v in (0..n).filter(|&v| p.ops[v].last_stage) {
            for w in (0..n).filter(|&w| w != v) {
                model.add_constraint(constraint!(stage[w].clone() <= stage[v].clone()));
            }
        }
    }
    // Length.
    for (v, op) in p.ops.iter().enumerate() {
        let end = starts[v].clone() + op.cycles as f64;
        model.add_constraint(constraint!(length >= end));
    }

    match model.solve() {
        Ok(sol) => {
            let optimal = matches!(sol.status(), SolutionStatus::Optimal);
            let start: Vec<u32> = x
                .iter()
                .map(|xs| xs.iter().position(|&v| sol.value(v) > 0.5).unwrap_or(0) as u32)
                .collect();
            ZlpOutcome::Feasible {
                schedule: Schedule::tight(p, ii, start),
                optimal,
            }
        }
        Err(ResolutionError::Infeasible) => ZlpOutcome::Infeasible,
        Err(e) => ZlpOutcome::Unknown(e.to_string()),
    }
}
