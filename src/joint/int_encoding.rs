//! twill's own SMT encoding of the joint problem (the default).
//!
//! One integer start time M(v) per op and one integer group A(v) per compute
//! op, instead of the paper's boolean op[v, i, t] over the straight-line
//! program: all copies of an op are M(v) + iI, so every constraint of the
//! paper's Figures 4-6 can be stated on the steady state directly.
//!
//! * modulo capacity as pairwise non-overlap of occupancy intervals modulo I:
//!   intervals [M(u)+a, M(u)+a+la) and [M(v)+b, M(v)+b+lb) on a unit of
//!   capacity 1 are disjoint in every iteration iff
//!   (M(v)+b - M(u)-a) mod I lies in [la, I-lb]; units of larger capacity
//!   count occupancy per residue;
//! * dependences with the cross-warp spill added when A(u) != A(v);
//! * liveness from the latest user E(v) = max M(u) + delta*I: the number of
//!   live instances of v at cycle t is floor(l/I) + [(t - M(v)) mod I < l mod I]
//!   with l = E(v) - M(v); register and memory limits are checked at every
//!   lifetime start (where the live sum can increase);
//! * concurrency: (M(v) - M(o)) mod I >= cycles(o) when v blocks and o shares
//!   its group;
//! * symmetry breaking between the interchangeable compute groups (the first
//!   compute op takes group 1, each next one at most one past the largest so
//!   far);
//! * the length L is a variable bounded by assumptions, so one solver per I
//!   answers every L query incrementally.

// Encodings index ops, copies and cycles together; index loops read best.
#![allow(clippy::needless_range_loop)]

use z3::ast::{Bool, Int};
use z3::{Params, SatResult, Solver};

use super::{EncodingOutcome, JointEncoding};
use crate::checker::{JointSchedule, WarpConfig};
use crate::problem::{Problem, Schedule};

/// An occupancy interval of an op on a unit: (offset, length, instances).
type Interval = (i64, i64, u32);

/// Occupancy intervals of one op on one unit.
fn intervals(p: &Problem, v: usize, f: usize) -> Vec<Interval> {
    let mut out: Vec<Interval> = Vec::new();
    for (c, row) in p.ops[v].rrt.iter().enumerate() {
        let n = row[f];
        if n == 0 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.0 + last.1 == c as i64 && last.2 == n => last.1 += 1,
            _ => out.push((c as i64, 1, n)),
        }
    }
    out
}

pub struct IntEncoding<'p> {
    p: &'p Problem,
    cfg: WarpConfig,
    seed: u32,
    ii: u32,
    solver: Solver,
    start: Vec<Int>,
    group: Vec<Int>,
    length: Int,
    /// Statically infeasible at this I (an op overlaps itself, ...).
    trivially_unsat: bool,
}

impl<'p> IntEncoding<'p> {
    pub fn new(p: &'p Problem, cfg: WarpConfig, seed: u32) -> Self {
        IntEncoding {
            p,
            cfg,
            seed,
            ii: 0,
            solver: Solver::new(),
            start: vec![],
            group: vec![],
            length: Int::from_i64(0),
            trivially_unsat: false,
        }
    }

    fn modulo(&self, x: &Int) -> Int {
        x.modulo(Int::from_i64(self.ii as i64))
    }
}

impl JointEncoding for IntEncoding<'_> {
    fn name(&self) -> &'static str {
        "default"
    }

    fn set_interval(&mut self, ii: u32) {
        let p = self.p;
        let n = p.ops.len();
        self.ii = ii;
        self.trivially_unsat = false;
        self.solver = Solver::new();
        let mut params = Params::new();
        params.set_u32("random_seed", self.seed);
        self.solver.set_params(&params);
        let s = &self.solver;
        let iv = ii as i64;
        let i_int = Int::from_i64(iv);

        self.length = Int::new_const("L");
        self.start = (0..n).map(|v| Int::new_const(format!("M_{v}"))).collect();
        let compute: Vec<usize> = (0..n).filter(|&v| !p.ops[v].variable_latency).collect();
        self.group = (0..n)
            .map(|v| {
                if p.ops[v].variable_latency {
                    Int::from_i64(0)
                } else if self.cfg.groups == 1 {
                    Int::from_i64(1)
                } else {
                    Int::new_const(format!("A_{v}"))
                }
            })
            .collect();
        let (m, g, len) = (&self.start, &self.group, &self.length);

        // Completion and bounds.
        for v in 0..n {
            s.assert(m[v].ge(0));
            s.assert((&m[v] + p.ops[v].cycles as i64).le(len));
        }
        // Groups and symmetry breaking.
        if self.cfg.groups > 1 {
            let mut max_so_far: Option<Int> = None;
            for &v in &compute {
                s.assert(g[v].ge(1));
                s.assert(g[v].le(self.cfg.groups as i64));
                match &max_so_far {
                    None => {
                        s.assert(g[v].eq(1));
                        max_so_far = Some(g[v].clone());
                    }
                    Some(mx) => {
                        s.assert(g[v].le(mx + 1));
                        max_so_far = Some(g[v].gt(mx).ite(&g[v], mx));
                    }
                }
            }
        }
        let differ = |u: usize, v: usize| -> Bool { g[u].eq(&g[v]).not() };

        // Dependences (+ cross-warp spill).
        for e in &p.edges {
            if !self.cfg.cross_warp && !p.ops[e.from].variable_latency && !p.ops[e.to].variable_latency {
                s.assert(g[e.from].eq(&g[e.to]));
            }
            let lhs = &m[e.to] + iv * e.distance as i64;
            let base = &m[e.from] + e.delay as i64;
            s.assert(lhs.ge(&base));
            let spill = p.ops[e.from].spill_cost as i64;
            if spill > 0 && e.from != e.to {
                s.assert(differ(e.from, e.to).implies(lhs.ge(&base + spill)));
            }
        }

        // Modulo capacity.
        for (f, &cap) in p.capacity.iter().enumerate() {
            let ivs: Vec<(usize, Vec<Interval>)> = (0..n)
                .map(|v| (v, intervals(p, v, f)))
                .filter(|(_, x)| !x.is_empty())
                .collect();
            let unit_simple = cap == 1 && ivs.iter().all(|(_, x)| x.iter().all(|i| i.2 == 1));
            if unit_simple {
                for (a, (u, xu)) in ivs.iter().enumerate() {
                    // An op's own intervals, across iterations.
                    for (k, &(oa, la, _)) in xu.iter().enumerate() {
                        if la > iv {
                            self.trivially_unsat = true;
                        }
                        for &(ob, lb, _) in &xu[k + 1..] {
                            let r = (ob - oa).rem_euclid(iv);
                            if la + lb > iv || r < la || r > iv - lb {
                                self.trivially_unsat = true;
                            }
                        }
                    }
                    for (v, xv) in &ivs[a + 1..] {
                        for &(oa, la, _) in xu {
                            for &(ob, lb, _) in xv {
                                if la + lb > iv {
                                    self.trivially_unsat = true;
                                    continue;
                                }
                                let r = self.modulo(&(&m[*v] + ob - &m[*u] - oa));
                                s.assert(r.ge(la));
                                s.assert(r.le(iv - lb));
                            }
                        }
                    }
                }
            } else {
                let residue: Vec<Int> = (0..n).map(|v| self.modulo(&m[v])).collect();
                for r in 0..iv {
                    let mut terms: Vec<Int> = Vec::new();
                    for (v, xv) in &ivs {
                        for &(off, len_i, k) in xv {
                            for c in off..off + len_i {
                                let want = (r - c).rem_euclid(iv);
                                terms.push(
                                    residue[*v]
                                        .eq(want)
                                        .ite(&Int::from_i64(k as i64), &Int::from_i64(0)),
                                );
                            }
                        }
                    }
                    if !terms.is_empty() {
                        s.assert(Int::add(&terms).le(cap as i64));
                    }
                }
            }
        }

        // Concurrency.
        for v in 0..n {
            let incoming: Vec<&crate::problem::ProblemEdge> = p
                .edges
                .iter()
                .filter(|e| e.to == v && e.from != v)
                .collect();
            if incoming.is_empty() && !p.edges.iter().any(|e| e.to == v && e.blocking) {
                continue;
            }
            let mut why: Vec<Bool> = Vec::new();
            if p.edges.iter().any(|e| e.to == v && e.blocking) {
                why.push(Bool::from_bool(true));
            }
            for e in &incoming {
                why.push(differ(e.from, v));
            }
            let blocking = Bool::or(&why);
            for o in 0..n {
                let cyc = p.ops[o].cycles as i64;
                if o == v || cyc == 0 {
                    continue;
                }
                if p.ops[o].variable_latency != p.ops[v].variable_latency {
                    continue; // never in the same group
                }
                let same = g[o].eq(&g[v]);
                let apart = if cyc >= iv {
                    Bool::from_bool(false)
                } else {
                    self.modulo(&(&m[v] - &m[o])).ge(cyc)
                };
                s.assert(Bool::and(&[same, blocking.clone()]).implies(apart));
            }
        }

        // Liveness: registers per group, memory per kind.
        let mut live_count: Vec<Option<(Int, Int)>> = vec![None; n]; // (q, r) of the lifetime
        for x in 0..n {
            let holds = p.ops[x].regs > 0 || p.ops[x].memory.iter().any(|&b| b > 0);
            let users: Vec<Int> = p
                .edges
                .iter()
                .filter(|e| e.from == x)
                .map(|e| &m[e.to] + iv * e.distance as i64)
                .collect();
            if !holds || users.is_empty() {
                continue;
            }
            let mut end = users[0].clone();
            for u in &users[1..] {
                end = u.gt(&end).ite(u, &end);
            }
            let life = &end - &m[x];
            live_count[x] = Some((life.div(&i_int), life.modulo(&i_int)));
        }
        let count_at = |x: usize, t: &Int| -> Option<Int> {
            let (q, r) = live_count[x].as_ref()?;
            let off = (t - &m[x]).modulo(Int::from_i64(iv));
            Some(q + off.lt(r).ite(&Int::from_i64(1), &Int::from_i64(0)))
        };
        for v in 0..n {
            if p.ops[v].regs > 0 && live_count[v].is_some() {
                let mut terms = Vec::new();
                for x in 0..n {
                    if p.ops[x].regs == 0 || p.ops[x].variable_latency != p.ops[v].variable_latency
                    {
                        continue;
                    }
                    if let Some(c) = count_at(x, &m[v]) {
                        let regs = c * p.ops[x].regs as i64;
                        terms.push(g[x].eq(&g[v]).ite(&regs, &Int::from_i64(0)));
                    }
                }
                if !terms.is_empty() {
                    s.assert(Int::add(&terms).le(self.cfg.reg_limit as i64));
                }
            }
            for (mk, (_, cap)) in p.memories.iter().enumerate() {
                if p.ops[v].memory[mk] == 0 || live_count[v].is_none() {
                    continue;
                }
                let terms: Vec<Int> = (0..n)
                    .filter(|&x| p.ops[x].memory[mk] > 0)
                    .filter_map(|x| count_at(x, &m[v]).map(|c| c * p.ops[x].memory[mk] as i64))
                    .collect();
                if !terms.is_empty() {
                    s.assert(Int::add(&terms).le(*cap as i64));
                }
            }
        }
    }

    fn solve_within(&mut self, max_length: u32, max_group: Option<u32>, timeout_ms: u32) -> EncodingOutcome {
        if self.trivially_unsat {
            return EncodingOutcome::Unsat;
        }
        let mut params = Params::new();
        params.set_u32("timeout", timeout_ms.max(1));
        params.set_u32("random_seed", self.seed);
        self.solver.set_params(&params);
        let mut assumptions = vec![self.length.le(max_length as i64)];
        if let Some(k) = max_group {
            for (v, g) in self.group.iter().enumerate() {
                if !self.p.ops[v].variable_latency {
                    assumptions.push(g.le(k as i64));
                }
            }
        }
        match self.solver.check_assumptions(&assumptions) {
            SatResult::Unsat => EncodingOutcome::Unsat,
            SatResult::Unknown => EncodingOutcome::Unknown(
                self.solver
                    .get_reason_unknown()
                    .unwrap_or_else(|| "unknown".into()),
            ),
            SatResult::Sat => {
                let Some(model) = self.solver.get_model() else {
                    return EncodingOutcome::Unknown("no model".into());
                };
                let value = |x: &Int| model.eval(x, true).and_then(|v| v.as_i64()).unwrap_or(0);
                let start: Vec<u32> = self.start.iter().map(|x| value(x).max(0) as u32).collect();
                let group: Vec<u32> = self.group.iter().map(|x| value(x).max(0) as u32).collect();
                let length = self
                    .p
                    .ops
                    .iter()
                    .zip(&start)
                    .map(|(o, &s)| s + o.cycles)
                    .max()
                    .unwrap_or(0);
                EncodingOutcome::Sat(JointSchedule {
                    schedule: Schedule {
                        ii: self.ii,
                        start,
                        length,
                    },
                    group,
                })
            }
        }
    }
}
