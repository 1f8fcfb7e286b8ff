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

use super::{EncodingOutcome, JointEncoding};
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

    fn solve_within(
        &mut self,
        max_length: u32,
        max_group: Option<u32>,
        timeout_ms: u32,
    ) -> EncodingOutcome {
        let p = self.p;
        let n = p.ops.len();
        let ii = self.ii as usize;
        // Building this encoding can itself take long: honour the time limit
        // while constructing, not only while solving.
        let deadline = Instant::now() + Duration::from_millis(timeout_ms as u64);
        macro_rules! check_deadline {
            () => {
                if Instant::now() > deadline {
                    return EncodingOutcome::Unknown(
                        "time limit while building the paper encoding".into(),
                    );
                }
            };
        }
        let l = max_length as usize;
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
        let window = (copies - 1) * ii..copies * ii;
        // Groups: 0 for variable latency, 1..=G compute.
        let top = max_group.unwrap_or(self.cfg.groups).min(self.cfg.groups);
        let groups: Vec<usize> = (0..=top as usize).collect();

        // QF_FD: z3's SAT core with native pseudo-Boolean reasoning (the SMT
        // core's PB theory is unsound on these encodings in z3 4.8.12).
        let solver = Solver::new_for_logic("QF_FD").unwrap_or_default();
        let mut params = Params::new();
        params.set_u32("timeout", timeout_ms.max(1));
        params.set_u32("random_seed", self.seed);
        solver.set_params(&params);
        let f = Bool::from_bool(false);

        // op[v][i][t]; completion: no variable where t + cycles(v) > T.
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
        let at = |v: usize, i: usize, t: i64| -> Bool {
            if i >= copies || t < 0 || t as usize >= t_live {
                f.clone()
            } else {
                op[v][i][t as usize].clone()
            }
        };
        // Uniqueness.
        for row in op.iter().flatten() {
            let refs: Vec<(&Bool, i32)> = row.iter().map(|b| (b, 1)).collect();
            solver.assert(Bool::pb_eq(&refs, 1));
        }
        check_deadline!();
        // Consistency.
        for v in 0..n {
            for t in 0..t_live {
                for i in 1..copies {
                    solver.assert(op[v][0][t].implies(at(v, i, (t + i * ii) as i64)));
                }
            }
        }
        // Last-stage pins (twill's addition for Triton < 3.9 on Hopper): with
        // st[v][k] = "copy 0 of v issues in stage k", a pinned v in stage k
        // excludes every other op from the stages after k.
        if p.ops.iter().any(|o| o.last_stage) {
            let nstages = t_live.div_ceil(ii).max(1);
            let st: Vec<Vec<Bool>> = (0..n)
                .map(|v| {
                    (0..nstages)
                        .map(|k| {
                            let lits: Vec<Bool> = (k * ii..((k + 1) * ii).min(t_live))
                                .map(|t| op[v][0][t].clone())
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
                            solver.assert(Bool::and(&[&st[v][k], &st[w][later]]).not());
                        }
                    }
                }
            }
        }
        // Warp assignment: opw[v][w], uniqueness, variable latency.
        let opw: Vec<Vec<Bool>> = (0..n)
            .map(|v| {
                groups
                    .iter()
                    .map(|w| Bool::new_const(format!("opw_{v}_{w}")))
                    .collect()
            })
            .collect();
        for v in 0..n {
            let refs: Vec<(&Bool, i32)> = opw[v].iter().map(|b| (b, 1)).collect();
            solver.assert(Bool::pb_eq(&refs, 1));
            let vl = Bool::from_bool(p.ops[v].variable_latency);
            solver.assert(vl.eq(&opw[v][0]));
        }
        let cross = |u: usize, v: usize| -> Bool {
            let pairs: Vec<Bool> = groups
                .iter()
                .map(|&w| Bool::and(&[opw[u][w].clone(), opw[v][w].not()]))
                .collect();
            Bool::or(&pairs)
        };
        // Colocation (rule 5): no set member on another group than the first.
        for set in &p.same_group {
            for pair in set.windows(2) {
                solver.assert(cross(pair[0], pair[1]).not());
            }
        }
        // Bandwidth of the crossings (rule 10).
        if groups.len() > 1 {
            if let Some((charges, left)) = super::crossing_budget(p, self.ii) {
                let terms: Vec<(Bool, i32)> = charges
                    .iter()
                    .map(|&(a, b, w)| (cross(a, b), w.min(i32::MAX as u64) as i32))
                    .collect();
                solver.assert(pb_le(&terms, left.min(i32::MAX as u64) as i64));
            }
        }
        // Dependence and cross-warp spills.
        for e in &p.edges {
            check_deadline!();
            let (u, v, d, dl) = (e.from, e.to, e.delay as i64, e.distance as usize);
            if !self.cfg.cross_warp && !p.ops[u].variable_latency && !p.ops[v].variable_latency {
                solver.assert(cross(u, v).not());
            }
            let spill = p.ops[u].spill_cost as i64;
            let crosses = if u == v { f.clone() } else { cross(u, v) };
            for i in 0..copies {
                if i + dl >= copies {
                    continue;
                }
                for t in 0..t_live as i64 {
                    let here = at(u, i, t);
                    if here.as_bool() == Some(false) {
                        continue;
                    }
                    for t2 in 0..(t + d).min(t_live as i64) {
                        solver.assert(here.implies(at(v, i + dl, t2).not()));
                    }
                    for s in 0..spill {
                        let t2 = t + d + s;
                        solver.assert(
                            Bool::and(&[here.clone(), crosses.clone()])
                                .implies(at(v, i + dl, t2).not()),
                        );
                    }
                }
            }
        }
        // Capacity.
        for (fu, &cap) in p.capacity.iter().enumerate() {
            check_deadline!();
            for t in 0..t_live as i64 {
                let mut terms: Vec<(Bool, i32)> = Vec::new();
                for (v, o) in p.ops.iter().enumerate() {
                    for (c, row) in o.rrt.iter().enumerate() {
                        if row[fu] > 0 {
                            for i in 0..copies {
                                let b = at(v, i, t - c as i64);
                                if b.as_bool() != Some(false) {
                                    terms.push((b, row[fu] as i32));
                                }
                            }
                        }
                    }
                }
                if terms.iter().map(|x| x.1 as i64).sum::<i64>() > cap as i64 {
                    solver.assert(pb_le(&terms, cap as i64));
                }
            }
        }
        // Concurrency: a blocking v on warp w at t excludes every other op
        // executing on w at t (any instance).
        for v in 0..n {
            let incoming: Vec<_> = p.edges.iter().filter(|e| e.to == v).collect();
            if incoming.is_empty() {
                continue;
            }
            let mut why: Vec<Bool> = Vec::new();
            if incoming.iter().any(|e| e.blocking) {
                why.push(Bool::from_bool(true));
            }
            for e in incoming.iter().filter(|e| e.from != v) {
                why.push(cross(e.from, v));
            }
            if why.is_empty() {
                continue;
            }
            let blocking = Bool::or(&why);
            for i in 0..copies {
                check_deadline!();
                for t in 0..t_live as i64 {
                    let issue = at(v, i, t);
                    if issue.as_bool() == Some(false) {
                        continue;
                    }
                    for o in (0..n).filter(|&o| o != v && !p.ops[o].asynchronous) {
                        let cyc = p.ops[o].cycles as i64;
                        for &w in &groups {
                            let mut busy: Vec<Bool> = Vec::new();
                            for i2 in 0..copies {
                                for t2 in (t - cyc + 1).max(0)..=t {
                                    let b = at(o, i2, t2);
                                    if b.as_bool() != Some(false) {
                                        busy.push(b);
                                    }
                                }
                            }
                            if busy.is_empty() {
                                continue;
                            }
                            let pre =
                                Bool::and(&[issue.clone(), opw[v][w].clone(), blocking.clone()]);
                            let clash = Bool::and(&[Bool::or(&busy), opw[o][w].clone()]);
                            solver.assert(pre.implies(clash.not()));
                        }
                    }
                }
            }
        }
        // Liveness (Figure 5) for values that occupy registers or memory.
        let holds: Vec<bool> = (0..n)
            .map(|v| {
                (p.ops[v].regs > 0 || p.ops[v].memory.iter().any(|&m| m > 0))
                    && p.edges.iter().any(|e| e.from == v && !e.order)
            })
            .collect();
        let mut live: Vec<Vec<Vec<Bool>>> = vec![vec![]; n];
        for v in (0..n).filter(|&v| holds[v]) {
            let users: Vec<(usize, usize, i64)> = p
                .edges
                .iter()
                .filter(|e| e.from == v && !e.order)
                .map(|e| (e.to, e.distance as usize, e.hold as i64))
                .collect();
            live[v] = (0..copies)
                .map(|i| {
                    (0..=t_live)
                        .map(|t| Bool::new_const(format!("live_{v}_{i}_{t}")))
                        .collect()
                })
                .collect();
            check_deadline!();
            for i in 0..copies {
                let lv = &live[v][i];
                // Init: live at the end iff some user instance lies beyond Q.
                let beyond = users.iter().any(|&(_, dl, _)| i + dl >= copies);
                solver.assert(lv[t_live].eq(Bool::from_bool(beyond)));
                for t in 1..=t_live {
                    let issued = at(v, i, t as i64);
                    let use_now: Vec<Bool> = users
                        .iter()
                        .map(|&(u, dl, h)| at(u, i + dl, t as i64 - h))
                        .collect();
                    let any_use = Bool::or(&use_now);
                    // LiveProp-1, LiveProp-2.
                    solver.assert(
                        Bool::and(&[lv[t].clone(), issued.clone()]).implies(lv[t - 1].not()),
                    );
                    solver.assert(
                        Bool::and(&[lv[t].clone(), issued.not()]).implies(lv[t - 1].clone()),
                    );
                    // DeadProp-1, DeadProp-2.
                    let dead_use = Bool::and(&[lv[t].not(), any_use.clone(), issued.not()]);
                    solver.assert(dead_use.implies(lv[t - 1].clone()));
                    let dead_quiet =
                        Bool::and(&[lv[t].not(), Bool::or(&[any_use.not(), issued.clone()])]);
                    solver.assert(dead_quiet.implies(lv[t - 1].not()));
                }
                // At time 0 a value is live only if it issues at 0.
                solver.assert(lv[0].implies(at(v, i, 0)));
            }
        }
        // Memory capacity and register limit on the steady-state window.
        for t in window.clone() {
            check_deadline!();
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
                    solver.assert(pb_le(&terms, *cap as i64));
                }
            }
            for &w in &groups {
                let terms: Vec<(Bool, i32)> = (0..n)
                    .filter(|&v| holds[v] && p.ops[v].regs > 0)
                    .flat_map(|v| (0..copies).map(move |i| (v, i)))
                    .map(|(v, i)| {
                        (
                            Bool::and(&[live[v][i][t].clone(), opw[v][w].clone()]),
                            p.ops[v].regs as i32,
                        )
                    })
                    .collect();
                if !terms.is_empty() {
                    solver.assert(pb_le(&terms, self.cfg.reg_limit as i64));
                }
            }
        }

        check_deadline!();
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .max(1);
        let mut params = Params::new();
        params.set_u32("timeout", u32::try_from(left).unwrap_or(u32::MAX));
        params.set_u32("random_seed", self.seed);
        solver.set_params(&params);
        match solver.check() {
            SatResult::Unsat => EncodingOutcome::Unsat,
            SatResult::Unknown => EncodingOutcome::Unknown(
                solver
                    .get_reason_unknown()
                    .unwrap_or_else(|| "unknown".into()),
            ),
            SatResult::Sat => {
                let Some(model) = solver.get_model() else {
                    return EncodingOutcome::Unknown("no model".into());
                };
                let truth = |b: &Bool| {
                    model
                        .eval(b, true)
                        .and_then(|x| x.as_bool())
                        .unwrap_or(false)
                };
                let start: Vec<u32> = (0..n)
                    .map(|v| op[v][0].iter().position(truth).unwrap_or(0) as u32)
                    .collect();
                let group: Vec<u32> = (0..n)
                    .map(|v| opw[v].iter().position(truth).unwrap_or(0) as u32)
                    .collect();
                EncodingOutcome::Sat(JointSchedule {
                    schedule: Schedule::tight(p, self.ii, start),
                    group,
                })
            }
        }
    }
}
