//! Lowering a solved sm90 loop to warp-specialized TTGIR
//! (docs/ws-lowering.md, milestone 1): a producer partition issues the
//! TMA copies of the variable-latency group into shared-memory rings, the
//! compute group runs in the default region with asynchronous wgmmas.
//!
//! [`plan`] derives everything from the loop's graph, its joint schedule
//! and the TTGIR types (MLIR-free); [`emit`] builds the ops. A loop outside
//! the supported shape gets a [`LowerSkip`] and takes the attribute route.

#[cfg(feature = "mlir")]
pub mod emit;
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
    /// The schedule has not exactly one compute group.
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
    /// A producer capture would be a tensor.
    TensorCapture(String),
    /// A type the lowering cannot read.
    Type(String),
    /// The rings and barriers exceed shared memory.
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
            LowerSkip::ComputeGroups(n) => write!(f, "{n} compute groups (one is supported)"),
            LowerSkip::ProducerOp(op) => write!(
                f,
                "`{op}` in the variable-latency group (only descriptor loads into local_alloc)"
            ),
            LowerSkip::LoadInCompute(op) => {
                write!(f, "load `{op}` outside the variable-latency group")
            }
            LowerSkip::Dots(n) => write!(f, "{n} wgmmas in the compute group (at least one is needed)"),
            LowerSkip::Shape(why) => write!(f, "{why}"),
            LowerSkip::TensorCapture(ty) => write!(f, "the producer would capture a tensor ({ty})"),
            LowerSkip::Type(ty) => write!(f, "cannot read type {ty}"),
            LowerSkip::SharedMemory { bytes, capacity } => write!(
                f,
                "rings need {bytes} B of shared memory, {capacity} B available"
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

/// Everything [`emit`] builds, decided from the graph and the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsPlan {
    /// Slots per ring: the loads' prefetch plus the iterations the wgmma
    /// holds a slot.
    pub depth: u32,
    pub loads: Vec<RingLoad>,
    /// Bytes the `full` barrier of a slot expects (all copies of a trip).
    pub expect_bytes: u64,
    /// Arrivals that complete a phase: `full` (the producer's expect),
    /// `empty` (one per compute partition reading the slot).
    pub full_count: u32,
    pub empty_count: u32,
    /// The compute group's wgmmas (all asynchronous) and its waits.
    pub dots: Vec<usize>,
    pub waits: waits::Waits,
    /// Body ops the producer needs (scalar address arithmetic), in order.
    pub producer_ops: Vec<usize>,
    /// Iteration arguments the producer carries itself (scalar offsets the
    /// loads' addresses advance by), with their updates among
    /// `producer_ops`.
    pub producer_carried: Vec<usize>,
    /// Body ops of the default region, in order (loads and allocs
    /// excluded: the allocs become slot views).
    pub consumer_ops: Vec<usize>,
    pub producer_warps: u32,
    /// Warps of the default region (the module's); with more than one warp
    /// group, a slot is released only after every warp group's waits (a
    /// thread barrier), since one thread arrives for the region.
    pub compute_warps: u32,
    /// The thread barrier's op and attributes (Triton-version rule).
    pub thread_barrier: (String, Vec<(String, String)>),
    pub producer_registers: u32,
    /// Triton >= 3.9 puts the captures on `ttg.warp_specialize.partitions`.
    pub captures_on_partitions: bool,
    /// Rings plus barriers.
    pub smem_bytes: u64,
}

impl WsPlan {
    /// `rings 3x(2 tiles, 32768 B)` for the remark.
    pub fn summary(&self) -> String {
        format!(
            "lowered to 1+1 partitions (rings {}x{} tiles, {} B per slot, {} B shared; producer {} warp, {} registers)",
            self.depth,
            self.loads.len(),
            self.expect_bytes,
            self.smem_bytes,
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
    for (v, &g) in group.iter().enumerate() {
        let op = lowered.op_of_node[v];
        if g == 0 {
            loads.push(producer_load(ir, &users, op)?);
        } else if LOADS.contains(&ir.ops[op].name.as_str()) {
            return Err(LowerSkip::LoadInCompute(ir.ops[op].name.clone()));
        }
    }
    let groups: BTreeSet<u32> = group.iter().copied().filter(|&g| g != 0).collect();
    if groups.len() != 1 {
        return Err(LowerSkip::ComputeGroups(groups.len() as u32));
    }
    loads.sort_unstable_by_key(|&(l, _, _)| l);
    let (producer_ops, producer_carried) = producer_deps(ir, &loads)?;
    let taken: BTreeSet<usize> = loads.iter().flat_map(|&(l, a, _)| [l, a]).collect();
    let consumer_ops = consumer_ops(ir, &users, &taken, &producer_ops);
    let dots = compute_dots(ir, &consumer_ops)?;
    let allocs: BTreeSet<usize> = loads.iter().map(|&(_, a, _)| a).collect();
    let waits = waits::plan(ir, &consumer_ops, &allocs)?;
    let prefetch = loads
        .iter()
        .filter_map(|&(l, _, _)| prefetch_of(lowered, result, l))
        .max()
        .unwrap_or(0);
    let slot_bytes = loads
        .iter()
        .map(|(_, _, t)| MemDesc::parse(t).and_then(|m| m.bytes()).unwrap_or(0))
        .sum::<u64>();
    let need = prefetch + waits.hold;
    let depth = match ring {
        RingDepth::Schedule => need,
        RingDepth::Max => deepest(slot_bytes, smem_capacity).max(need),
    };
    let rings = loads
        .iter()
        .map(|&(load, alloc, ref t)| ring_load(load, alloc, t, depth))
        .collect::<Result<Vec<_>, _>>()?;
    let expect_bytes = rings.iter().map(|r| r.bytes).sum::<u64>();
    // Two barrier arrays of `depth` 8-byte barriers.
    let smem_bytes = expect_bytes * u64::from(depth) + 16 * u64::from(depth);
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
        empty_count: 1,
        dots,
        waits,
        producer_ops: producer_ops.into_iter().collect(),
        producer_carried: producer_carried.into_iter().collect(),
        consumer_ops,
        producer_warps: PRODUCER_WARPS,
        compute_warps: ir.num_warps,
        thread_barrier: {
            let (name, attrs) = target.thread_barrier();
            let attrs = attrs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
            (name.to_string(), attrs.collect())
        },
        producer_registers: PRODUCER_REGISTERS,
        captures_on_partitions: target.version >= (3, 9),
        smem_bytes,
    })
}

fn check_target(ir: &LoopIr, target: &TritonTarget) -> Result<(), LowerSkip> {
    let (major, minor) = target.version;
    if target.arch != Arch::Sm90 || !matches!((major, minor), (3, 6) | (3, 9)) {
        return Err(LowerSkip::Target(format!(
            "{} triton={major}.{minor}",
            target.arch.name()
        )));
    }
    // The one compute group runs in the default region on the module's
    // layouts: any whole number of warp groups.
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

/// The default region's ops: all but the loads, their allocs and the ops
/// only the producer uses.
fn consumer_ops(
    ir: &LoopIr,
    users: &[Vec<usize>],
    taken: &BTreeSet<usize>,
    producer: &BTreeSet<usize>,
) -> Vec<usize> {
    let yielded = |i: usize| {
        ir.yields
            .iter()
            .any(|y| matches!(y.src, ValueSrc::Op { op, .. } if op == i))
    };
    (0..ir.ops.len())
        .filter(|i| !taken.contains(i))
        .filter(|&i| {
            !producer.contains(&i)
                || yielded(i)
                || users[i]
                    .iter()
                    .any(|u| !producer.contains(u) && !taken.contains(u))
        })
        .collect()
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
