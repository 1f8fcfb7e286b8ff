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

use super::{EncodingOutcome, JointEncoding};
use crate::checker::{JointSchedule, WarpConfig};
use crate::problem::{Problem, Schedule};

pub struct SatEncoding<'p> {
    p: &'p Problem,
    cfg: WarpConfig,
    seed: u32,
    modulo_only: bool,
    ii: u32,
    rlimit: u32,
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
}

impl<'p> SatEncoding<'p> {
    pub fn new(p: &'p Problem, cfg: WarpConfig, seed: u32) -> Self {
        SatEncoding {
            p,
            cfg,
            seed,
            modulo_only: false,
            ii: 0,
            rlimit: 0,
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

    fn build(&mut self, ii: u32, max_length: u32) {
        let p = self.p;
        let n = p.ops.len();
        let iv = ii as i64;
        let ws = !self.modulo_only;
        self.ii = ii;
        self.built = true;
        self.trivially_unsat = false;
        self.cross_guards.clear();
        self.slack_guards.clear();
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

        self.last = p
            .ops
            .iter()
            .map(|o| max_length as i64 - o.cycles as i64)
            .collect();
        if self.last.iter().any(|&l| l < 0) {
            self.trivially_unsat = true;
            return;
        }
        self.order = (0..n)
            .map(|v| {
                (1..=self.last[v])
                    .map(|t| Bool::new_const(format!("B_{v}_{t}")))
                    .collect()
            })
            .collect();
        let s = &self.solver;
        for v in 0..n {
            for t in 1..self.last[v] {
                s.assert(self.ge(v, t + 1).implies(self.ge(v, t)));
            }
        }

        // Last-stage pins: stage(w) <= stage(v) for pinned v, i.e. for every
        // stage boundary b = kI: M(w) >= b implies M(v) >= b.
        for v in (0..n).filter(|&v| p.ops[v].last_stage) {
            for w in (0..n).filter(|&w| w != v) {
                let mut b = iv;
                while b <= self.last[w] {
                    s.assert(self.ge(w, b).implies(self.ge(v, b)));
                    b += iv;
                }
            }
        }

        // Interchangeable ops (sub-tiles): M(v) <= M(pi(v)) for the first moved op.
        if let Some((v, perm)) = super::symmetry::find_involution(p) {
            let u = perm[v];
            for t in 1..=self.last[v] {
                s.assert(self.ge(v, t).implies(self.ge(u, t)));
            }
        }

        // Groups: one-hot, value-precedence symmetry breaking.
        let groups = if ws { self.cfg.groups as usize } else { 1 };
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
        let compute: Vec<usize> = (0..n).filter(|&v| !p.ops[v].variable_latency).collect();
        if groups > 1 {
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
        let mut same_cache: HashMap<(usize, usize), Bool> = HashMap::new();
        let mut same = |u: usize, v: usize, g: &Vec<Vec<Bool>>| -> Bool {
            let key = (u.min(v), u.max(v));
            if let Some(b) = same_cache.get(&key) {
                return b.clone();
            }
            let b = match (p.ops[u].variable_latency, p.ops[v].variable_latency) {
                (true, true) => Bool::from_bool(true),
                (true, false) | (false, true) => Bool::from_bool(false),
                _ if u == v || groups == 1 => Bool::from_bool(true),
                _ => {
                    let both: Vec<Bool> = (0..groups)
                        .map(|w| Bool::and(&[g[u][w].clone(), g[v][w].clone()]))
                        .collect();
                    let aux = Bool::new_const(format!("S_{}_{}", key.0, key.1));
                    s.assert(aux.eq(Bool::or(&both)));
                    aux
                }
            };
            same_cache.insert(key, b.clone());
            b
        };

        // Colocation (rule 5): every same_group set on one group.
        if ws {
            for set in &p.same_group {
                for pair in set.windows(2) {
                    let (u, v) = (pair[0], pair[1]);
                    s.assert(same(u, v, &self.group));
                    // The same, as binary clauses that propagate at once.
                    if groups > 1 && !self.group[u].is_empty() && !self.group[v].is_empty() {
                        for w in 0..groups {
                            s.assert(self.group[u][w].eq(&self.group[v][w]));
                        }
                    }
                }
            }
        }

        // Cross-group pairs, for the fewest-crossings refinement.
        self.cross = if ws && groups > 1 {
            super::cross_pairs(p)
                .into_iter()
                .map(|(u, v)| same(u, v, &self.group).not())
                .collect()
        } else {
            Vec::new()
        };

        // Bandwidth of the crossings (rule 10): the charged pairs that cross
        // fit in what the ops' own traffic leaves of the budget.
        if ws && groups > 1 {
            if let Some((charges, left)) = super::crossing_budget(p, ii) {
                let crossed: Vec<Bool> = charges
                    .iter()
                    .map(|&(a, b, _)| same(a, b, &self.group).not())
                    .collect();
                let terms: Vec<(&Bool, i32)> = crossed
                    .iter()
                    .zip(&charges)
                    .map(|(c, &(_, _, w))| (c, w.min(i32::MAX as u64) as i32))
                    .collect();
                s.assert(Bool::pb_le(&terms, left.min(i32::MAX as u64) as i32));
            }
        }

        // Dependences (+ cross-warp spill, + prohibited cross-warp edges).
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
            let together = if ws {
                Some(same(u, v, &self.group))
            } else {
                None
            };
            if ws
                && !self.cfg.cross_warp
                && !p.ops[u].variable_latency
                && !p.ops[v].variable_latency
            {
                if let Some(t) = &together {
                    s.assert(t.clone());
                    // The same, as binary clauses that propagate at once.
                    if groups > 1 {
                        for w in 0..groups {
                            s.assert(self.group[u][w].eq(&self.group[v][w]));
                        }
                    }
                }
            }
            for t in 0..=self.last[u] {
                let pre = self.ge(u, t);
                let need = self.ge(v, t + lag);
                s.assert(pre.implies(&need));
                if spill > 0 {
                    let need = self.ge(v, t + lag + spill);
                    let apart = together
                        .as_ref()
                        .map(|b| b.not())
                        .unwrap_or(Bool::from_bool(false));
                    s.assert(Bool::and(&[pre.clone(), apart]).implies(&need));
                }
            }
        }

        // Residues.
        let residue: Vec<Vec<Bool>> = (0..n)
            .map(|v| {
                let mut hits: Vec<Vec<Bool>> = vec![vec![]; ii as usize];
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
            .collect();

        // Modulo capacity.
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
                s.assert(Bool::pb_le(&terms, cap as i32));
            }
        }
        if !ws {
            return;
        }

        // Concurrency.
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
                why.push(same(e.from, v, &self.group).not());
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
                let pair = Bool::and(&[same(v, o, &self.group), blocking.clone()]);
                for r in 0..iv as usize {
                    s.assert(
                        Bool::and(&[pair.clone(), residue[v][r].clone(), busy[o][r].clone()]).not(),
                    );
                }
            }
        }

        // Liveness: live[x][a] for a in [0, horizon of lifetimes).
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
        let holds = |x: usize| -> bool {
            !users[x].is_empty() && (p.ops[x].regs > 0 || p.ops[x].memory.iter().any(|&m| m > 0))
        };
        let mut live: Vec<Vec<Bool>> = vec![vec![]; n];
        for x in (0..n).filter(|&x| holds(x)) {
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
                    s.assert(b.eq(Bool::and(&[issued, Bool::or(&used_later)])));
                    b
                })
                .collect();
        }
        let at_residue = |x: usize, r: i64| -> Vec<&Bool> {
            (0..)
                .map(|m| r + m * iv)
                .take_while(|&a| a < span)
                .map(|a| &live[x][a as usize])
                .collect()
        };
        for r in 0..iv {
            // Registers per group (group 0: the variable-latency ops).
            for w in 0..=groups {
                let mut terms: Vec<(Bool, i32)> = Vec::new();
                for x in (0..n).filter(|&x| holds(x) && p.ops[x].regs > 0) {
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
                    for l in at_residue(x, r) {
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
                    s.assert(Bool::pb_le(
                        &refs,
                        self.cfg.reg_limit.min(i32::MAX as u32) as i32,
                    ));
                }
            }
            for (mk, (_, cap)) in p.memories.iter().enumerate() {
                let mut terms: Vec<(&Bool, i32)> = Vec::new();
                for x in (0..n).filter(|&x| holds(x) && p.ops[x].memory[mk] > 0) {
                    for l in at_residue(x, r) {
                        if l.as_bool() != Some(false) {
                            terms.push((l, p.ops[x].memory[mk].min(i32::MAX as u64) as i32));
                        }
                    }
                }
                if terms.iter().map(|t| t.1 as i64).sum::<i64>() > *cap as i64 {
                    s.assert(Bool::pb_le(&terms, (*cap).min(i32::MAX as u64) as i32));
                }
            }
        }
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

    fn set_rlimit(&mut self, rlimit: u32) {
        self.rlimit = rlimit;
    }

    fn solve_within(
        &mut self,
        max_length: u32,
        max_group: Option<u32>,
        timeout_ms: u32,
    ) -> EncodingOutcome {
        self.solve_assuming(max_length, max_group, None, None, timeout_ms)
    }

    fn solve_limited(
        &mut self,
        max_length: u32,
        max_group: Option<u32>,
        max_cross: u32,
        timeout_ms: u32,
    ) -> Option<EncodingOutcome> {
        Some(self.solve_assuming(max_length, max_group, Some(max_cross), None, timeout_ms))
    }

    fn solve_slack(
        &mut self,
        max_length: u32,
        max_group: Option<u32>,
        max_cross: Option<u32>,
        pairs: &[super::slack::SlackPair],
        slack: i64,
        timeout_ms: u32,
    ) -> Option<EncodingOutcome> {
        Some(self.solve_assuming(
            max_length,
            max_group,
            max_cross,
            Some((pairs, slack)),
            timeout_ms,
        ))
    }
}

impl SatEncoding<'_> {
    fn solve_assuming(
        &mut self,
        max_length: u32,
        max_group: Option<u32>,
        max_cross: Option<u32>,
        slack: Option<(&[super::slack::SlackPair], i64)>,
        timeout_ms: u32,
    ) -> EncodingOutcome {
        if !self.built {
            let t0 = std::time::Instant::now();
            self.build(self.ii, max_length);
            tracing::debug!(
                ii = self.ii,
                max_length,
                seconds = t0.elapsed().as_secs_f64(),
                "sat encoding built"
            );
        }
        if self.trivially_unsat {
            return EncodingOutcome::Unsat;
        }
        let p = self.p;
        let mut assumptions: Vec<Bool> = Vec::new();
        if let Some(k) = max_cross {
            if !self.cross.is_empty() {
                let guard = match self.cross_guards.get(&k) {
                    Some(g) => g.clone(),
                    None => {
                        let g = Bool::new_const(format!("cross_le_{k}"));
                        let terms: Vec<(&Bool, i32)> = self.cross.iter().map(|b| (b, 1)).collect();
                        self.solver
                            .assert(g.implies(Bool::pb_le(&terms, k.min(i32::MAX as u32) as i32)));
                        self.cross_guards.insert(k, g.clone());
                        g
                    }
                };
                assumptions.push(guard);
            }
        }
        if let Some((pairs, k)) = slack {
            if self.slack_pairs.as_slice() != pairs {
                // Guards of other pairs would constrain the wrong ops.
                self.slack_guards.clear();
                self.slack_pairs = pairs.to_vec();
                self.slack_generation += 1;
            }
            if !pairs.is_empty() {
                let guard = match self.slack_guards.get(&k) {
                    Some(g) => g.clone(),
                    None => {
                        // g_S and M(u) >= t imply M(w) >= t + lag + S.
                        let g = Bool::new_const(format!("slack_ge_{}_{k}", self.slack_generation));
                        for q in pairs {
                            for t in 0..=self.last[q.from] {
                                let need = self.ge(q.to, t + q.lag + k);
                                self.solver.assert(
                                    Bool::and(&[g.clone(), self.ge(q.from, t)]).implies(&need),
                                );
                            }
                        }
                        self.slack_guards.insert(k, g.clone());
                        g
                    }
                };
                assumptions.push(guard);
            }
        }
        for v in 0..p.ops.len() {
            let latest = max_length as i64 - p.ops[v].cycles as i64;
            if latest < 0 {
                return EncodingOutcome::Unsat;
            }
            let lit = self.ge(v, latest + 1).not();
            if lit.as_bool() != Some(true) {
                assumptions.push(lit);
            }
        }
        if let Some(k) = max_group {
            for g in &self.group {
                for b in g.iter().skip(k as usize) {
                    assumptions.push(b.not());
                }
            }
        }
        let mut params = Params::new();
        params.set_u32("timeout", timeout_ms.max(1));
        params.set_u32("random_seed", self.seed);
        params.set_u32("rlimit", self.rlimit);
        self.solver.set_params(&params);
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
                    schedule: Schedule::tight(p, self.ii, start),
                    group,
                })
            }
        }
    }
}
