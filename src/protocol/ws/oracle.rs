//! Oracle test of the machine ([`super::sim`]): on tiny traces (a
//! producer/consumer family of two threads with rings of depth 1 or 2 and
//! at most three iterations; random traces of two or three threads over one
//! slot and two barriers), every interleaving of the threads' events runs under mbarrier
//! semantics: a copy lands at any time after it is issued; a phase
//! completes once it has all its arrivals and its copies have landed; a
//! wait on parity p returns once the open phase's parity is not p; a
//! `local_store` completes at once, or (a region of several warp groups) at
//! the latest at its thread's next barrier of its warps. Some
//! interleaving goes wrong when it has a data race (a store or read whose
//! slot another thread is about to store into or read in the same state is
//! one: the two can happen together), an overrun or a
//! deadlock, leaves a read in flight at the end, a copy whose landing no
//! wait observed or a store not complete, or (where one thread writes the
//! ring) has a thread's k-th
//! read not read the k-th value. The machine must never prove a trace that
//! goes wrong, and on the family it must reject only those.

use std::collections::{BTreeSet, HashSet};

use super::super::Rule;
use super::sim::Sim;
use super::trace::Ev;

const RING: usize = 1;
const FULL: usize = 2;
const EMPTY: usize = 3;

/// One protocol of the family: ring depth, iterations and the mutations.
#[derive(Clone, Copy, Debug)]
struct Shape {
    d: i64,
    n: i64,
    /// The consumer's read is an async wgmma (retired by `DotWait`).
    async_: bool,
    pendings: i64,
    /// The consumer releases the slot of iteration i − lag.
    lag: i64,
    release: bool,
    /// Parities flipped (off by one phase) in the producer / consumer.
    pflip: i64,
    cflip: i64,
    full_count: i64,
    empty_count: i64,
    /// Iterations added to the producer / taken from the consumer.
    more: i64,
    fewer: i64,
}

const SYNC: Shape = Shape {
    d: 1,
    n: 1,
    async_: false,
    pendings: 0,
    lag: 0,
    release: true,
    pflip: 0,
    cflip: 0,
    full_count: 1,
    empty_count: 1,
    more: 0,
    fewer: 0,
};

const ASYNC: Shape = Shape {
    async_: true,
    pendings: 1,
    lag: 1,
    ..SYNC
};

fn traces(s: &Shape) -> (Vec<Ev>, Vec<Vec<Ev>>) {
    let op = |x: &str| x.to_string();
    let mut init = Vec::new();
    for k in 0..s.d {
        let (f, e) = ((FULL, k), (EMPTY, k));
        init.push(Ev::Init {
            bar: f,
            count: s.full_count,
        });
        init.push(Ev::Init {
            bar: e,
            count: s.empty_count,
        });
    }
    let mut cons = Vec::new();
    for i in 0..(s.n - s.fewer).max(0) {
        let slot = i % s.d;
        let parity = ((i / s.d) & 1) ^ s.cflip;
        cons.push(Ev::Wait {
            bar: (FULL, slot),
            parity,
            op: op("wait full"),
        });
        cons.push(Ev::Read {
            src: (RING, slot),
            operand: 0,
            op: op("read"),
            async_: s.async_,
        });
        if s.async_ {
            cons.push(Ev::DotIssued);
            cons.push(Ev::DotWait {
                pendings: s.pendings,
            });
        }
        if s.release && i >= s.lag {
            cons.push(Ev::Arrive {
                bar: (EMPTY, (i - s.lag) % s.d),
                count: 1,
                tx: false,
                op: op("release"),
            });
        }
    }
    if s.async_ {
        cons.push(Ev::DotWait { pendings: 0 });
    }
    let mut prod = Vec::new();
    for i in 0..s.n + s.more {
        let slot = i % s.d;
        let parity = ((i / s.d) & 1) ^ 1 ^ s.pflip;
        prod.push(Ev::Wait {
            bar: (EMPTY, slot),
            parity,
            op: op("wait empty"),
        });
        prod.push(Ev::Arrive {
            bar: (FULL, slot),
            count: 1,
            tx: true,
            op: op("expect"),
        });
        prod.push(Ev::Tma {
            dst: (RING, slot),
            bar: (FULL, slot),
            op: op("copy"),
        });
    }
    (init, vec![cons, prod])
}

/// A slot: the value its latest write holds (its number in the ring's
/// order) and whether it landed; the barrier and phase it landed with; the
/// reads of it not retired; whether the latest write is a store.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
struct SlotSt {
    latest: Option<(u8, bool)>,
    landed: Option<(usize, u64)>,
    unretired: u8,
    plain: bool,
}

/// A barrier: place, count, arrivals of the open phase, completed phases,
/// its open phase's copies in flight, the latest phase a wait observed.
#[derive(Clone, PartialEq, Eq, Hash)]
struct BarSt {
    place: (usize, i64),
    count: i64,
    arrived: i64,
    completed: u64,
    inflight: u8,
    observed: Option<u64>,
}

/// The state of one interleaving so far.
#[derive(Clone, PartialEq, Eq, Hash)]
struct St {
    pc: Vec<usize>,
    bars: Vec<BarSt>,
    slots: Vec<SlotSt>,
    written: u8,
    /// Per thread and reader (synchronous, async wgmma): the values it has
    /// read (the reader's executions).
    read: Vec<[u8; 2]>,
    /// Copies in flight: slot, barrier.
    flight: Vec<(i64, usize)>,
    /// Whether one thread writes the ring (its order is checked then).
    one_writer: bool,
    /// The consumer's async reads: queue of groups (slots), open group.
    dots: Vec<Vec<i64>>,
    pending: Vec<i64>,
    /// Per thread: its stores not complete yet (slot, value).
    stores: Vec<Vec<(i64, u8)>>,
}

/// The slot a store or read touches, and whether it is a store.
fn access(e: Option<&Ev>) -> Option<(i64, bool)> {
    match e? {
        Ev::Store { dst, .. } => Some((dst.1, true)),
        Ev::Read { src, .. } => Some((src.1, false)),
        _ => None,
    }
}

impl St {
    fn bar(&mut self, p: (usize, i64)) -> usize {
        self.bars
            .iter()
            .position(|b| b.place == p)
            .expect("barrier")
    }

    /// A copy into `slot` joining the open phase of `bar`; false: a race.
    fn copy(&mut self, slot: i64, bar: (usize, i64)) -> bool {
        if !self.write(slot, false, false) {
            return false;
        }
        let b = self.bar(bar);
        self.bars[b].inflight += 1;
        self.flight.push((slot, b));
        true
    }

    /// A store of thread `t` into `slot` (complete now when `at_once`);
    /// false: a race with a read in flight or a write not complete.
    fn store(&mut self, t: usize, slot: i64, at_once: bool) -> bool {
        if !self.write(slot, at_once, true) {
            return false;
        }
        if !at_once {
            self.stores[t].push((slot, self.written - 1));
        }
        true
    }

    /// The next write into `slot` (a copy, or a `plain` store), complete
    /// now when `complete`; false: a race with a read in flight or a write
    /// not complete.
    fn write(&mut self, slot: i64, complete: bool, plain: bool) -> bool {
        let s = &mut self.slots[slot as usize];
        if s.unretired > 0 || s.latest.is_some_and(|l| !l.1) {
            return false;
        }
        s.latest = Some((self.written, complete));
        s.landed = None;
        s.plain = plain;
        self.written += 1;
        true
    }

    /// Thread `t`'s barrier of its warps: its stores complete.
    fn stores_land(&mut self, t: usize) {
        for (slot, v) in std::mem::take(&mut self.stores[t]) {
            let s = &mut self.slots[slot as usize];
            if s.latest == Some((v, false)) {
                s.latest = Some((v, true));
            }
        }
    }

    /// Whether thread `t`'s next event (a store or read) touches a slot
    /// another thread's next event touches, one of them storing: both can
    /// happen at once.
    fn concurrent(&self, t: usize, traces: &[Vec<Ev>]) -> bool {
        let Some((slot, store)) = access(traces[t].get(self.pc[t])) else {
            return false;
        };
        (0..traces.len()).any(|u| {
            u != t
                && access(traces[u].get(self.pc[u]))
                    .is_some_and(|(x, st)| x == slot && (st || store))
        })
    }

    fn arrive(&mut self, bar: (usize, i64), count: i64) -> bool {
        let b = self.bar(bar);
        let bar = &mut self.bars[b];
        if bar.arrived + count > bar.count {
            return false;
        }
        bar.arrived += count;
        self.complete(b);
        true
    }

    fn complete(&mut self, b: usize) {
        let bar = &mut self.bars[b];
        if bar.arrived == bar.count && bar.inflight == 0 {
            bar.arrived = 0;
            bar.completed += 1;
        }
    }

    /// The `j`-th copy in flight lands.
    fn land(&self, j: usize) -> St {
        let mut s = self.clone();
        let (slot, b) = s.flight.remove(j);
        let phase = s.bars[b].completed;
        s.bars[b].inflight -= 1;
        let sl = &mut s.slots[slot as usize];
        if let Some(l) = &mut sl.latest {
            l.1 = true;
            sl.landed = Some((b, phase));
        }
        s.complete(b);
        s
    }

    fn read(&mut self, t: usize, slot: i64, async_: bool) -> bool {
        let s = &mut self.slots[slot as usize];
        match s.latest {
            Some((v, true)) if v == self.read[t][async_ as usize] || !self.one_writer => {}
            _ => return false,
        }
        self.read[t][async_ as usize] += 1;
        if async_ {
            s.unretired += 1;
            self.pending.push(slot);
        }
        true
    }

    /// Runs thread `t`'s next step (an arrival with the copies that follow
    /// it on its barrier: `barrier_expect` holds the phase until they
    /// land). None: blocked or done; Some(false): it goes wrong.
    fn step(&self, t: usize, ev: &[Ev]) -> Option<(St, bool)> {
        let mut s = self.clone();
        let ok = match ev.get(s.pc[t])? {
            Ev::Wait { bar, parity, .. } => {
                let b = s.bar(*bar);
                let bar = &mut s.bars[b];
                if (bar.completed % 2) as i64 == *parity {
                    return None;
                }
                if bar.completed > 0 {
                    bar.observed = bar.observed.max(Some(bar.completed - 1));
                }
                true
            }
            Ev::Arrive { bar, count, tx, .. } => {
                let mut ok = true;
                while let Some(Ev::Tma { dst, bar: b2, .. }) = ev.get(s.pc[t] + 1) {
                    if b2 != bar || !tx {
                        break;
                    }
                    ok &= s.copy(dst.1, *b2);
                    s.pc[t] += 1;
                }
                ok && s.arrive(*bar, *count)
            }
            Ev::Tma { dst, bar, .. } => s.copy(dst.1, *bar),
            Ev::Store { dst, at_once, .. } => s.store(t, dst.1, *at_once),
            Ev::StoresLand => {
                s.stores_land(t);
                true
            }
            Ev::Read { src, async_, .. } => s.read(t, src.1, *async_),
            Ev::EarlyUse { .. } => false,
            Ev::DotIssued => {
                let g = std::mem::take(&mut s.pending);
                s.dots.push(g);
                true
            }
            Ev::DotWait { pendings } => {
                while s.dots.len() as i64 > *pendings {
                    for slot in s.dots.remove(0) {
                        s.slots[slot as usize].unretired -= 1;
                    }
                }
                true
            }
            Ev::Init { .. } => true,
        };
        s.pc[t] += 1;
        Some((s, ok))
    }

    /// Every thread at its end with nothing in flight: each read retired,
    /// each copy landed with a phase some wait observed.
    fn drained(&self, traces: &[Vec<Ev>]) -> bool {
        let seen = |s: &SlotSt| match s.landed {
            Some((b, k)) => self.bars[b].observed.is_some_and(|o| o >= k),
            None => s.latest.is_none_or(|l| s.plain && l.1),
        };
        self.pc.iter().zip(traces).all(|(&pc, ev)| pc >= ev.len())
            && self.slots.iter().all(|s| s.unretired == 0 && seen(s))
    }
}

/// Whether some interleaving from `s` goes wrong.
fn goes_wrong(s: &St, traces: &[Vec<Ev>], seen: &mut HashSet<St>) -> bool {
    let mut moved = false;
    for t in 0..traces.len() {
        if s.concurrent(t, traces) {
            return true;
        }
        let Some((next, ok)) = s.step(t, &traces[t]) else {
            continue;
        };
        moved = true;
        if !ok {
            return true;
        }
        if seen.insert(next.clone()) && goes_wrong(&next, traces, seen) {
            return true;
        }
    }
    for j in 0..s.flight.len() {
        moved = true;
        let next = s.land(j);
        if seen.insert(next.clone()) && goes_wrong(&next, traces, seen) {
            return true;
        }
    }
    !moved && !s.drained(traces)
}

fn oracle(s: &Shape) -> bool {
    let (init, traces) = traces(s);
    oracle_of(&init, &traces, s.d as usize)
}

/// Whether some interleaving of `traces` goes wrong (`d` slots).
fn oracle_of(init: &[Ev], traces: &[Vec<Ev>], d: usize) -> bool {
    let bars = init
        .iter()
        .filter_map(|e| match e {
            Ev::Init { bar, count } => Some(BarSt {
                place: *bar,
                count: *count,
                arrived: 0,
                completed: 0,
                inflight: 0,
                observed: None,
            }),
            _ => None,
        })
        .collect();
    let start = St {
        pc: vec![0; traces.len()],
        bars,
        slots: vec![SlotSt::default(); d],
        written: 0,
        read: vec![[0; 2]; traces.len()],
        flight: Vec::new(),
        one_writer: traces
            .iter()
            .filter(|ev| {
                ev.iter()
                    .any(|e| matches!(e, Ev::Tma { .. } | Ev::Store { .. }))
            })
            .count()
            <= 1,
        dots: Vec::new(),
        pending: Vec::new(),
        stores: vec![Vec::new(); traces.len()],
    };
    goes_wrong(&start, traces, &mut HashSet::new())
}

fn machine(s: &Shape) -> bool {
    let (init, traces) = traces(s);
    let mut m = Sim::new(&init, traces, BTreeSet::from([RING]));
    m.run();
    !m.found.is_empty()
}

#[test]
fn machine_rejects_exactly_what_some_interleaving_breaks() {
    let variants = [
        SYNC,
        ASYNC,
        Shape {
            pendings: 0,
            ..ASYNC
        },
        Shape { lag: 0, ..ASYNC },
        Shape {
            pendings: 2,
            ..ASYNC
        },
        Shape {
            release: false,
            ..SYNC
        },
        Shape { pflip: 1, ..SYNC },
        Shape { cflip: 1, ..SYNC },
        Shape { cflip: 1, ..ASYNC },
        Shape {
            full_count: 2,
            ..SYNC
        },
        Shape {
            empty_count: 2,
            ..SYNC
        },
        Shape { more: 1, ..SYNC },
        Shape { fewer: 1, ..SYNC },
        Shape { more: 1, ..ASYNC },
    ];
    let mut mismatches = Vec::new();
    let (mut proved, mut rejected) = (0, 0);
    for v in variants {
        for d in 1..=2 {
            for n in 0..=3 {
                let s = Shape { d, n, ..v };
                let (wrong, found) = (oracle(&s), machine(&s));
                if wrong != found {
                    mismatches.push(format!("{s:?}: oracle {wrong}, machine {found}"));
                }
                if found {
                    rejected += 1;
                } else {
                    proved += 1;
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(
        proved > 10 && rejected > 40,
        "{proved} proved, {rejected} rejected"
    );
}

/// Random traces of `threads` threads over one slot and two barriers
/// (`full`, whose `barrier_expect` carries the slot's copy, and `empty`);
/// copies without an expect, reads synchronous or by an async wgmma, and
/// wgmma waits; stores (complete at once or at the thread's next barrier
/// of its warps) and such barriers.
fn random_traces(seed: &mut u64, threads: usize) -> Vec<Vec<Ev>> {
    let mut next = |m: u64| {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) % m
    };
    let op = |x: &str| x.to_string();
    (0..threads)
        .map(|_| {
            let mut ev = Vec::new();
            for _ in 0..next(6) {
                match next(12) {
                    0 | 1 => ev.push(Ev::Wait {
                        bar: (if next(2) == 0 { FULL } else { EMPTY }, 0),
                        parity: next(2) as i64,
                        op: op("wait"),
                    }),
                    2 => ev.push(Ev::Arrive {
                        bar: (EMPTY, 0),
                        count: 1,
                        tx: false,
                        op: op("release"),
                    }),
                    3 => {
                        ev.push(Ev::Arrive {
                            bar: (FULL, 0),
                            count: 1,
                            tx: true,
                            op: op("expect"),
                        });
                        ev.push(Ev::Tma {
                            dst: (RING, 0),
                            bar: (FULL, 0),
                            op: op("copy"),
                        });
                    }
                    6 => {
                        ev.push(Ev::Read {
                            src: (RING, 0),
                            operand: 0,
                            op: op("wgmma"),
                            async_: true,
                        });
                        ev.push(Ev::DotIssued);
                    }
                    8 => ev.push(Ev::Tma {
                        dst: (RING, 0),
                        bar: (FULL, 0),
                        op: op("copy"),
                    }),
                    7 => ev.push(Ev::DotWait {
                        pendings: next(2) as i64,
                    }),
                    9 | 10 => ev.push(Ev::Store {
                        dst: (RING, 0),
                        op: op("store"),
                        at_once: next(3) != 0,
                    }),
                    11 => ev.push(Ev::StoresLand),
                    _ => ev.push(Ev::Read {
                        src: (RING, 0),
                        operand: 0,
                        op: op("read"),
                        async_: false,
                    }),
                }
            }
            ev
        })
        .collect()
}

/// Two threads with `empty` counting one arrival, and three with it
/// counting two (a barrier shared by several partitions).
#[test]
fn machine_never_proves_what_some_random_interleaving_breaks() {
    let mut seed = 7;
    let (mut unsound, mut strict, mut agree) = (Vec::new(), 0, 0);
    // Traces with a store: proved, and rejected by rule 10.
    let (mut stored_proved, mut store_races) = (0, 0);
    for (threads, empty, samples) in [(2, 1, 20000), (3, 2, 10000)] {
        let init = vec![
            Ev::Init {
                bar: (FULL, 0),
                count: 1,
            },
            Ev::Init {
                bar: (EMPTY, 0),
                count: empty,
            },
        ];
        for _ in 0..samples {
            let traces = random_traces(&mut seed, threads);
            let wrong = oracle_of(&init, &traces, 1);
            let mut m = Sim::new(&init, traces.clone(), BTreeSet::from([RING]));
            m.run();
            let stores = traces
                .iter()
                .flatten()
                .any(|e| matches!(e, Ev::Store { .. }));
            stored_proved += usize::from(stores && m.found.is_empty());
            store_races += usize::from(m.found.iter().any(|f| f.0 == Rule::StoreRace));
            match (wrong, !m.found.is_empty()) {
                (true, false) => unsound.push(format!("{traces:?}")),
                (false, true) => strict += 1,
                _ => agree += 1,
            }
        }
    }
    eprintln!("{agree} agree, {strict} rejected though no interleaving breaks");
    eprintln!("with stores: {stored_proved} proved; {store_races} rejected by rule 10");
    assert!(strict * 50 < agree, "{strict} rejected of {agree}");
    assert!(
        stored_proved > 500 && store_races > 500,
        "{stored_proved} proved with stores, {store_races} store races"
    );
    assert!(unsound.is_empty(), "{}", unsound.join("\n"));
}

/// A producer and two consumers of a ring one slot deep: `empty` must
/// count both releases. With a count of one (the consumer count wrong by
/// one) the producer can refill the slot after the first release while the
/// second consumer has not read it, or before it waited: rejected, as some
/// interleaving breaks; with two, proved.
#[test]
fn a_release_count_shared_by_two_consumers() {
    let op = |x: &str| x.to_string();
    let consumer: Vec<Ev> = (0..2)
        .flat_map(|i| {
            [
                Ev::Wait {
                    bar: (FULL, 0),
                    parity: i & 1,
                    op: op("wait full"),
                },
                Ev::Read {
                    src: (RING, 0),
                    operand: 0,
                    op: op("read"),
                    async_: false,
                },
                Ev::Arrive {
                    bar: (EMPTY, 0),
                    count: 1,
                    tx: false,
                    op: op("release"),
                },
            ]
        })
        .collect();
    let producer: Vec<Ev> = (0..2)
        .flat_map(|i| {
            [
                Ev::Wait {
                    bar: (EMPTY, 0),
                    parity: (i & 1) ^ 1,
                    op: op("wait empty"),
                },
                Ev::Arrive {
                    bar: (FULL, 0),
                    count: 1,
                    tx: true,
                    op: op("expect"),
                },
                Ev::Tma {
                    dst: (RING, 0),
                    bar: (FULL, 0),
                    op: op("copy"),
                },
            ]
        })
        .collect();
    let traces = vec![consumer.clone(), consumer, producer];
    for (count, bad) in [(1, true), (2, false)] {
        let init = vec![
            Ev::Init {
                bar: (FULL, 0),
                count: 1,
            },
            Ev::Init {
                bar: (EMPTY, 0),
                count,
            },
        ];
        assert_eq!(oracle_of(&init, &traces, 1), bad, "oracle, count {count}");
        let mut m = Sim::new(&init, traces.clone(), BTreeSet::from([RING]));
        m.run();
        assert_eq!(!m.found.is_empty(), bad, "machine, count {count}");
    }
}

/// A worker delivers a result to the default region through a plain buffer
/// (the lowering's result buffers): it stores, runs a barrier of its warps
/// where its stores are not complete at once (several warp groups), and
/// arrives on `done`; the default region waits on `done` and loads. Each
/// mutant must be rejected exactly when some interleaving breaks.
#[test]
fn a_result_buffer_delivered_through_done() {
    let op = |x: &str| x.to_string();
    let done = (FULL, 0);
    let store = |at_once| Ev::Store {
        dst: (RING, 0),
        op: op("store"),
        at_once,
    };
    let arrive = Ev::Arrive {
        bar: done,
        count: 1,
        tx: false,
        op: op("arrive done"),
    };
    let wait = Ev::Wait {
        bar: done,
        parity: 0,
        op: op("wait done"),
    };
    let load = Ev::Read {
        src: (RING, 0),
        operand: 0,
        op: op("load"),
        async_: false,
    };
    let worker = |at_once: bool, sync: bool| {
        let mut ev = vec![store(at_once)];
        ev.extend(sync.then_some(Ev::StoresLand));
        ev.push(arrive.clone());
        ev
    };
    // Name, `done`'s count, the default region, the worker, whether wrong.
    type Case = (&'static str, i64, Vec<Ev>, Vec<Ev>, bool);
    let cases: Vec<Case> = vec![
        (
            "one warp group",
            1,
            vec![wait.clone(), load.clone()],
            worker(true, false),
            false,
        ),
        (
            "two warp groups",
            1,
            vec![wait.clone(), load.clone()],
            worker(false, true),
            false,
        ),
        (
            "no region barrier",
            1,
            vec![wait.clone(), load.clone()],
            worker(false, false),
            true,
        ),
        ("no wait", 1, vec![load.clone()], worker(true, true), true),
        (
            "arrive before the store",
            1,
            vec![wait.clone(), load.clone()],
            vec![arrive.clone(), store(true)],
            true,
        ),
        (
            "done counts two",
            2,
            vec![wait.clone(), load.clone()],
            worker(true, true),
            true,
        ),
        (
            "a second store before the wait",
            1,
            vec![store(true), wait.clone(), load.clone()],
            worker(true, true),
            true,
        ),
        (
            "a second store after the load",
            1,
            vec![wait.clone(), load.clone(), store(true)],
            worker(true, true),
            false,
        ),
    ];
    for (name, count, default, worker, bad) in cases {
        let init = vec![Ev::Init { bar: done, count }];
        let traces = vec![default, worker];
        assert_eq!(oracle_of(&init, &traces, 1), bad, "oracle: {name}");
        let mut m = Sim::new(&init, traces, BTreeSet::new());
        m.run();
        assert_eq!(!m.found.is_empty(), bad, "machine: {name}: {:?}", m.found);
    }
}
