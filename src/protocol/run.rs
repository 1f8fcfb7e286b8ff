//! The machine of the pipeline-protocol verifier (rules in the module
//! documentation of [`super`]): one concrete run of a function per choice of
//! trip counts, recording every broken rule.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::{Block, Function, LoopReport, Op, Rule, Unsupported, Verdict, Violation};

/// A value of the run: an integer (Booleans are 0/1), a place in shared
/// memory (a buffer and, once indexed, its slot), or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    Int(i64),
    Mem(usize, Option<i64>),
    Unknown,
}

/// A shared-memory buffer: an allocation, a ring when indexed.
#[derive(Debug, Clone)]
struct Buffer {
    loc: String,
    depth: i64,
    indexed: bool,
}

#[derive(Debug, Clone)]
struct Write {
    buf: usize,
    slot: i64,
    op: String,
    complete: bool,
    /// A TMA copy predicated off: no data, but a place in the ring's order.
    phantom: bool,
}

#[derive(Debug, Clone)]
struct Read {
    buf: usize,
    slot: i64,
    op: String,
    retired: bool,
}

#[derive(Debug, Clone, Default)]
struct SlotState {
    latest: Option<usize>,
    writes: Vec<usize>,
    reads: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Barrier {
    count: i64,
    arrived: i64,
    completed: u64,
    /// Copies that land, and reads (tcgen05 MMAs) that retire, when the open
    /// phase completes.
    copies: Vec<usize>,
    reads: Vec<usize>,
}

/// Ops that take part in the protocol (their loops are reported).
const ASYNC_OPS: &[&str] = &[
    "ttg.async_copy_global_to_local",
    "ttng.async_tma_copy_global_to_local",
    "ttng.barrier_expect",
    "ttng.wait_barrier",
    "ttng.warp_group_dot_wait",
    "ttng.async_tma_copy_local_to_global",
    "ttng.tc_gen5_mma",
    "ttng.tc_gen5_mma_scaled",
];

/// Ops that give another view of the same memory.
const VIEWS: &[&str] = &[
    "ttg.memdesc_trans",
    "ttg.memdesc_reshape",
    "ttg.memdesc_reinterpret",
    "ttg.memdesc_subslice",
    "ttg.memdesc_subview",
];

/// Where a rule broke or what is not covered, while running.
struct Machine<'a> {
    /// The loops whose own bodies issue asynchronous ops (by op id).
    protocol: &'a BTreeSet<usize>,
    /// Trip count of each protocol loop's first execution in this run.
    trips: BTreeMap<usize, u64>,
    env: HashMap<usize, Val>,
    pins: HashMap<usize, i64>,
    buffers: Vec<Buffer>,
    alloc_of: HashMap<usize, usize>,
    writes: Vec<Write>,
    reads: Vec<Read>,
    slots: HashMap<(usize, i64), SlotState>,
    barriers: HashMap<(usize, i64), Barrier>,
    order: HashMap<usize, Vec<usize>>,
    readers: HashMap<(usize, String), usize>,
    uncommitted: Vec<usize>,
    groups: VecDeque<Vec<usize>>,
    dots: VecDeque<Vec<usize>>,
    stores: VecDeque<Vec<usize>>,
    /// Reads of tcgen05 MMAs not yet committed to a barrier.
    mmas: Vec<usize>,
    /// Innermost protocol loop running, and its iteration.
    at: Vec<(usize, u64)>,
    violations: Vec<(Option<usize>, Violation)>,
    unsupported: Option<(Option<usize>, Unsupported)>,
    /// Loop-carried integers at each loop head (loop id -> per iteration).
    heads: HashMap<usize, Vec<Vec<Option<i64>>>>,
}

fn name_of(op: &Op) -> String {
    format!("{} @ {}", op.name, op.loc)
}

impl<'a> Machine<'a> {
    fn new(
        protocol: &'a BTreeSet<usize>,
        buffers: Vec<Buffer>,
        alloc_of: HashMap<usize, usize>,
    ) -> Self {
        Machine {
            protocol,
            trips: BTreeMap::new(),
            env: HashMap::new(),
            pins: HashMap::new(),
            buffers,
            alloc_of,
            writes: Vec::new(),
            reads: Vec::new(),
            slots: HashMap::new(),
            barriers: HashMap::new(),
            order: HashMap::new(),
            readers: HashMap::new(),
            uncommitted: Vec::new(),
            groups: VecDeque::new(),
            dots: VecDeque::new(),
            stores: VecDeque::new(),
            mmas: Vec::new(),
            at: Vec::new(),
            violations: Vec::new(),
            unsupported: None,
            heads: HashMap::new(),
        }
    }

    /// A value: what the run computed, else its pin (a loop bound the run
    /// cannot compute), else unknown.
    fn val(&self, v: usize) -> Val {
        match self.env.get(&v).copied() {
            Some(x) if x != Val::Unknown => x,
            _ => self.pins.get(&v).map_or(Val::Unknown, |&p| Val::Int(p)),
        }
    }

    fn int(&self, v: usize) -> Option<i64> {
        match self.val(v) {
            Val::Int(i) => Some(i),
            _ => None,
        }
    }

    fn set(&mut self, v: usize, x: Val) {
        self.env.insert(v, x);
    }

    fn loop_here(&self) -> Option<usize> {
        self.at.last().map(|&(l, _)| l)
    }

    fn unsupported(&mut self, op: &Op, why: impl Into<String>) {
        if self.unsupported.is_none() {
            self.unsupported = Some((
                self.loop_here(),
                Unsupported {
                    op: name_of(op),
                    why: why.into(),
                },
            ));
        }
    }

    fn violate(
        &mut self,
        rule: Rule,
        buf: usize,
        slot: Option<i64>,
        op: &Op,
        other: Option<String>,
        text: String,
    ) {
        let trip_counts = self.trips.values().copied().collect();
        let v = Violation {
            rule,
            buffer: self.buffers[buf].loc.clone(),
            slot,
            op: name_of(op),
            other,
            trip_counts,
            iteration: self.at.last().map(|&(_, k)| k),
            text,
        };
        self.violations.push((self.loop_here(), v));
    }

    fn slot(&mut self, buf: usize, slot: i64) -> &mut SlotState {
        self.slots.entry((buf, slot)).or_default()
    }

    /// The memory place of operand `v`: (buffer, slot), a buffer used
    /// whole as its only slot when it is not a ring.
    fn place(&mut self, op: &Op, v: usize) -> Option<(usize, i64)> {
        match self.val(v) {
            Val::Mem(b, Some(s)) => Some((b, s)),
            Val::Mem(b, None) if !self.buffers[b].indexed => Some((b, 0)),
            Val::Mem(_, None) => {
                self.unsupported(op, "a whole ring used without a slot index");
                None
            }
            _ => None,
        }
    }

    // ---------------------------------------------------------------
    // Writes and reads.
    // ---------------------------------------------------------------

    fn write(&mut self, op: &Op, buf: usize, slot: i64, complete: bool, phantom: bool) -> usize {
        let id = self.writes.len();
        if !phantom {
            // Rules 1 and 2: the slot's readers and writers still in flight.
            let s = self.slots.get(&(buf, slot)).cloned().unwrap_or_default();
            let readers = s
                .reads
                .iter()
                .filter(|&&r| !self.reads[r].retired)
                .map(|&r| {
                    let o = self.reads[r].op.clone();
                    (
                        Rule::WriteWhileRead,
                        format!("while {o} may still read it"),
                        o,
                    )
                });
            let writers = s
                .writes
                .iter()
                .filter(|&&w| !self.writes[w].complete)
                .map(|&w| {
                    let o = self.writes[w].op.clone();
                    (
                        Rule::WriteWhileWriting,
                        format!("while the write of {o} is in flight"),
                        o,
                    )
                });
            let hazards: Vec<(Rule, String, String)> = readers.chain(writers).collect();
            for (rule, why, other) in hazards {
                let text = format!(
                    "{} writes slot {slot} of {} {why}",
                    name_of(op),
                    self.buffers[buf].loc
                );
                self.violate(rule, buf, Some(slot), op, Some(other), text);
            }
        }
        self.writes.push(Write {
            buf,
            slot,
            op: name_of(op),
            complete,
            phantom,
        });
        self.order.entry(buf).or_default().push(id);
        if !phantom {
            let s = self.slot(buf, slot);
            s.latest = Some(id);
            s.writes.retain(|&w| w != id);
            s.writes.push(id);
            s.reads.clear();
        }
        id
    }

    /// A read of (buf, slot) by operand `operand` of `op`; in flight until
    /// retired when `async_`.
    fn read(&mut self, op: &Op, operand: usize, buf: usize, slot: i64, async_: bool) -> usize {
        let latest = self.slots.get(&(buf, slot)).and_then(|s| s.latest);
        match latest {
            Some(w) if !self.writes[w].complete => {
                let writer = self.writes[w].op.clone();
                self.violate(
                    Rule::ReadBeforeWrite,
                    buf,
                    Some(slot),
                    op,
                    Some(writer.clone()),
                    format!(
                        "{} reads slot {slot} of {} before the write of {writer} completed",
                        name_of(op),
                        self.buffers[buf].loc
                    ),
                );
            }
            None => self.violate(
                Rule::ReadBeforeWrite,
                buf,
                Some(slot),
                op,
                None,
                format!(
                    "{} reads slot {slot} of {}, never written",
                    name_of(op),
                    self.buffers[buf].loc
                ),
            ),
            _ => {}
        }
        if self.buffers[buf].indexed {
            self.ring_order(op, operand, buf, slot, latest);
        }
        let id = self.reads.len();
        self.reads.push(Read {
            buf,
            slot,
            op: name_of(op),
            retired: !async_,
        });
        self.slot(buf, slot).reads.push(id);
        id
    }

    /// Rule 4: the k-th read of a reader gets the k-th value of its ring.
    fn ring_order(
        &mut self,
        op: &Op,
        operand: usize,
        buf: usize,
        slot: i64,
        latest: Option<usize>,
    ) {
        let key = (buf, format!("{}#{operand}", name_of(op)));
        let k = *self.readers.get(&key).unwrap_or(&0);
        self.readers.insert(key, k + 1);
        let expected = self.order.get(&buf).and_then(|o| o.get(k)).copied();
        let why = match expected {
            None => Some(format!(
                "read #{k} of the ring, which has only {k} writes so far"
            )),
            Some(w) if self.writes[w].slot != slot => Some(format!(
                "read #{k} of the ring reads slot {slot}, the value #{k} was written to slot {}",
                self.writes[w].slot
            )),
            Some(w) if self.writes[w].phantom => Some(format!(
                "read #{k} of the ring reads a copy that was predicated off"
            )),
            Some(w) if latest != Some(w) => Some(format!(
                "read #{k} of the ring reads slot {slot} after the value #{k} was overwritten"
            )),
            _ => None,
        };
        if let Some(why) = why {
            let other = expected.map(|w| self.writes[w].op.clone());
            self.violate(
                Rule::WrongSlot,
                buf,
                Some(slot),
                op,
                other,
                format!("{} on {}: {why}", name_of(op), self.buffers[buf].loc),
            );
        }
    }

    fn retire_all_but(queue: &mut VecDeque<Vec<usize>>, keep: usize) -> Vec<usize> {
        let mut out = Vec::new();
        while queue.len() > keep {
            out.extend(queue.pop_front().unwrap_or_default());
        }
        out
    }

    // ---------------------------------------------------------------
    // Barriers.
    // ---------------------------------------------------------------

    fn barrier(&mut self, op: &Op, v: usize) -> Option<(usize, i64)> {
        let place = self.place(op, v)?;
        if !self.barriers.contains_key(&place) {
            self.unsupported(op, "an mbarrier used before ttng.init_barrier");
            return None;
        }
        Some(place)
    }

    fn arrive(&mut self, op: &Op, place: (usize, i64), count: i64) {
        let Some(b) = self.barriers.get(&place) else {
            return;
        };
        if b.arrived + count > b.count {
            let text = format!(
                "{} arrives on barrier {} slot {} whose open phase already has its {} arrivals",
                name_of(op),
                self.buffers[place.0].loc,
                place.1,
                b.count
            );
            self.violate(Rule::PhaseOverrun, place.0, Some(place.1), op, None, text);
        }
        if let Some(b) = self.barriers.get_mut(&place) {
            b.arrived += count;
        }
    }

    fn wait_barrier(&mut self, op: &Op, place: (usize, i64), parity: i64) {
        let Some(b) = self.barriers.get(&place).cloned() else {
            return;
        };
        if (b.completed % 2) as i64 != parity {
            return; // that phase completed: returns at once
        }
        if b.arrived < b.count {
            let text = format!(
                "{} waits on barrier {} slot {} (phase parity {parity}) whose open phase has {} of its {} arrivals: it never returns",
                name_of(op),
                self.buffers[place.0].loc,
                place.1,
                b.arrived,
                b.count
            );
            self.violate(
                Rule::WaitWithoutArrival,
                place.0,
                Some(place.1),
                op,
                None,
                text,
            );
            return;
        }
        for &w in &b.copies {
            self.writes[w].complete = true;
        }
        for &r in &b.reads {
            self.reads[r].retired = true;
        }
        if let Some(b) = self.barriers.get_mut(&place) {
            b.completed += 1;
            b.arrived = 0;
            b.copies.clear();
            b.reads.clear();
        }
    }

    // ---------------------------------------------------------------
    // Draining.
    // ---------------------------------------------------------------

    fn drained(&mut self, op: &Op, buf: Option<usize>) {
        let mine = |b: usize| buf.is_none_or(|x| x == b);
        let pending_w: Vec<usize> = (0..self.writes.len())
            .filter(|&w| {
                !self.writes[w].complete && !self.writes[w].phantom && mine(self.writes[w].buf)
            })
            .collect();
        let pending_r: Vec<usize> = (0..self.reads.len())
            .filter(|&r| !self.reads[r].retired && mine(self.reads[r].buf))
            .collect();
        for w in pending_w {
            let (b, s, o) = (
                self.writes[w].buf,
                self.writes[w].slot,
                self.writes[w].op.clone(),
            );
            let text = format!(
                "{}: the write of {o} to slot {s} of {} is still in flight",
                name_of(op),
                self.buffers[b].loc
            );
            self.violate(Rule::NotDrained, b, Some(s), op, Some(o), text);
            self.writes[w].complete = true;
        }
        for r in pending_r {
            let (b, s, o) = (
                self.reads[r].buf,
                self.reads[r].slot,
                self.reads[r].op.clone(),
            );
            let text = format!(
                "{}: {o} may still read slot {s} of {}",
                name_of(op),
                self.buffers[b].loc
            );
            self.violate(Rule::NotDrained, b, Some(s), op, Some(o), text);
            self.reads[r].retired = true;
        }
    }
}

// -------------------------------------------------------------------
// Evaluation of ops.
// -------------------------------------------------------------------

pub(super) fn arith(name: &str, a: i64, b: i64, attrs: &BTreeMap<String, i64>) -> Option<i64> {
    Some(match name {
        "arith.addi" => a.wrapping_add(b),
        "arith.subi" => a.wrapping_sub(b),
        "arith.muli" => a.wrapping_mul(b),
        "arith.divsi" | "arith.divui" => a.checked_div(b)?,
        "arith.remsi" | "arith.remui" => a.checked_rem(b)?,
        "arith.ceildivsi" => {
            let q = a.checked_div(b)?;
            if q * b != a && ((a < 0) == (b < 0)) {
                q + 1
            } else {
                q
            }
        }
        "arith.floordivsi" => a.checked_div_euclid(b)?,
        "arith.andi" => a & b,
        "arith.ori" => a | b,
        "arith.xori" => a ^ b,
        "arith.maxsi" | "arith.maxui" => a.max(b),
        "arith.minsi" | "arith.minui" => a.min(b),
        "arith.shli" => a.checked_shl(b as u32)?,
        "arith.shrsi" | "arith.shrui" => a.checked_shr(b as u32)?,
        "arith.cmpi" => {
            // mlir::arith::CmpIPredicate: eq ne slt sle sgt sge ult ule ugt uge.
            let r = match attrs.get("predicate")? {
                0 => a == b,
                1 => a != b,
                2 | 6 => a < b,
                3 | 7 => a <= b,
                4 | 8 => a > b,
                5 | 9 => a >= b,
                _ => return None,
            };
            r as i64
        }
        _ => return None,
    })
}

impl Machine<'_> {
    fn op(&mut self, op: &Op) {
        let n = op.name.as_str();
        match n {
            "arith.constant" => {
                let v = op.attrs.get("value").map_or(Val::Unknown, |&i| Val::Int(i));
                if let Some(&r) = op.results.first() {
                    self.set(r, v);
                }
            }
            "arith.select" => {
                let v = match self.int(op.operands[0]) {
                    Some(c) => self.val(op.operands[if c != 0 { 1 } else { 2 }]),
                    None => Val::Unknown,
                };
                self.set(op.results[0], v);
            }
            "arith.extui" | "arith.extsi" | "arith.trunci" | "arith.index_cast"
            | "arith.index_castui" | "tt.splat" => {
                let v = self.val(op.operands[0]);
                let v = if matches!(v, Val::Int(_)) {
                    v
                } else {
                    Val::Unknown
                };
                self.set(op.results[0], v);
            }
            _ if n.starts_with("arith.") && op.operands.len() == 2 && op.results.len() == 1 => {
                let v = match (self.int(op.operands[0]), self.int(op.operands[1])) {
                    (Some(a), Some(b)) => arith(n, a, b, &op.attrs).map_or(Val::Unknown, Val::Int),
                    _ => Val::Unknown,
                };
                self.set(op.results[0], v);
            }
            "scf.for" => self.for_loop(op),
            "scf.while" => self.while_loop(op),
            "scf.if" => self.if_op(op),
            "ttg.local_alloc" => self.alloc(op),
            "ttg.local_dealloc" => {
                if let Val::Mem(b, _) = self.val(op.operands[0]) {
                    self.drained(op, Some(b));
                }
            }
            "ttg.memdesc_index" => {
                let v = match (self.val(op.operands[0]), self.int(op.operands[1])) {
                    (Val::Mem(b, None), Some(i)) => {
                        if i < 0 || i >= self.buffers[b].depth {
                            self.unsupported(
                                op,
                                format!(
                                    "slot index {i} outside a ring of {}",
                                    self.buffers[b].depth
                                ),
                            );
                        }
                        Val::Mem(b, Some(i))
                    }
                    (Val::Mem(_, _), None) => {
                        self.unsupported(op, "a slot index the verifier cannot evaluate");
                        Val::Unknown
                    }
                    (Val::Mem(_, Some(_)), _) => {
                        self.unsupported(op, "an index into a slot (nested rings)");
                        Val::Unknown
                    }
                    _ => Val::Unknown,
                };
                self.set(op.results[0], v);
            }
            _ if VIEWS.contains(&n) => {
                let v = self.val(op.operands[0]);
                self.set(op.results[0], v);
            }
            _ => self.protocol_op(op),
        }
    }

    fn alloc(&mut self, op: &Op) {
        let Some(&buf) = self.alloc_of.get(&op.id) else {
            return;
        };
        self.set(op.results[0], Val::Mem(buf, None));
        if !op.operands.is_empty() {
            // Initialized at allocation: a completed write of its only slot.
            self.write(op, buf, 0, true, false);
        }
    }

    fn protocol_op(&mut self, op: &Op) {
        let n = op.name.as_str();
        match n {
            "ttg.async_copy_global_to_local" => {
                if let Some((b, s)) = self.place(op, op.operands[1]) {
                    let w = self.write(op, b, s, false, false);
                    self.uncommitted.push(w);
                }
            }
            "ttg.async_commit_group" => {
                let g = std::mem::take(&mut self.uncommitted);
                self.groups.push_back(g);
            }
            "ttg.async_wait" => {
                let keep = op.attrs.get("num").copied().unwrap_or(0).max(0) as usize;
                for w in Self::retire_all_but(&mut self.groups, keep) {
                    self.writes[w].complete = true;
                }
            }
            "ttng.init_barrier" => {
                if let Some(p) = self.place(op, op.operands[0]) {
                    let count = op.attrs.get("count").copied().unwrap_or(1);
                    self.barriers.insert(
                        p,
                        Barrier {
                            count,
                            arrived: 0,
                            completed: 0,
                            copies: Vec::new(),
                            reads: Vec::new(),
                        },
                    );
                }
            }
            "ttng.inval_barrier" => {
                if let Some(p) = self.place(op, op.operands[0]) {
                    self.barriers.remove(&p);
                }
            }
            "ttng.barrier_expect" | "ttng.arrive_barrier" => {
                if !self.predicate(op, op.operands.get(1).copied()) {
                    return;
                }
                let count = if n == "ttng.arrive_barrier" {
                    op.attrs.get("count").copied().unwrap_or(1)
                } else {
                    1
                };
                if let Some(p) = self.barrier(op, op.operands[0]) {
                    self.arrive(op, p, count);
                }
            }
            "ttng.async_tma_copy_global_to_local" => self.tma_load(op),
            "ttng.wait_barrier" => {
                if !self.predicate(op, wait_predicate(op)) {
                    return;
                }
                let Some(parity) = self.int(op.operands[1]) else {
                    self.unsupported(op, "a barrier phase the verifier cannot evaluate");
                    return;
                };
                if let Some(p) = self.barrier(op, op.operands[0]) {
                    self.wait_barrier(op, p, parity & 1);
                }
            }
            "ttng.warp_group_dot" => {
                let async_ = op.attrs.get("isAsync").copied().unwrap_or(0) != 0;
                let mut group = Vec::new();
                for i in 0..op.operands.len().min(2) {
                    if op.is_memdesc(i) {
                        if let Some((b, s)) = self.place(op, op.operands[i]) {
                            group.push(self.read(op, i, b, s, async_));
                        }
                    }
                }
                if async_ {
                    self.dots.push_back(group);
                }
            }
            "ttng.tc_gen5_mma" | "ttng.tc_gen5_mma_scaled" => self.tcgen05_mma(op),
            "ttng.tc_gen5_commit" => {
                if !self.predicate(op, op.operands.get(1).copied()) {
                    return;
                }
                if let Some(p) = self.barrier(op, op.operands[0]) {
                    self.commit_mmas(op, p);
                }
            }
            "ttng.warp_group_dot_wait" => {
                let keep = op.attrs.get("pendings").copied().unwrap_or(0).max(0) as usize;
                for r in Self::retire_all_but(&mut self.dots, keep) {
                    self.reads[r].retired = true;
                }
                // Results are the operands, retired.
                for (i, &r) in op.results.iter().enumerate() {
                    if let Some(&v) = op.operands.get(i) {
                        let x = self.val(v);
                        self.set(r, x);
                    }
                }
            }
            "ttg.local_load" => {
                if let Some((b, s)) = self.place(op, op.operands[0]) {
                    self.read(op, 0, b, s, false);
                }
            }
            "ttg.local_store" => {
                if let Some((b, s)) = self.place(op, op.operands[1]) {
                    self.write(op, b, s, true, false);
                }
            }
            "ttng.async_tma_copy_local_to_global" => {
                let src = (0..op.operands.len()).rev().find(|&i| op.is_memdesc(i));
                if let Some(i) = src {
                    if let Some((b, s)) = self.place(op, op.operands[i]) {
                        let r = self.read(op, i, b, s, true);
                        self.stores.push_back(vec![r]);
                    }
                }
            }
            "ttng.async_tma_store_wait" => {
                let keep = op.attrs.get("pendings").copied().unwrap_or(0).max(0) as usize;
                for r in Self::retire_all_but(&mut self.stores, keep) {
                    self.reads[r].retired = true;
                }
            }
            "tt.return" => self.drained(op, None),
            "ttng.fence_async_shared" | "scf.yield" => {}
            _ => self.other(op),
        }
    }

    /// An op the machine does not model: fine unless it touches a buffer
    /// or holds protocol ops in its regions.
    fn other(&mut self, op: &Op) {
        let touches = op
            .operands
            .iter()
            .any(|&v| matches!(self.val(v), Val::Mem(b, _) if self.buffers[b].indexed || self.buffers[b].depth > 0));
        if touches {
            self.unsupported(
                op,
                format!("`{}` on a shared-memory buffer is not modeled", op.name),
            );
        } else if op.regions.iter().any(has_protocol_ops) {
            self.unsupported(op, format!("asynchronous operations inside `{}`", op.name));
        }
        for &r in &op.results {
            self.set(r, Val::Unknown);
        }
    }

    /// Whether an optional predicate operand holds (no operand: true); an
    /// undecidable predicate is not covered.
    fn predicate(&mut self, op: &Op, pred: Option<usize>) -> bool {
        let Some(p) = pred else { return true };
        match self.int(p) {
            Some(x) => x != 0,
            None => {
                self.unsupported(op, "a predicate the verifier cannot evaluate");
                false
            }
        }
    }

    /// A tcgen05 MMA: reads its shared-memory operands (the first two)
    /// until it completes; it arrives on its barriers (those whose predicate
    /// holds) when it and every earlier tcgen05 op complete.
    fn tcgen05_mma(&mut self, op: &Op) {
        let seg = &op.segments;
        if seg.len() < 4 {
            self.unsupported(op, "a tcgen05 MMA without its operand segments");
            return;
        }
        let start = |k: usize| seg[..k].iter().sum::<i64>() as usize;
        let n = seg.len();
        let (pred_at, bars_at, preds_at) = (start(n - 3), start(n - 2), start(n - 1));
        let pred = (seg[n - 3] > 0).then(|| op.operands[pred_at]);
        if !self.predicate(op, pred) {
            return;
        }
        for i in 0..2 {
            if op.is_memdesc(i) {
                if let Some((b, s)) = self.place(op, op.operands[i]) {
                    let r = self.read(op, i, b, s, true);
                    self.mmas.push(r);
                }
            }
        }
        for k in 0..seg[n - 2] as usize {
            let bar_pred = (k < seg[n - 1] as usize).then(|| op.operands[preds_at + k]);
            if self.predicate(op, bar_pred) {
                if let Some(p) = self.barrier(op, op.operands[bars_at + k]) {
                    self.commit_mmas(op, p);
                }
            }
        }
    }

    /// An arrival on `place` when every tcgen05 MMA issued so far completes:
    /// their reads retire with its phase.
    fn commit_mmas(&mut self, op: &Op, place: (usize, i64)) {
        let reads = std::mem::take(&mut self.mmas);
        self.arrive(op, place, 1);
        if let Some(b) = self.barriers.get_mut(&place) {
            b.reads.extend(reads);
        }
    }

    fn tma_load(&mut self, op: &Op) {
        let [bar, dst] = op.memdesc_operands()[..] else {
            self.unsupported(op, "a TMA copy without its barrier and destination");
            return;
        };
        let pred = (dst + 1 < op.operands.len()).then(|| op.operands[op.operands.len() - 1]);
        let on = match pred {
            None => true,
            Some(p) => match self.int(p) {
                Some(x) => x != 0,
                None => {
                    self.unsupported(op, "a TMA predicate the verifier cannot evaluate");
                    return;
                }
            },
        };
        let Some((b, s)) = self.place(op, op.operands[dst]) else {
            return;
        };
        if !on {
            self.write(op, b, s, true, true);
            return;
        }
        let Some(place) = self.barrier(op, op.operands[bar]) else {
            return;
        };
        let w = self.write(op, b, s, false, false);
        if let Some(br) = self.barriers.get_mut(&place) {
            br.copies.push(w);
        }
    }

    fn if_op(&mut self, op: &Op) {
        match self.int(op.operands[0]) {
            Some(c) => {
                let region = if c != 0 { 0 } else { 1 };
                let yielded = match op.regions.get(region) {
                    Some(b) if !b.ops.is_empty() => self.block(b),
                    _ => Vec::new(),
                };
                for (i, &r) in op.results.iter().enumerate() {
                    self.set(r, yielded.get(i).copied().unwrap_or(Val::Unknown));
                }
            }
            None => self.other(op),
        }
    }

    /// Runs a block; returns what its terminator yields.
    fn block(&mut self, b: &Block) -> Vec<Val> {
        for op in &b.ops {
            if op.name == "scf.yield" {
                return op.operands.iter().map(|&v| self.val(v)).collect();
            }
            self.op(op);
            if self.unsupported.is_some() {
                return Vec::new();
            }
        }
        Vec::new()
    }

    fn for_loop(&mut self, op: &Op) {
        let (lb, ub, step) = (op.operands[0], op.operands[1], op.operands[2]);
        let inits: Vec<Val> = op.operands[3..].iter().map(|&v| self.val(v)).collect();
        let proto = self.protocol.contains(&op.id);
        let (Some(lbv), Some(ubv), Some(stepv)) = (self.int(lb), self.int(ub), self.int(step))
        else {
            if proto {
                self.unsupported(op, "loop bounds the verifier cannot evaluate");
            }
            return self.skip_loop(op);
        };
        if stepv <= 0 {
            self.unsupported(op, "a loop step that is not positive");
            return self.skip_loop(op);
        }
        let count = ((ubv - lbv).max(0) as u64).div_ceil(stepv as u64);
        let body = &op.regions[0];
        let mut args = inits;
        // The loop-carried integers of its first execution in the run (a
        // loop nested in another runs once per outer iteration).
        let first = proto && !self.trips.contains_key(&op.id);
        if proto {
            self.trips.entry(op.id).or_insert(count);
            self.at.push((op.id, 0));
        }
        for k in 0..count {
            if let Some(top) = self.at.last_mut().filter(|t| t.0 == op.id) {
                top.1 = k;
            }
            if first {
                let head: Vec<Option<i64>> = args
                    .iter()
                    .map(|a| if let Val::Int(i) = a { Some(*i) } else { None })
                    .collect();
                self.heads.entry(op.id).or_default().push(head);
            }
            self.set(body.args[0], Val::Int(lbv + k as i64 * stepv));
            for (i, a) in args.iter().enumerate() {
                self.set(body.args[i + 1], *a);
            }
            let yielded = self.block(body);
            if self.unsupported.is_some() {
                break;
            }
            args = (0..args.len())
                .map(|i| yielded.get(i).copied().unwrap_or(Val::Unknown))
                .collect();
        }
        if proto {
            self.at.pop();
        }
        for (i, &r) in op.results.iter().enumerate() {
            self.set(r, args.get(i).copied().unwrap_or(Val::Unknown));
        }
    }

    /// A loop whose trip count the run cannot evaluate: results unknown;
    /// one that holds protocol ops runs one representative iteration
    /// ([`Self::representative`]).
    fn skip_loop(&mut self, op: &Op) {
        if self.unsupported.is_none() && op.regions.iter().any(has_protocol_ops) {
            let body = &op.regions[0];
            for &a in &body.args {
                self.set(a, Val::Unknown);
            }
            self.representative(op, body);
        }
        for &r in &op.results {
            self.set(r, Val::Unknown);
        }
    }

    /// An `scf.while`: without protocol ops its results are unknown; with
    /// them, its condition region runs and its body one representative
    /// iteration ([`Self::representative`]).
    fn while_loop(&mut self, op: &Op) {
        if op.regions.iter().any(has_protocol_ops) {
            let (before, after) = (&op.regions[0], &op.regions[1]);
            if has_protocol_ops(before) {
                self.unsupported(
                    op,
                    "asynchronous operations in the condition of `scf.while`",
                );
                return;
            }
            for &a in &before.args {
                self.set(a, Val::Unknown);
            }
            self.block(before);
            let passed: Vec<Val> = before
                .ops
                .last()
                .filter(|o| o.name == "scf.condition")
                .map(|c| c.operands[1..].iter().map(|&v| self.val(v)).collect())
                .unwrap_or_default();
            for (i, &a) in after.args.iter().enumerate() {
                self.set(a, passed.get(i).copied().unwrap_or(Val::Unknown));
            }
            self.representative(op, after);
        }
        for &r in &op.results {
            self.set(r, Val::Unknown);
        }
    }

    /// One iteration of a loop whose trip count the run does not know,
    /// standing for all of them: it must start with nothing in flight and
    /// end so, with every barrier it found in the same state (count,
    /// arrivals, phase parity), so that each iteration starts where the
    /// first did, its rings' order (rule 4) counted from its own first
    /// write; the loop-carried values are unknown, so an iteration
    /// whose protocol depends on them (a slot index, a phase, a predicate, a
    /// loop bound) is not covered. Values an iteration loads (a grouped
    /// GEMM's sizes) are pinned like the function's arguments, so the runs
    /// cover the trip counts of the loops inside it.
    fn representative(&mut self, op: &Op, body: &Block) {
        if !self.quiescent() {
            self.unsupported(
                op,
                "a loop with asynchronous operations whose trip count is unknown, entered with asynchronous operations in flight",
            );
            return;
        }
        let before = self.barrier_states();
        // Each iteration starts its rings' order afresh (rule 4 within the
        // iteration): a read of a value an earlier iteration wrote is then
        // a read beyond the iteration's own writes, a violation.
        let buffers = &self.buffers;
        self.order.retain(|&b, _| !buffers[b].indexed);
        self.readers.retain(|(b, _), _| !buffers[*b].indexed);
        self.block(body);
        if self.unsupported.is_some() {
            return;
        }
        let after = self.barrier_states();
        if !self.quiescent() || !before.iter().all(|(p, b)| after.get(p) == Some(b)) {
            self.unsupported(
                op,
                "a loop with asynchronous operations whose trip count is unknown, whose iteration leaves asynchronous state to the next",
            );
        }
    }

    /// Nothing in flight: every copy landed, every asynchronous read
    /// retired, no copy outside a commit group.
    fn quiescent(&self) -> bool {
        self.writes.iter().all(|w| w.complete || w.phantom)
            && self.reads.iter().all(|r| r.retired)
            && self.uncommitted.is_empty()
            && self.mmas.is_empty()
    }

    /// Each barrier's count, arrivals on its open phase and phase parity.
    fn barrier_states(&self) -> BTreeMap<(usize, i64), (i64, i64, u64)> {
        self.barriers
            .iter()
            .map(|(&p, b)| (p, (b.count, b.arrived, b.completed % 2)))
            .collect()
    }
}

// -------------------------------------------------------------------
// The function: its buffers, loops, and runs.
// -------------------------------------------------------------------

/// The predicate operand of a `ttng.wait_barrier` (barrier, phase, then an
/// optional predicate, then the buffers it guards), if it has one.
fn wait_predicate(o: &Op) -> Option<usize> {
    let has = match o.segments.get(2) {
        Some(&n) => n > 0,
        None => !o.memdesc.get(2).copied().unwrap_or(true),
    };
    has.then(|| o.operands.get(2).copied()).flatten()
}

fn has_protocol_ops(b: &Block) -> bool {
    b.ops
        .iter()
        .any(|o| ASYNC_OPS.contains(&o.name.as_str()) || o.regions.iter().any(has_protocol_ops))
}

/// Whether `b` itself (not a nested loop) issues asynchronous ops.
fn issues_async(b: &Block) -> bool {
    b.ops.iter().any(|o| {
        ASYNC_OPS.contains(&o.name.as_str())
            || (o.name != "scf.for" && o.regions.iter().any(issues_async))
    })
}

fn walk<'b>(b: &'b Block, f: &mut impl FnMut(&'b Op, usize)) {
    fn go<'b>(b: &'b Block, depth: usize, f: &mut impl FnMut(&'b Op, usize)) {
        for o in &b.ops {
            f(o, depth);
            for r in &o.regions {
                go(r, depth + 1, f);
            }
        }
    }
    go(b, 0, f)
}

/// A loop that issues asynchronous ops outside the function's
/// `ttg.warp_specialize`: not covered (the function is verified as the ws
/// op's threads only), hence reported `unsupported`, never proved.
fn beside_ws(f: &Function) -> Option<LoopReport> {
    fn find(b: &Block) -> Option<&Op> {
        b.ops.iter().find_map(|o| match o.name.as_str() {
            "ttg.warp_specialize" => None,
            "scf.for" if issues_async(&o.regions[0]) => Some(o),
            _ => o.regions.iter().find_map(find),
        })
    }
    let o = find(&f.body)?;
    Some(LoopReport {
        function: f.name.clone(),
        loc: o.loc.clone(),
        verdict: Verdict::Unsupported,
        rings: Vec::new(),
        max_trip_count: 0,
        violations: Vec::new(),
        unsupported: Some(Unsupported {
            op: o.name.clone(),
            why: "a pipelined loop beside a ttg.warp_specialize in one function is not verified"
                .into(),
        }),
    })
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The buffers of a function (one per `ttg.local_alloc`): depth = the
/// leading dimension of an indexed allocation.
fn buffers(f: &Function) -> (Vec<Buffer>, HashMap<usize, usize>) {
    let mut indexed: BTreeSet<usize> = BTreeSet::new();
    walk(&f.body, &mut |o, _| {
        if o.name == "ttg.memdesc_index" {
            indexed.insert(o.operands[0]);
        }
    });
    let mut out = Vec::new();
    let mut of = HashMap::new();
    walk(&f.body, &mut |o, _| {
        if o.name == "ttg.local_alloc" {
            let (shape, _) = o.alloc.clone().unwrap_or_default();
            let idx = o.results.first().is_some_and(|r| indexed.contains(r));
            of.insert(o.id, out.len());
            out.push(Buffer {
                loc: o.loc.clone(),
                depth: if idx {
                    shape.first().copied().unwrap_or(1)
                } else {
                    1
                },
                indexed: idx,
            });
        }
    });
    (out, of)
}

struct LoopInfo<'b> {
    op: &'b Op,
    rings: Vec<usize>,
    /// Positions of the loop-carried values that slot indices, phases and
    /// predicates of the protocol depend on.
    carried: Vec<usize>,
    bound: u64,
    period: u64,
    deepest: u64,
}

/// The protocol loops of `f` (loops whose own body issues asynchronous
/// ops), with their rings and the trip-count bound that covers them.
fn loops<'b>(
    f: &'b Function,
    bufs: &[Buffer],
    alloc_of: &HashMap<usize, usize>,
) -> Vec<LoopInfo<'b>> {
    let mut value_buf: HashMap<usize, usize> = HashMap::new();
    walk(&f.body, &mut |o, _| {
        if let Some(&b) = alloc_of.get(&o.id) {
            value_buf.insert(o.results[0], b);
        }
    });
    let mut out = Vec::new();
    walk(&f.body, &mut |o, _| {
        if o.name != "scf.for" || !issues_async(&o.regions[0]) {
            return;
        }
        let mut rings = BTreeSet::new();
        walk(&o.regions[0], &mut |x, _| {
            if x.name == "ttg.memdesc_index" {
                if let Some(&b) = value_buf.get(&x.operands[0]) {
                    rings.insert(b);
                }
            }
        });
        let depths: Vec<i64> = rings.iter().map(|&b| bufs[b].depth.max(1)).collect();
        let lcm = depths.iter().fold(1i64, |a, &d| a / gcd(a, d) * d);
        // Barrier phases alternate: their pattern repeats after two laps.
        let mut phases = false;
        walk(&o.regions[0], &mut |x, _| {
            phases |= x.name == "ttng.wait_barrier"
        });
        let period = (lcm * if phases { 2 } else { 1 }) as u64;
        let deepest = depths.iter().copied().max().unwrap_or(1) as u64;
        // Runs up to a warm-up (at most the deepest ring), a period, and the
        // tail of predicated iterations (at most the deepest ring) cover
        // every trip count once the state repeats with the period.
        let bound = period + 2 * deepest + 2;
        out.push(LoopInfo {
            op: o,
            rings: rings.into_iter().collect(),
            carried: protocol_carried(o),
            bound,
            period,
            deepest,
        });
    });
    out
}

/// The iteration arguments of loop `l` that the protocol's integers (slot
/// indices, barrier phases, predicates) depend on: a backward slice.
fn protocol_carried(l: &Op) -> Vec<usize> {
    let body = &l.regions[0];
    let mut need: BTreeSet<usize> = BTreeSet::new();
    walk(body, &mut |o, _| match o.name.as_str() {
        "ttg.memdesc_index" => {
            need.insert(o.operands[1]);
        }
        // Phases and predicates (not a TMA copy's coordinates, nor the
        // buffers a wait lists).
        "ttng.barrier_expect" => need.extend(o.operands.get(1).copied()),
        "ttng.wait_barrier" => {
            need.extend(o.operands.get(1).copied());
            if let Some(p) = wait_predicate(o) {
                need.insert(p);
            }
        }
        "ttng.async_tma_copy_global_to_local" => {
            let last_mem = (0..o.operands.len()).rev().find(|&i| o.memdesc[i]);
            if let Some(p) = last_mem.and_then(|i| o.operands.get(i + 1)) {
                need.insert(*p);
            }
        }
        _ => {}
    });
    loop {
        let before = need.len();
        let mut more = Vec::new();
        walk(body, &mut |o, _| {
            if o.name == "scf.for" {
                more.extend(nested_for_slice(o, &need));
            } else if o.results.iter().any(|r| need.contains(r)) {
                more.extend(o.operands.iter().copied());
            }
        });
        need.extend(more);
        // Through the loop's own yield: argument i + 1 <- yielded value i.
        if let Some(y) = body.ops.last().filter(|o| o.name == "scf.yield") {
            for (i, &v) in y.operands.iter().enumerate() {
                if need.contains(&body.args[i + 1]) {
                    need.insert(v);
                }
            }
        }
        if need.len() == before {
            break;
        }
    }
    (0..body.args.len().saturating_sub(1))
        .filter(|&i| need.contains(&body.args[i + 1]))
        .collect()
}

/// What a nested `scf.for` adds to a backward slice `need`: for each of
/// its results or iteration arguments in `need`, the bounds, that
/// argument's initial value and the value its body yields for it; for its
/// induction variable, the bounds. (Its other operands, the tensors it
/// carries, do not reach those values.)
fn nested_for_slice(o: &Op, need: &BTreeSet<usize>) -> Vec<usize> {
    let body = &o.regions[0];
    let yielded = body.ops.last().filter(|y| y.name == "scf.yield");
    let mut out = Vec::new();
    if need.contains(&body.args[0]) {
        out.extend(&o.operands[..3]);
    }
    for j in 0..o.operands.len().saturating_sub(3) {
        let result = o.results.get(j).is_some_and(|r| need.contains(r));
        let arg = body.args.get(j + 1).is_some_and(|a| need.contains(a));
        if result || arg {
            out.extend(&o.operands[..3]);
            out.push(o.operands[3 + j]);
            out.extend(yielded.and_then(|y| y.operands.get(j)));
            if let Some(&a) = body.args.get(j + 1) {
                out.push(a);
            }
        }
    }
    out
}

/// Ops the scalar evaluator follows (integer arithmetic and casts).
fn is_scalar_op(o: &Op) -> bool {
    o.results.len() == 1
        && (o.name.starts_with("arith.") || o.name == "tt.splat")
        && !o.name.ends_with("f")
}

/// Scalar definitions of `f`: result value -> defining op.
pub(super) fn scalar_defs(f: &Function) -> HashMap<usize, &Op> {
    let mut out = HashMap::new();
    walk(&f.body, &mut |o, _| {
        if is_scalar_op(o) {
            out.insert(o.results[0], o);
        }
    });
    out
}

/// The value of `v` from its scalar definitions, with `pins` for the
/// values they start from; None where some input is not pinned.
fn eval_scalar(
    defs: &HashMap<usize, &Op>,
    pins: &HashMap<usize, i64>,
    v: usize,
    depth: u32,
) -> Option<i64> {
    if let Some(&x) = pins.get(&v) {
        return Some(x);
    }
    let o = defs.get(&v)?;
    if depth > 64 {
        return None;
    }
    let arg = |i: usize| eval_scalar(defs, pins, *o.operands.get(i)?, depth + 1);
    match o.name.as_str() {
        "arith.constant" => o.attrs.get("value").copied(),
        "arith.select" => {
            let c = arg(0)?;
            arg(if c != 0 { 1 } else { 2 })
        }
        "arith.extui" | "arith.extsi" | "arith.trunci" | "arith.index_cast"
        | "arith.index_castui" | "tt.splat" => arg(0),
        n if o.operands.len() == 2 => arith(n, arg(0)?, arg(1)?, &o.attrs),
        _ => None,
    }
}

/// The values `v` is computed from that nothing computes: function and
/// block arguments, results of ops the evaluator does not follow.
pub(super) fn roots_of(defs: &HashMap<usize, &Op>, v: usize, out: &mut Vec<usize>, depth: u32) {
    match defs.get(&v) {
        Some(o) if depth < 64 => {
            for &x in &o.operands {
                roots_of(defs, x, out, depth + 1);
            }
        }
        Some(_) => {}
        None => {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
}

/// Trip count of loop `l` under `pins`, where its bounds evaluate.
pub(super) fn trip_count(
    defs: &HashMap<usize, &Op>,
    pins: &HashMap<usize, i64>,
    l: &Op,
) -> Option<u64> {
    let lb = eval_scalar(defs, pins, l.operands[0], 0)?;
    let ub = eval_scalar(defs, pins, l.operands[1], 0)?;
    let step = eval_scalar(defs, pins, l.operands[2], 0)?;
    (step > 0).then(|| ((ub - lb).max(0) as u64).div_ceil(step as u64))
}

/// Candidate values searched for each root (0 up to this).
const ROOT_SEARCH: i64 = 1 << 16;

/// The inputs a run binds (pins): the roots of the protocol loops' bounds,
/// each with the values that give its loops every trip count up to their
/// bounds (the least value for each combination, the other roots at 0).
fn free_values(ls: &[LoopInfo], defs: &HashMap<usize, &Op>) -> Vec<(usize, Vec<i64>)> {
    let mut roots = Vec::new();
    for l in ls {
        for &b in &l.op.operands[..3] {
            roots_of(defs, b, &mut roots, 0);
        }
    }
    roots
        .iter()
        .map(|&r| {
            let mine: Vec<&LoopInfo> = ls
                .iter()
                .filter(|l| {
                    let mut rs = Vec::new();
                    for &b in &l.op.operands[..3] {
                        roots_of(defs, b, &mut rs, 0);
                    }
                    rs.contains(&r)
                })
                .collect();
            let mut pins: HashMap<usize, i64> = roots.iter().map(|&x| (x, 0)).collect();
            let mut seen: BTreeSet<Vec<Option<u64>>> = BTreeSet::new();
            let mut values = Vec::new();
            let wanted: usize = mine
                .iter()
                .map(|l| l.bound as usize + 1)
                .product::<usize>()
                .min(4096);
            for x in 0..=ROOT_SEARCH {
                pins.insert(r, x);
                let trips: Vec<Option<u64>> =
                    mine.iter().map(|l| trip_count(defs, &pins, l.op)).collect();
                let fits = trips
                    .iter()
                    .zip(&mine)
                    .all(|(t, l)| t.is_some_and(|t| t <= l.bound));
                if fits && seen.insert(trips) {
                    values.push(x);
                    if values.len() >= wanted {
                        break;
                    }
                }
            }
            if values.is_empty() {
                values.push(0);
            }
            (r, values)
        })
        .collect()
}

/// The pins of every run: all combinations, or, when that is too many,
/// each value through its domain with the others at their fourth value.
pub(super) fn pin_plans(free: &[(usize, Vec<i64>)]) -> Vec<HashMap<usize, i64>> {
    let total: usize = free.iter().map(|(_, d)| d.len()).product();
    if total <= 4096 {
        let mut out = vec![HashMap::new()];
        for (v, d) in free {
            out = out
                .into_iter()
                .flat_map(|p| {
                    d.iter().map(move |&x| {
                        let mut q = p.clone();
                        q.insert(*v, x);
                        q
                    })
                })
                .collect();
        }
        return out;
    }
    let base: HashMap<usize, i64> = free
        .iter()
        .map(|(v, d)| (*v, d[d.len().min(4) - 1]))
        .collect();
    free.iter()
        .flat_map(|(v, d)| {
            let base = &base;
            d.iter().map(move |&x| {
                let mut q = base.clone();
                q.insert(*v, x);
                q
            })
        })
        .collect()
}

/// Verifies every protocol loop of `f` (module documentation).
pub fn verify_function(f: &Function) -> Vec<LoopReport> {
    let mut out = super::ws::verify_ws(f);
    if !out.is_empty() {
        out.extend(beside_ws(f));
        return out;
    }
    let (bufs, alloc_of) = buffers(f);
    let ls = loops(f, &bufs, &alloc_of);
    if ls.is_empty() {
        return Vec::new();
    }
    let defs = scalar_defs(f);
    let protocol: BTreeSet<usize> = ls.iter().map(|l| l.op.id).collect();
    let mut found: Vec<(Option<usize>, Violation)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut unsupported: Option<(Option<usize>, Unsupported)> = None;
    let mut heads: HashMap<usize, Vec<Vec<Option<i64>>>> = HashMap::new();
    for pins in pin_plans(&free_values(&ls, &defs)) {
        let mut m = Machine::new(&protocol, bufs.clone(), alloc_of.clone());
        m.pins = pins;
        m.block(&f.body);
        for (l, v) in m.violations {
            let key = (
                v.rule,
                v.buffer.clone(),
                v.slot,
                v.op.clone(),
                v.other.clone(),
            );
            if seen.insert(key) {
                found.push((l, v));
            }
        }
        if m.unsupported.is_some() {
            unsupported = m.unsupported;
            break;
        }
        for (l, h) in m.heads {
            if heads.get(&l).is_none_or(|x| x.len() < h.len()) {
                heads.insert(l, h);
            }
        }
    }
    // A violation that no loop claims (outside every loop, on a buffer no
    // loop indexes) makes the whole function unsafe: every loop reports it.
    let found: Vec<(Option<usize>, Violation)> = found
        .into_iter()
        .map(|(at, v)| {
            let owned = ls.iter().any(|l| claims(l, &bufs, &at, &v));
            (if owned { at } else { Some(ORPHAN) }, v)
        })
        .collect();
    ls.iter()
        .map(|l| {
            report(
                f,
                l,
                &bufs,
                &found,
                unsupported.as_ref(),
                heads.get(&l.op.id),
            )
        })
        .collect()
}

/// Marks a violation that every loop of the function reports.
const ORPHAN: usize = usize::MAX;

/// Whether loop `l` owns a violation: it happened in the loop, or on one of
/// its rings.
fn claims(l: &LoopInfo, bufs: &[Buffer], at: &Option<usize>, v: &Violation) -> bool {
    *at == Some(l.op.id) || l.rings.iter().any(|&b| bufs[b].loc == v.buffer)
}

fn report(
    f: &Function,
    l: &LoopInfo,
    bufs: &[Buffer],
    found: &[(Option<usize>, Violation)],
    unsupported: Option<&(Option<usize>, Unsupported)>,
    heads: Option<&Vec<Vec<Option<i64>>>>,
) -> LoopReport {
    let violations: Vec<Violation> = found
        .iter()
        .filter(|(at, v)| *at == Some(ORPHAN) || claims(l, bufs, at, v))
        .map(|(_, v)| v.clone())
        .collect();
    let mut unsup = unsupported
        .filter(|(at, _)| at.is_none_or(|a| a == l.op.id))
        .map(|(_, u)| u.clone());
    if unsup.is_none() && !periodic(heads, &l.carried, l.period as usize, l.deepest as usize) {
        unsup = Some(Unsupported {
            op: name_of(l.op),
            why: format!(
                "the loop-carried integers do not repeat every {} iterations",
                l.period
            ),
        });
    }
    let verdict = if !violations.is_empty() {
        Verdict::Rejected
    } else if unsup.is_some() {
        Verdict::Unsupported
    } else {
        Verdict::Proved
    };
    LoopReport {
        function: f.name.clone(),
        loc: l.op.loc.clone(),
        verdict,
        rings: l
            .rings
            .iter()
            .map(|&b| (bufs[b].loc.clone(), bufs[b].depth))
            .collect(),
        max_trip_count: l.bound,
        violations,
        unsupported: unsup,
    }
}

/// Whether the loop-carried integers at the loop head repeat with `period`
/// once past the warm-up (`warm` iterations).
fn periodic(
    heads: Option<&Vec<Vec<Option<i64>>>>,
    carried: &[usize],
    period: usize,
    warm: usize,
) -> bool {
    let Some(h) = heads else { return true };
    (warm + 1..h.len().saturating_sub(period)).all(|k| {
        carried.iter().all(|&i| {
            let (a, b) = (
                h[k].get(i).copied().flatten(),
                h[k + period].get(i).copied().flatten(),
            );
            a.is_some() && a == b
        })
    })
}
