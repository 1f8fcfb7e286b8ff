//! An integer SMT encoding of the joint problem (`--encoding int`), kept
//! beside the default Boolean one for comparison.
//!
//! Each start time is M(v) = I*k(v) + r(v) with a stage k(v) and a residue
//! 0 <= r(v) < I, and each compute op has an integer group A(v):
//!
//! * modulo capacity as pairwise non-overlap of occupancy intervals modulo I:
//!   intervals [M(u)+a, M(u)+a+la) and [M(v)+b, M(v)+b+lb) on a unit of
//!   capacity 1 are disjoint in every iteration iff
//!   (r(v) - r(u) + b - a) mod I lies in [la, I-lb], where "mod" is a short
//!   chain of case splits on the known range instead of integer division;
//!   units of larger capacity count occupancy per residue;
//! * dependences with the cross-warp spill added when A(u) != A(v);
//! * liveness: the live instances of x at cycle t = M(v) are
//!   floor((t - M(x))/I) - floor((t - E(x))/I), E(x) the latest user issue,
//!   which with stages and residues is max over users u (distance d) of
//!   (k(u) + d - k(x)) - [r(v) < r(x)] + [r(v) < r(u)]; register and memory
//!   limits are checked at every lifetime start (where the sum can grow);
//! * concurrency: (r(v) - r(o)) mod I >= cycles(o) when v blocks and o shares
//!   its group and needs its warp (not `ProblemOp::asynchronous`);
//! * symmetry breaking between the interchangeable compute groups;
//! * the length L is a variable bounded by assumptions, so one solver per I
//!   answers every L query incrementally.

// Encodings index ops, copies and cycles together; index loops read best.
#![allow(clippy::needless_range_loop)]

use z3::ast::{Bool, Int};
use z3::{Params, SatResult, Solver};

use super::{EncodingOutcome, JointEncoding, Query};
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
    /// Only the modulo-scheduling rules (1-4): no groups, liveness or concurrency.
    modulo_only: bool,
    ii: u32,
    solver: Solver,
    /// M(v) = I * stage[v] + residue[v].
    stage: Vec<Int>,
    residue: Vec<Int>,
    group: Vec<Int>,
    length: Int,
    /// Statically infeasible at this I (an op overlaps itself, ...).
    trivially_unsat: bool,
}

/// x mod I for an integer expression known to lie in [lo, hi]: a chain of
/// case splits instead of integer division.
fn mod_in_range(x: &Int, lo: i64, hi: i64, ii: i64) -> Int {
    let first = lo.div_euclid(ii);
    let last = hi.div_euclid(ii);
    let mut out = x - first * ii;
    for q in first + 1..=last {
        out = x.ge(q * ii).ite(&(x - q * ii), &out);
    }
    out
}

impl<'p> IntEncoding<'p> {
    pub fn new(p: &'p Problem, cfg: WarpConfig, seed: u32) -> Self {
        IntEncoding {
            p,
            cfg,
            seed,
            modulo_only: false,
            ii: 0,
            solver: Solver::new(),
            stage: vec![],
            residue: vec![],
            group: vec![],
            length: Int::from_i64(0),
            trivially_unsat: false,
        }
    }

    /// An encoding of rules 1-4 only: optimal modulo scheduling in SMT.
    pub fn modulo_only(p: &'p Problem, seed: u32) -> Self {
        let mut e = IntEncoding::new(p, WarpConfig::unconstrained(), seed);
        e.modulo_only = true;
        e
    }

    /// (r_a - r_b + off) mod I, with off a constant.
    fn residue_diff(&self, a: usize, b: usize, off: i64) -> Int {
        let iv = self.ii as i64;
        let off = off.rem_euclid(iv);
        let x = &self.residue[a] - &self.residue[b] + off;
        mod_in_range(&x, -(iv - 1) + off, iv - 1 + off, iv)
    }

    /// Prepares the encoding for `ii` with schedules no longer than
    /// `max_length`: one constraint family after the other, in a fixed
    /// order (z3's answers depend on it).
    fn build(&mut self, ii: u32, max_length: u32) {
        self.reset(ii);
        self.declare();
        self.assert_bounds(max_length);
        self.assert_last_stage_pins();
        if self.ws() && self.cfg.groups > 1 {
            self.assert_group_order();
        }
        if self.ws() {
            self.assert_colocation();
        }
        if self.ws() && self.cfg.groups > 1 {
            self.assert_crossing_bandwidth();
        }
        self.assert_dependences();
        for (f, &cap) in self.p.capacity.iter().enumerate() {
            self.assert_modulo_capacity(f, cap);
        }
        if !self.ws() {
            return;
        }
        self.assert_concurrency();
        self.assert_live_limits();
    }

    /// Whether warp specialization is encoded (not only rules 1-4).
    fn ws(&self) -> bool {
        !self.modulo_only
    }

    /// A fresh solver for `ii`: the state of an earlier build is dropped.
    fn reset(&mut self, ii: u32) {
        self.ii = ii;
        self.trivially_unsat = false;
        self.solver = Solver::new();
        let mut params = Params::new();
        params.set_u32("random_seed", self.seed);
        self.solver.set_params(&params);
    }

    /// The variables: L, and per op its stage, residue and group.
    fn declare(&mut self) {
        let p = self.p;
        let n = p.ops.len();
        let ws = self.ws();
        self.length = Int::new_const("L");
        self.stage = (0..n).map(|v| Int::new_const(format!("k_{v}"))).collect();
        self.residue = (0..n).map(|v| Int::new_const(format!("r_{v}"))).collect();
        self.group = (0..n)
            .map(|v| {
                if !ws {
                    Int::from_i64(1)
                } else if p.ops[v].variable_latency {
                    Int::from_i64(0)
                } else if self.cfg.groups == 1 {
                    Int::from_i64(1)
                } else {
                    Int::new_const(format!("A_{v}"))
                }
            })
            .collect();
    }

    /// M(v) = I * k(v) + r(v).
    fn start(&self, v: usize) -> Int {
        &self.stage[v] * self.ii as i64 + &self.residue[v]
    }

    /// "u and v run in different groups".
    fn differ(&self, u: usize, v: usize) -> Bool {
        self.group[u].eq(&self.group[v]).not()
    }

    /// Bounds of the variables, and completion of every op by L.
    fn assert_bounds(&self, max_length: u32) {
        let (p, s, iv) = (self.p, &self.solver, self.ii as i64);
        let stages = (max_length as u64).div_ceil(self.ii as u64).max(1) as i64;
        let (k, r) = (&self.stage, &self.residue);
        s.assert(self.length.le(max_length as i64));
        for v in 0..p.ops.len() {
            s.assert(r[v].ge(0));
            s.assert(r[v].lt(iv));
            s.assert(k[v].ge(0));
            s.assert(k[v].lt(stages));
            s.assert((self.start(v) + p.ops[v].cycles as i64).le(&self.length));
        }
    }

    /// Last-stage pins: no op in a later stage than a pinned one.
    fn assert_last_stage_pins(&self) {
        let (p, k) = (self.p, &self.stage);
        for v in (0..p.ops.len()).filter(|&v| p.ops[v].last_stage) {
            for w in 0..p.ops.len() {
                self.solver.assert(k[w].le(&k[v]));
            }
        }
    }

    /// Group ranges, and symmetry breaking between the interchangeable
    /// compute groups: each op's group at most one above the largest
    /// before it.
    fn assert_group_order(&self) {
        let (p, s, g) = (self.p, &self.solver, &self.group);
        let mut max_so_far: Option<Int> = None;
        for v in (0..p.ops.len()).filter(|&v| !p.ops[v].variable_latency) {
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

    /// Colocation (rule 5).
    fn assert_colocation(&self) {
        for set in &self.p.same_group {
            for pair in set.windows(2) {
                self.solver
                    .assert(self.group[pair[0]].eq(&self.group[pair[1]]));
            }
        }
    }

    /// Bandwidth of the crossings (rule 10), as a linear sum.
    fn assert_crossing_bandwidth(&self) {
        if let Some((charges, left)) = super::crossing_budget(self.p, self.ii) {
            let zero = Int::from_i64(0);
            let terms: Vec<Int> = charges
                .iter()
                .map(|&(a, b, w)| self.differ(a, b).ite(&Int::from_i64(w as i64), &zero))
                .collect();
            let refs: Vec<&Int> = terms.iter().collect();
            self.solver
                .assert(Int::add(&refs).le(left.min(i64::MAX as u64) as i64));
        }
    }

    /// Dependences (+ cross-warp spill, + prohibited cross-warp edges).
    fn assert_dependences(&self) {
        let (p, s, g, iv, ws) = (self.p, &self.solver, &self.group, self.ii as i64, self.ws());
        for e in &p.edges {
            if ws
                && !self.cfg.cross_warp
                && !p.ops[e.from].variable_latency
                && !p.ops[e.to].variable_latency
            {
                s.assert(g[e.from].eq(&g[e.to]));
            }
            let lhs = self.start(e.to) + iv * e.distance as i64;
            let base = self.start(e.from) + e.delay as i64;
            s.assert(lhs.ge(&base));
            let spill = p.ops[e.from].spill_cost as i64;
            if ws && spill > 0 && e.from != e.to {
                s.assert(self.differ(e.from, e.to).implies(lhs.ge(&base + spill)));
            }
        }
    }

    /// Modulo capacity of unit `f`: pairwise non-overlap when it has
    /// capacity 1 and single occupancies, else occupancy counted per
    /// residue.
    fn assert_modulo_capacity(&mut self, f: usize, cap: u32) {
        let p = self.p;
        let ivs: Vec<(usize, Vec<Interval>)> = (0..p.ops.len())
            .map(|v| (v, intervals(p, v, f)))
            .filter(|(_, x)| !x.is_empty())
            .collect();
        let unit_simple = cap == 1 && ivs.iter().all(|(_, x)| x.iter().all(|i| i.2 == 1));
        if unit_simple {
            self.assert_disjoint(&ivs);
        } else {
            self.assert_counted(&ivs, cap);
        }
    }

    /// Intervals on a unit of capacity 1 disjoint in every iteration:
    /// (M(v) + ob - M(u) - oa) mod I in [la, I - lb].
    fn assert_disjoint(&mut self, ivs: &[(usize, Vec<Interval>)]) {
        let iv = self.ii as i64;
        for (a, (u, xu)) in ivs.iter().enumerate() {
            // An op's own intervals, across iterations.
            for (j, &(oa, la, _)) in xu.iter().enumerate() {
                if la > iv {
                    self.trivially_unsat = true;
                }
                for &(ob, lb, _) in &xu[j + 1..] {
                    let d = (ob - oa).rem_euclid(iv);
                    if la + lb > iv || d < la || d > iv - lb {
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
                        let d = self.residue_diff(*v, *u, ob - oa);
                        self.solver.assert(d.ge(la));
                        self.solver.assert(d.le(iv - lb));
                    }
                }
            }
        }
    }

    /// Occupancy per residue at most `cap`.
    fn assert_counted(&self, ivs: &[(usize, Vec<Interval>)], cap: u32) {
        let (iv, r) = (self.ii as i64, &self.residue);
        for t in 0..iv {
            let mut terms: Vec<Int> = Vec::new();
            for (v, xv) in ivs {
                for &(off, len_i, cnt) in xv {
                    for c in off..off + len_i {
                        let want = (t - c).rem_euclid(iv);
                        terms.push(
                            r[*v]
                                .eq(want)
                                .ite(&Int::from_i64(cnt as i64), &Int::from_i64(0)),
                        );
                    }
                }
            }
            if !terms.is_empty() {
                self.solver.assert(Int::add(&terms).le(cap as i64));
            }
        }
    }

    /// Concurrency: (r(v) - r(o)) mod I >= cycles(o) when v blocks and o
    /// shares its group and needs its warp.
    fn assert_concurrency(&self) {
        let (p, n, g, iv) = (self.p, self.p.ops.len(), &self.group, self.ii as i64);
        for v in 0..n {
            let incoming: Vec<&crate::problem::ProblemEdge> = p
                .edges
                .iter()
                .filter(|e| e.to == v && e.from != v)
                .collect();
            let flagged = p.edges.iter().any(|e| e.to == v && e.blocking);
            if incoming.is_empty() && !flagged {
                continue;
            }
            let mut why: Vec<Bool> = Vec::new();
            if flagged {
                why.push(Bool::from_bool(true));
            }
            for e in &incoming {
                why.push(self.differ(e.from, v));
            }
            let blocking = Bool::or(&why);
            for o in 0..n {
                let cyc = p.ops[o].cycles as i64;
                if o == v
                    || cyc == 0
                    || p.ops[o].asynchronous
                    || p.ops[o].variable_latency != p.ops[v].variable_latency
                {
                    continue;
                }
                let same = g[o].eq(&g[v]);
                let apart = if cyc >= iv {
                    Bool::from_bool(false)
                } else {
                    self.residue_diff(v, o, 0).ge(cyc)
                };
                self.solver
                    .assert(Bool::and(&[same, blocking.clone()]).implies(apart));
            }
        }
    }

    /// Liveness. The live instances of x at cycle t = M(v) are
    /// floor((t - M(x))/I) - floor((t - E(x))/I) with E(x) the latest user
    /// issue; with M = I*k + r this is, maximized over the users u (delta
    /// d): (k_u + d - k_x) - [r_v < r_x] + [r_v < r_u]. A user that holds
    /// the value h cycles past its issue (an asynchronous reader) ends it at
    /// M(u) + d*I + h: the last term becomes ceil((r_u + h - r_v) / I).
    /// Register and memory limits are checked at every lifetime start.
    fn assert_live_limits(&self) {
        let (p, n, g) = (self.p, self.p.ops.len(), &self.group);
        let lives = LiveCount::new(self);
        let zero = Int::from_i64(0);
        for v in 0..n {
            if lives.users[v].is_empty() {
                continue;
            }
            if p.ops[v].regs > 0 {
                let mut terms = Vec::new();
                for x in 0..n {
                    if p.ops[x].regs == 0 || p.ops[x].variable_latency != p.ops[v].variable_latency
                    {
                        continue;
                    }
                    if let Some(c) = lives.at(x, v) {
                        let regs = c * p.ops[x].regs as i64;
                        terms.push(g[x].eq(&g[v]).ite(&regs, &zero));
                    }
                }
                if !terms.is_empty() {
                    self.solver
                        .assert(Int::add(&terms).le(self.cfg.reg_limit as i64));
                }
            }
            for (mk, (_, cap)) in p.memories.iter().enumerate() {
                if p.ops[v].memory[mk] == 0 {
                    continue;
                }
                let terms: Vec<Int> = (0..n)
                    .filter(|&x| p.ops[x].memory[mk] > 0)
                    .filter_map(|x| lives.at(x, v).map(|c| c * p.ops[x].memory[mk] as i64))
                    .collect();
                if !terms.is_empty() {
                    self.solver.assert(Int::add(&terms).le(*cap as i64));
                }
            }
        }
    }
}

/// The live-instance counts of [`IntEncoding::assert_live_limits`].
struct LiveCount<'e> {
    /// Per op, its value's users: (user, distance, hold).
    users: Vec<Vec<(usize, i64, i64)>>,
    stage: &'e [Int],
    residue: &'e [Int],
    ii: i64,
}

impl<'e> LiveCount<'e> {
    fn new(e: &'e IntEncoding) -> Self {
        let p = e.p;
        let users = (0..p.ops.len())
            .map(|x| {
                p.edges
                    .iter()
                    .filter(|e| e.from == x && !e.order)
                    .map(|e| (e.to, e.distance as i64, e.hold as i64))
                    .collect()
            })
            .collect();
        LiveCount {
            users,
            stage: &e.stage,
            residue: &e.residue,
            ii: e.ii as i64,
        }
    }

    /// [r_a < r_b] as 0 or 1.
    fn lt(&self, a: usize, b: usize) -> Int {
        let r = self.residue;
        r[a].lt(&r[b]).ite(&Int::from_i64(1), &Int::from_i64(0))
    }

    /// The live instances of x's value when v issues; `None` without users.
    fn at(&self, x: usize, v: usize) -> Option<Int> {
        let (k, r, iv) = (self.stage, self.residue, self.ii);
        let mut best: Option<Int> = None;
        for &(u, d, h) in &self.users[x] {
            let ends = if h == 0 {
                self.lt(v, u)
            } else {
                (&r[u] + (h + iv - 1) - &r[v]).div(Int::from_i64(iv))
            };
            let c = &k[u] + d - &k[x] - self.lt(v, x) + ends;
            best = Some(match best {
                None => c,
                Some(b) => c.gt(&b).ite(&c, &b),
            });
        }
        best
    }
}

impl JointEncoding for IntEncoding<'_> {
    fn name(&self) -> &'static str {
        "int"
    }

    fn set_interval(&mut self, ii: u32) {
        self.ii = ii;
        // Built lazily by the first query, which knows the length bound.
        self.stage.clear();
    }

    /// States the length and group bounds only (see
    /// [`JointEncoding::supports`]).
    fn solve(&mut self, q: &Query) -> EncodingOutcome {
        if !self.supports(q) {
            return super::unsupported(self);
        }
        if self.stage.is_empty() && !self.p.ops.is_empty() {
            // The first query at this I bounds every later one (they only tighten L).
            self.build(self.ii, q.max_length);
        }
        if self.trivially_unsat {
            return EncodingOutcome::Unsat;
        }
        let mut params = Params::new();
        params.set_u32("timeout", q.timeout_ms.max(1));
        params.set_u32("random_seed", self.seed);
        params.set_u32("rlimit", q.rlimit);
        self.solver.set_params(&params);
        let mut assumptions = vec![self.length.le(q.max_length as i64)];
        if let Some(k) = q.max_group {
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
            SatResult::Sat => self.read_model(),
        }
    }
}

impl IntEncoding<'_> {
    /// The joint schedule of the solver's model.
    fn read_model(&self) -> EncodingOutcome {
        let Some(model) = self.solver.get_model() else {
            return EncodingOutcome::Unknown("no model".into());
        };
        let value = |x: &Int| model.eval(x, true).and_then(|v| v.as_i64()).unwrap_or(0);
        let start: Vec<u32> = self
            .stage
            .iter()
            .zip(&self.residue)
            .map(|(k, r)| (value(k) * self.ii as i64 + value(r)).max(0) as u32)
            .collect();
        let group: Vec<u32> = self.group.iter().map(|x| value(x).max(0) as u32).collect();
        EncodingOutcome::Sat(JointSchedule {
            schedule: Schedule::tight(self.p, self.ii, start),
            group,
        })
    }
}
