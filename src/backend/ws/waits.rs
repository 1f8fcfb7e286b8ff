//! Where the compute partition waits for its asynchronous wgmmas, and how
//! long it holds a ring slot (docs/ws-lowering.md 3.4, step 5). MLIR-free:
//! from the loop's IR and the default region's ops.
//!
//! Every wgmma is issued asynchronously. A wait is placed before the first
//! op that reads a wgmma's result (the accumulator operand of a later wgmma
//! excepted: the chain stays in flight), retiring it and every wgmma
//! issued before it (`pendings` = those issued after it). At the end of a
//! trip one more wait retires what the previous trip left in flight, so
//! that its slot can be released, and every wgmma that cannot stay in
//! flight across the back edge: one whose result the loop does not carry,
//! or one whose register A operand the trip computes (its registers must
//! live until the wgmma retires). A slot is held for one trip when no
//! wgmma reading it is left in flight at the end of its trip, else for two
//! (released in the next trip, after that trip's end wait).

use std::collections::BTreeSet;

use super::LowerSkip;
use crate::backend::{SMEM_VIEWS, WGMMA};
use crate::frontend::{LoopIr, ValueSrc};

/// A wgmma in flight: issued in this trip (body op), or in the previous
/// trip and carried by an iteration argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum InFlight {
    Dot(usize),
    Carried(usize),
}

/// One `warp_group_dot_wait`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPoint {
    /// Before the default region's op at this position (its length: at the
    /// trip's end, before the releases and the yield).
    pub before: usize,
    /// The wgmmas it retires, oldest first.
    pub retire: Vec<InFlight>,
    /// This trip's wgmmas whose results it passes through (retired or still
    /// in flight, as Triton threads an accumulator).
    pub through: Vec<usize>,
    pub pendings: u32,
}

/// The compute partition's waits and slot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waits {
    pub points: Vec<WaitPoint>,
    /// This trip's wgmmas still in flight when the trip ends, with the
    /// iteration argument that carries each.
    pub carried: Vec<(usize, usize)>,
    /// Trips a slot is held: 1 or 2.
    pub hold: u32,
    /// Some op reads a ring slot (directly or through a view of one): the
    /// partition waits on `full` and arrives on `empty`.
    pub reads_slots: bool,
}

/// Plans the waits of the default region's ops `consumer` (in order),
/// whose ring slots are the results of the body ops `allocs`.
pub fn plan(ir: &LoopIr, consumer: &[usize], allocs: &BTreeSet<usize>) -> Result<Waits, LowerSkip> {
    let (readers, reads_slots) = slot_readers(ir, consumer, allocs)?;
    // The steady state: the in-flight set a trip starts with is the one
    // the previous trip ended with (reached after one trip).
    let mut start: Vec<InFlight> = Vec::new();
    for _ in 0..3 {
        let (w, end) = trip(ir, consumer, &start, &readers)?;
        let next: Vec<InFlight> = end.iter().map(|&(_, k)| InFlight::Carried(k)).collect();
        if next == start {
            return Ok(Waits { reads_slots, ..w });
        }
        start = next;
    }
    Err(LowerSkip::Shape(
        "the wgmmas in flight across the back edge do not settle".into(),
    ))
}

/// The ops of `ops` (program order) that read a ring slot of `allocs`,
/// directly or through views, views excepted; and whether any op (a view
/// included) reads one.
pub fn slot_reading(ir: &LoopIr, ops: &[usize], allocs: &BTreeSet<usize>) -> (Vec<usize>, bool) {
    let mut slot: BTreeSet<usize> = allocs.clone();
    let mut readers = Vec::new();
    let mut any = false;
    for &i in ops {
        let o = &ir.ops[i];
        let reads = (o.operands.iter().chain(&o.region_uses))
            .any(|v| matches!(v.src, ValueSrc::Op { op, .. } if slot.contains(&op)));
        if !reads {
            continue;
        }
        any = true;
        if SMEM_VIEWS.contains(&o.name.as_str()) {
            slot.insert(i);
        } else {
            readers.push(i);
        }
    }
    (readers, any)
}

/// The wgmmas among `consumer` that read a ring slot (through views), and
/// whether any op reads one; refuses another reader of a slot than a view,
/// a wgmma or a `local_load`.
pub(super) fn slot_readers(
    ir: &LoopIr,
    consumer: &[usize],
    allocs: &BTreeSet<usize>,
) -> Result<(BTreeSet<usize>, bool), LowerSkip> {
    let (reading, any) = slot_reading(ir, consumer, allocs);
    let mut readers = BTreeSet::new();
    for i in reading {
        match ir.ops[i].name.as_str() {
            WGMMA => {
                readers.insert(i);
            }
            "ttg.local_load" => {}
            other => {
                return Err(LowerSkip::Shape(format!(
                    "`{other}` reads a ring slot (only views, wgmmas and local_load are supported)"
                )))
            }
        }
    }
    Ok((readers, any))
}

type Trip = (Waits, Vec<(usize, usize)>);

/// One trip starting with `start` in flight: its waits, and the wgmmas it
/// leaves in flight with their carrying iteration arguments.
fn trip(
    ir: &LoopIr,
    consumer: &[usize],
    start: &[InFlight],
    readers: &BTreeSet<usize>,
) -> Result<Trip, LowerSkip> {
    let mut flight: Vec<InFlight> = start.to_vec();
    let mut points = issue_and_wait(ir, consumer, &mut flight, &in_flight_of);
    let carried_by = |d: usize| {
        ir.yields
            .iter()
            .position(|y| y.src == ValueSrc::Op { op: d, result: 0 })
    };
    let must = flight.iter().rposition(|&f| match f {
        InFlight::Carried(_) => true,
        InFlight::Dot(d) => carried_by(d).is_none() || computes_a(ir, d),
    });
    if let Some(idx) = must {
        points.push(retire(&mut flight, idx, consumer.len()));
    }
    let mut end = Vec::new();
    for f in &flight {
        let InFlight::Dot(d) = *f else {
            unreachable!("every carried wgmma retired at the trip's end")
        };
        end.push((d, carried_by(d).expect("uncarried wgmmas retired")));
    }
    let hold = if end.iter().any(|(d, _)| readers.contains(d)) {
        2
    } else {
        1
    };
    Ok((
        Waits {
            points,
            carried: end.clone(),
            hold,
            reads_slots: false,
        },
        end,
    ))
}

/// Walks `seq` with `flight` in flight: a wait before each op that reads
/// an in-flight wgmma's result (`resolve` names it; a later wgmma's
/// accumulator operand excepted), retiring it and every older one; each
/// wgmma joins `flight` as it is issued.
fn issue_and_wait(
    ir: &LoopIr,
    seq: &[usize],
    flight: &mut Vec<InFlight>,
    resolve: &dyn Fn(ValueSrc) -> Option<InFlight>,
) -> Vec<WaitPoint> {
    let mut points = Vec::new();
    for (p, &i) in seq.iter().enumerate() {
        let o = &ir.ops[i];
        let needed = o
            .operands
            .iter()
            .enumerate()
            .filter(|&(j, _)| !(o.name == WGMMA && j == 2))
            .map(|(_, v)| v)
            .chain(&o.region_uses)
            .filter_map(|v| resolve(v.src))
            .filter_map(|f| flight.iter().position(|&g| g == f))
            .max();
        if let Some(idx) = needed {
            points.push(retire(flight, idx, p));
        }
        if o.name == WGMMA {
            flight.push(InFlight::Dot(i));
        }
    }
    points
}

/// A wait before position `p` retiring `flight[..=idx]`; it passes
/// through this trip's wgmmas in flight until then.
fn retire(flight: &mut Vec<InFlight>, idx: usize, p: usize) -> WaitPoint {
    let through = flight
        .iter()
        .filter_map(|&f| match f {
            InFlight::Dot(d) => Some(d),
            InFlight::Carried(_) => None,
        })
        .collect();
    let retire: Vec<InFlight> = flight.drain(..=idx).collect();
    WaitPoint {
        before: p,
        retire,
        through,
        pendings: flight.len() as u32,
    }
}

fn in_flight_of(src: ValueSrc) -> Option<InFlight> {
    match src {
        ValueSrc::Op { op, .. } => Some(InFlight::Dot(op)),
        ValueSrc::IterArg(k) => Some(InFlight::Carried(k)),
        _ => None,
    }
}

/// Whether wgmma `d` takes its A operand from registers the trip computes.
pub fn computes_a(ir: &LoopIr, d: usize) -> bool {
    ir.ops[d].operands.first().is_some_and(|a| {
        !a.ty.starts_with("!ttg.memdesc")
            && matches!(a.src, ValueSrc::Op { .. } | ValueSrc::IterArg(_))
    })
}

/// The waits of a straight sequence of body ops `seq` (a staged part's
/// prologue, steady trip or epilogue): before the first op that reads an
/// in-flight wgmma's result (a later wgmma's accumulator operand
/// excepted), and at the end one wait retiring whatever is still in
/// flight, so no wgmma crosses the sequence's end. `resolve` says which
/// wgmma a value names when it is one (an iteration argument can name a
/// wgmma issued earlier in the same trip).
pub fn straight(
    ir: &LoopIr,
    seq: &[usize],
    resolve: &dyn Fn(ValueSrc) -> Option<InFlight>,
) -> Vec<WaitPoint> {
    let mut flight: Vec<InFlight> = Vec::new();
    let mut points = issue_and_wait(ir, seq, &mut flight, resolve);
    if !flight.is_empty() {
        let last = flight.len() - 1;
        points.push(retire(&mut flight, last, seq.len()));
    }
    points
}
