//! The machine that interleaves the threads of a `ttg.warp_specialize`
//! (their event traces) under mbarrier semantics: round-robin, each thread
//! until it blocks or ends. A phase completes with its last arrival (a
//! `barrier_expect` first issues the copies that follow it: the phase
//! waits for them to land, and they land as it completes); a wait on
//! parity p returns once the open phase's parity is not p and observes the
//! last completed phase.
//!
//! Every thread carries a vector clock with one component per thread and
//! one per barrier. An arrival or a TMA copy joins its thread's clock into
//! the open phase; a completing phase takes that join with its barrier's
//! component set to its number, so that only a wait that observes it (or
//! a thread that learns from one) knows its copies landed; a wait joins
//! the phase it observes. Retiring a read stamps it with the retiring
//! thread's clock. The data rules compare clocks (happens-before), not the
//! run's order; rule 8 checks that each wait's phase is forced by
//! happens-before, so that every interleaving has the run's outcomes.
//!
//! A `ttg.local_store` is a plain write: complete with its thread's clock
//! at the store (or, in a region of several warp groups, at the region's
//! next barrier of its warps). Its races with the other threads' reads and
//! writes of the same place are rule 10 (the same happens-before checks as
//! rules 1′/2′/3′ for copies).

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::super::Rule;
use super::trace::{Ev, Place};

type Clock = Vec<u64>;

fn leq(a: &Clock, b: &Clock) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y)
}

/// Whether a phase that completed at `done` happens before `clock`: a
/// phase with copies completes when they land, which only a wait (its
/// barrier's component `lane`) tells; one without completes with its last
/// arrival.
fn after(done: &Clock, clock: &Clock, copied: bool, lane: usize) -> bool {
    done.iter()
        .zip(clock)
        .enumerate()
        .all(|(i, (x, y))| (i == lane && !copied) || x <= y)
}

fn join(a: &mut Clock, b: &Clock) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

struct Bar {
    /// Its component of the clocks (after the threads'): the phases whose
    /// completion a thread has observed, directly or through others.
    lane: usize,
    count: i64,
    arrived: i64,
    completed: u64,
    open: Clock,
    /// Completion clocks of the last completed phase and of the one before
    /// (zero before there is one: the initialization).
    done: Clock,
    prev: Clock,
    /// Whether the last completed phase and the one before had copies
    /// (then their completion is the copies' landing, which a thread knows
    /// only through a wait); else their arrivals complete them.
    copied: bool,
    prev_copied: bool,
    copies: Vec<usize>,
    /// The waits that observed the last completed phase: thread, the wait's
    /// own time in that thread, op.
    observers: Vec<(usize, u64, String)>,
    /// The latest phase a wait observed.
    observed: Option<u64>,
}

/// When a write completed: its clock, and for a copy the barrier and phase
/// it landed with (a wait must observe that phase before the join).
struct Landed {
    clock: Clock,
    phase: Option<(Place, u64)>,
}

struct Write {
    op: String,
    slot: i64,
    /// A `ttg.local_store` (else a TMA copy).
    plain: bool,
    landed: Option<Landed>,
}

/// The writes to one ring, in their thread's order (rule 4 checks rings
/// written by one thread only, where that order is the program's).
struct RingOrder {
    thread: usize,
    writes: Vec<usize>,
    shared: bool,
}

struct Read {
    op: String,
    retired: Option<Clock>,
}

#[derive(Default)]
struct Slot {
    latest: Option<usize>,
    reads: Vec<usize>,
}

struct Thread {
    ev: Vec<Ev>,
    pc: usize,
    clock: Clock,
    dots: VecDeque<Vec<usize>>,
    pending: Vec<usize>,
    /// Its stores not complete for the other threads yet.
    stores: Vec<usize>,
}

/// The place of a rule-11 violation: registers, not shared memory.
pub const REGISTERS: (usize, i64) = (usize::MAX, 0);

/// A broken rule found by the machine: rule, place, op, other op, text.
pub type Found = (Rule, Place, String, Option<String>, String);

enum Step {
    Done,
    Blocked,
    Ran,
}

pub struct Sim {
    threads: Vec<Thread>,
    bars: HashMap<Place, Bar>,
    writes: Vec<Write>,
    reads: Vec<Read>,
    slots: HashMap<Place, Slot>,
    indexed: BTreeSet<usize>,
    rings: HashMap<usize, RingOrder>,
    /// The allocations some thread writes with `ttg.local_store`.
    stored: BTreeSet<usize>,
    /// Executions so far of each reader: (way of telling readers apart,
    /// thread, op name or op, operand, ring).
    readers: HashMap<(usize, usize, String, usize, usize), usize>,
    /// Rule 4's violations per (thread, op name, operand, ring), readers
    /// told apart by op name and by op name and location.
    #[allow(clippy::type_complexity)]
    order_found: HashMap<(usize, String, usize, usize), [Vec<Found>; 2]>,
    pub found: Vec<Found>,
}

impl Sim {
    /// The barriers initialized before the fork (`init`), then one thread
    /// per trace; `indexed`: the allocations that are rings.
    pub fn new(init: &[Ev], traces: Vec<Vec<Ev>>, indexed: BTreeSet<usize>) -> Sim {
        let stored = traces
            .iter()
            .flatten()
            .filter_map(|e| match e {
                Ev::Store { dst, .. } => Some(dst.0),
                _ => None,
            })
            .collect();
        let inits = init.iter().filter(|e| matches!(e, Ev::Init { .. }));
        let n = traces.len() + inits.count();
        let mut bars = HashMap::new();
        for e in init {
            if let Ev::Init { bar, count } = e {
                let lane = traces.len() + bars.len();
                bars.insert(
                    *bar,
                    Bar {
                        lane,
                        count: *count,
                        arrived: 0,
                        completed: 0,
                        open: vec![0; n],
                        done: vec![0; n],
                        prev: vec![0; n],
                        copied: false,
                        prev_copied: false,
                        copies: Vec::new(),
                        observers: Vec::new(),
                        observed: None,
                    },
                );
            }
        }
        let threads = traces
            .into_iter()
            .map(|ev| Thread {
                ev,
                pc: 0,
                clock: vec![0; n],
                dots: VecDeque::new(),
                pending: Vec::new(),
                stores: Vec::new(),
            })
            .collect();
        Sim {
            threads,
            bars,
            writes: Vec::new(),
            reads: Vec::new(),
            slots: HashMap::new(),
            indexed,
            rings: HashMap::new(),
            stored,
            readers: HashMap::new(),
            order_found: HashMap::new(),
            found: Vec::new(),
        }
    }

    /// Round-robin: each thread runs until it blocks or ends; all live
    /// threads blocked is a deadlock (rule 5 on every blocked wait).
    pub fn run(&mut self) {
        loop {
            let mut progress = false;
            let mut live = false;
            for t in 0..self.threads.len() {
                loop {
                    match self.step(t) {
                        Step::Ran => progress = true,
                        Step::Blocked => {
                            live = true;
                            break;
                        }
                        Step::Done => break,
                    }
                }
            }
            if !live {
                break;
            }
            if !progress {
                self.deadlock();
                self.order_violations();
                return;
            }
        }
        self.drained();
        self.order_violations();
    }

    fn deadlock(&mut self) {
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if let Some(Ev::Wait { bar, parity, op }) = th.ev.get(th.pc) {
                let b = &self.bars[bar];
                let text = format!(
                    "{op} waits on barrier slot {} (phase parity {parity}) whose open phase has {} of its {} arrivals, and every other thread is blocked or done: it never returns",
                    bar.1, b.arrived, b.count
                );
                self.found
                    .push((Rule::WaitWithoutArrival, *bar, op.clone(), None, text));
            }
        }
    }

    fn drained(&mut self) {
        for (place, s) in &self.slots {
            if let Some(w) = s.latest {
                let write = &self.writes[w];
                let seen = |l: &Landed| match l.phase {
                    Some((bar, k)) => self.bars.get(&bar).and_then(|b| b.observed) >= Some(k),
                    None => true,
                };
                if !write.landed.as_ref().is_some_and(seen) {
                    let op = write.op.clone();
                    let text = if write.plain {
                        format!(
                            "the store of {op} into slot {} is not complete for the other threads at the join",
                            place.1
                        )
                    } else {
                        format!(
                            "the landing of the copy of {op} into slot {} is never waited for: it may still be in flight at the join",
                            place.1
                        )
                    };
                    self.found.push((Rule::NotDrained, *place, op, None, text));
                }
            }
            for &r in &s.reads {
                if self.reads[r].retired.is_none() {
                    let op = self.reads[r].op.clone();
                    let text = format!("{op} still reads slot {} at the join", place.1);
                    self.found.push((Rule::NotDrained, *place, op, None, text));
                }
            }
        }
    }

    fn step(&mut self, t: usize) -> Step {
        let th = &self.threads[t];
        let Some(ev) = th.ev.get(th.pc).cloned() else {
            return Step::Done;
        };
        if let Ev::Wait { bar, parity, op } = &ev {
            if !self.wait(t, *bar, *parity, op) {
                return Step::Blocked;
            }
        }
        let th = &mut self.threads[t];
        th.pc += 1;
        th.clock[t] += 1;
        match ev {
            Ev::Arrive { bar, count, tx, op } => {
                if tx {
                    self.copies_of(t, bar);
                }
                self.arrive(t, bar, count, op)
            }
            Ev::Tma { dst, bar, op } => self.tma(t, dst, bar, op),
            Ev::Store { dst, op, at_once } => self.store(t, dst, op, at_once),
            Ev::StoresLand => self.stores_land(t),
            Ev::Read {
                src,
                operand,
                op,
                async_,
            } => self.read(t, (src, operand), op, async_),
            Ev::DotIssued => {
                let th = &mut self.threads[t];
                let group = std::mem::take(&mut th.pending);
                th.dots.push_back(group);
            }
            Ev::DotWait { pendings } => self.dot_wait(t, pendings),
            Ev::EarlyUse { op, dot } => {
                let text = format!(
                    "{op} uses the result of {dot} before a warp_group_dot_wait retired it"
                );
                self.found
                    .push((Rule::ResultInFlight, REGISTERS, op, Some(dot), text));
            }
            Ev::Init { .. } | Ev::Wait { .. } => {}
        }
        Step::Ran
    }

    /// Whether the wait returns now (and its effects if so): once the open
    /// phase's parity is not `parity`, observing the last completed phase
    /// k. Rule 8 wants phase k − 1 completed before it (else another
    /// interleaving has it observe an earlier phase); the check that phase
    /// k + 1 completes after it is made when that phase completes.
    fn wait(&mut self, t: usize, bar: Place, parity: i64, op: &str) -> bool {
        let before = self.threads[t].clock.clone();
        let Some(b) = self.bars.get_mut(&bar) else {
            return true;
        };
        if (b.completed % 2) as i64 == parity {
            return false;
        }
        if !after(&b.prev, &before, b.prev_copied, b.lane) {
            let text = format!(
                "{op} observes phase {} of barrier slot {} without the completion of phase {} happening before it: in another interleaving it observes an earlier phase",
                b.completed as i64 - 1,
                bar.1,
                b.completed as i64 - 2
            );
            self.found
                .push((Rule::PhaseRace, bar, op.to_string(), None, text));
        }
        if b.completed > 0 {
            b.observed = b.observed.max(Some(b.completed - 1));
        }
        b.observers.push((t, before[t] + 1, op.to_string()));
        let done = b.done.clone();
        join(&mut self.threads[t].clock, &done);
        true
    }

    /// The copies that directly follow a `barrier_expect` of thread `t` on
    /// `bar`: the phase cannot complete before they land, so they join it
    /// before the arrival (a copy issued later joins the open phase then:
    /// the next one, if this arrival completed it).
    fn copies_of(&mut self, t: usize, bar: Place) {
        loop {
            let th = &mut self.threads[t];
            let Some(Ev::Tma { dst, bar: b, op }) = th.ev.get(th.pc).cloned() else {
                return;
            };
            if b != bar {
                return;
            }
            th.pc += 1;
            th.clock[t] += 1;
            self.tma(t, dst, b, op);
        }
    }

    /// Phase `completed` of `bar` has all its arrivals: it completes (its
    /// copies land). Rule 8: every wait that observed the phase before has
    /// an arrival of this one happening after it, else this phase can
    /// complete before that wait returns and the wait sees two phases on.
    fn complete(&mut self, bar: Place) {
        let Some(b) = self.bars.get_mut(&bar) else {
            return;
        };
        let copied = !b.copies.is_empty();
        let mut done = std::mem::replace(&mut b.open, vec![0; b.done.len()]);
        done[b.lane] = b.completed + 1;
        for (u, at, other) in std::mem::take(&mut b.observers) {
            if done[u] < at {
                let text = format!(
                    "phase {} of barrier slot {} can complete before {other} returns, which observes phase {}: no arrival of it happens after that wait, so the wait can see either phase",
                    b.completed,
                    bar.1,
                    b.completed as i64 - 1
                );
                self.found.push((Rule::PhaseRace, bar, other, None, text));
            }
        }
        b.completed += 1;
        b.arrived = 0;
        b.prev = std::mem::replace(&mut b.done, done);
        b.prev_copied = std::mem::replace(&mut b.copied, copied);
        for w in std::mem::take(&mut b.copies) {
            self.writes[w].landed = Some(Landed {
                clock: b.done.clone(),
                phase: Some((bar, b.completed - 1)),
            });
        }
    }

    fn arrive(&mut self, t: usize, bar: Place, count: i64, op: String) {
        let clock = self.threads[t].clock.clone();
        let Some(b) = self.bars.get_mut(&bar) else {
            return;
        };
        if b.arrived + count > b.count {
            let text = format!(
                "{op} arrives on barrier slot {} whose open phase already has its {} arrivals",
                bar.1, b.count
            );
            self.found.push((Rule::PhaseOverrun, bar, op, None, text));
            return;
        }
        if b.completed > 0 && !after(&b.done, &clock, b.copied, b.lane) {
            let text = format!(
                "{op} arrives on barrier slot {} without the completion of its previous phase happening before",
                bar.1
            );
            self.found
                .push((Rule::PhaseOverrun, bar, op.clone(), None, text));
        }
        b.arrived += count;
        join(&mut b.open, &clock);
        if b.arrived == b.count {
            self.complete(bar);
        }
    }

    fn tma(&mut self, t: usize, dst: Place, bar: Place, op: String) {
        let w = self.write(t, dst, op, false);
        let clock = self.threads[t].clock.clone();
        if let Some(b) = self.bars.get_mut(&bar) {
            b.copies.push(w);
            join(&mut b.open, &clock);
        }
    }

    /// A `ttg.local_store` of thread `t`: complete now (`at_once`) or at its
    /// region's next barrier of its warps.
    fn store(&mut self, t: usize, dst: Place, op: String, at_once: bool) {
        let w = self.write(t, dst, op, true);
        if at_once {
            let clock = self.threads[t].clock.clone();
            self.writes[w].landed = Some(Landed { clock, phase: None });
        } else {
            self.threads[t].stores.push(w);
        }
    }

    /// A barrier of thread `t`'s warps: its stores are complete from here.
    fn stores_land(&mut self, t: usize) {
        let th = &mut self.threads[t];
        for w in std::mem::take(&mut th.stores) {
            self.writes[w].landed = Some(Landed {
                clock: th.clock.clone(),
                phase: None,
            });
        }
    }

    /// A write (a copy, or with `plain` a store) of `op` into `dst` by
    /// thread `t`: it must happen after the retirement of every read since
    /// the previous write and after that write completed (rules 1′ and 2′
    /// for copies, 10 where a store is one of the two). Returns its number.
    fn write(&mut self, t: usize, dst: Place, op: String, plain: bool) -> usize {
        let clock = self.threads[t].clock.clone();
        let slot = self.slots.entry(dst).or_default();
        for &r in &slot.reads {
            let read = &self.reads[r];
            if read.retired.as_ref().is_none_or(|c| !leq(c, &clock)) {
                let (rule, what) = if plain {
                    (Rule::StoreRace, "stores into")
                } else {
                    (Rule::WriteWhileRead, "writes")
                };
                let text = format!(
                    "{op} {what} slot {} while {} may still read it (its retirement does not happen before)",
                    dst.1, read.op
                );
                self.found
                    .push((rule, dst, op.clone(), Some(read.op.clone()), text));
            }
        }
        if let Some(w) = slot.latest {
            let prev = &self.writes[w];
            if prev.landed.as_ref().is_none_or(|l| !leq(&l.clock, &clock)) {
                let rule = if plain || prev.plain {
                    Rule::StoreRace
                } else {
                    Rule::WriteWhileWriting
                };
                let text = format!(
                    "{op} writes slot {} while the write of {} may be in flight (its completion does not happen before)",
                    dst.1, prev.op
                );
                self.found
                    .push((rule, dst, op.clone(), Some(prev.op.clone()), text));
            }
        }
        tracing::debug!(thread = t, slot = ?dst, plain, %op, "write");
        let w = self.writes.len();
        self.writes.push(Write {
            op,
            slot: dst.1,
            plain,
            landed: None,
        });
        slot.latest = Some(w);
        slot.reads.clear();
        let ring = self.rings.entry(dst.0).or_insert(RingOrder {
            thread: t,
            writes: Vec::new(),
            shared: false,
        });
        ring.shared |= ring.thread != t;
        ring.writes.push(w);
        w
    }

    fn read(&mut self, t: usize, (src, operand): (Place, usize), op: String, async_: bool) {
        let clock = self.threads[t].clock.clone();
        let slot = self.slots.entry(src).or_default();
        let latest = slot.latest;
        let landed = latest.and_then(|w| self.writes[w].landed.as_ref());
        if landed.is_none_or(|l| !leq(&l.clock, &clock)) {
            let other = latest.map(|w| self.writes[w].op.clone());
            let plain = latest.map_or(self.stored.contains(&src.0), |w| self.writes[w].plain);
            let (rule, what) = if plain {
                (Rule::StoreRace, "the store it reads happens before it")
            } else {
                (Rule::ReadBeforeWrite, "the write it reads has landed")
            };
            let text = format!("{op} reads slot {} before {what} (or with none)", src.1);
            self.found.push((rule, src, op.clone(), other, text));
        }
        let r = self.reads.len();
        let retired = (!async_).then_some(clock);
        self.reads.push(Read {
            op: op.clone(),
            retired,
        });
        self.slots.entry(src).or_default().reads.push(r);
        if async_ {
            self.threads[t].pending.push(r);
        }
        if self.indexed.contains(&src.0) {
            self.ring_order(t, (src, operand), op, latest);
        }
    }

    /// Rule 4, per reader and thread: the k-th read of a reader reads the
    /// k-th value written to its ring (by the ring's one writer thread),
    /// from the slot it went to, not overwritten since. Which reads are one
    /// reader is told two ways, and the rule holds where either way it
    /// does ([`Sim::order_found`]): by op name and operand (a reader's
    /// peeled copies, a staged partition's prologue and epilogue, continue
    /// its count whatever their locations), and by op name, location and
    /// operand (two readers of one name each reading every value of a ring,
    /// as the FA backward's dQ wgmma and its QK^T both read K). The
    /// location only splits what the name puts together: a reader whose
    /// copies sit at different locations starts its count again at each
    /// (stricter), and readers at one location count as one, as by name.
    fn ring_order(
        &mut self,
        t: usize,
        (src, operand): (Place, usize),
        op: String,
        latest: Option<usize>,
    ) {
        let name = op.split(" @ ").next().unwrap_or(&op).to_string();
        for (way, reader) in [name.clone(), op.clone()].into_iter().enumerate() {
            let key = (way, t, reader, operand, src.0);
            let k = *self.readers.get(&key).unwrap_or(&0);
            self.readers.insert(key, k + 1);
            if let Some(f) = self.wrong_slot(k, src, &op, latest) {
                self.order_found
                    .entry((t, name.clone(), operand, src.0))
                    .or_default()[way]
                    .push(f);
            }
        }
    }

    /// The rule-4 violation of read #`k` of a reader, if any.
    fn wrong_slot(&self, k: usize, src: Place, op: &str, latest: Option<usize>) -> Option<Found> {
        let ring = self.rings.get(&src.0).filter(|r| !r.shared)?;
        let why = match ring.writes.get(k).copied() {
            None if latest.is_some() => format!(
                "read #{k} of the ring, which has only {} writes so far",
                ring.writes.len()
            ),
            None => return None,
            Some(w) if self.writes[w].slot != src.1 => format!(
                "read #{k} of the ring reads slot {}, the value #{k} was written to slot {}",
                src.1, self.writes[w].slot
            ),
            Some(w) if latest != Some(w) => format!(
                "read #{k} of the ring reads slot {} after the value #{k} was overwritten",
                src.1
            ),
            Some(_) => return None,
        };
        let other = ring.writes.get(k).map(|&w| self.writes[w].op.clone());
        Some((
            Rule::WrongSlot,
            src,
            op.to_string(),
            other,
            format!("{op}: {why}"),
        ))
    }

    /// Rule 4's findings where neither way of telling readers apart holds
    /// (the first of each reader, told by name and location).
    fn order_violations(&mut self) {
        let mut classes: Vec<_> = std::mem::take(&mut self.order_found).into_iter().collect();
        classes.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, [by_name, by_location]) in classes {
            if !by_name.is_empty() && !by_location.is_empty() {
                self.found.extend(by_location.into_iter().take(1));
            }
        }
    }

    fn dot_wait(&mut self, t: usize, pendings: i64) {
        let th = &mut self.threads[t];
        let clock = th.clock.clone();
        while th.dots.len() as i64 > pendings.max(0) {
            for r in th.dots.pop_front().unwrap_or_default() {
                self.reads[r].retired = Some(clock.clone());
            }
        }
    }
}
