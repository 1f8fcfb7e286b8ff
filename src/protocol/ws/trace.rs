//! Per-thread event traces of a `ttg.warp_specialize`: each region (the
//! default region and every partition) runs as its own thread. Control flow
//! depends only on scalars, so a thread's events do not depend on how the
//! threads interleave; the machine ([`super::sim`]) interleaves them.

use std::collections::{BTreeSet, HashMap};

use super::super::run::arith;
use super::super::{Block, Op, Unsupported};

/// A place in shared memory: the allocation (its result value) and the
/// slot (0 for an allocation that is not indexed).
pub type Place = (usize, i64);

/// One protocol event of a thread; `op` is `name @ loc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Init {
        bar: Place,
        count: i64,
    },
    /// An arrival; `tx` for a `barrier_expect`, whose phase then waits for
    /// the copies that follow it (they join the phase first).
    Arrive {
        bar: Place,
        count: i64,
        tx: bool,
        op: String,
    },
    Tma {
        dst: Place,
        bar: Place,
        op: String,
    },
    Wait {
        bar: Place,
        parity: i64,
        op: String,
    },
    Read {
        src: Place,
        /// The operand of `op` read (a reader may read several rings).
        operand: usize,
        op: String,
        async_: bool,
    },
    /// A `ttg.local_store`: a plain write by the thread's warps, complete
    /// for the other threads at once (`at_once`: a region of one warp
    /// group, whose warps run as one) or only at the region's next barrier
    /// of its warps ([`Ev::StoresLand`], or the join).
    Store {
        dst: Place,
        op: String,
        at_once: bool,
    },
    /// A barrier of the region's warps after stores not complete at once:
    /// they are complete for the other threads from here on.
    StoresLand,
    /// Closes the reads of one asynchronous wgmma (a group of the queue).
    DotIssued,
    /// `op` uses the result of the asynchronous wgmma `dot` (registers)
    /// before a wait retired it (rule 11; thread-local).
    EarlyUse {
        op: String,
        dot: String,
    },
    DotWait {
        pendings: i64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V {
    Int(i64),
    Mem(usize, Option<i64>),
    /// A read-only buffer: allocated with its contents (`local_alloc` with
    /// an operand, an immutable type) before any thread reads it; nothing
    /// can write it, so its reads need no event.
    Const,
    /// The result of the asynchronous wgmma issued `n`-th by the thread.
    InFlight(u64),
    Unknown,
}

/// Ops whose shared-memory operands are only read (a read-only buffer
/// needs no event there).
const READERS: &[&str] = &["ttng.warp_group_dot", "ttg.local_load"];

/// Ops that give another view of the same memory.
const VIEWS: &[&str] = &[
    "ttg.memdesc_trans",
    "ttg.memdesc_reshape",
    "ttg.memdesc_reinterpret",
    "ttg.memdesc_subslice",
];

/// Runs one thread's code, recording its events.
#[derive(Clone, Default)]
pub struct Tracer {
    env: HashMap<usize, V>,
    /// Depth of each allocation (its leading dimension).
    depth: HashMap<usize, i64>,
    pub events: Vec<Ev>,
    /// Trip count of every `scf.for` run, in order.
    pub trips: Vec<u64>,
    /// Per `scf.for` run: the index of the first event of each iteration,
    /// then the index past the last.
    pub iters: Vec<Vec<usize>>,
    /// Allocations indexed by `ttg.memdesc_index` (rings).
    pub indexed: BTreeSet<usize>,
    pub unsupported: Option<Unsupported>,
    /// Warp groups of the region this thread runs. Each issues and waits
    /// for its own wgmmas, and one thread arrives for the region: with
    /// more than one, a wait retires the reads for the region only at the
    /// next barrier of its warps (or at the join).
    pub warp_groups: i64,
    /// Waits not yet retiring for the whole region: (pendings, wgmmas
    /// issued since).
    delayed: Vec<(i64, i64)>,
    /// Whether a store not complete at once waits for the region's next
    /// barrier of its warps.
    unlanded: bool,
    /// The thread's asynchronous wgmmas whose results are not retired, in
    /// issue order (a wait retires in registers at once, for its own warp
    /// group), and how many it issued.
    flight: Vec<(u64, String)>,
    issued: u64,
    /// The values the run pins (roots of the loop bounds).
    pins: BTreeSet<usize>,
}

/// Whether operand `i` of `op` may be an asynchronous wgmma's result still
/// in flight: the accumulator of a later wgmma (the chain stays on the
/// tensor core), a wait's operands, and values carried around a loop.
fn may_be_in_flight(op: &Op, i: usize) -> bool {
    match op.name.as_str() {
        "ttng.warp_group_dot" => i == 2,
        "ttng.warp_group_dot_wait" | "scf.yield" => true,
        "scf.for" => i >= 3,
        _ => false,
    }
}

/// The ops that make the warps of one region wait for each other.
const THREAD_BARRIERS: &[&str] = &["gpu.barrier", "ttg.barrier"];

pub fn op_name(op: &Op) -> String {
    format!("{} @ {}", op.name, op.loc)
}

impl Tracer {
    pub fn new(pins: &HashMap<usize, i64>) -> Self {
        Tracer {
            env: pins.iter().map(|(&k, &x)| (k, V::Int(x))).collect(),
            pins: pins.keys().copied().collect(),
            ..Tracer::default()
        }
    }

    /// A barrier of the region's warps (or the join): every wait so far
    /// now retires its reads for the whole region, and every store so far
    /// is complete for the other threads.
    pub fn region_sync(&mut self) {
        if let Some(pendings) = self.delayed.drain(..).map(|(p, since)| p + since).min() {
            self.events.push(Ev::DotWait { pendings });
        }
        if std::mem::take(&mut self.unlanded) {
            self.events.push(Ev::StoresLand);
        }
    }

    /// A thread that starts from this one's values, with `args` bound to
    /// `captures`.
    pub fn fork(&self, args: &[usize], captures: &[usize]) -> Tracer {
        let mut t = Tracer {
            env: self.env.clone(),
            depth: self.depth.clone(),
            pins: self.pins.clone(),
            ..Tracer::default()
        };
        for (&a, &c) in args.iter().zip(captures) {
            let v = t.val(c);
            t.env.insert(a, v);
        }
        t
    }

    fn val(&self, v: usize) -> V {
        self.env.get(&v).copied().unwrap_or(V::Unknown)
    }

    fn int(&self, v: usize) -> Option<i64> {
        match self.val(v) {
            V::Int(x) => Some(x),
            _ => None,
        }
    }

    fn unsupported(&mut self, op: &Op, why: &str) {
        if self.unsupported.is_none() {
            self.unsupported = Some(Unsupported {
                op: op_name(op),
                why: why.to_string(),
            });
        }
    }

    fn place(&mut self, op: &Op, v: usize) -> Option<Place> {
        match self.val(v) {
            V::Mem(b, s) => Some((b, s.unwrap_or(0))),
            V::Const if READERS.contains(&op.name.as_str()) => None,
            _ => {
                self.unsupported(op, "a shared-memory operand the verifier cannot place");
                None
            }
        }
    }

    /// Whether an optional trailing predicate operand (after `fixed`
    /// operands) holds; None where it cannot be evaluated.
    fn pred(&mut self, op: &Op, fixed: usize) -> Option<bool> {
        if op.operands.len() <= fixed {
            return Some(true);
        }
        let p = self.int(op.operands[fixed]);
        if p.is_none() {
            self.unsupported(op, "a predicate the verifier cannot evaluate");
        }
        p.map(|x| x != 0)
    }

    /// Runs `b`; returns the values its terminator yields.
    pub fn block(&mut self, b: &Block) -> Vec<V> {
        for op in &b.ops {
            if self.unsupported.is_some() {
                return Vec::new();
            }
            self.early_uses(op);
            match op.name.as_str() {
                "scf.yield" | "ttg.warp_yield" | "ttg.warp_return" => {
                    return op.operands.iter().map(|&v| self.val(v)).collect();
                }
                _ => self.op(op),
            }
        }
        Vec::new()
    }

    /// Rule 11: an operand that is an asynchronous wgmma's result no wait
    /// has retired, where a use needs its value.
    fn early_uses(&mut self, op: &Op) {
        for (i, &v) in op.operands.iter().enumerate() {
            let V::InFlight(n) = self.val(v) else {
                continue;
            };
            if may_be_in_flight(op, i) {
                continue;
            }
            if let Some((_, dot)) = self.flight.iter().find(|f| f.0 == n) {
                let ev = Ev::EarlyUse {
                    op: op_name(op),
                    dot: dot.clone(),
                };
                self.events.push(ev);
            }
        }
    }

    fn set(&mut self, op: &Op, x: V) {
        if let Some(&r) = op.results.first() {
            self.env.insert(r, x);
        }
    }

    pub fn op(&mut self, op: &Op) {
        let n = op.name.as_str();
        match n {
            "scf.for" => self.for_loop(op),
            "scf.if" => self.if_op(op),
            // An earlier ws op of the function, before the one traced: done
            // (its end joins every warp); its results are registers.
            "ttg.warp_specialize" => {
                for &r in &op.results {
                    self.env.insert(r, V::Unknown);
                }
            }
            "ttg.local_alloc"
                if op.operands.len() == 1 && op.alloc.as_ref().is_some_and(|a| !a.1) =>
            {
                self.set(op, V::Const)
            }
            "ttg.local_alloc" if op.operands.is_empty() => {
                let depth = op.alloc.as_ref().and_then(|a| a.0.first().copied());
                self.depth.insert(op.results[0], depth.unwrap_or(1));
                self.set(op, V::Mem(op.results[0], None))
            }
            "ttg.memdesc_index" => self.index(op),
            _ if VIEWS.contains(&n) => {
                let x = self.val(op.operands[0]);
                self.set(op, x);
            }
            "arith.constant" => {
                self.set(op, op.attrs.get("value").map_or(V::Unknown, |&x| V::Int(x)))
            }
            "arith.select" => {
                let x = match self.int(op.operands[0]) {
                    Some(c) => self.val(op.operands[if c != 0 { 1 } else { 2 }]),
                    None => V::Unknown,
                };
                self.set(op, x);
            }
            "arith.extui" | "arith.extsi" | "arith.trunci" | "arith.index_cast" => {
                let x = self.val(op.operands[0]);
                self.set(op, x);
            }
            _ if n.starts_with("arith.") && op.operands.len() == 2 => {
                let x = match (self.int(op.operands[0]), self.int(op.operands[1])) {
                    (Some(a), Some(b)) => arith(n, a, b, &op.attrs).map_or(V::Unknown, V::Int),
                    _ => V::Unknown,
                };
                self.set(op, x);
            }
            _ => self.protocol_op(op),
        }
    }

    fn protocol_op(&mut self, op: &Op) {
        let name = op_name(op);
        match op.name.as_str() {
            "ttng.init_barrier" => {
                if let Some(bar) = self.place(op, op.operands[0]) {
                    let count = op.attrs.get("count").copied().unwrap_or(1);
                    self.events.push(Ev::Init { bar, count });
                }
            }
            "ttng.barrier_expect" | "ttng.arrive_barrier" => {
                let count = match op.name.as_str() {
                    "ttng.arrive_barrier" => op.attrs.get("count").copied().unwrap_or(1),
                    _ => 1,
                };
                if self.pred(op, 1) == Some(true) {
                    if let Some(bar) = self.place(op, op.operands[0]) {
                        self.events.push(Ev::Arrive {
                            bar,
                            count,
                            tx: op.name == "ttng.barrier_expect",
                            op: name,
                        });
                    }
                }
            }
            "ttng.wait_barrier" => {
                let parity = self.int(op.operands[1]);
                if self.pred(op, 2) == Some(true) {
                    match (self.place(op, op.operands[0]), parity) {
                        (_, Some(p)) if p != 0 && p != 1 => {
                            self.unsupported(op, "a wait parity other than 0 or 1")
                        }
                        (Some(bar), Some(parity)) => self.events.push(Ev::Wait {
                            bar,
                            parity,
                            op: name,
                        }),
                        _ => self.unsupported(op, "a wait parity the verifier cannot evaluate"),
                    }
                }
            }
            "ttng.async_tma_copy_global_to_local" => self.tma(op),
            "ttng.warp_group_dot" => self.dot(op),
            _ if THREAD_BARRIERS.contains(&op.name.as_str()) => self.region_sync(),
            "ttng.warp_group_dot_wait" => {
                let pendings = op.attrs.get("pendings").copied().unwrap_or(0);
                let keep = usize::try_from(pendings).unwrap_or(0);
                let retired = self.flight.len().saturating_sub(keep);
                self.flight.drain(..retired);
                if self.warp_groups > 1 {
                    self.delayed.push((pendings, 0));
                } else {
                    self.events.push(Ev::DotWait { pendings });
                }
                for (&r, &a) in op.results.iter().zip(&op.operands) {
                    let x = self.val(a);
                    self.env.insert(r, x);
                }
            }
            "ttg.local_store" => self.store(op),
            "ttg.local_load" => {
                if let Some(src) = self.place(op, op.operands[0]) {
                    self.events.push(Ev::Read {
                        src,
                        operand: 0,
                        op: name,
                        async_: false,
                    });
                }
            }
            _ => self.other(op),
        }
    }

    fn index(&mut self, op: &Op) {
        let x = match (self.val(op.operands[0]), self.int(op.operands[1])) {
            (V::Mem(b, None), Some(i)) => {
                self.indexed.insert(b);
                let depth = self.depth.get(&b).copied().unwrap_or(i64::MAX);
                if !(0..depth).contains(&i) {
                    self.unsupported(op, "a slot index outside its ring");
                }
                V::Mem(b, Some(i))
            }
            _ => V::Unknown,
        };
        self.set(op, x);
    }

    fn other(&mut self, op: &Op) {
        let on_memory = op
            .operands
            .iter()
            .any(|&v| matches!(self.val(v), V::Mem(..) | V::Const));
        if on_memory && op.name != "ttng.inval_barrier" && op.name != "ttg.local_dealloc" {
            self.unsupported(
                op,
                "an op on a shared-memory buffer the machine does not model",
            );
        }
        // A root of the loop bounds the run pins (the program id of a
        // causal loop's bounds) keeps its pinned value; every other result
        // of an op not modeled is unknown.
        for &r in &op.results {
            if !self.pins.contains(&r) {
                self.env.insert(r, V::Unknown);
            }
        }
    }

    /// `ttg.local_store %value, %dst`: a plain write of `dst` (a buffer or
    /// a slot of one; a read-only buffer cannot be placed: unsupported).
    fn store(&mut self, op: &Op) {
        let Some(&dst) = op.memdesc_operands().last() else {
            self.unsupported(op, "a ttg.local_store without its destination");
            return;
        };
        if let Some(dst) = self.place(op, op.operands[dst]) {
            let at_once = self.warp_groups <= 1;
            self.unlanded |= !at_once;
            self.events.push(Ev::Store {
                dst,
                op: op_name(op),
                at_once,
            });
        }
    }

    fn tma(&mut self, op: &Op) {
        let [bar, dst] = op.memdesc_operands()[..] else {
            self.unsupported(op, "a TMA copy without its barrier and destination");
            return;
        };
        if self.pred(op, dst + 1) != Some(true) {
            return;
        }
        if let (Some(bar), Some(dst)) = (
            self.place(op, op.operands[bar]),
            self.place(op, op.operands[dst]),
        ) {
            self.events.push(Ev::Tma {
                dst,
                bar,
                op: op_name(op),
            });
        }
    }

    fn dot(&mut self, op: &Op) {
        let async_ = op.attrs.get("isAsync").copied().unwrap_or(0) != 0;
        for (i, &v) in op.operands.iter().enumerate() {
            if op.is_memdesc(i) {
                if let Some(src) = self.place(op, v) {
                    self.events.push(Ev::Read {
                        src,
                        operand: i,
                        op: op_name(op),
                        async_,
                    });
                }
            }
        }
        if async_ {
            self.events.push(Ev::DotIssued);
            for d in &mut self.delayed {
                d.1 += 1;
            }
            self.issued += 1;
            self.flight.push((self.issued, op_name(op)));
            self.set(op, V::InFlight(self.issued));
        } else {
            self.set(op, V::Unknown);
        }
    }

    fn if_op(&mut self, op: &Op) {
        let Some(c) = self.int(op.operands[0]) else {
            if op
                .regions
                .iter()
                .any(|r| !r.ops.is_empty() && r.ops.len() > 1)
            {
                self.unsupported(op, "an scf.if whose condition the verifier cannot evaluate");
            }
            return;
        };
        let region = if c != 0 {
            op.regions.first()
        } else {
            op.regions.get(1)
        };
        let out = region.map(|r| self.block(r)).unwrap_or_default();
        for (&r, x) in op.results.iter().zip(out) {
            self.env.insert(r, x);
        }
    }

    fn for_loop(&mut self, op: &Op) {
        let (Some(lb), Some(ub), Some(step)) = (
            self.int(op.operands[0]),
            self.int(op.operands[1]),
            self.int(op.operands[2]),
        ) else {
            self.unsupported(op, "loop bounds the verifier cannot evaluate");
            return;
        };
        if step <= 0 {
            self.unsupported(op, "a loop step that is not positive");
            return;
        }
        let body = &op.regions[0];
        let mut carried: Vec<V> = op.operands[3..].iter().map(|&v| self.val(v)).collect();
        let trips = ((ub - lb).max(0) as u64).div_ceil(step as u64);
        self.trips.push(trips);
        let mut starts = Vec::new();
        for k in 0..trips {
            starts.push(self.events.len());
            self.env.insert(body.args[0], V::Int(lb + k as i64 * step));
            for (&a, &x) in body.args[1..].iter().zip(&carried) {
                self.env.insert(a, x);
            }
            carried = self.block(body);
            if self.unsupported.is_some() {
                return;
            }
        }
        starts.push(self.events.len());
        self.iters.push(starts);
        for (&r, x) in op.results.iter().zip(carried) {
            self.env.insert(r, x);
        }
    }

    /// Whether every loop's iterations repeat their events every `period`
    /// iterations once past `warm` of them.
    pub fn periodic(&self, period: usize, warm: usize) -> bool {
        let ev = &self.events;
        self.iters.iter().all(|st| {
            let n = st.len().saturating_sub(1);
            (warm + 1..n.saturating_sub(period))
                .all(|k| ev[st[k]..st[k + 1]] == ev[st[k + period]..st[k + period + 1]])
        })
    }
}
