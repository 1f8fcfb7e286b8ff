//! Lowering a solved sm90 loop to warp-specialized TTGIR
//! (docs/ws-lowering.md): a producer partition issues the TMA copies of the
//! variable-latency group into shared-memory rings; each compute group runs
//! in a partition of its own (the first in the default region) with
//! asynchronous wgmmas, and the loop-carried tensors of the other compute
//! partitions reach the code after the loop through result buffers.
//!
//! [`plan`] derives everything from the loop's graph, its joint schedule
//! and the TTGIR types (MLIR-free); [`emit`] builds the ops. A loop outside
//! the supported shape gets a [`LowerSkip`] and takes the attribute route.

#[cfg(feature = "mlir")]
pub mod emit;
pub mod partition;
pub mod stages;
pub mod types;
pub mod waits;

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Arch, TritonTarget, LOADS, SMEM_VIEWS, WGMMA};
use crate::frontend::lower::Lowered;
use crate::frontend::{IrValue, LoopIr, ValueSrc};
use crate::joint::JointResult;
use types::MemDesc;

/// Warps of the producer partition (one warp issues the TMA copies).
pub const PRODUCER_WARPS: u32 = 1;
/// Registers the producer asks for (`gluon_hopper.py`'s 24).
pub const PRODUCER_REGISTERS: u32 = 24;

/// How deep the rings are (the pass's `ring=` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RingDepth {
    /// The schedule's prefetch plus the slots a consumer holds.
    #[default]
    Schedule,
    /// As deep as shared memory allows (at most [`MAX_DEPTH`] slots,
    /// [`SMEM_RESERVE`] bytes left for the code around the loop), never
    /// less than the schedule's.
    Max,
}

impl std::str::FromStr for RingDepth {
    type Err = String;
    fn from_str(s: &str) -> Result<RingDepth, String> {
        match s {
            "schedule" => Ok(RingDepth::Schedule),
            "max" => Ok(RingDepth::Max),
            other => Err(format!("ring: expected `schedule` or `max`, got `{other}`")),
        }
    }
}

/// The deepest ring `ring=max` builds.
pub const MAX_DEPTH: u32 = 8;
/// Shared memory `ring=max` leaves to the code before and after the loop.
pub const SMEM_RESERVE: u64 = 16 * 1024;

/// Why a loop is not lowered (it then takes the attribute route).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "code", content = "detail")]
pub enum LowerSkip {
    /// Not sm90, or a Triton version whose ws op spelling is unknown.
    Target(String),
    /// The module's warps differ from one warp group.
    NumWarps(u32),
    /// No compute group, or more than the CTA's warps hold.
    ComputeGroups(u32),
    /// An op of the variable-latency group is not a descriptor load into a
    /// `local_alloc`.
    ProducerOp(String),
    /// A load outside the variable-latency group.
    LoadInCompute(String),
    /// Not exactly one wgmma in the compute group.
    Dots(u32),
    /// An op with regions, or an op the producer would need from the
    /// compute group.
    Shape(String),
    /// A value one compute group makes and another reads (it would need a
    /// channel between their partitions).
    Channel(String),
    /// A producer capture would be a tensor.
    TensorCapture(String),
    /// A type the lowering cannot read.
    Type(String),
    /// The rings, barriers and buffers (with, at emission, the workers'
    /// initial-value buffers and the buffers the loop reads from before
    /// it) exceed shared memory.
    SharedMemory { bytes: u64, capacity: u64 },
    /// Building the IR failed.
    Emit(String),
    /// The pipeline verifier did not prove the lowered code (`lower=on` or
    /// `only`): its verdict and the first rule that failed.
    NotVerified(String),
}

impl fmt::Display for LowerSkip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerSkip::Target(t) => {
                write!(f, "target {t} is not lowered (sm90, Triton 3.6 or 3.9)")
            }
            LowerSkip::NumWarps(n) => write!(
                f,
                "num-warps {n}: the default region runs on the module's layouts, which need whole warp groups"
            ),
            LowerSkip::ComputeGroups(n) => write!(
                f,
                "{n} compute groups (one, or several of one warp group each, are supported)"
            ),
            LowerSkip::ProducerOp(op) => write!(
                f,
                "`{op}` in the variable-latency group (only descriptor loads into local_alloc)"
            ),
            LowerSkip::LoadInCompute(op) => {
                write!(f, "load `{op}` outside the variable-latency group")
            }
            LowerSkip::Dots(n) => write!(f, "{n} wgmmas in the compute group (at least one is needed)"),
            LowerSkip::Shape(why) => write!(f, "{why}"),
            LowerSkip::Channel(what) => write!(
                f,
                "{what} (channels between partitions are not supported)"
            ),
            LowerSkip::TensorCapture(ty) => write!(f, "the producer would capture a tensor ({ty})"),
            LowerSkip::Type(ty) => write!(f, "cannot read type {ty}"),
            LowerSkip::SharedMemory { bytes, capacity } => write!(
                f,
                "rings and buffers need {bytes} B of shared memory, {capacity} B available"
            ),
            LowerSkip::Emit(e) => write!(f, "cannot build the IR: {e}"),
            LowerSkip::NotVerified(why) => write!(f, "not verified: {why}"),
        }
    }
}

/// One load of the producer, copied by TMA into its ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingLoad {
    /// Body op of the `tt.descriptor_load`.
    pub load: usize,
    /// Body op of the `local_alloc` that stores its tile.
    pub alloc: usize,
    /// The ring: `depth` slots of the alloc's buffer, mutable.
    pub ring: MemDesc,
    /// One slot of it.
    pub slot: MemDesc,
    pub bytes: u64,
}

/// One compute partition: a compute group of the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputePart {
    /// The schedule's group id.
    pub group: u32,
    /// Its body ops, in program order (loads and allocs excluded: the
    /// allocs become slot views; folded ops cloned into every part that
    /// reads them).
    pub ops: Vec<usize>,
    /// Iteration arguments it carries, ascending.
    pub carried: Vec<usize>,
    /// Graph nodes of other compute groups it recomputes (index
    /// arithmetic), ascending.
    pub recomputed: Vec<usize>,
    /// Its wgmmas (all asynchronous) and its waits.
    pub dots: Vec<usize>,
    pub waits: waits::Waits,
    /// Its two stages, when a wgmma is issued one trip later (then
    /// `waits` holds only the slot hold and `staging` the waits).
    pub staging: Option<stages::Staging>,
    /// Warps (the module's: the part runs on the module's layouts); with
    /// more than one warp group, a slot is released only after every warp
    /// group's waits (a thread barrier), since one thread arrives.
    pub warps: u32,
    /// `requestedRegisters` of a worker partition (None: the default
    /// region, which gets what the others leave).
    pub registers: Option<u32>,
    /// Loop-carried tensors a worker delivers to the code after the loop
    /// through a shared-memory buffer: (iteration argument, buffer type).
    pub results: Vec<(usize, String)>,
}

/// Loads that share their `full` / `empty` barriers: one phase per trip,
/// one `barrier_expect` for their copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingGroup {
    /// Indices into [`WsPlan::loads`].
    pub loads: Vec<usize>,
    pub expect_bytes: u64,
    /// Compute partitions that read its slots (the arrivals on `empty`).
    pub empty_count: u32,
    /// Read by a staged part's second stage (a trip after it is copied).
    pub late: bool,
}

/// Everything [`emit`] builds, decided from the graph and the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsPlan {
    /// Slots per ring: the loads' prefetch plus the iterations a wgmma
    /// holds a slot.
    pub depth: u32,
    pub loads: Vec<RingLoad>,
    /// Bytes of all copies of a trip (each ring group's `full` expects its
    /// own share, [`RingGroup::expect_bytes`]).
    pub expect_bytes: u64,
    /// Arrivals that complete a phase of `full` (the producer's expect);
    /// `empty`'s are per ring group ([`RingGroup::empty_count`]).
    pub full_count: u32,
    /// The compute partitions; the first runs in the default region.
    pub parts: Vec<ComputePart>,
    /// The loads' barrier groups: one, or (a staged part) the loads the
    /// first stage reads and those the second reads, each released as soon
    /// as its own readers retired.
    pub groups: Vec<RingGroup>,
    /// Body ops the producer needs (scalar address arithmetic), in order.
    pub producer_ops: Vec<usize>,
    /// Iteration arguments the producer carries itself (scalar offsets the
    /// loads' addresses advance by), with their updates among
    /// `producer_ops`.
    pub producer_carried: Vec<usize>,
    pub producer_warps: u32,
    /// The thread barrier's op and attributes (Triton-version rule).
    pub thread_barrier: (String, Vec<(String, String)>),
    pub producer_registers: u32,
    /// Triton >= 3.9 puts the captures on `ttg.warp_specialize.partitions`.
    pub captures_on_partitions: bool,
    /// Rings, result buffers and barriers.
    pub smem_bytes: u64,
    /// The machine's shared memory, which the emitted code must fit
    /// (with the read-only buffers of [`Emitted`]).
    pub smem_capacity: u64,
}

/// What the emitter added to the plan: the initial values of tensors a
/// worker carries that it cannot recompute from scalars (an earlier
/// loop's accumulator) reach it through read-only buffers written before
/// the ws op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Emitted {
    pub init_buffers: u32,
    pub init_bytes: u64,
}

impl WsPlan {
    /// `rings 3x(2 tiles, 32768 B)` for the remark, with what the emitter
    /// added.
    pub fn summary(&self, e: &Emitted) -> String {
        let results: usize = self.parts.iter().map(|p| p.results.len()).sum();
        let mut buffers = String::new();
        if results > 0 {
            buffers += &format!(", {results} result buffers");
        }
        if e.init_buffers > 0 {
            buffers += &format!(", {} initial-value buffers", e.init_buffers);
        }
        let recomputed: usize = self.parts.iter().map(|p| p.recomputed.len()).sum();
        let recomputed = if recomputed == 0 {
            String::new()
        } else {
            format!("; {recomputed} ops of other groups recomputed")
        };
        format!(
            "lowered to 1+{} partitions (rings {}x{} tiles, {} B per slot{buffers}, {} B shared; producer {} warp, {} registers{recomputed})",
            self.parts.len(),
            self.depth,
            self.loads.len(),
            self.expect_bytes,
            self.smem_bytes + e.init_bytes,
            self.producer_warps,
            self.producer_registers
        )
    }
}

/// The slot a trip counter `it` uses in a ring of `depth` slots.
pub fn slot(it: u32, depth: u32) -> u32 {
    it % depth
}

/// The phase parity the consumer waits for on `full` at trip `it`; the
/// producer waits on `empty` with the opposite parity, which a fresh
/// barrier passes.
pub fn phase(it: u32, depth: u32) -> u32 {
    (it / depth) & 1
}

/// Warps the compute partitions may take together (the producer's warp
/// group comes on top).
pub const MAX_COMPUTE_WARPS: u32 = 16;
/// 32-bit registers of an SM (sm90).
pub const REGISTER_FILE: u32 = 64 * 1024;

/// Plans the lowering of a scheduled loop, or says why it is not lowered.
pub fn plan(
    ir: &LoopIr,
    lowered: &Lowered,
    result: &JointResult,
    target: &TritonTarget,
    smem_capacity: u64,
    ring: RingDepth,
) -> Result<WsPlan, LowerSkip> {
    check_target(ir, target)?;
    let group = &result.schedule.group;
    let users = super::users_of(ir);
    let mut loads = Vec::new();
    let mut node_group = vec![None; ir.ops.len()];
    for (v, &g) in group.iter().enumerate() {
        let op = lowered.op_of_node[v];
        if g == 0 {
            loads.push(producer_load(ir, &users, op)?);
        } else if LOADS.contains(&ir.ops[op].name.as_str()) {
            return Err(LowerSkip::LoadInCompute(ir.ops[op].name.clone()));
        } else {
            node_group[op] = Some(g);
        }
    }
    let groups = node_group.iter().flatten().collect::<BTreeSet<_>>().len() as u32;
    // Several compute partitions of more than one warp group each leave
    // each thread too few registers (the sub-tiled FA forward at 8 warps:
    // 112 per thread, spilling, at a quarter of the 4-warp lowering's speed
    // on the H200; BENCHMARKS.md).
    if groups == 0 || (groups > 1 && ir.num_warps > 4) || groups * ir.num_warps > MAX_COMPUTE_WARPS
    {
        return Err(LowerSkip::ComputeGroups(groups));
    }
    loads.sort_unstable_by_key(|&(l, _, _)| l);
    let (producer_ops, producer_carried) = producer_deps(ir, &loads)?;
    let taken: BTreeSet<usize> = loads.iter().flat_map(|&(l, a, _)| [l, a]).collect();
    let allocs: BTreeSet<usize> = loads.iter().map(|&(_, a, _)| a).collect();
    let split = partition::split(ir, &node_group, &taken, &producer_ops)?;
    let parts = split
        .into_iter()
        .enumerate()
        .map(|(j, g)| compute_part(ir, g, &allocs, j > 0))
        .collect::<Result<Vec<_>, _>>()?;
    let parts = with_registers(parts, ir.num_warps);
    let allocs_in_order: Vec<usize> = loads.iter().map(|&(_, a, _)| a).collect();
    let (parts, split_loads) = ring_split(ir, parts, &allocs_in_order, &allocs)?;
    let prefetch = loads
        .iter()
        .filter_map(|&(l, _, _)| prefetch_of(lowered, result, l))
        .max()
        .unwrap_or(0);
    let bytes = |t: &str| MemDesc::parse(t).and_then(|m| m.bytes()).unwrap_or(0);
    let slot_bytes = loads.iter().map(|(_, _, t)| bytes(t)).sum::<u64>();
    let hold = parts.iter().map(|p| p.waits.hold).max().unwrap_or(1);
    let need = prefetch + hold;
    let results_bytes = parts
        .iter()
        .flat_map(|p| &p.results)
        .map(|(_, t)| bytes(t))
        .sum::<u64>();
    let staged = parts.iter().any(|p| p.staging.is_some());
    let depth = match ring {
        // A deferred wgmma holds its slot into the next trip; the ring
        // keeps the unstaged depth (the prefetch plus the trip that reads
        // the slot), and that wgmma's release, part of a trip later, gates
        // the producer (as the two-slot rings of the Gluon FA kernel).
        RingDepth::Schedule if staged => (prefetch + 1).max(2),
        RingDepth::Schedule => need,
        RingDepth::Max => {
            deepest(slot_bytes, smem_capacity.saturating_sub(results_bytes)).max(need)
        }
    };
    let rings = loads
        .iter()
        .map(|&(load, alloc, ref t)| ring_load(load, alloc, t, depth))
        .collect::<Result<Vec<_>, _>>()?;
    let expect_bytes = rings.iter().map(|r| r.bytes).sum::<u64>();
    let groups = split_loads
        .into_iter()
        .filter(|(ls, _)| !ls.is_empty())
        .map(|(ls, late)| RingGroup {
            expect_bytes: ls.iter().map(|&k| rings[k].bytes).sum(),
            empty_count: (parts.iter())
                .filter(|p| ls.iter().any(|&k| reads_slot(ir, &p.ops, rings[k].alloc)))
                .count() as u32,
            loads: ls,
            late,
        })
        .collect::<Vec<_>>();
    // Two barrier arrays of `depth` 8-byte barriers, and `done` when a
    // worker delivers results.
    let done = if results_bytes > 0 { 8 } else { 0 };
    let smem_bytes = expect_bytes * u64::from(depth)
        + 16 * u64::from(depth) * groups.len() as u64
        + results_bytes
        + done;
    if smem_bytes > smem_capacity {
        return Err(LowerSkip::SharedMemory {
            bytes: smem_bytes,
            capacity: smem_capacity,
        });
    }
    Ok(WsPlan {
        depth,
        loads: rings,
        expect_bytes,
        full_count: 1,
        parts,
        groups,
        producer_ops: producer_ops.into_iter().collect(),
        producer_carried: producer_carried.into_iter().collect(),
        producer_warps: PRODUCER_WARPS,
        thread_barrier: {
            let (name, attrs) = target.thread_barrier();
            let attrs = attrs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
            (name.to_string(), attrs.collect())
        },
        producer_registers: PRODUCER_REGISTERS,
        captures_on_partitions: target.version >= (3, 9),
        smem_bytes,
        smem_capacity,
    })
}

/// One compute partition from its share of the body; a worker delivers
/// the loop-carried tensors it owns through result buffers.
fn compute_part(
    ir: &LoopIr,
    g: partition::GroupOps,
    allocs: &BTreeSet<usize>,
    worker: bool,
) -> Result<ComputePart, LowerSkip> {
    let dots = compute_dots(ir, &g.ops)?;
    let mut waits = waits::plan(ir, &g.ops, allocs)?;
    let staging = stages::plan(ir, &g.ops, allocs);
    if staging.is_some() {
        // The deferred wgmma reads the previous trip's slot: released at
        // the end of the trip that retires it.
        waits = waits::Waits {
            points: Vec::new(),
            carried: Vec::new(),
            hold: 2,
            reads_slots: true,
        };
    }
    let mut results = Vec::new();
    if worker {
        for &k in &g.carried {
            let ty = &ir.yields[k].ty;
            if !ty.starts_with("tensor<") {
                return Err(LowerSkip::Shape(format!(
                    "compute group {} carries a {ty}, which only the default region can deliver",
                    g.group
                )));
            }
            let buf = types::result_buffer(ty).ok_or_else(|| LowerSkip::Type(ty.clone()))?;
            results.push((k, buf));
        }
    }
    Ok(ComputePart {
        group: g.group,
        ops: g.ops,
        carried: g.carried,
        recomputed: g.recomputed,
        dots,
        waits,
        staging,
        warps: ir.num_warps,
        registers: None,
        results,
    })
}

/// The loads of each barrier group, `(loads, late)`: one group, or with
/// staged parts the loads their first stage reads and those their second
/// reads. Staging is dropped (every part in one stage) when some part is
/// not staged or a load is read in both stages.
#[allow(clippy::type_complexity)]
fn ring_split(
    ir: &LoopIr,
    mut parts: Vec<ComputePart>,
    allocs: &[usize],
    all: &BTreeSet<usize>,
) -> Result<(Vec<ComputePart>, Vec<(Vec<usize>, bool)>), LowerSkip> {
    let one = vec![((0..allocs.len()).collect(), false)];
    if parts.iter().all(|p| p.staging.is_none()) {
        return Ok((parts, one));
    }
    let mut split = vec![(Vec::new(), false), (Vec::new(), true)];
    let mut ok = parts.iter().all(|p| p.staging.is_some());
    for (k, &a) in allocs.iter().enumerate() {
        let stage = |late: bool| {
            parts.iter().any(|p| {
                let st = p.staging.as_ref().expect("staged");
                reads_slot(ir, if late { &st.late } else { &st.early }, a)
            })
        };
        match (ok && stage(false), ok && stage(true)) {
            (true, true) => ok = false,
            (_, late) => split[usize::from(late)].0.push(k),
        }
    }
    if ok {
        return Ok((parts, split));
    }
    for p in &mut parts {
        if p.staging.take().is_some() {
            p.waits = waits::plan(ir, &p.ops, all)?;
        }
    }
    Ok((parts, one))
}

/// Whether an op of `ops` (program order) reads the slot of `alloc`,
/// directly or through views.
pub fn reads_slot(ir: &LoopIr, ops: &[usize], alloc: usize) -> bool {
    !waits::slot_reading(ir, ops, &BTreeSet::from([alloc]))
        .0
        .is_empty()
}

/// The register split of Gluon's warp-specialized kernels
/// (`bench/kernels/gluon_hopper.py` `register_split`, one CTA per SM): the
/// producer's warp group asks for [`PRODUCER_REGISTERS`]; each worker
/// compute partition for an equal share of the rest, rounded down to 8;
/// the default region gets what is left (Triton's AllocateWarpGroups).
fn with_registers(mut parts: Vec<ComputePart>, warps: u32) -> Vec<ComputePart> {
    if parts.len() < 2 {
        return parts;
    }
    let groups_per_part = warps.div_ceil(4);
    let warp_groups = groups_per_part * parts.len() as u32 + 1;
    let per_thread = (REGISTER_FILE / (warp_groups * 128) / 8 * 8).min(256);
    let budget = warp_groups * per_thread;
    let share = (budget - PRODUCER_REGISTERS) / (warp_groups - 1) / 8 * 8;
    for p in parts.iter_mut().skip(1) {
        p.registers = Some(share.min(256));
    }
    parts
}

fn check_target(ir: &LoopIr, target: &TritonTarget) -> Result<(), LowerSkip> {
    let (major, minor) = target.version;
    if target.arch != Arch::Sm90 || !matches!((major, minor), (3, 6) | (3, 9)) {
        return Err(LowerSkip::Target(format!(
            "{} triton={major}.{minor}",
            target.arch.name()
        )));
    }
    // Every compute partition runs on the module's layouts: any whole
    // number of warp groups.
    if ir.num_warps % 4 != 0 {
        return Err(LowerSkip::NumWarps(ir.num_warps));
    }
    Ok(())
}

/// A variable-latency op: a descriptor load whose one user is a
/// `local_alloc`; (load, alloc, the alloc's type).
fn producer_load(
    ir: &LoopIr,
    users: &[Vec<usize>],
    op: usize,
) -> Result<(usize, usize, String), LowerSkip> {
    let o = &ir.ops[op];
    let alloc = match users[op].as_slice() {
        [a] if o.name == "tt.descriptor_load" && ir.ops[*a].name == "ttg.local_alloc" => *a,
        _ => return Err(LowerSkip::ProducerOp(o.name.clone())),
    };
    let ty = ir.ops[alloc].results.first().cloned().unwrap_or_default();
    Ok((op, alloc, ty))
}

/// The body ops the loads' operands come from (transitively): scalar ops
/// the producer clones, and the iteration arguments among them, which the
/// producer carries with their updates. Refuses anything else.
fn producer_deps(
    ir: &LoopIr,
    loads: &[(usize, usize, String)],
) -> Result<(BTreeSet<usize>, BTreeSet<usize>), LowerSkip> {
    let mut deps = BTreeSet::new();
    let mut carried = BTreeSet::new();
    let mut todo: Vec<usize> = loads.iter().map(|&(l, _, _)| l).collect();
    while let Some(i) = todo.pop() {
        let mut values: Vec<&IrValue> = ir.ops[i].operands.iter().collect();
        while let Some(v) = values.pop() {
            match v.src {
                ValueSrc::Op { op, .. } if deps.insert(op) => todo.push(op),
                ValueSrc::IterArg(k) if carried.insert(k) => {
                    let next = &ir.yields[k];
                    if !types::capturable(&next.ty) || next.ty.starts_with("!ttg") {
                        return Err(LowerSkip::Shape(format!(
                            "a load depends on a loop-carried {}, not a scalar",
                            next.ty
                        )));
                    }
                    values.push(next);
                }
                ValueSrc::Outside(_) if !types::capturable(&v.ty) => {
                    return Err(LowerSkip::TensorCapture(v.ty.clone()))
                }
                _ => {}
            }
        }
    }
    for &d in &deps {
        let o = &ir.ops[d];
        let scalar = o
            .results
            .iter()
            .all(|t| types::capturable(t) && !t.starts_with("!ttg"));
        if !scalar || !o.nested.is_empty() || LOADS.contains(&o.name.as_str()) {
            return Err(LowerSkip::Shape(format!(
                "the loads' addresses need `{}`, which is not scalar arithmetic",
                o.name
            )));
        }
    }
    Ok((deps, carried))
}

/// The compute group's wgmmas; refuses an op with regions other than a
/// reduction or scan, and an op making a shared-memory buffer.
fn compute_dots(ir: &LoopIr, consumer: &[usize]) -> Result<Vec<usize>, LowerSkip> {
    let dots: Vec<usize> = consumer
        .iter()
        .copied()
        .filter(|&i| ir.ops[i].name == WGMMA)
        .collect();
    for &i in consumer {
        let o = &ir.ops[i];
        if !o.nested.is_empty() && !matches!(o.name.as_str(), "tt.reduce" | "tt.scan") {
            return Err(LowerSkip::Shape(format!("`{}` has regions", o.name)));
        }
        let view = SMEM_VIEWS.contains(&o.name.as_str()) || o.name == WGMMA;
        if !view && o.results.iter().any(|t| t.starts_with("!ttg.memdesc")) {
            return Err(LowerSkip::Shape(format!(
                "`{}` makes a shared-memory buffer in the compute group",
                o.name
            )));
        }
    }
    if dots.is_empty() {
        return Err(LowerSkip::Dots(0));
    }
    Ok(dots)
}

/// The most slots of `slot_bytes` (plus two barriers) that fit in shared
/// memory less [`SMEM_RESERVE`], at most [`MAX_DEPTH`].
fn deepest(slot_bytes: u64, capacity: u64) -> u32 {
    let room = capacity.saturating_sub(SMEM_RESERVE);
    (room / (slot_bytes + 16).max(1)).min(u64::from(MAX_DEPTH)) as u32
}

/// The solver's prefetch of the load at body op `l`.
fn prefetch_of(lowered: &Lowered, result: &JointResult, l: usize) -> Option<u32> {
    let v = lowered.op_of_node.iter().position(|&o| o == l)?;
    let name = &lowered.graph.ops[v].name;
    result
        .streaming
        .iter()
        .find(|s| &s.op == name)
        .map(|s| s.prefetch)
}

fn ring_load(load: usize, alloc: usize, ty: &str, depth: u32) -> Result<RingLoad, LowerSkip> {
    let tile = MemDesc::parse(ty).ok_or_else(|| LowerSkip::Type(ty.to_string()))?;
    let bytes = tile
        .bytes()
        .ok_or_else(|| LowerSkip::Type(ty.to_string()))?;
    Ok(RingLoad {
        load,
        alloc,
        ring: tile.ring(depth),
        slot: tile.mutable(),
        bytes,
    })
}
