//! Warp-specialized code: a function holding `ttg.warp_specialize` ops,
//! each verified after the code before it (an earlier ws op is done: its
//! end joins every warp of the CTA), whose regions run as threads (the default region and each partition of
//! `ttg.warp_specialize.partitions`, whose block arguments are the captures:
//! the ws op's operands for Triton 3.6, the partitions op's for 3.9). The
//! code before the ws op initializes the barriers; each region's events are
//! traced ([`trace`]) and interleaved by the machine ([`sim`]) for every
//! trip count of the default region's loop from 0 to its period (twice the
//! least common multiple of the rings' depths) plus twice the deepest ring;
//! each loop's events must repeat with that period. At the join, every
//! thread that waits on a ring's `full` barriers has waited for as many of
//! their phases as the producer started (rule 9).

#[cfg(test)]
mod oracle;
mod sim;
mod trace;

use std::collections::{BTreeSet, HashMap};

use super::run::{pin_plans, roots_of, scalar_defs, trip_count};
use super::{Block, Function, LoopReport, Op, Rule, Unsupported, Verdict, Violation};
use trace::{op_name, Ev, Tracer};

/// The function's `ttg.warp_specialize` ops at its top level, in order.
/// Each joins every warp of the CTA at its end (Triton's lowering of the
/// op), so each is verified on its own: the ones before it are done.
fn ws_ops(f: &Function) -> Vec<&Op> {
    f.body
        .ops
        .iter()
        .filter(|o| o.name == "ttg.warp_specialize")
        .collect()
}

/// The partition regions and the values their block arguments capture.
fn partitions(ws: &Op) -> Option<(&[Block], &[usize])> {
    let parts = ws
        .regions
        .get(1)?
        .ops
        .iter()
        .find(|o| o.name == "ttg.warp_specialize.partitions")?;
    let captures = if parts.operands.is_empty() {
        &ws.operands
    } else {
        &parts.operands
    };
    Some((&parts.regions, captures))
}

fn first_loop(b: &Block) -> Option<&Op> {
    b.ops.iter().find(|o| o.name == "scf.for")
}

/// Rings of the function: (allocation result, location, depth).
/// A buffer indexed by no `ttg.memdesc_index` (anywhere, a partition's
/// capture included) is one slot deep.
fn rings(f: &Function) -> Vec<(usize, String, i64)> {
    let indexed = indexed_buffers(&f.body);
    f.body
        .ops
        .iter()
        .filter_map(|o| {
            let (shape, mutable) = o.alloc.as_ref()?;
            (*mutable && o.operands.is_empty()).then(|| {
                let depth = if indexed.contains(&o.results[0]) {
                    shape.first().copied().unwrap_or(1)
                } else {
                    1
                };
                (o.results[0], o.loc.clone(), depth)
            })
        })
        .collect()
}

/// The values some `ttg.memdesc_index` indexes, with the captures of the
/// partition arguments it indexes.
fn indexed_buffers(body: &Block) -> BTreeSet<usize> {
    fn walk<'a>(b: &'a Block, out: &mut BTreeSet<usize>, ws: &mut Vec<&'a Op>) {
        for o in &b.ops {
            match o.name.as_str() {
                "ttg.memdesc_index" => {
                    out.insert(o.operands[0]);
                }
                "ttg.warp_specialize" => ws.push(o),
                _ => {}
            }
            o.regions.iter().for_each(|r| walk(r, out, ws));
        }
    }
    let (mut out, mut ws_ops) = (BTreeSet::new(), Vec::new());
    walk(body, &mut out, &mut ws_ops);
    let captured: Vec<usize> = ws_ops
        .into_iter()
        .filter_map(partitions)
        .flat_map(|(parts, captures)| parts.iter().flat_map(move |p| p.args.iter().zip(captures)))
        .filter(|(a, _)| out.contains(a))
        .map(|(_, &c)| c)
        .collect();
    out.extend(captured);
    out
}

/// The events of every thread under `pins`.
struct Traces {
    /// The barriers' initialization (the code before the ws op).
    init: Vec<trace::Ev>,
    /// Per thread (default region first): its events and the trip counts
    /// of its loops, in the order they ran.
    threads: Vec<(Vec<trace::Ev>, Vec<u64>)>,
    /// The allocations indexed as rings.
    indexed: BTreeSet<usize>,
    /// Whether every thread's loops repeat their events with the period.
    periodic: bool,
}

fn trace_all(
    f: &Function,
    ws: &Op,
    pins: &HashMap<usize, i64>,
    (period, warm): (usize, usize),
) -> Result<Traces, Unsupported> {
    let mut main = Tracer::new(pins);
    for op in f.body.ops.iter().take_while(|o| o.id != ws.id) {
        main.op(op);
    }
    if let Some(u) = main.unsupported.take() {
        return Err(u);
    }
    let Some((parts, captures)) = partitions(ws) else {
        return Err(Unsupported {
            op: op_name(ws),
            why: "a ttg.warp_specialize without its partitions".to_string(),
        });
    };
    // Warp groups per region: the default region has the CTA's warps
    // (unknown: taken as several), partition k its `partitionNumWarps`.
    let groups = |warps: i64| (warps + 3) / 4;
    let mut threads = vec![main.fork(&[], &[])];
    threads[0].warp_groups = groups(f.num_warps.map_or(8, i64::from));
    threads[0].block(&ws.regions[0]);
    threads[0].region_sync();
    for (k, p) in parts.iter().enumerate() {
        let mut t = main.fork(&p.args, captures);
        t.warp_groups = groups(ws.warps.get(k).copied().unwrap_or(8));
        t.block(p);
        t.region_sync();
        threads.push(t);
    }
    let periodic = threads.iter().all(|t| t.periodic(period, warm));
    let (init, prefix): (Vec<Ev>, Vec<Ev>) = main
        .events
        .into_iter()
        .partition(|e| matches!(e, Ev::Init { .. }));
    let mut out = Traces {
        init,
        threads: Vec::new(),
        indexed: main.indexed,
        periodic,
    };
    for t in threads {
        if let Some(u) = t.unsupported {
            return Err(u);
        }
        out.indexed.extend(t.indexed);
        out.threads.push((t.events, t.trips));
    }
    fork(&mut out, prefix, &op_name(ws));
    initialized(ws, &out)?;
    Ok(out)
}

/// The barrier standing for the fork of the ws op's threads.
const FORK: trace::Place = (usize::MAX, 0);

/// The code before the ws op (beyond initializing barriers: a TMA copy of
/// a buffer every region reads, and its wait) runs first, in the default
/// region's thread; every other thread starts after it: the default
/// region arrives on a barrier of one arrival, which the others wait for.
fn fork(out: &mut Traces, prefix: Vec<Ev>, op: &str) {
    if prefix.is_empty() {
        return;
    }
    out.init.push(Ev::Init {
        bar: FORK,
        count: 1,
    });
    let arrive = Ev::Arrive {
        bar: FORK,
        count: 1,
        tx: false,
        op: format!("the fork of {op}"),
    };
    for (k, (events, _)) in out.threads.iter_mut().enumerate() {
        let mut head = if k == 0 {
            prefix.iter().cloned().chain([arrive.clone()]).collect()
        } else {
            vec![Ev::Wait {
                bar: FORK,
                parity: 0,
                op: format!("the fork of {op}"),
            }]
        };
        head.append(events);
        *events = head;
    }
}

/// Every barrier the threads use is initialized before the ws op, and
/// none inside it.
fn initialized(ws: &Op, tr: &Traces) -> Result<(), Unsupported> {
    let inits: BTreeSet<trace::Place> = tr
        .init
        .iter()
        .filter_map(|e| match e {
            trace::Ev::Init { bar, .. } => Some(*bar),
            _ => None,
        })
        .collect();
    let why = tr.threads.iter().flat_map(|t| &t.0).find_map(|e| match e {
        trace::Ev::Init { .. } => Some("a ttng.init_barrier inside the ttg.warp_specialize"),
        trace::Ev::Arrive { bar, .. }
        | trace::Ev::Tma { bar, .. }
        | trace::Ev::Wait { bar, .. }
            if !inits.contains(bar) =>
        {
            Some("an mbarrier used without a ttng.init_barrier before the ttg.warp_specialize")
        }
        _ => None,
    });
    match why {
        Some(why) => Err(Unsupported {
            op: op_name(ws),
            why: why.to_string(),
        }),
        None => Ok(()),
    }
}

/// The pins of every run: each root of the default loop's bounds takes the
/// least values giving trip counts 0..=bound.
fn plans(f: &Function, l: &Op, bound: u64) -> Vec<HashMap<usize, i64>> {
    let defs = scalar_defs(f);
    let mut roots = Vec::new();
    for &b in &l.operands[..3] {
        roots_of(&defs, b, &mut roots, 0);
    }
    let free: Vec<(usize, Vec<i64>)> = roots
        .iter()
        .map(|&r| {
            let mut pins: HashMap<usize, i64> = roots.iter().map(|&x| (x, 0)).collect();
            let mut seen = BTreeSet::new();
            let mut values = Vec::new();
            for x in 0..=(1i64 << 16) {
                pins.insert(r, x);
                if let Some(t) = trip_count(&defs, &pins, l) {
                    if t <= bound && seen.insert(t) {
                        values.push(x);
                    }
                }
                if seen.len() as u64 > bound {
                    break;
                }
            }
            (r, if values.is_empty() { vec![0] } else { values })
        })
        .collect();
    pin_plans(&free)
}

/// Values each root of a loop-free default region's `scf.if` conditions
/// takes (0 up to this, less one).
const CONDITION_ROOT_VALUES: i64 = 8;

/// The pins of a default region without a loop (Triton folded a loop of
/// one trip, as the causal forward's diagonal block): its code runs once
/// per run; the values its `scf.if` conditions start from (a program id)
/// take the values 0..8, each through its range with the others fixed, as
/// the loops' bounds do. A condition these do not decide leaves the run
/// unsupported.
fn straight_plans(f: &Function, default: &Block) -> Vec<HashMap<usize, i64>> {
    let defs = scalar_defs(f);
    let mut roots = Vec::new();
    for o in default.ops.iter().filter(|o| o.name == "scf.if") {
        roots_of(&defs, o.operands[0], &mut roots, 0);
    }
    let free: Vec<(usize, Vec<i64>)> = roots
        .into_iter()
        .map(|r| (r, (0..CONDITION_ROOT_VALUES).collect()))
        .collect();
    pin_plans(&free)
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x.max(1) * b
}

/// Interleaves the threads of one run; the violations it finds.
fn run(ws: &Op, tr: Traces, locs: &HashMap<usize, &str>) -> Vec<Violation> {
    let trips: Vec<u64> = tr.threads.iter().flat_map(|t| t.1.clone()).collect();
    let mut out = exit_imbalance(ws, &tr, &trips);
    let traces = tr.threads.into_iter().map(|t| t.0).collect();
    let mut m = sim::Sim::new(&tr.init, traces, tr.indexed);
    m.run();
    tracing::debug!(?trips, found = m.found.len(), "ws run");
    for (rule, place, op, other, text) in m.found {
        let registers = place == sim::REGISTERS;
        out.push(Violation {
            rule,
            buffer: match registers {
                true => "registers".to_string(),
                false => locs.get(&place.0).copied().unwrap_or("?").to_string(),
            },
            slot: (!registers).then_some(place.1),
            op,
            other,
            trip_counts: trips.clone(),
            iteration: None,
            text,
        });
    }
    out
}

/// Rule 9: every thread that waits on a barrier the copies land on (a
/// ring's `full`) consumes as many of its phases as were started (one
/// `barrier_expect` each), so none exits while a copy it should consume is
/// still coming, or with phases no one consumed. Counted over the whole
/// run, not per loop: a partition may run some trips outside its loop (a
/// staged part's prologue and epilogue).
fn exit_imbalance(ws: &Op, tr: &Traces, trips: &[u64]) -> Vec<Violation> {
    let copied: BTreeSet<usize> = (tr.threads.iter().flat_map(|t| &t.0))
        .filter_map(|e| match e {
            Ev::Tma { bar, .. } => Some(bar.0),
            _ => None,
        })
        .collect();
    // Phases started on `b` (one `barrier_expect` each), or (`waits`)
    // phases a thread consumed: per slot, each run of waits on one parity
    // (waiting again on the phase just observed consumes nothing).
    let count = |events: &[Ev], b: usize, waits: bool| {
        let mut last: HashMap<i64, i64> = HashMap::new();
        let mut n = 0;
        for e in events {
            match e {
                Ev::Wait { bar, parity, .. }
                    if waits && bar.0 == b && last.insert(bar.1, *parity) != Some(*parity) =>
                {
                    n += 1
                }
                Ev::Arrive { bar, tx: true, .. } if !waits && bar.0 == b => n += 1,
                _ => {}
            }
        }
        n
    };
    let region = |i: usize| match i {
        0 => ws.regions.first(),
        _ => partitions(ws).and_then(|(p, _)| p.get(i - 1)),
    };
    let loop_of = |i: usize| {
        region(i)
            .and_then(first_loop)
            .map_or_else(|| op_name(ws), op_name)
    };
    let mut out = Vec::new();
    for &b in &copied {
        let started: usize = tr.threads.iter().map(|t| count(&t.0, b, false)).sum();
        for (i, (events, _)) in tr.threads.iter().enumerate() {
            let waited = count(events, b, true);
            if waited == 0 || waited == started {
                continue;
            }
            let who = match i {
                0 => "the default region".to_string(),
                _ => format!("partition {}", i - 1),
            };
            out.push(Violation {
                rule: Rule::ExitImbalance,
                buffer: who.clone(),
                slot: None,
                op: loop_of(i),
                other: None,
                trip_counts: trips.to_vec(),
                iteration: None,
                text: format!(
                    "{who} consumes {waited} of the {started} phases started on a barrier the copies land on: at the join one side exits with phases the other still needs or leaves unconsumed"
                ),
            });
        }
    }
    out
}

/// Verifies every `ttg.warp_specialize` of `f`, one report each (empty:
/// `f` holds none).
pub fn verify_ws(f: &Function) -> Vec<LoopReport> {
    ws_ops(f).into_iter().map(|ws| verify_one(f, ws)).collect()
}

/// Verifies `ws`, one of `f`'s ws ops, after the code before it.
fn verify_one(f: &Function, ws: &Op) -> LoopReport {
    let rings = rings(f);
    let deepest = rings.iter().map(|r| r.2).max().unwrap_or(1).max(1) as u64;
    let period = 2 * rings.iter().fold(1, |a, r| lcm(a, r.2.max(1) as u64));
    let bound = period + 2 * deepest;
    let mut report = LoopReport {
        function: f.name.clone(),
        loc: ws.loc.clone(),
        verdict: Verdict::Proved,
        rings: rings.iter().map(|r| (r.1.clone(), r.2)).collect(),
        max_trip_count: bound,
        violations: Vec::new(),
        unsupported: None,
    };
    let runs = match first_loop(&ws.regions[0]) {
        Some(l) => plans(f, l, bound),
        None => straight_plans(f, &ws.regions[0]),
    };
    let locs: HashMap<usize, &str> = rings.iter().map(|r| (r.0, r.1.as_str())).collect();
    let mut seen = BTreeSet::new();
    for pins in runs {
        let shape = (period as usize, deepest as usize);
        let tr = match trace_all(f, ws, &pins, shape) {
            Ok(x) => x,
            Err(u) => {
                report.verdict = Verdict::Unsupported;
                report.unsupported = Some(u);
                report.violations.clear();
                return report;
            }
        };
        if !tr.periodic && report.unsupported.is_none() {
            report.unsupported = Some(Unsupported {
                op: op_name(ws),
                why: format!("the events of a loop do not repeat every {period} iterations"),
            });
        }
        for v in run(ws, tr, &locs) {
            if seen.insert((v.rule, v.buffer.clone(), v.slot, v.op.clone())) {
                report.violations.push(v);
            }
        }
    }
    if !report.violations.is_empty() {
        report.verdict = Verdict::Rejected;
    } else if report.unsupported.is_some() {
        report.verdict = Verdict::Unsupported;
    }
    report
}
