//! Loop dependence graphs G = (V, E) as the solver core sees them.
//!
//! A [`Graph`] is what a front end produces (the TOML loader in [`load`], and
//! later the MLIR front end): ops with their timing (an explicit resource
//! reservation table, or a cost class priced by a machine description),
//! registers, memory footprints and flags, and edges (u, v, d, delta). It
//! knows nothing of MLIR or Triton. [`crate::problem`] resolves a graph against
//! a [`crate::machine::Machine`] into the integer problem the solvers take.

pub mod load;

use std::collections::BTreeMap;

/// A run of identical rows of a resource reservation table: for `len`
/// consecutive cycles the op occupies `uses[unit]` instances of each unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub len: u64,
    pub uses: BTreeMap<String, u32>,
}

impl Segment {
    /// Appends `self` to the run-length encoded rows `segments`: joined
    /// with the last segment when it uses the same units; nothing for an
    /// empty segment.
    pub fn append_to(self, segments: &mut Vec<Segment>) {
        if self.len == 0 {
            return;
        }
        match segments.last_mut() {
            Some(last) if last.uses == self.uses => last.len += self.len,
            _ => segments.push(self),
        }
    }
}

/// How an op's cycles and reservation table are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timing {
    /// Given explicitly, as run-length encoded RRT rows.
    Table(Vec<Segment>),
    /// Priced by the machine's cost rule for `class` on a tile.
    Cost {
        class: String,
        shape: Vec<u64>,
        dtype: String,
    },
}

/// A tile-level operation of the loop body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub name: String,
    pub timing: Timing,
    /// Registers per thread that the op's result occupies while live.
    pub regs: u32,
    /// Bytes (or the memory's own unit) of the result per memory kind while live.
    pub memory: BTreeMap<String, u64>,
    /// Latency unknown statically (TMA); scheduled on a designated warp.
    pub variable_latency: bool,
    /// Variable-latency op without incoming data dependences (section 5.3).
    pub streaming: bool,
    /// Must be issued by a whole warp group (wgmma on Hopper).
    pub warp_group: bool,
    /// Must be in the last pipeline stage: floor(M(v)/I) >= floor(M(w)/I)
    /// for every op w (Triton before 3.9 pipelines Hopper wgmma only there).
    pub last_stage: bool,
    /// Cycles to move this op's result to another warp through shared memory.
    pub spill_cost: u64,
    /// Bytes the op moves through each bandwidth unit (by unit name) each
    /// time it runs: wgmma operands read from shared memory, TMA copies
    /// written to it. Bounded per iteration, not per cycle.
    pub traffic: BTreeMap<String, u64>,
    /// Bytes moved through the machine's crossing unit for each consumer of
    /// this op's result on another warp group (a store and a load).
    pub cross_bytes: u64,
    /// The op stands for a region op (an `scf.if`): its table is its
    /// costlier branch's ops in sequence, and it runs as one op of fixed
    /// latency on the warps that issue it.
    pub conditional: bool,
    /// Where the op came from (an MLIR location, or `file:line`).
    pub origin: String,
}

/// A dependence (u, v, d, delta): v of iteration i + delta issues at least d
/// cycles after u of iteration i.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// d in cycles; `None` means the cycles of `from`.
    pub delay: Option<u64>,
    /// delta, the iteration distance (0 inside an iteration, 1 loop-carried).
    pub distance: u32,
    /// v needs blocking synchronization before u's result is accessible.
    pub blocking: bool,
    /// An ordering-only edge (through memory, e.g. a later write after a
    /// read of the same buffer): v must wait, but it does not use u's
    /// result, so the edge does not keep that result live.
    pub order: bool,
    /// Where the edge came from.
    pub origin: String,
}

/// Ops that must be assigned the same warp group: a constraint of the
/// code generator that consumes the schedule (Triton's warp specialization
/// cannot split them), not of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SameGroup {
    /// At least two fixed-latency ops.
    pub ops: Vec<usize>,
    /// Why they must stay together (shown in reports and errors).
    pub reason: String,
    /// Where the constraint came from.
    pub origin: String,
}

/// A loop dependence graph.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Graph {
    pub name: String,
    pub description: String,
    pub ops: Vec<Op>,
    pub edges: Vec<Edge>,
    /// Warp-group colocation constraints (empty: any assignment).
    pub same_group: Vec<SameGroup>,
}

impl Graph {
    /// Index of the op with this name.
    pub fn op_index(&self, name: &str) -> Option<usize> {
        self.ops.iter().position(|o| o.name == name)
    }
}
