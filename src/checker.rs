//! Independent checker for modulo schedules.
//!
//! # Invariant
//!
//! A schedule (I, M, L) of a [`Problem`] is valid iff
//!
//! 1. **shape**: I >= 1 and M gives one issue cycle to every op;
//! 2. **completion**: every op finishes within the schedule,
//!    M(v) + cycles(v) <= L;
//! 3. **dependence**: for every edge (u, v, d, delta),
//!    M(v) + I*delta >= M(u) + d — the instance of v from iteration
//!    i + delta issues at least d cycles after u of iteration i;
//! 4. **modulo capacity**: in the steady state, where the ops of
//!    ceil(L/I) iterations overlap, every unit f at every residue
//!    r in [0, I) is occupied by at most cap(f) instances:
//!    sum over v, c with (M(v) + c) mod I = r of RRT[v][c][f] <= cap(f).
//!
//! A *joint* schedule (I, M, L, A) of the warp-specialization problem (paper
//! section 4) additionally assigns every op v a warp group A(v) and is valid
//! iff, with [`WarpConfig`] giving the number G of compute groups and the
//! per-thread register limit R:
//!
//! 5. **groups**: A(v) = 0 iff v has variable latency (group 0 is the
//!    designated variable-latency warp); otherwise 1 <= A(v) <= G; the ops
//!    of every `same_group` set share one group (**colocation**);
//! 6. **cross-warp spill**: an edge (u, v, d, delta) with A(u) != A(v) needs
//!    M(v) + I*delta >= M(u) + d + spill_cost(u) (rule 3 with the spill added);
//!    when cross-warp communication is prohibited, an edge between two
//!    fixed-latency ops never crosses groups;
//! 7. **liveness**: the result of v, instance k, is live during
//!    [M(v) + kI, E(v) + kI) where E(v) is the latest issue of a user,
//!    max over data edges (v, u, _, delta) of M(u) + delta*I; ordering-only
//!    edges use no value (never live without users). At every steady-state
//!    cycle, for every group w,
//!    sum over live instances of values defined in w of regs <= R
//!    (**register limit**), and for every memory kind m,
//!    sum over live instances of footprint(m) <= capacity(m) (**memory**);
//! 8. **concurrency**: an op v is *blocking* if an incoming edge is marked
//!    blocking or comes from another group (cross-warp data is handed over
//!    through shared memory behind a barrier wait). When a blocking v issues,
//!    no other op o of the same group that needs its warp is executing: for
//!    every instance, the issue cycle of v is not in
//!    [M(o) + kI, M(o) + kI + cycles(o)). An op needs its warp unless every
//!    unit its reservation table occupies is asynchronous (and it occupies
//!    one): a wgmma or a TMA copy is one instruction, and the unit finishes
//!    it while the warp waits; an exponential tile is many instructions that
//!    a waiting warp stops issuing (the paper's Figure 2).
//! 9. **last stage**: an op marked `last_stage` issues in the last stage,
//!    floor(M(v)/I) = max over all ops w of floor(M(w)/I) (Triton before 3.9
//!    pipelines Hopper wgmma only there).
//!
//! 10. **bandwidth**: for every bandwidth unit f (a shared-memory port:
//!     traffic is bounded per iteration, not per cycle), the raw machine
//!     cycles of one iteration's traffic fit what f moves in I normalized
//!     cycles: sum over v of traffic(v, f), plus, on the crossing unit of a
//!     joint schedule, cross_traffic(u) for every distinct data edge
//!     u -> v (u != v, both of fixed latency) with A(u) != A(v), is at most
//!     floor(I * cap(f) * raw / normalized), the problem's cycle scale.
//!
//! 11. **held buffers**: an asynchronous reader (an op on asynchronous
//!     units only: a wgmma, a TMA store) of a value in memory (not a
//!     streaming load's: its ring is the back end's) reads it until it
//!     completes, not only when it issues, and its wait retires it then:
//!     for rule 7's memory limit such a value stays live until
//!     M(u) + delta*I + cycles(u). A schedule whose memory fits without these
//!     holds but not with them breaks this rule (else rule 7).
//!
//! # Measure (not a rule)
//!
//! [`latency_slack`] measures how much later than modeled the asynchronous
//! ops of a schedule may complete before they delay one another: the least,
//! over asynchronous, non-streaming ops u != w joined by a path of
//! dependences whose inner ops are not such ops, of
//! M(w) - M(u) - max over those paths of sum(delay - I*delta). The joint
//! search prefers schedules where it is large (`joint::slack`); the value it
//! reports is this function's.
//!
//! This module shares no code with the encodings that produce schedules (the
//! ZLP in `modulo::zlp`, the brute force in the tests): it only reads the
//! problem's data, and it checks capacity by laying the steady state out
//! cycle by cycle rather than by residue arithmetic. It reports every
//! violation it finds, not just the first; an empty list means valid.

use std::fmt;

use crate::problem::{Problem, Schedule};

/// Warp-specialization parameters of the joint problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WarpConfig {
    /// Number of compute warp groups (group 0 is reserved for
    /// variable-latency ops and comes on top). Serialized as
    /// `compute_groups`: a report's `groups` lists the ops per group.
    #[serde(rename = "compute_groups")]
    pub groups: u32,
    /// Registers per thread available to each group.
    pub reg_limit: u32,
    /// Whether values may cross between compute groups (through shared
    /// memory). When false, both ends of every edge between fixed-latency
    /// ops share a group (the paper's "prohibiting cross-warp communication").
    pub cross_warp: bool,
}

impl WarpConfig {
    /// No warp-specialization limits: one compute group, unbounded registers
    /// (for encodings restricted to the modulo-scheduling rules).
    pub fn unconstrained() -> WarpConfig {
        WarpConfig {
            groups: 1,
            reg_limit: u32::MAX,
            cross_warp: true,
        }
    }
}

/// A joint modulo schedule with a warp-group assignment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JointSchedule {
    pub schedule: Schedule,
    /// A(v): warp group of every op; 0 is the variable-latency group.
    pub group: Vec<u32>,
}

/// A broken rule, naming its operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Rule 1: the initiation interval must be at least 1.
    ZeroInitiationInterval,
    /// Rule 10: bandwidth unit `unit` carries `used` raw cycles of traffic
    /// in an iteration, more than its `budget`; `crossings` are the
    /// crossing data edges (from, to, raw cycles) counted in `used`.
    Bandwidth {
        unit: String,
        used: u64,
        budget: u64,
        crossings: Vec<(String, String, u64)>,
    },
    /// Rule 9: `op` must be in the last stage, but `later` is in a later one.
    LastStage {
        op: String,
        stage: u32,
        later: String,
        later_stage: u32,
    },
    /// Rule 1: M must have one entry per op.
    WrongOpCount { expected: usize, got: usize },
    /// Rule 2: `op` issued at `start` with `cycles` cycles ends after `length`.
    Completion {
        op: String,
        start: u32,
        cycles: u32,
        length: u32,
    },
    /// Rule 3: edge `edge` from `from` to `to` needs M(to) + I*delta >= M(from) + d.
    Dependence {
        edge: usize,
        from: String,
        to: String,
        delay: u32,
        distance: u32,
        /// M(from) + d
        earliest: i64,
        /// M(to) + I*delta
        actual: i64,
    },
    /// Rule 5: a group out of range, or variable latency not matching group 0.
    Group {
        op: String,
        group: u32,
        variable_latency: bool,
        groups: u32,
    },
    /// Rule 5: `op` and `other` of `same_group` set `set` are on different groups.
    SameGroup {
        set: usize,
        op: String,
        group: u32,
        other: String,
        other_group: u32,
    },
    /// Rule 6: edge `edge` crosses groups and needs M(to) + I*delta >= M(from) + d + spill.
    Spill {
        edge: usize,
        from: String,
        to: String,
        spill: u32,
        earliest: i64,
        actual: i64,
    },
    /// Rule 6: cross-warp communication is prohibited but edge `edge` crosses groups.
    CrossWarp {
        edge: usize,
        from: String,
        to: String,
    },
    /// Rule 7: group `group` holds `used` > `limit` registers per thread at `residue`.
    Registers {
        group: u32,
        residue: u32,
        used: u64,
        limit: u32,
        /// Live values with their number of live instances.
        values: Vec<(String, u32)>,
    },
    /// Rule 7: memory `kind` holds `used` > `capacity` at `residue`.
    Memory {
        kind: String,
        residue: u32,
        used: u64,
        capacity: u64,
        values: Vec<(String, u32)>,
    },
    /// Rule 11: memory `kind` holds `used` > `capacity` at `residue` because
    /// asynchronous readers hold their buffers until they complete (without
    /// the holds it fits): `held` names (value, reader) pairs.
    HeldBuffers {
        kind: String,
        residue: u32,
        used: u64,
        capacity: u64,
        held: Vec<(String, String)>,
    },
    /// Rule 8: `blocked` issues with blocking synchronization at `residue`
    /// while `other` of the same group executes.
    Concurrency {
        blocked: String,
        other: String,
        group: u32,
        residue: u32,
    },
    /// Rule 4: `unit` at steady-state cycle `residue` holds `used` > `capacity`.
    Capacity {
        unit: String,
        residue: u32,
        used: u32,
        capacity: u32,
        /// The ops occupying the unit there, with their own cycle of execution.
        ops: Vec<(String, u32)>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::ZeroInitiationInterval => write!(f, "shape: initiation interval is 0"),
            Violation::LastStage {
                op,
                stage,
                later,
                later_stage,
            } => write!(
                f,
                "last stage: `{op}` is in stage {stage} but `{later}` is in stage {later_stage}"
            ),
            Violation::WrongOpCount { expected, got } => {
                write!(f, "shape: schedule has {got} issue cycles for {expected} ops")
            }
            Violation::Completion {
                op,
                start,
                cycles,
                length,
            } => write!(
                f,
                "completion: `{op}` issues at {start} and runs {cycles} cycles, past L = {length}"
            ),
            Violation::Dependence {
                edge,
                from,
                to,
                delay,
                distance,
                earliest,
                actual,
            } => write!(
                f,
                "dependence: edge {edge} `{from}` -> `{to}` (d = {delay}, delta = {distance}) needs M({to}) + I*delta >= {earliest}, got {actual}"
            ),
            Violation::Group {
                op,
                group,
                variable_latency,
                groups,
            } => write!(
                f,
                "groups: `{op}` (variable latency: {variable_latency}) is on group {group}; group 0 is exactly the variable-latency ops, compute groups are 1..={groups}"
            ),
            Violation::SameGroup {
                set,
                op,
                group,
                other,
                other_group,
            } => write!(
                f,
                "colocation: `{op}` (group {group}) and `{other}` (group {other_group}) of same_group set {set} must share a group"
            ),
            Violation::Spill {
                edge,
                from,
                to,
                spill,
                earliest,
                actual,
            } => write!(
                f,
                "cross-warp spill: edge {edge} `{from}` -> `{to}` crosses groups and needs M({to}) + I*delta >= {earliest} (spill {spill}), got {actual}"
            ),
            Violation::CrossWarp { edge, from, to } => write!(
                f,
                "cross-warp: edge {edge} `{from}` -> `{to}` crosses warp groups, which is prohibited"
            ),
            Violation::Concurrency {
                blocked,
                other,
                group,
                residue,
            } => write!(
                f,
                "concurrency: `{blocked}` blocks at steady-state cycle {residue} while `{other}`, which needs its warp, executes on the same group {group}"
            ),
            Violation::Registers { .. }
            | Violation::HeldBuffers { .. }
            | Violation::Memory { .. }
            | Violation::Bandwidth { .. }
            | Violation::Capacity { .. } => self.fmt_occupancy(f),
        }
    }
}

impl Violation {
    /// The violations of a limit held by several ops or values, listed.
    fn fmt_occupancy(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Registers {
                group,
                residue,
                used,
                limit,
                values,
            } => {
                let who: Vec<String> = values.iter().map(|(v, n)| format!("{v}x{n}")).collect();
                write!(
                    f,
                    "register limit: group {group} at steady-state cycle {residue} holds {used} > {limit} registers per thread ({})",
                    who.join(", ")
                )
            }
            Violation::HeldBuffers {
                kind,
                residue,
                used,
                capacity,
                held,
            } => {
                let who: Vec<String> = held
                    .iter()
                    .map(|(v, r)| format!("{v} read by {r}"))
                    .collect();
                write!(
                    f,
                    "held buffers: {kind} at steady-state cycle {residue} holds {used} > {capacity} while asynchronous readers still read their operands ({})",
                    who.join(", ")
                )
            }
            Violation::Memory {
                kind,
                residue,
                used,
                capacity,
                values,
            } => {
                let who: Vec<String> = values.iter().map(|(v, n)| format!("{v}x{n}")).collect();
                write!(
                    f,
                    "memory: {kind} at steady-state cycle {residue} holds {used} > {capacity} ({})",
                    who.join(", ")
                )
            }
            Violation::Bandwidth {
                unit,
                used,
                budget,
                crossings,
            } => {
                let who: Vec<String> = crossings
                    .iter()
                    .map(|(a, b, c)| format!("{a}->{b}:{c}"))
                    .collect();
                write!(
                    f,
                    "bandwidth: {unit} carries {used} raw cycles per iteration > its budget {budget} (crossings: {})",
                    if who.is_empty() { "none".to_string() } else { who.join(", ") }
                )
            }
            Violation::Capacity {
                unit,
                residue,
                used,
                capacity,
                ops,
            } => {
                let who: Vec<String> = ops.iter().map(|(o, c)| format!("{o}@{c}")).collect();
                write!(
                    f,
                    "capacity: {unit} at steady-state cycle {residue} holds {used} > {capacity} ({})",
                    who.join(", ")
                )
            }
            _ => unreachable!("only the violations of a limit list ops or values"),
        }
    }
}

/// Validates `s` against `p` (rules 1-4, 9, and 10 without crossings);
/// returns every violation (empty when valid).
pub fn check(p: &Problem, s: &Schedule) -> Vec<Violation> {
    let mut out = Vec::new();
    if s.ii == 0 {
        out.push(Violation::ZeroInitiationInterval);
    }
    if s.start.len() != p.ops.len() {
        out.push(Violation::WrongOpCount {
            expected: p.ops.len(),
            got: s.start.len(),
        });
    }
    if !out.is_empty() {
        return out;
    }

    for (op, &m) in p.ops.iter().zip(&s.start) {
        if m as u64 + op.cycles as u64 > s.length as u64 {
            out.push(Violation::Completion {
                op: op.name.clone(),
                start: m,
                cycles: op.cycles,
                length: s.length,
            });
        }
    }

    for (k, e) in p.edges.iter().enumerate() {
        let earliest = s.start[e.from] as i64 + e.delay as i64;
        let actual = s.start[e.to] as i64 + s.ii as i64 * e.distance as i64;
        if actual < earliest {
            out.push(Violation::Dependence {
                edge: k,
                from: p.ops[e.from].name.clone(),
                to: p.ops[e.to].name.clone(),
                delay: e.delay,
                distance: e.distance,
                earliest,
                actual,
            });
        }
    }

    // Lay out the steady state: iteration j's copy of op v occupies absolute
    // cycles j*I + M(v) + c. Observe one window of I cycles starting at
    // W = (copies - 1) * I + ... far enough that every copy that can reach it
    // is present; count occupancy per absolute cycle inside the window.
    let ii = s.ii as u64;
    let end = p
        .ops
        .iter()
        .zip(&s.start)
        .map(|(o, &m)| m as u64 + o.cycles as u64)
        .max()
        .unwrap_or(0);
    // An op instance lasting until `end` started at most `end` cycles before,
    // so with iterations issued every I cycles, a window starting at
    // W = ceil(end / I) * I sees every overlapping instance from
    // iterations 0 ..= W / I (all issued before the window ends).
    let window = end.div_ceil(ii) * ii;
    let iterations = window / ii + 1;
    for (f, unit) in p.units.iter().enumerate() {
        for cycle in window..window + ii {
            let mut used = 0u32;
            let mut who = Vec::new();
            for j in 0..iterations {
                for (op, &m) in p.ops.iter().zip(&s.start) {
                    let issue = j * ii + m as u64;
                    if cycle < issue || cycle >= issue + op.cycles as u64 {
                        continue;
                    }
                    let row = (cycle - issue) as usize;
                    let n = op.rrt[row][f];
                    if n > 0 {
                        used += n;
                        who.push((op.name.clone(), row as u32));
                    }
                }
            }
            if used > p.capacity[f] {
                out.push(Violation::Capacity {
                    unit: unit.clone(),
                    residue: (cycle - window) as u32,
                    used,
                    capacity: p.capacity[f],
                    ops: who,
                });
            }
        }
    }
    // Rule 9, by enumerating stages op by op.
    let stage_of = |v: usize| s.start[v] / s.ii;
    if let Some(latest) = (0..p.ops.len()).max_by_key(|&w| stage_of(w)) {
        for (v, op) in p.ops.iter().enumerate() {
            if op.last_stage && stage_of(v) < stage_of(latest) {
                out.push(Violation::LastStage {
                    op: op.name.clone(),
                    stage: stage_of(v),
                    later: p.ops[latest].name.clone(),
                    later_stage: stage_of(latest),
                });
            }
        }
    }
    // Rule 10, the ops' own traffic.
    for f in (0..p.units.len()).filter(|&f| p.bandwidth[f]) {
        let used: u64 = p.ops.iter().map(|o| o.traffic[f]).sum();
        let budget = budget_of(p, f, s.ii);
        if used > budget {
            out.push(Violation::Bandwidth {
                unit: p.units[f].clone(),
                used,
                budget,
                crossings: Vec::new(),
            });
        }
    }
    out
}

/// Rule 10's budget: floor(I * cap(f) * raw / normalized).
fn budget_of(p: &Problem, f: usize, ii: u32) -> u64 {
    let num = u128::from(ii) * u128::from(p.capacity[f]) * u128::from(p.scale.0);
    (num / u128::from(p.scale.1.max(1))).min(u128::from(u64::MAX)) as u64
}

/// Whether `s` is a valid schedule of `p`.
pub fn is_valid(p: &Problem, s: &Schedule) -> bool {
    check(p, s).is_empty()
}

/// Validates a joint schedule: rules 1-4, 9 and 10 of [`check`] with the
/// cross-warp spill delays of rule 6, rules 5-8, and rule 10's crossings.
/// Returns every violation.
pub fn check_joint(p: &Problem, js: &JointSchedule, cfg: &WarpConfig) -> Vec<Violation> {
    let s = &js.schedule;
    let mut out = check(p, s);
    if js.group.len() != p.ops.len() {
        out.push(Violation::WrongOpCount {
            expected: p.ops.len(),
            got: js.group.len(),
        });
    }
    if out.iter().any(|v| {
        matches!(
            v,
            Violation::WrongOpCount { .. } | Violation::ZeroInitiationInterval
        )
    }) {
        return out;
    }
    check_crossing_bandwidth(p, js, &mut out);
    check_groups(p, &js.group, cfg, &mut out);
    check_colocation(p, &js.group, &mut out);
    check_crossing_edges(p, js, cfg, &mut out);
    let steady = SteadyState::new(p, s);
    for t in steady.window..steady.window + steady.ii {
        let residue = (t - steady.window) as u32;
        let live = steady.live(t);
        steady.check_registers(&live, &js.group, cfg, residue, &mut out);
        steady.check_memories(&live, t, residue, &mut out);
        steady.check_concurrency(&js.group, t, residue, &mut out);
    }
    out
}

/// Rule 10 with the crossings, where the ops' own traffic fits (`check`
/// reported it otherwise).
fn check_crossing_bandwidth(p: &Problem, js: &JointSchedule, out: &mut Vec<Violation>) {
    let Some(f) = p.crossing_unit else {
        return;
    };
    let g = &js.group;
    let own: u64 = p.ops.iter().map(|o| o.traffic[f]).sum();
    let budget = budget_of(p, f, js.schedule.ii);
    let mut seen = std::collections::BTreeSet::new();
    let mut crossings = Vec::new();
    for e in &p.edges {
        let (u, v) = (e.from, e.to);
        if u == v || e.order || p.ops[u].variable_latency || p.ops[v].variable_latency {
            continue;
        }
        if g[u] != g[v] && seen.insert((u, v)) && p.ops[u].cross_traffic > 0 {
            crossings.push((
                p.ops[u].name.clone(),
                p.ops[v].name.clone(),
                p.ops[u].cross_traffic,
            ));
        }
    }
    let used = own + crossings.iter().map(|c| c.2).sum::<u64>();
    if own <= budget && used > budget {
        out.push(Violation::Bandwidth {
            unit: p.units[f].clone(),
            used,
            budget,
            crossings,
        });
    }
}

/// Group 0 is exactly the variable-latency ops; compute groups are
/// 1..=groups.
fn check_groups(p: &Problem, g: &[u32], cfg: &WarpConfig, out: &mut Vec<Violation>) {
    for (op, &grp) in p.ops.iter().zip(g) {
        let ok = if op.variable_latency {
            grp == 0
        } else {
            (1..=cfg.groups).contains(&grp)
        };
        if !ok {
            out.push(Violation::Group {
                op: op.name.clone(),
                group: grp,
                variable_latency: op.variable_latency,
                groups: cfg.groups,
            });
        }
    }
}

/// Rule 5: every colocation set on one group.
fn check_colocation(p: &Problem, g: &[u32], out: &mut Vec<Violation>) {
    for (set, ops) in p.same_group.iter().enumerate() {
        let Some(&first) = ops.first() else {
            continue;
        };
        for &v in &ops[1..] {
            if g[v] != g[first] {
                out.push(Violation::SameGroup {
                    set,
                    op: p.ops[first].name.clone(),
                    group: g[first],
                    other: p.ops[v].name.clone(),
                    other_group: g[v],
                });
            }
        }
    }
}

/// Edges between groups: prohibited between compute ops without
/// cross-warp communication, and delayed by the producer's spill.
fn check_crossing_edges(
    p: &Problem,
    js: &JointSchedule,
    cfg: &WarpConfig,
    out: &mut Vec<Violation>,
) {
    let (s, g) = (&js.schedule, &js.group);
    for (k, e) in p.edges.iter().enumerate() {
        if g[e.from] == g[e.to] {
            continue;
        }
        if !cfg.cross_warp && !p.ops[e.from].variable_latency && !p.ops[e.to].variable_latency {
            out.push(Violation::CrossWarp {
                edge: k,
                from: p.ops[e.from].name.clone(),
                to: p.ops[e.to].name.clone(),
            });
        }
        let spill = p.ops[e.from].spill_cost;
        let earliest = s.start[e.from] as i64 + e.delay as i64 + spill as i64;
        let actual = s.start[e.to] as i64 + s.ii as i64 * e.distance as i64;
        // Plain dependence violations are reported by `check` already.
        if actual < earliest && actual >= earliest - spill as i64 {
            out.push(Violation::Spill {
                edge: k,
                from: p.ops[e.from].name.clone(),
                to: p.ops[e.to].name.clone(),
                spill,
                earliest,
                actual,
            });
        }
    }
}

/// The steady state laid out as `check` does: a window of I cycles far
/// enough from the start that every instance overlapping it exists.
struct SteadyState<'p> {
    p: &'p Problem,
    ii: i64,
    start: Vec<i64>,
    /// Ops that run on asynchronous units only, read off the reservation
    /// tables and the problem's unit flags (not `ProblemOp::asynchronous`,
    /// which the encodings use).
    detached: Vec<bool>,
    /// End of each value's lifetime (latest issue of a user), if it has
    /// users (ordering-only edges use no value).
    unheld: Vec<Option<i64>>,
    /// The same, where an asynchronous reader of a value in memory holds it
    /// until it completes (rule 11).
    last_use: Vec<Option<i64>>,
    /// First cycle of the window.
    window: i64,
}

impl<'p> SteadyState<'p> {
    fn new(p: &'p Problem, s: &Schedule) -> Self {
        let ii = s.ii as i64;
        let start: Vec<i64> = s.start.iter().map(|&m| m as i64).collect();
        let detached: Vec<bool> = p
            .ops
            .iter()
            .map(|op| {
                let used: Vec<usize> = (0..p.units.len())
                    .filter(|&f| {
                        op.rrt
                            .iter()
                            .any(|row| row.get(f).copied().unwrap_or(0) > 0)
                    })
                    .collect();
                !used.is_empty()
                    && used
                        .iter()
                        .all(|&f| p.asynchronous.get(f).copied().unwrap_or(false))
            })
            .collect();
        let mut steady = SteadyState {
            p,
            ii,
            start,
            detached,
            unheld: Vec::new(),
            last_use: Vec::new(),
            window: 0,
        };
        steady.unheld = steady.ends(false);
        steady.last_use = steady.ends(true);
        let longest = p
            .ops
            .iter()
            .enumerate()
            .map(|(v, o)| {
                let life = steady.last_use[v].map_or(0, |e| e - steady.start[v]);
                life.max(o.cycles as i64)
            })
            .max()
            .unwrap_or(0);
        steady.window = (longest + steady.start.iter().copied().max().unwrap_or(0) + ii) / ii * ii;
        steady
    }

    /// End of each value's lifetime; `held`: with rule 11's holds.
    fn ends(&self, held: bool) -> Vec<Option<i64>> {
        let p = self.p;
        (0..p.ops.len())
            .map(|v| {
                let buffer = p.ops[v].memory.iter().any(|&m| m > 0) && !p.ops[v].streaming;
                p.edges
                    .iter()
                    .filter(|e| e.from == v && !e.order)
                    .map(|e| {
                        let hold = if held && buffer && self.detached[e.to] {
                            p.ops[e.to].cycles as i64
                        } else {
                            0
                        };
                        self.start[e.to] + self.ii * e.distance as i64 + hold
                    })
                    .max()
            })
            .collect()
    }

    /// Instances of v's value live at t with lifetimes ending at `ends`:
    /// k with start + kI <= t < end + kI, over every iteration k >= 0.
    fn live_in(&self, ends: &[Option<i64>], v: usize, t: i64) -> u32 {
        let Some(end) = ends[v] else { return 0 };
        let (start, ii) = (self.start[v], self.ii);
        (0..=t / ii + 1)
            .filter(|k| start + k * ii <= t && t < end + k * ii)
            .count() as u32
    }

    /// Whether o executes at t and needs its warp.
    fn executing(&self, o: usize, t: i64) -> bool {
        !self.detached[o]
            && (0..=t / self.ii + 1).any(|k| {
                let issue = self.start[o] + k * self.ii;
                issue <= t && t < issue + self.p.ops[o].cycles as i64
            })
    }

    /// The values live at t and their instances.
    fn live(&self, t: i64) -> Vec<(usize, u32)> {
        (0..self.p.ops.len())
            .map(|v| (v, self.live_in(&self.last_use, v, t)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// Rule 7's register limit of every group, with `live` the values
    /// live at the cycle.
    fn check_registers(
        &self,
        live: &[(usize, u32)],
        g: &[u32],
        cfg: &WarpConfig,
        residue: u32,
        out: &mut Vec<Violation>,
    ) {
        let p = self.p;
        let mut groups: Vec<u32> = g.to_vec();
        groups.sort_unstable();
        groups.dedup();
        for &w in &groups {
            let mine: Vec<&(usize, u32)> = live
                .iter()
                .filter(|(v, _)| g[*v] == w && p.ops[*v].regs > 0)
                .collect();
            let used: u64 = mine
                .iter()
                .map(|(v, n)| p.ops[*v].regs as u64 * *n as u64)
                .sum();
            if used > cfg.reg_limit as u64 {
                out.push(Violation::Registers {
                    group: w,
                    residue,
                    used,
                    limit: cfg.reg_limit,
                    values: mine
                        .iter()
                        .map(|(v, n)| (p.ops[*v].name.clone(), *n))
                        .collect(),
                });
            }
        }
    }

    /// Every memory's capacity at t, with `live` the values live then:
    /// over only because asynchronous readers hold their buffers, rule 11;
    /// over anyway, rule 7.
    fn check_memories(
        &self,
        live: &[(usize, u32)],
        t: i64,
        residue: u32,
        out: &mut Vec<Violation>,
    ) {
        let p = self.p;
        for (m, (kind, cap)) in p.memories.iter().enumerate() {
            let mine: Vec<&(usize, u32)> = live
                .iter()
                .filter(|(v, _)| p.ops[*v].memory[m] > 0)
                .collect();
            let used: u64 = mine
                .iter()
                .map(|(v, n)| p.ops[*v].memory[m] * *n as u64)
                .sum();
            let unheld_used: u64 = (0..p.ops.len())
                .map(|v| p.ops[v].memory[m] * u64::from(self.live_in(&self.unheld, v, t)))
                .sum();
            if used > *cap && unheld_used <= *cap {
                out.push(Violation::HeldBuffers {
                    kind: kind.clone(),
                    residue,
                    used,
                    capacity: *cap,
                    held: held_readers(p, &self.start, self.ii, t, &self.detached, m),
                });
            } else if used > *cap {
                out.push(Violation::Memory {
                    kind: kind.clone(),
                    residue,
                    used,
                    capacity: *cap,
                    values: mine
                        .iter()
                        .map(|(v, n)| (p.ops[*v].name.clone(), *n))
                        .collect(),
                });
            }
        }
    }

    /// Rule 8: a blocking op issuing at t while another op of its group
    /// that needs its warp executes.
    fn check_concurrency(&self, g: &[u32], t: i64, residue: u32, out: &mut Vec<Violation>) {
        let (p, start, ii) = (self.p, &self.start, self.ii);
        for v in 0..p.ops.len() {
            let issues_now = (t - start[v]).rem_euclid(ii) == 0 && t >= start[v];
            if !issues_now {
                continue;
            }
            let blocking = p
                .edges
                .iter()
                .any(|e| e.to == v && (e.blocking || g[e.from] != g[v]));
            if !blocking {
                continue;
            }
            for o in 0..p.ops.len() {
                if o != v && g[o] == g[v] && self.executing(o, t) {
                    out.push(Violation::Concurrency {
                        blocked: p.ops[v].name.clone(),
                        other: p.ops[o].name.clone(),
                        group: g[v],
                        residue,
                    });
                }
            }
        }
    }
}

/// The (value, reader) pairs of memory kind `m` whose value an asynchronous
/// reader still holds at cycle `t` (rule 11): past the reader's issue, before
/// its completion.
fn held_readers(
    p: &Problem,
    start: &[i64],
    ii: i64,
    t: i64,
    detached: &[bool],
    m: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in p.edges.iter().filter(|e| {
        !e.order && detached[e.to] && p.ops[e.from].memory[m] > 0 && !p.ops[e.from].streaming
    }) {
        let issue = start[e.to] + ii * e.distance as i64;
        let done = issue + p.ops[e.to].cycles as i64;
        let holds = (0..=t / ii + 1).any(|k| issue + k * ii <= t && t < done + k * ii);
        let pair = (p.ops[e.from].name.clone(), p.ops[e.to].name.clone());
        if holds && !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

/// The latency slack of `s` (module doc, "Measure"): `None` when no two
/// asynchronous, non-streaming ops are joined through other ops, or when
/// such paths are unbounded (a cycle of positive weight: `s` then breaks
/// rule 3 anyway).
///
/// Computed as a max-plus closure (Floyd-Warshall) in which only ops that
/// are not endpoints may be inner nodes of a path; an op is asynchronous
/// when its reservation table occupies some unit and only units flagged
/// asynchronous (read here, not from `ProblemOp::asynchronous`).
pub fn latency_slack(p: &Problem, s: &Schedule) -> Option<i64> {
    let n = p.ops.len();
    if s.start.len() != n {
        return None;
    }
    let endpoint: Vec<bool> = p
        .ops
        .iter()
        .map(|op| {
            let mut any = false;
            let mut all = true;
            for row in &op.rrt {
                for (f, &k) in row.iter().enumerate() {
                    if k > 0 {
                        any = true;
                        all &= p.asynchronous.get(f).copied().unwrap_or(false);
                    }
                }
            }
            any && all && !op.streaming
        })
        .collect();
    let ii = s.ii as i64;
    // w[a][b]: the heaviest single edge a -> b, then the heaviest path.
    let mut w: Vec<Vec<Option<i64>>> = vec![vec![None; n]; n];
    for e in &p.edges {
        let x = e.delay as i64 - ii * e.distance as i64;
        let cell = &mut w[e.from][e.to];
        if cell.is_none_or(|c| x > c) {
            *cell = Some(x);
        }
    }
    for k in (0..n).filter(|&k| !endpoint[k]) {
        if w[k][k].is_some_and(|c| c > 0) {
            return None;
        }
        let through = w[k].clone();
        for row in w.iter_mut() {
            let Some(ak) = row[k] else { continue };
            for (cell, kb) in row.iter_mut().zip(&through) {
                if let Some(kb) = kb {
                    let x = ak + kb;
                    if cell.is_none_or(|c| x > c) {
                        *cell = Some(x);
                    }
                }
            }
        }
    }
    let mut least: Option<i64> = None;
    for a in (0..n).filter(|&a| endpoint[a]) {
        for b in (0..n).filter(|&b| b != a && endpoint[b]) {
            if let Some(lag) = w[a][b] {
                let slack = s.start[b] as i64 - s.start[a] as i64 - lag;
                least = Some(least.map_or(slack, |l| l.min(slack)));
            }
        }
    }
    least
}
