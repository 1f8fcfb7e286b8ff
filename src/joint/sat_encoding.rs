//! twill's default encoding of the joint problem: pure Boolean (SAT with
//! pseudo-Boolean constraints), one copy of the schedule folded modulo I.
//!
//! Where the paper's encoding has op[v, i, t] for every copy i of the
//! straight-line program and every cycle t, this encoding keeps one copy and
//! the *order encoding* of each issue cycle: B[v][t] <=> M(v) >= t. Then
//!
//! * a dependence M(v) + I*delta >= M(u) + d is one binary clause per t,
//!   B[u][t] => B[v][t + d - I*delta] (with the spill added under "A(u) != A(v)");
//! * the residue M(v) mod I is one-hot: R[v][r] <=> OR over t = r (mod I) of
//!   (B[v][t] and not B[v][t+1]); modulo capacity is a cardinality constraint
//!   per unit and residue over the R literals of the occupied rows;
//! * the warp group is one-hot G[v][w], with value-precedence symmetry
//!   breaking between the interchangeable compute groups;
//! * concurrency forbids R[v][r] and "o executes at residue r" in one group when
//!   v blocks and o needs its warp (not `ProblemOp::asynchronous`);
//! * liveness: instance m periods back of x is live at steady-state residue r
//!   iff M(x) <= a < E(x) for a = r + m*I, i.e. not B[x][a+1] and
//!   OR over users u of B[u][a+1-delta_u*I]; register and memory limits are
//!   pseudo-Boolean sums of these literals per residue (and group);
//! * a length bound L is a set of assumption literals not B[v][L - cycles(v) + 1],
//!   so one solver per I answers every L query incrementally.
//!
//! * interchangeable ops (an involutive automorphism of the problem, such as
//!   the swap of two sub-tiles) are ordered: M(v) <= M(pi(v)) for the first
//!   op v that pi moves (see [`super::symmetry`]).
//!
//! No integer arithmetic appears, so z3 runs its SAT core (the bare `sat`
//! tactic, without the QF_FD logic's preprocessing) with native cardinality
//! and pseudo-Boolean reasoning.

// Encodings index ops, cycles and residues together; index loops read best.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;

use z3::ast::Bool;
use z3::{Params, SatResult, Solver, Tactic};

use super::{EncodingOutcome, JointEncoding, Query};
use crate::checker::{JointSchedule, WarpConfig};
use crate::problem::{Problem, Schedule};

pub struct SatEncoding<'p> {
    p: &'p Problem,
    cfg: WarpConfig,
    seed: u32,
    modulo_only: bool,
    ii: u32,
    built: bool,
    solver: Solver,
    /// B[v][t] for t in 1..=horizon[v] (index t - 1).
    order: Vec<Vec<Bool>>,
    /// Latest issue cycle of each op within the built length bound.
    last: Vec<i64>,
    /// G[v][w - 1] for compute ops (empty for variable-latency ops).
    group: Vec<Vec<Bool>>,
    trivially_unsat: bool,
    /// One literal per pair of compute ops joined by an edge: "in different
    /// groups" (see [`super::cross_pairs`]).
    cross: Vec<Bool>,
    /// Guard literals g_K => (sum of `cross` <= K), made on demand.
    cross_guards: HashMap<u32, Bool>,
    /// Guard literals g_S => (latency slack >= S over the pairs), made on
    /// demand (see [`super::slack`]).
    slack_guards: HashMap<i64, Bool>,
    /// The pairs those guards were made for, and how many sets of pairs
    /// came before (guards of a new set get fresh names: z3 identifies
    /// constants by name, so an old name would bring its old clauses).
    slack_pairs: Vec<super::slack::SlackPair>,
    slack_generation: u32,
    /// The literals "u and v in one group" of the current build, by pair.
    same_cache: HashMap<(usize, usize), Bool>,
}

impl<'p> SatEncoding<'p> {
    pub fn new(p: &'p Problem, cfg: WarpConfig, seed: u32) -> Self {
        SatEncoding {
            p,
            cfg,
            seed,
            modulo_only: false,
            ii: 0,
            built: false,
            solver: Solver::new(),
            order: vec![],
            last: vec![],
            group: vec![],
            trivially_unsat: false,
            cross: Vec::new(),
            cross_guards: HashMap::new(),
            slack_guards: HashMap::new(),
            slack_pairs: Vec::new(),
            slack_generation: 0,
            same_cache: HashMap::new(),
        }
    }

    /// An encoding of rules 1-4 only: optimal modulo scheduling in SAT.
    pub fn modulo_only(p: &'p Problem, seed: u32) -> Self {
        let mut e = SatEncoding::new(p, WarpConfig::unconstrained(), seed);
        e.modulo_only = true;
        e
    }

    /// The literal M(v) >= t.
    fn ge(&self, v: usize, t: i64) -> Bool {
        if t <= 0 {
            Bool::from_bool(true)
        } else if t > self.last[v] {
            Bool::from_bool(false)
        } else {
            self.order[v][(t - 1) as usize].clone()
        }
    }

    /// Builds the encoding for `ii` with schedules no longer than
    /// `max_length`: one constraint family after the other, in a fixed
    /// order (z3's answers depend on it).
    fn build(&mut self, ii: u32, max_length: u32) {
        self.reset(ii);
        if !self.declare_order(max_length) {
            self.trivially_unsat = true;
            return;
        }
        self.assert_last_stage_pins();
        self.assert_interchangeable_order();
        self.declare_groups();
        if self.ws() {
            self.assert_colocation();
        }
        self.declare_crossings();
        self.assert_crossing_bandwidth();
        self.assert_dependences();
        let residue = self.declare_residues();
        self.assert_modulo_capacity(&residue);
        if !self.ws() {
            return;
        }
        self.assert_concurrency(&residue);
        let live = self.declare_liveness(max_length);
        for r in 0..ii as i64 {
            self.assert_register_limits(&live, r);
            self.assert_memory_limits(&live, r);
        }
    }

    /// Whether warp specialization is encoded (not only rules 1-4).
    fn ws(&self) -> bool {
        !self.modulo_only
    }

    /// A fresh solver for `ii`: the state of an earlier build is dropped.
    fn reset(&mut self, ii: u32) {
        self.ii = ii;
        self.built = true;
        self.trivially_unsat = false;
        self.cross_guards.clear();
        self.slack_guards.clear();
        self.same_cache.clear();
        // z3's SAT core with native cardinality/pseudo-Boolean reasoning,
        // reached through the bare `sat` tactic: the input is already
        // Boolean, and the preprocessing that the QF_FD logic adds
        // (simplify, propagate-values, card2bv, bit-blast) took more time
        // than the search itself on the case studies (2x overall, NOTES.md).
        // The default SMT core's pseudo-Boolean theory answered `unsat` for a
        // satisfiable query of this encoding with z3 4.8.12 (NOTES.md).
        self.solver = Tactic::new("sat").solver();
        let mut params = Params::new();
        params.set_u32("random_seed", self.seed);
        self.solver.set_params(&params);
    }

    /// The order literals B[v][t] of every op within `max_length`, chained
    /// (M(v) >= t + 1 implies M(v) >= t); false when some op cannot fit.
    fn declare_order(&mut self, max_length: u32) -> bool {
        let p = self.p;
        let n = p.ops.len();
        self.last = p
            .ops
            .iter()
            .map(|o| max_length as i64 - o.cycles as i64)
            .collect();
        if self.last.iter().any(|&l| l < 0) {
            return false;
        }
        self.order = (0..n)
            .map(|v| {
                (1..=self.last[v])
                    .map(|t| Bool::new_const(format!("B_{v}_{t}")))
                    .collect()
            })
            .collect();
        for v in 0..n {
            for t in 1..self.last[v] {
                self.solver.assert(self.ge(v, t + 1).implies(self.ge(v, t)));
            }
        }
        true
    }

    /// Last-stage pins: stage(w) <= stage(v) for pinned v, i.e. for every
    /// stage boundary b = kI: M(w) >= b implies M(v) >= b.
    fn assert_last_stage_pins(&self) {
        let (p, n, iv) = (self.p, self.p.ops.len(), self.ii as i64);
        for v in (0..n).filter(|&v| p.ops[v].last_stage) {
            for w in (0..n).filter(|&w| w != v) {
                let mut b = iv;
                while b <= self.last[w] {
                    self.solver.assert(self.ge(w, b).implies(self.ge(v, b)));
                    b += iv;
                }
            }
        }
    }

    /// Interchangeable ops (sub-tiles): M(v) <= M(pi(v)) for the first
    /// moved op.
    fn assert_interchangeable_order(&self) {
        if let Some((v, perm)) = super::symmetry::find_involution(self.p) {
            let u = perm[v];
            for t in 1..=self.last[v] {
                self.solver.assert(self.ge(v, t).implies(self.ge(u, t)));
            }
        }
    }

    /// Compute groups encoded (1 without warp specialization).
    fn groups(&self) -> usize {
        if self.ws() {
            self.cfg.groups as usize
        } else {
            1
        }
    }

    /// The group literals G[v][w]: one-hot, with value-precedence symmetry
    /// breaking between the interchangeable compute groups.
    fn declare_groups(&mut self) {
        let p = self.p;
        let n = p.ops.len();
        let groups = self.groups();
        self.group = (0..n)
            .map(|v| {
                if p.ops[v].variable_latency {
                    vec![]
                } else if groups == 1 {
                    vec![Bool::from_bool(true)]
                } else {
                    (1..=groups)
                        .map(|w| Bool::new_const(format!("G_{v}_{w}")))
                        .collect()
                }
            })
            .collect();
        if groups == 1 {
            return;
        }
        let compute: Vec<usize> = (0..n).filter(|&v| !p.ops[v].variable_latency).collect();
        let s = &self.solver;
        for &v in &compute {
            let refs: Vec<(&Bool, i32)> = self.group[v].iter().map(|b| (b, 1)).collect();
            s.assert(Bool::pb_eq(&refs, 1));
        }
        for (j, &v) in compute.iter().enumerate() {
            if j == 0 {
                s.assert(self.group[v][0].clone());
                continue;
            }
            for w in 1..groups {
                let before: Vec<Bool> = compute[..j]
                    .iter()
                    .map(|&u| self.group[u][w - 1].clone())
                    .collect();
                s.assert(self.group[v][w].implies(Bool::or(&before)));
            }
        }
    }

    /// The literal "u and v run in one group", made (and defined) on first
    /// use.
    fn same(&mut self, u: usize, v: usize) -> Bool {
        let key = (u.min(v), u.max(v));
        if let Some(b) = self.same_cache.get(&key) {
            return b.clone();
        }
        let p = self.p;
        let groups = self.groups();
        let b = match (p.ops[u].variable_latency, p.ops[v].variable_latency) {
            (true, true) => Bool::from_bool(true),
            (true, false) | (false, true) => Bool::from_bool(false),
            _ if u == v || groups == 1 => Bool::from_bool(true),
            _ => {
                let g = &self.group;
                let both: Vec<Bool> = (0..groups)
                    .map(|w| Bool::and(&[g[u][w].clone(), g[v][w].clone()]))
                    .collect();
                let aux = Bool::new_const(format!("S_{}_{}", key.0, key.1));
                self.solver.assert(aux.eq(Bool::or(&both)));
                aux
            }
        };
        self.same_cache.insert(key, b.clone());
        b
    }

    /// u and v in one group, also as binary clauses that propagate at once.
    fn assert_together(&mut self, u: usize, v: usize) {
        let together = self.same(u, v);
        self.solver.assert(together);
        if self.groups() > 1 && !self.group[u].is_empty() && !self.group[v].is_empty() {
            for w in 0..self.groups() {
                self.solver.assert(self.group[u][w].eq(&self.group[v][w]));
            }
        }
    }

    /// Colocation (rule 5): every same_group set on one group.
    fn assert_colocation(&mut self) {
        for set in &self.p.same_group {
            for pair in set.windows(2) {
                self.assert_together(pair[0], pair[1]);
            }
        }
    }

    /// Cross-group pairs, for the fewest-crossings refinement.
    fn declare_crossings(&mut self) {
        self.cross = if self.ws() && self.groups() > 1 {
            super::cross_pairs(self.p)
                .into_iter()
                .map(|(u, v)| self.same(u, v).not())
                .collect()
        } else {
            Vec::new()
        };
    }

    /// Bandwidth of the crossings (rule 10): the charged pairs that cross
    /// fit in what the ops' own traffic leaves of the budget.
    fn assert_crossing_bandwidth(&mut self) {
        if !self.ws() || self.groups() == 1 {
            return;
        }
        let Some((charges, left)) = super::crossing_budget(self.p, self.ii) else {
            return;
        };
        let crossed: Vec<Bool> = charges
            .iter()
            .map(|&(a, b, _)| self.same(a, b).not())
            .collect();
        let terms: Vec<(&Bool, i32)> = crossed
            .iter()
            .zip(&charges)
            .map(|(c, &(_, _, w))| (c, w.min(i32::MAX as u64) as i32))
            .collect();
        self.solver
            .assert(Bool::pb_le(&terms, left.min(i32::MAX as u64) as i32));
    }

    /// Dependences (+ cross-warp spill, + prohibited cross-warp edges).
    fn assert_dependences(&mut self) {
        let (p, iv, ws) = (self.p, self.ii as i64, self.ws());
        for e in &p.edges {
            let (u, v) = (e.from, e.to);
            let lag = e.delay as i64 - iv * e.distance as i64;
            if u == v {
                if lag > 0 {
                    self.trivially_unsat = true;
                }
                continue;
            }
            let spill = if ws { p.ops[u].spill_cost as i64 } else { 0 };
            let together = if ws { Some(self.same(u, v)) } else { None };
            if ws
                && !self.cfg.cross_warp
                && !p.ops[u].variable_latency
                && !p.ops[v].variable_latency
            {
                if let Some(t) = &together {
                    self.solver.assert(t.clone());
                    // The same, as binary clauses that propagate at once.
                    if self.groups() > 1 {
                        for w in 0..self.groups() {
                            self.solver.assert(self.group[u][w].eq(&self.group[v][w]));
                        }
                    }
                }
            }
            for t in 0..=self.last[u] {
                let pre = self.ge(u, t);
                let need = self.ge(v, t + lag);
                self.solver.assert(pre.implies(&need));
                if spill > 0 {
                    let need = self.ge(v, t + lag + spill);
                    let apart = together
                        .as_ref()
                        .map(|b| b.not())
                        .unwrap_or(Bool::from_bool(false));
                    self.solver
                        .assert(Bool::and(&[pre.clone(), apart]).implies(&need));
                }
            }
        }
    }

    /// The one-hot residue literals R[v][r] <=> M(v) = r (mod I).
    fn declare_residues(&self) -> Vec<Vec<Bool>> {
        let (n, iv, s) = (self.p.ops.len(), self.ii as i64, &self.solver);
        (0..n)
            .map(|v| {
                let mut hits: Vec<Vec<Bool>> = vec![vec![]; iv as usize];
                for t in 0..=self.last[v] {
                    let exact = Bool::and(&[self.ge(v, t), self.ge(v, t + 1).not()]);
                    hits[(t % iv) as usize].push(exact);
                }
                let rs: Vec<Bool> = (0..iv)
                    .map(|r| Bool::new_const(format!("R_{v}_{r}")))
                    .collect();
                for (r, h) in hits.iter().enumerate() {
                    s.assert(rs[r].eq(Bool::or(h)));
                }
                let refs: Vec<(&Bool, i32)> = rs.iter().map(|b| (b, 1)).collect();
                s.assert(Bool::pb_eq(&refs, 1));
                rs
            })
            .collect()
    }

    /// Modulo capacity: per unit and residue, a cardinality constraint over
    /// the residue literals of the occupied rows.
    fn assert_modulo_capacity(&self, residue: &[Vec<Bool>]) {
        let (p, iv) = (self.p, self.ii as i64);
        for (f, &cap) in p.capacity.iter().enumerate() {
            for r in 0..iv {
                let mut weight: HashMap<(usize, i64), i32> = HashMap::new();
                for (v, op) in p.ops.iter().enumerate() {
                    for (c, row) in op.rrt.iter().enumerate() {
                        if row[f] > 0 {
                            *weight
                                .entry((v, (r - c as i64).rem_euclid(iv)))
                                .or_default() += row[f] as i32;
                        }
                    }
                }
                if weight.values().map(|&w| w as i64).sum::<i64>() <= cap as i64 {
                    continue;
                }
                let mut keys: Vec<&(usize, i64)> = weight.keys().collect();
                keys.sort();
                let terms: Vec<(&Bool, i32)> = keys
                    .iter()
                    .map(|&&(v, rr)| (&residue[v][rr as usize], weight[&(v, rr)]))
                    .collect();
                self.solver.assert(Bool::pb_le(&terms, cap as i32));
            }
        }
    }

    /// Concurrency: a blocking op v excludes, at its residue, every op of
    /// its group that needs its warp and is executing then.
    fn assert_concurrency(&mut self, residue: &[Vec<Bool>]) {
        let (p, n, iv) = (self.p, self.p.ops.len(), self.ii as i64);
        let busy: Vec<Vec<Bool>> = (0..n)
            .map(|o| {
                let cyc = p.ops[o].cycles as i64;
                (0..iv)
                    .map(|r| {
                        if cyc >= iv {
                            Bool::from_bool(true)
                        } else {
                            let covers: Vec<Bool> = (0..cyc)
                                .map(|c| residue[o][(r - c).rem_euclid(iv) as usize].clone())
                                .collect();
                            Bool::or(&covers)
                        }
                    })
                    .collect()
            })
            .collect();
        for v in 0..n {
            let flagged = p.edges.iter().any(|e| e.to == v && e.blocking);
            let mut why: Vec<Bool> = Vec::new();
            if flagged {
                why.push(Bool::from_bool(true));
            }
            for e in p.edges.iter().filter(|e| e.to == v && e.from != v) {
                why.push(self.same(e.from, v).not());
            }
            if why.is_empty() {
                continue;
            }
            let blocking = Bool::or(&why);
            for o in 0..n {
                if o == v
                    || p.ops[o].cycles == 0
                    || p.ops[o].asynchronous
                    || p.ops[o].variable_latency != p.ops[v].variable_latency
                {
                    continue;
                }
                let pair = Bool::and(&[self.same(v, o), blocking.clone()]);
                for r in 0..iv as usize {
                    self.solver.assert(
                        Bool::and(&[pair.clone(), residue[v][r].clone(), busy[o][r].clone()]).not(),
                    );
                }
            }
        }
    }

    /// Liveness: live[x][a] for a in [0, span), for the values that hold
    /// registers or memory.
    fn declare_liveness(&self, max_length: u32) -> Liveness {
        let (p, n, iv) = (self.p, self.p.ops.len(), self.ii as i64);
        let users: Vec<Vec<(usize, i64)>> = (0..n)
            .map(|x| {
                p.edges
                    .iter()
                    .filter(|e| e.from == x && !e.order)
                    .map(|e| (e.to, e.distance as i64 * iv + e.hold as i64))
                    .collect()
            })
            .collect();
        let dmax = p.edges.iter().map(|e| e.distance as i64).max().unwrap_or(0);
        let hmax = p.edges.iter().map(|e| e.hold as i64).max().unwrap_or(0);
        let span = max_length as i64 + dmax * iv + hmax + 1;
        let holds: Vec<bool> = (0..n)
            .map(|x| {
                !users[x].is_empty()
                    && (p.ops[x].regs > 0 || p.ops[x].memory.iter().any(|&m| m > 0))
            })
            .collect();
        let mut live: Vec<Vec<Bool>> = vec![vec![]; n];
        for x in (0..n).filter(|&x| holds[x]) {
            live[x] = (0..span)
                .map(|a| {
                    let issued = self.ge(x, a + 1).not();
                    if issued.as_bool() == Some(false) {
                        return Bool::from_bool(false);
                    }
                    let used_later: Vec<Bool> = users[x]
                        .iter()
                        .map(|&(u, later)| self.ge(u, a + 1 - later))
                        .collect();
                    let b = Bool::new_const(format!("live_{x}_{a}"));
                    self.solver
                        .assert(b.eq(Bool::and(&[issued, Bool::or(&used_later)])));
                    b
                })
                .collect();
        }
        Liveness {
            live,
            span,
            holds,
            ii: iv,
        }
    }

    /// Registers per group at steady-state residue `r` (group 0: the
    /// variable-latency ops).
    fn assert_register_limits(&self, live: &Liveness, r: i64) {
        let (p, n) = (self.p, self.p.ops.len());
        for w in 0..=self.groups() {
            let mut terms: Vec<(Bool, i32)> = Vec::new();
            for x in (0..n).filter(|&x| live.holds[x] && p.ops[x].regs > 0) {
                let mine = if w == 0 {
                    if !p.ops[x].variable_latency {
                        continue;
                    }
                    None
                } else {
                    if p.ops[x].variable_latency {
                        continue;
                    }
                    Some(self.group[x][w - 1].clone())
                };
                for l in live.at_residue(x, r) {
                    if l.as_bool() == Some(false) {
                        continue;
                    }
                    let lit = match &mine {
                        None => l.clone(),
                        Some(g) => Bool::and(&[l.clone(), g.clone()]),
                    };
                    terms.push((lit, p.ops[x].regs.min(i32::MAX as u32) as i32));
                }
            }
            if terms.iter().map(|t| t.1 as i64).sum::<i64>() > self.cfg.reg_limit as i64 {
                let refs: Vec<(&Bool, i32)> = terms.iter().map(|(b, k)| (b, *k)).collect();
                self.solver.assert(Bool::pb_le(
                    &refs,
                    self.cfg.reg_limit.min(i32::MAX as u32) as i32,
                ));
            }
        }
    }

    /// Each memory's capacity at steady-state residue `r`.
    fn assert_memory_limits(&self, live: &Liveness, r: i64) {
        let (p, n) = (self.p, self.p.ops.len());
        for (mk, (_, cap)) in p.memories.iter().enumerate() {
            let mut terms: Vec<(&Bool, i32)> = Vec::new();
            for x in (0..n).filter(|&x| live.holds[x] && p.ops[x].memory[mk] > 0) {
                for l in live.at_residue(x, r) {
                    if l.as_bool() != Some(false) {
                        terms.push((l, p.ops[x].memory[mk].min(i32::MAX as u64) as i32));
                    }
                }
            }
            if terms.iter().map(|t| t.1 as i64).sum::<i64>() > *cap as i64 {
                self.solver
                    .assert(Bool::pb_le(&terms, (*cap).min(i32::MAX as u64) as i32));
            }
        }
    }
}

/// The liveness literals of one build: `live[x][a]` for a in [0, span),
/// non-empty for the ops that `holds` (their value takes registers or
/// memory and has users).
struct Liveness {
    live: Vec<Vec<Bool>>,
    span: i64,
    holds: Vec<bool>,
    ii: i64,
}

impl Liveness {
    /// The instances of x live at steady-state residue r: a = r + m*I.
    fn at_residue(&self, x: usize, r: i64) -> Vec<&Bool> {
        (0..)
            .map(|m| r + m * self.ii)
            .take_while(|&a| a < self.span)
            .map(|a| &self.live[x][a as usize])
            .collect()
    }
}

impl SatEncoding<'_> {
    /// Whether the encoding (built for `ii` and bound `max_length`) admits
    /// this schedule, up to the symmetries it breaks (the schedule is first
    /// put in canonical form: interchangeable ops ordered, compute groups
    /// numbered by first use). A self-test of the encoding against the checker.
    pub fn admits(&mut self, js: &JointSchedule, max_length: u32) -> bool {
        let mut js = js.clone();
        if let Some((v, perm)) = super::symmetry::find_involution(self.p) {
            if js.schedule.start[v] > js.schedule.start[perm[v]] {
                let (start, group) = (js.schedule.start.clone(), js.group.clone());
                for x in 0..perm.len() {
                    js.schedule.start[perm[x]] = start[x];
                    js.group[perm[x]] = group[x];
                }
            }
        }
        let mut rename: Vec<u32> = Vec::new();
        for g in js.group.iter_mut().filter(|g| **g > 0) {
            let k = match rename.iter().position(|&r| r == *g) {
                Some(k) => k,
                None => {
                    rename.push(*g);
                    rename.len() - 1
                }
            };
            *g = k as u32 + 1;
        }
        let js = &js;
        self.build(js.schedule.ii, max_length);
        if self.trivially_unsat {
            return false;
        }
        let mut assumptions = Vec::new();
        for (v, &m) in js.schedule.start.iter().enumerate() {
            assumptions.push(self.ge(v, m as i64));
            assumptions.push(self.ge(v, m as i64 + 1).not());
            if let Some(b) = self.group[v].get((js.group[v] as usize).wrapping_sub(1)) {
                if self.group[v].len() > 1 {
                    assumptions.push(b.clone());
                }
            }
        }
        matches!(self.solver.check_assumptions(&assumptions), SatResult::Sat)
    }
}

impl JointEncoding for SatEncoding<'_> {
    fn name(&self) -> &'static str {
        "default"
    }

    fn set_interval(&mut self, ii: u32) {
        self.ii = ii;
        // Built by the first query, which knows the length bound.
        self.built = false;
    }

    /// Every bound of a [`Query`] is stated.
    fn supports(&self, _q: &Query) -> bool {
        true
    }

    /// The first query after [`JointEncoding::set_interval`] builds the
    /// encoding for its length bound, which bounds every later query; each
    /// query's bounds are assumption literals (guarded constraints for
    /// crossings and slack, made on first use).
    fn solve(&mut self, q: &Query) -> EncodingOutcome {
        if !self.built {
            let t0 = std::time::Instant::now();
            self.build(self.ii, q.max_length);
            tracing::debug!(
                ii = self.ii,
                max_length = q.max_length,
                seconds = t0.elapsed().as_secs_f64(),
                "sat encoding built"
            );
        }
        if self.trivially_unsat {
            return EncodingOutcome::Unsat;
        }
        let mut assumptions: Vec<Bool> = Vec::new();
        if let Some(k) = q.max_cross {
            if let Some(guard) = self.cross_guard(k) {
                assumptions.push(guard);
            }
        }
        if let Some(bound) = q.slack {
            if let Some(guard) = self.slack_guard(bound.pairs, bound.at_least) {
                assumptions.push(guard);
            }
        }
        let Some(lengths) = self.length_assumptions(q.max_length) else {
            return EncodingOutcome::Unsat;
        };
        if let Some(stages) = q.stages {
            let ii = i64::from(self.ii);
            for (v, &s) in stages.iter().enumerate().take(self.p.ops.len()) {
                assumptions.push(self.ge(v, i64::from(s) * ii));
                assumptions.push(self.ge(v, (i64::from(s) + 1) * ii).not());
            }
        }
        assumptions.extend(lengths);
        if let Some(k) = q.max_group {
            for g in &self.group {
                for b in g.iter().skip(k as usize) {
                    assumptions.push(b.not());
                }
            }
        }
        let mut params = Params::new();
        params.set_u32("timeout", q.timeout_ms.max(1));
        params.set_u32("random_seed", self.seed);
        params.set_u32("rlimit", q.rlimit);
        self.solver.set_params(&params);
        match self.solver.check_assumptions(&assumptions) {
            SatResult::Unsat => EncodingOutcome::Unsat,
            SatResult::Unknown => EncodingOutcome::Unknown(
                self.solver
                    .get_reason_unknown()
                    .unwrap_or_else(|| "unknown".into()),
            ),
            SatResult::Sat => self.read_model(),
        }
    }
}

impl SatEncoding<'_> {
    /// The guard g_K => (at most K of the cross-group pairs cross); `None`
    /// when no pair can cross.
    fn cross_guard(&mut self, k: u32) -> Option<Bool> {
        if self.cross.is_empty() {
            return None;
        }
        if let Some(g) = self.cross_guards.get(&k) {
            return Some(g.clone());
        }
        let g = Bool::new_const(format!("cross_le_{k}"));
        let terms: Vec<(&Bool, i32)> = self.cross.iter().map(|b| (b, 1)).collect();
        self.solver
            .assert(g.implies(Bool::pb_le(&terms, k.min(i32::MAX as u32) as i32)));
        self.cross_guards.insert(k, g.clone());
        Some(g)
    }

    /// The guard g_S => (latency slack >= S over `pairs`); `None` without
    /// pairs.
    fn slack_guard(&mut self, pairs: &[super::slack::SlackPair], k: i64) -> Option<Bool> {
        if self.slack_pairs.as_slice() != pairs {
            // Guards of other pairs would constrain the wrong ops.
            self.slack_guards.clear();
            self.slack_pairs = pairs.to_vec();
            self.slack_generation += 1;
        }
        if pairs.is_empty() {
            return None;
        }
        if let Some(g) = self.slack_guards.get(&k) {
            return Some(g.clone());
        }
        // g_S and M(u) >= t imply M(w) >= t + lag + S.
        let g = Bool::new_const(format!("slack_ge_{}_{k}", self.slack_generation));
        for q in pairs {
            for t in 0..=self.last[q.from] {
                let need = self.ge(q.to, t + q.lag + k);
                self.solver
                    .assert(Bool::and(&[g.clone(), self.ge(q.from, t)]).implies(&need));
            }
        }
        self.slack_guards.insert(k, g.clone());
        Some(g)
    }

    /// The length bound as assumptions: not B[v][L - cycles(v) + 1] for
    /// every op; `None` when some op cannot fit.
    fn length_assumptions(&self, max_length: u32) -> Option<Vec<Bool>> {
        let mut out = Vec::new();
        for v in 0..self.p.ops.len() {
            let latest = max_length as i64 - self.p.ops[v].cycles as i64;
            if latest < 0 {
                return None;
            }
            let lit = self.ge(v, latest + 1).not();
            if lit.as_bool() != Some(true) {
                out.push(lit);
            }
        }
        Some(out)
    }

    /// The joint schedule of the solver's model.
    fn read_model(&self) -> EncodingOutcome {
        let Some(model) = self.solver.get_model() else {
            return EncodingOutcome::Unknown("no model".into());
        };
        let truth = |b: &Bool| {
            model
                .eval(b, true)
                .and_then(|x| x.as_bool())
                .unwrap_or(false)
        };
        let start: Vec<u32> = self
            .order
            .iter()
            .map(|bits| bits.iter().take_while(|b| truth(b)).count() as u32)
            .collect();
        let group: Vec<u32> = self
            .group
            .iter()
            .map(|g| {
                if g.is_empty() {
                    0
                } else {
                    g.iter().position(truth).map_or(1, |w| w as u32 + 1)
                }
            })
            .collect();
        EncodingOutcome::Sat(JointSchedule {
            schedule: Schedule::tight(self.p, self.ii, start),
            group,
        })
    }
}
