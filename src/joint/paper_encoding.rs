//! The paper's encoding of the joint problem (Figures 4, 5 and 6), for
//! comparison and cross-checking: boolean op[v, i, t] ("instance i of v issues
//! at cycle t of the straight-line program Q"), live[v, i, t] defined by the
//! backward liveness dataflow, and opw[v, w] for the warp assignment.
//!
//! Q is the straight-line program of C overlapped copies of the schedule, each
//! I cycles after the previous, of length T = (C - 1) * I + L. The paper uses
//! C = ceil(L/I); we add max(delta) copies so that the last window of I cycles,
//! [(C-1) I, C I), contains every live instance of the infinite loop, and we
//! state the memory and register limits on that window. This makes the paper
//! encoding decide exactly the rules of `crate::checker` (the same question as
//! the default encoding), which the paper's Figure 5 on ceil(L/I) copies does
//! not when lifetimes reach beyond Q. Two further adjustments, both needed for
//! that agreement and documented in NOTES.md: the Init condition marks every
//! instance whose user lies beyond Q as live at the end, not only the last
//! copy's; and a user issuing in the same cycle as its producer does not make
//! the producer live before it issues (DeadProp-1 requires ¬op[v, i, t]).
//! Blocking synchronization is required by blocking edges and by every edge
//! that crosses warp groups (the constraint the paper elides, section 4.3).
//! The ops it excludes are those that need their warp: an op on asynchronous
//! units only (`ProblemOp::asynchronous`) runs on while its warp waits, which
//! is the paper's own reason for the constraint (Figure 2) applied to units
//! it does not distinguish.

// Encodings index ops, copies and cycles together; index loops read best.
#![allow(clippy::needless_range_loop)]

use std::time::{Duration, Instant};

use z3::ast::Bool;
use z3::{Params, SatResult, Solver};

use super::{EncodingOutcome, JointEncoding, Query};
use crate::checker::{JointSchedule, WarpConfig};
use crate::problem::{Problem, Schedule};

pub struct PaperEncoding<'p> {
    p: &'p Problem,
    cfg: WarpConfig,
    seed: u32,
    ii: u32,
}

impl<'p> PaperEncoding<'p> {
    pub fn new(p: &'p Problem, cfg: WarpConfig, seed: u32) -> Self {
        PaperEncoding {
            p,
            cfg,
            seed,
            ii: 0,
        }
    }
}

fn pb_le(terms: &[(Bool, i32)], k: i64) -> Bool {
    if terms.is_empty() {
        return Bool::from_bool(0 <= k);
    }
    let refs: Vec<(&Bool, i32)> = terms.iter().map(|(b, w)| (b, *w)).collect();
    Bool::pb_le(&refs, k.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
}

impl JointEncoding for PaperEncoding<'_> {
    fn name(&self) -> &'static str {
        "paper"
    }

    fn set_interval(&mut self, ii: u32) {
        self.ii = ii;
    }

    /// Builds the encoding for the query's length (a new solver per query)
    /// and solves it; states the length and group bounds only (see
    /// [`JointEncoding::supports`]).
    fn solve(&mut self, q: &Query) -> EncodingOutcome {
        if !self.supports(q) {
            return super::unsupported(self);
        }
        // Building this encoding can itself take long: honour the time limit
        // while constructing, not only while solving.
        let deadline = Instant::now() + Duration::from_millis(q.timeout_ms as u64);
        let mut b = Build::new(self, q, deadline);
        if b.assert_all(self).is_err() {
            return EncodingOutcome::Unknown("time limit while building the paper encoding".into());
        }
        b.check(self, q)
    }
}

/// The time limit passed while building the encoding.
struct TimeLimit;

/// Checks the build's deadline.
fn in_time(deadline: Instant) -> Result<(), TimeLimit> {
    if Instant::now() > deadline {
        Err(TimeLimit)
    } else {
        Ok(())
    }
}

/// The encoding built for one query: the straight-line program Q of
/// `copies` overlapped copies, its variables and its solver.
struct Build {
    solver: Solver,
    deadline: Instant,
    ii: usize,
    copies: usize,
    /// Cycles with variables: T and the ends of the last holds.
    t_live: usize,
    /// Group indices: 0 for variable latency, 1..=G compute.
    groups: Vec<usize>,
    /// op[v][i][t]; false where t + cycles(v) > T (completion).
    op: Vec<Vec<Vec<Bool>>>,
    /// opw[v][w].
    opw: Vec<Vec<Bool>>,
    /// Ops whose value occupies registers or memory and has users.
    holds: Vec<bool>,
    /// live[v][i][t] for the ops that hold.
    live: Vec<Vec<Vec<Bool>>>,
}

impl Build {
    /// The dimensions of Q for the query's length, and the op variables.
    fn new(e: &PaperEncoding, q: &Query, deadline: Instant) -> Self {
        let p = e.p;
        let n = p.ops.len();
        let ii = e.ii as usize;
        let l = q.max_length as usize;
        let dmax = p
            .edges
            .iter()
            .map(|e| e.distance as usize)
            .max()
            .unwrap_or(0);
        // An asynchronous reader holds a value past its issue (ProblemEdge::
        // hold): enough more copies that no earlier instance outlives the
        // window, and cycles past Q for the ends of the last holds.
        let hmax = p.edges.iter().map(|e| e.hold as usize).max().unwrap_or(0);
        let copies = l.div_ceil(ii).max(1) + dmax + hmax.div_ceil(ii);
        let t_q = (copies - 1) * ii + l;
        let t_live = t_q.max(copies * ii) + hmax;
        let top = q.max_group.unwrap_or(e.cfg.groups).min(e.cfg.groups);
        let groups: Vec<usize> = (0..=top as usize).collect();

        // QF_FD: z3's SAT core with native pseudo-Boolean reasoning (the SMT
        // core's PB theory is unsound on these encodings in z3 4.8.12).
        let solver = Solver::new_for_logic("QF_FD").unwrap_or_default();
        let mut params = Params::new();
        params.set_u32("timeout", q.timeout_ms.max(1));
        params.set_u32("random_seed", e.seed);
        solver.set_params(&params);
        let f = Bool::from_bool(false);
        let op: Vec<Vec<Vec<Bool>>> = (0..n)
            .map(|v| {
                (0..copies)
                    .map(|i| {
                        (0..t_live)
                            .map(|t| {
                                if t + p.ops[v].cycles as usize > t_q {
                                    f.clone()
                                } else {
                                    Bool::new_const(format!("op_{v}_{i}_{t}"))
                                }
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Build {
            solver,
            deadline,
            ii,
            copies,
            t_live,
            groups,
            op,
            opw: Vec::new(),
            holds: Vec::new(),
            live: vec![vec![]; n],
        }
    }

    /// "Instance i of v issues at t", false outside Q.
    fn at(&self, v: usize, i: usize, t: i64) -> Bool {
        if i >= self.copies || t < 0 || t as usize >= self.t_live {
            Bool::from_bool(false)
        } else {
            self.op[v][i][t as usize].clone()
        }
    }

    /// Every constraint family, in the order of the figures.
    fn assert_all(&mut self, e: &PaperEncoding) -> Result<(), TimeLimit> {
        let p = e.p;
        self.assert_unique_and_consistent(p)?;
        self.assert_last_stage_pins(p);
        self.declare_warps(p);
        self.assert_colocation(p);
        self.assert_crossing_bandwidth(p, e.ii);
        self.assert_dependences(p, &e.cfg)?;
        self.assert_capacity(p)?;
        self.assert_concurrency(p)?;
        self.declare_liveness(p)?;
        self.assert_window_limits(p, &e.cfg)?;
        in_time(self.deadline)
    }

    /// Uniqueness (each instance issues once) and consistency (copy i is
    /// copy 0 shifted by i * I).
    fn assert_unique_and_consistent(&self, p: &Problem) -> Result<(), TimeLimit> {
        for row in self.op.iter().flatten() {
            let refs: Vec<(&Bool, i32)> = row.iter().map(|b| (b, 1)).collect();
            self.solver.assert(Bool::pb_eq(&refs, 1));
        }
        in_time(self.deadline)?;
        for v in 0..p.ops.len() {
            for t in 0..self.t_live {
                for i in 1..self.copies {
                    self.solver.assert(self.op[v][0][t].implies(self.at(
                        v,
                        i,
                        (t + i * self.ii) as i64,
                    )));
                }
            }
        }
        Ok(())
    }

    /// Last-stage pins (twill's addition for Triton < 3.9 on Hopper): with
    /// st[v][k] = "copy 0 of v issues in stage k", a pinned v in stage k
    /// excludes every other op from the stages after k.
    fn assert_last_stage_pins(&self, p: &Problem) {
        if !p.ops.iter().any(|o| o.last_stage) {
            return;
        }
        let (n, ii, t_live) = (p.ops.len(), self.ii, self.t_live);
        let nstages = t_live.div_ceil(ii).max(1);
        let st: Vec<Vec<Bool>> = (0..n)
            .map(|v| {
                (0..nstages)
                    .map(|k| {
                        let lits: Vec<Bool> = (k * ii..((k + 1) * ii).min(t_live))
                            .map(|t| self.op[v][0][t].clone())
                            .collect();
                        let refs: Vec<&Bool> = lits.iter().collect();
                        Bool::or(&refs)
                    })
                    .collect()
            })
            .collect();
        for v in (0..n).filter(|&v| p.ops[v].last_stage) {
            for w in (0..n).filter(|&w| w != v) {
                for k in 0..nstages {
                    for later in k + 1..nstages {
                        self.solver
                            .assert(Bool::and(&[&st[v][k], &st[w][later]]).not());
                    }
                }
            }
        }
    }

    /// Warp assignment: opw[v][w], uniqueness, variable latency on group 0.
    fn declare_warps(&mut self, p: &Problem) {
        let n = p.ops.len();
        self.opw = (0..n)
            .map(|v| {
                self.groups
                    .iter()
                    .map(|w| Bool::new_const(format!("opw_{v}_{w}")))
                    .collect()
            })
            .collect();
        for v in 0..n {
            let refs: Vec<(&Bool, i32)> = self.opw[v].iter().map(|b| (b, 1)).collect();
            self.solver.assert(Bool::pb_eq(&refs, 1));
            let vl = Bool::from_bool(p.ops[v].variable_latency);
            self.solver.assert(vl.eq(&self.opw[v][0]));
        }
    }

    /// "u and v run on different groups".
    fn cross(&self, u: usize, v: usize) -> Bool {
        let pairs: Vec<Bool> = self
            .groups
            .iter()
            .map(|&w| Bool::and(&[self.opw[u][w].clone(), self.opw[v][w].not()]))
            .collect();
        Bool::or(&pairs)
    }

    /// Colocation (rule 5): no set member on another group than the first.
    fn assert_colocation(&self, p: &Problem) {
        for set in &p.same_group {
            for pair in set.windows(2) {
                self.solver.assert(self.cross(pair[0], pair[1]).not());
            }
        }
    }

    /// Bandwidth of the crossings (rule 10).
    fn assert_crossing_bandwidth(&self, p: &Problem, ii: u32) {
        if self.groups.len() == 1 {
            return;
        }
        if let Some((charges, left)) = super::crossing_budget(p, ii) {
            let terms: Vec<(Bool, i32)> = charges
                .iter()
                .map(|&(a, b, w)| (self.cross(a, b), w.min(i32::MAX as u64) as i32))
                .collect();
            self.solver
                .assert(pb_le(&terms, left.min(i32::MAX as u64) as i64));
        }
    }

    /// Dependences and cross-warp spills.
    fn assert_dependences(&self, p: &Problem, cfg: &WarpConfig) -> Result<(), TimeLimit> {
        let (copies, t_live) = (self.copies, self.t_live as i64);
        for e in &p.edges {
            in_time(self.deadline)?;
            let (u, v, d, dl) = (e.from, e.to, e.delay as i64, e.distance as usize);
            if !cfg.cross_warp && !p.ops[u].variable_latency && !p.ops[v].variable_latency {
                self.solver.assert(self.cross(u, v).not());
            }
            let spill = p.ops[u].spill_cost as i64;
            let crosses = if u == v {
                Bool::from_bool(false)
            } else {
                self.cross(u, v)
            };
            for i in 0..copies {
                if i + dl >= copies {
                    continue;
                }
                for t in 0..t_live {
                    let here = self.at(u, i, t);
                    if here.as_bool() == Some(false) {
                        continue;
                    }
                    for t2 in 0..(t + d).min(t_live) {
                        self.solver
                            .assert(here.implies(self.at(v, i + dl, t2).not()));
                    }
                    for s in 0..spill {
                        let t2 = t + d + s;
                        self.solver.assert(
                            Bool::and(&[here.clone(), crosses.clone()])
                                .implies(self.at(v, i + dl, t2).not()),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Capacity of every unit in every cycle of Q.
    fn assert_capacity(&self, p: &Problem) -> Result<(), TimeLimit> {
        for (fu, &cap) in p.capacity.iter().enumerate() {
            in_time(self.deadline)?;
            for t in 0..self.t_live as i64 {
                let mut terms: Vec<(Bool, i32)> = Vec::new();
                for (v, o) in p.ops.iter().enumerate() {
                    for (c, row) in o.rrt.iter().enumerate() {
                        if row[fu] > 0 {
                            for i in 0..self.copies {
                                let b = self.at(v, i, t - c as i64);
                                if b.as_bool() != Some(false) {
                                    terms.push((b, row[fu] as i32));
                                }
                            }
                        }
                    }
                }
                if terms.iter().map(|x| x.1 as i64).sum::<i64>() > cap as i64 {
                    self.solver.assert(pb_le(&terms, cap as i64));
                }
            }
        }
        Ok(())
    }

    /// Concurrency: a blocking v on warp w at t excludes every other op
    /// executing on w at t (any instance).
    fn assert_concurrency(&self, p: &Problem) -> Result<(), TimeLimit> {
        for v in 0..p.ops.len() {
            let incoming: Vec<_> = p.edges.iter().filter(|e| e.to == v).collect();
            if incoming.is_empty() {
                continue;
            }
            let mut why: Vec<Bool> = Vec::new();
            if incoming.iter().any(|e| e.blocking) {
                why.push(Bool::from_bool(true));
            }
            for e in incoming.iter().filter(|e| e.from != v) {
                why.push(self.cross(e.from, v));
            }
            if why.is_empty() {
                continue;
            }
            let blocking = Bool::or(&why);
            for i in 0..self.copies {
                in_time(self.deadline)?;
                for t in 0..self.t_live as i64 {
                    self.assert_exclusive(p, v, i, t, &blocking);
                }
            }
        }
        Ok(())
    }

    /// Instance i of a blocking v issuing at t on warp w: no other op that
    /// needs its warp executes on w at t.
    fn assert_exclusive(&self, p: &Problem, v: usize, i: usize, t: i64, blocking: &Bool) {
        let issue = self.at(v, i, t);
        if issue.as_bool() == Some(false) {
            return;
        }
        for o in (0..p.ops.len()).filter(|&o| o != v && !p.ops[o].asynchronous) {
            let cyc = p.ops[o].cycles as i64;
            for &w in &self.groups {
                let mut busy: Vec<Bool> = Vec::new();
                for i2 in 0..self.copies {
                    for t2 in (t - cyc + 1).max(0)..=t {
                        let b = self.at(o, i2, t2);
                        if b.as_bool() != Some(false) {
                            busy.push(b);
                        }
                    }
                }
                if busy.is_empty() {
                    continue;
                }
                let pre = Bool::and(&[issue.clone(), self.opw[v][w].clone(), blocking.clone()]);
                let clash = Bool::and(&[Bool::or(&busy), self.opw[o][w].clone()]);
                self.solver.assert(pre.implies(clash.not()));
            }
        }
    }

    /// Liveness (Figure 5) for values that occupy registers or memory.
    fn declare_liveness(&mut self, p: &Problem) -> Result<(), TimeLimit> {
        let n = p.ops.len();
        self.holds = (0..n)
            .map(|v| {
                (p.ops[v].regs > 0 || p.ops[v].memory.iter().any(|&m| m > 0))
                    && p.edges.iter().any(|e| e.from == v && !e.order)
            })
            .collect();
        for v in (0..n).filter(|&v| self.holds[v]) {
            let users: Vec<(usize, usize, i64)> = p
                .edges
                .iter()
                .filter(|e| e.from == v && !e.order)
                .map(|e| (e.to, e.distance as usize, e.hold as i64))
                .collect();
            self.live[v] = (0..self.copies)
                .map(|i| {
                    (0..=self.t_live)
                        .map(|t| Bool::new_const(format!("live_{v}_{i}_{t}")))
                        .collect()
                })
                .collect();
            in_time(self.deadline)?;
            for i in 0..self.copies {
                self.assert_live_flow(v, i, &users);
            }
        }
        Ok(())
    }

    /// The liveness dataflow of instance i of v, whose users are `users`
    /// (user, distance, hold).
    fn assert_live_flow(&self, v: usize, i: usize, users: &[(usize, usize, i64)]) {
        let (s, lv, t_live) = (&self.solver, &self.live[v][i], self.t_live);
        // Init: live at the end iff some user instance lies beyond Q.
        let beyond = users.iter().any(|&(_, dl, _)| i + dl >= self.copies);
        s.assert(lv[t_live].eq(Bool::from_bool(beyond)));
        for t in 1..=t_live {
            let issued = self.at(v, i, t as i64);
            let use_now: Vec<Bool> = users
                .iter()
                .map(|&(u, dl, h)| self.at(u, i + dl, t as i64 - h))
                .collect();
            let any_use = Bool::or(&use_now);
            // LiveProp-1, LiveProp-2.
            s.assert(Bool::and(&[lv[t].clone(), issued.clone()]).implies(lv[t - 1].not()));
            s.assert(Bool::and(&[lv[t].clone(), issued.not()]).implies(lv[t - 1].clone()));
            // DeadProp-1, DeadProp-2.
            let dead_use = Bool::and(&[lv[t].not(), any_use.clone(), issued.not()]);
            s.assert(dead_use.implies(lv[t - 1].clone()));
            let dead_quiet = Bool::and(&[lv[t].not(), Bool::or(&[any_use.not(), issued.clone()])]);
            s.assert(dead_quiet.implies(lv[t - 1].not()));
        }
        // At time 0 a value is live only if it issues at 0.
        s.assert(lv[0].implies(self.at(v, i, 0)));
    }

    /// Memory capacity and register limit on the steady-state window
    /// [(C-1) I, C I).
    fn assert_window_limits(&self, p: &Problem, cfg: &WarpConfig) -> Result<(), TimeLimit> {
        let n = p.ops.len();
        let (holds, live, copies) = (&self.holds, &self.live, self.copies);
        for t in (copies - 1) * self.ii..copies * self.ii {
            in_time(self.deadline)?;
            for (mk, (_, cap)) in p.memories.iter().enumerate() {
                let terms: Vec<(Bool, i32)> = (0..n)
                    .filter(|&v| holds[v] && p.ops[v].memory[mk] > 0)
                    .flat_map(|v| {
                        let w = p.ops[v].memory[mk].min(i32::MAX as u64) as i32;
                        (0..copies).map(move |i| (v, i, w))
                    })
                    .map(|(v, i, w)| (live[v][i][t].clone(), w))
                    .collect();
                if !terms.is_empty() {
                    self.solver.assert(pb_le(&terms, *cap as i64));
                }
            }
            for &w in &self.groups {
                let terms: Vec<(Bool, i32)> = (0..n)
                    .filter(|&v| holds[v] && p.ops[v].regs > 0)
                    .flat_map(|v| (0..copies).map(move |i| (v, i)))
                    .map(|(v, i)| {
                        (
                            Bool::and(&[live[v][i][t].clone(), self.opw[v][w].clone()]),
                            p.ops[v].regs as i32,
                        )
                    })
                    .collect();
                if !terms.is_empty() {
                    self.solver.assert(pb_le(&terms, cfg.reg_limit as i64));
                }
            }
        }
        Ok(())
    }

    /// Solves within what is left of the time limit (and the query's
    /// resource budget, when it has one).
    fn check(&self, e: &PaperEncoding, q: &Query) -> EncodingOutcome {
        let left = self
            .deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .max(1);
        let mut params = Params::new();
        params.set_u32("timeout", u32::try_from(left).unwrap_or(u32::MAX));
        params.set_u32("random_seed", e.seed);
        if q.rlimit > 0 {
            params.set_u32("rlimit", q.rlimit);
        }
        self.solver.set_params(&params);
        match self.solver.check() {
            SatResult::Unsat => EncodingOutcome::Unsat,
            SatResult::Unknown => EncodingOutcome::Unknown(
                self.solver
                    .get_reason_unknown()
                    .unwrap_or_else(|| "unknown".into()),
            ),
            SatResult::Sat => self.read_model(e),
        }
    }

    /// The joint schedule of the solver's model (copy 0's issue cycles).
    fn read_model(&self, e: &PaperEncoding) -> EncodingOutcome {
        let Some(model) = self.solver.get_model() else {
            return EncodingOutcome::Unknown("no model".into());
        };
        let truth = |b: &Bool| {
            model
                .eval(b, true)
                .and_then(|x| x.as_bool())
                .unwrap_or(false)
        };
        let n = e.p.ops.len();
        let start: Vec<u32> = (0..n)
            .map(|v| self.op[v][0].iter().position(truth).unwrap_or(0) as u32)
            .collect();
        let group: Vec<u32> = (0..n)
            .map(|v| self.opw[v].iter().position(truth).unwrap_or(0) as u32)
            .collect();
        EncodingOutcome::Sat(JointSchedule {
            schedule: Schedule::tight(e.p, e.ii, start),
            group,
        })
    }
}
