//! Back ends: from a solved schedule to the attributes Triton consumes.
//!
//! [`decide`] turns a joint schedule of a lowered loop into one decision per
//! top-level body op — `loop.stage`, `loop.cluster` and a warp partition —
//! following the contract of Triton's pipeliner (see NOTES.md, "Triton's
//! attribute contract"):
//!
//! * stage(v) = floor(M(v) / I); streaming loads (section 5.3) are moved
//!   `prefetch` stages ahead of the iteration that uses them, and every other
//!   op `P` stages later, P the largest prefetch, so no stage is negative;
//! * clusters order the emitted loop body (Triton emits the steady state in
//!   cluster order, then program order): prefetched loads first, in one
//!   cluster (they get the prefetch * I cycles of lead time the model
//!   assumed; Triton gives their use in a later cluster one more buffer),
//!   then the other ops, either all in one cluster, so in program order
//!   within their stage ([`ClusterOrder::Program`], the default), or sorted
//!   by their slot in the kernel, M(v) mod I, then program order
//!   ([`ClusterOrder::Slot`]);
//! * ops the front end folded (scalars, views, broadcasts) take the stage and
//!   cluster of their first user, or of the first user of the iteration
//!   argument they feed;
//! * on sm90 every `ttng.warp_group_dot` must be in the last stage: the
//!   solver is told so ([`crate::graph::Op::last_stage`]) and [`validate`]
//!   checks it;
//! * partitions: on sm100 `ttg.partition` on every body op (partition 0 the
//!   default region, the MMA's partition 1) with `ttg.partition.stages` and
//!   `ttg.warp_specialize.tag` on the loop, without which Triton recomputes
//!   its own; on sm90 the `async_task_id` anchors Triton's Hopper warp
//!   specialization propagates from: {0} on loads, {1, 2} on every wgmma and
//!   every store of the function (all anchors or none);
//! * `tt.self_latency = 1` on sm100 MMAs, without which Triton's pipeliner
//!   leaves them synchronous.
//!
//! [`validate`] is the back end's own check of the decision against the loop
//! (every op placed, dependences respect stage then cluster order, the
//! version rule, no load refilling a ring slot its reader has not finished
//! with: [`rings`]), independent of the solver and its checker.
//! The MLIR writer is [`mlir`].

pub mod gluon;
#[cfg(feature = "mlir")]
pub mod mlir;
pub mod ops;
pub mod stages;
pub mod ws;

use std::collections::BTreeMap;

use crate::checker::JointSchedule;
use crate::frontend::lower::Lowered;
use crate::frontend::{LoopIr, ValueSrc};
use crate::joint::Streaming;
use crate::problem::Schedule;

/// The GPU generation whose Triton lowering consumes the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Hopper: `async_task_id` partitions.
    Sm90,
    /// Blackwell: `ttg.partition` partitions.
    Sm100,
}

impl Arch {
    pub fn parse(s: &str) -> Option<Arch> {
        match s {
            "sm90" | "sm_90" | "sm90a" | "hopper" => Some(Arch::Sm90),
            "sm100" | "sm_100" | "sm100a" | "blackwell" => Some(Arch::Sm100),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm90 => "sm90",
            Arch::Sm100 => "sm100",
        }
    }

    /// The bundled machine description of this target.
    pub fn default_machine(self) -> &'static str {
        match self {
            Arch::Sm90 => "h100",
            Arch::Sm100 => "b200",
        }
    }
}

/// The Triton version and target whose rules the decision must obey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TritonTarget {
    pub arch: Arch,
    /// (major, minor), e.g. (3, 6).
    pub version: (u32, u32),
}

impl TritonTarget {
    /// Parses `3.6`, `3.6.0`, `3.9.1`.
    pub fn parse_version(s: &str) -> Option<(u32, u32)> {
        let mut it = s.split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse().ok())?;
        if it.any(|p| p.parse::<u32>().is_err()) {
            return None;
        }
        Some((major, minor))
    }

    /// Whether every warp-group MMA must sit in the last stage. On sm90,
    /// Triton 3.6 fails to compile a wgmma below the last stage ("pipeliner
    /// doesn't know how to predicate this op"); 3.9 compiles it but wraps it
    /// in `scf.if` and leaves it synchronous, which loses the MMA overlap the
    /// schedule assumes. So the rule holds for every version we target.
    pub fn dots_in_last_stage(&self) -> bool {
        self.arch == Arch::Sm90
    }

    /// When twill writes warp partitions: the MMA ops around which the
    /// code generator's partitions are built, for
    /// [`crate::frontend::lower::colocation`] (sm100: Triton keeps its
    /// `ttg.partition` ids only when values cross partitions through MMAs
    /// and loads); `None` where no colocation is needed (sm90 writes only
    /// the producer/consumer split).
    pub fn partition_mma_ops(&self) -> Option<&'static [&'static str]> {
        (self.arch == Arch::Sm100).then_some(MMA_V5)
    }

    /// The op that makes the warps of one region wait for each other
    /// (`tl.debug_barrier`), with its inherent attributes: `gpu.barrier`
    /// before Triton 3.9, `ttg.barrier` (all address spaces) from 3.9.
    pub fn thread_barrier(&self) -> (&'static str, &'static [(&'static str, &'static str)]) {
        if self.version >= (3, 9) {
            ("ttg.barrier", &[("addrSpace", "31 : i32")])
        } else {
            ("gpu.barrier", &[])
        }
    }

    /// Op names subject to [`Self::dots_in_last_stage`].
    pub fn last_stage_ops(&self) -> &'static [&'static str] {
        if self.dots_in_last_stage() {
            &["ttng.warp_group_dot"]
        } else {
            &[]
        }
    }

    /// Whether the pipeline verifier models the warp-specialized code
    /// Triton builds from a marked loop: not on sm100, where Triton's MMA
    /// partition completes its tcgen05 MMAs through commit barriers and
    /// hands scores and accumulators through tensor memory
    /// (docs/pipeline-verifier.md).
    pub fn verifier_models_partitions(&self) -> bool {
        self.arch != Arch::Sm100
    }

    /// Whether Triton warp-specializes a loop marked `tt.warp_specialize`
    /// in a CTA of `num_warps` warps: on sm90 only at 4 warps (other loops
    /// are software-pipelined only).
    pub fn warp_specializes(&self, num_warps: u32) -> bool {
        self.arch != Arch::Sm90 || num_warps == 4
    }

    /// Whether Triton lowers several warp-specialized loops of one kernel
    /// only when it partitions them all itself, so that twill may write
    /// stages but not partitions there: where twill writes partitions
    /// ([`Self::partition_mma_ops`]) before Triton 3.7 ("'nvvm.setmaxregister'
    /// op new register size must be in between 24 to 256" otherwise,
    /// measured on the causal FA forward with 3.6).
    pub fn partitions_every_ws_loop_itself(&self) -> bool {
        self.partition_mma_ops().is_some() && self.version < (3, 7)
    }

    /// Warp groups of a warp-specialized schedule when the user names
    /// none: one producer and two consumers on Hopper; loads, MMA issue,
    /// two softmax groups and a correction group on Blackwell (FA4).
    pub fn default_groups(&self) -> u32 {
        match self.arch {
            Arch::Sm90 => 2,
            Arch::Sm100 => 4,
        }
    }
}

/// What the back end writes on one top-level body op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpDecision {
    pub stage: u32,
    pub cluster: u32,
    /// Partition ids: `ttg.partition` on sm100 (every op), `async_task_id`
    /// on sm90 (anchors only: loads, wgmma); empty writes nothing.
    pub partition: Vec<u32>,
    /// `tt.self_latency = 1`: Triton's LowerLoops makes an MMAv5 op
    /// asynchronous only when it carries this.
    pub self_latency: bool,
}

/// What the back end writes on one loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopDecision {
    pub ops: Vec<OpDecision>,
    /// `tt.scheduled_max_stage`.
    pub max_stage: u32,
    /// sm100: `ttg.partition.stages`, one entry per partition (empty: not
    /// warp-specialized).
    pub partition_stages: Vec<u32>,
    /// sm90: every store of the enclosing function gets `async_task_id`
    /// {1, 2} (Triton's Hopper WS needs all anchors or none).
    pub anchor_stores: bool,
    /// Graph nodes of the loads placed after their tcgen05 reader, one stage
    /// deeper than asked (sm100: see [`decide`]).
    pub moved_last: Vec<usize>,
}

impl LoopDecision {
    /// Number of warp partitions written (0 when not warp-specialized).
    pub fn partitions(&self) -> u32 {
        if !self.partition_stages.is_empty() {
            self.partition_stages.len() as u32
        } else if self.anchor_stores {
            3
        } else {
            0
        }
    }
}

/// Triton's names the back end keys on.
const MMA_V5: &[&str] = &["ttng.tc_gen5_mma", "ttng.tc_gen5_mma_scaled"];
const WGMMA: &str = "ttng.warp_group_dot";
const LOADS: &[&str] = &["tt.descriptor_load", "tt.load", "tt.descriptor_gather"];
/// Store ops that Hopper warp specialization anchors on consumers.
pub const STORES: &[&str] = &["tt.store", "tt.descriptor_store", "tt.descriptor_scatter"];

/// How the ops that are not prefetched loads are ordered within a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterOrder {
    /// One cluster: Triton emits them in program order. On the H100 this
    /// measured at or above the slot order on twill's own configurations
    /// (the sub-tiled FA forward: 0.82 -> 1.0 of Triton's own schedule;
    /// BENCHMARKS.md, 2026-11-23).
    Program,
    /// One cluster per slot of the modulo schedule (M(v) mod I): the body in
    /// the order the model issues it.
    Slot,
}

impl std::str::FromStr for ClusterOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "program" => Ok(ClusterOrder::Program),
            "slot" => Ok(ClusterOrder::Slot),
            _ => Err(format!("order: expected `program` or `slot`, got `{s}`")),
        }
    }
}

/// Where one kind of streaming load is issued and how far ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placement {
    /// At the end of the body (Triton's own structure) instead of its
    /// start: one iteration less lead at the same depth, one buffer fewer
    /// (Triton adds one when a load's use is in a later cluster).
    pub last: bool,
    /// Stages of prefetch on top of the depth that hides the load's modeled
    /// time (section 5.3's tunable).
    pub extra: u32,
}

/// Placements of the two kinds of streaming load Triton pipelines
/// differently: descriptor loads (`tt.descriptor_load`/`_gather`: one
/// thread issues a TMA copy that completes on an mbarrier) and pointer loads
/// (`tt.load`: every thread issues `cp.async` and waits on its commit
/// groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadPlacement {
    pub descriptor: Placement,
    pub pointer: Placement,
}

/// The op that Triton pipelines as a pointer load (`cp.async`).
pub const POINTER_LOAD: &str = "tt.load";

impl LoadPlacement {
    /// The same placement for both kinds.
    pub fn uniform(last: bool, extra: u32) -> LoadPlacement {
        let p = Placement { last, extra };
        LoadPlacement {
            descriptor: p,
            pointer: p,
        }
    }

    /// The placement of a load whose MLIR op is `op_name`.
    pub fn of(&self, op_name: &str) -> Placement {
        if op_name == POINTER_LOAD {
            self.pointer
        } else {
            self.descriptor
        }
    }

    /// The placement of graph node `v` of `lowered` (a lowering of `ir`):
    /// that of the MLIR op behind it.
    pub fn of_node(&self, ir: &LoopIr, lowered: &Lowered, v: usize) -> Placement {
        self.of(&ir.ops[lowered.op_of_node[v]].name)
    }

    /// Whether both kinds are placed alike.
    pub fn is_uniform(&self) -> bool {
        self.descriptor == self.pointer
    }

    /// Whether the streaming loads of a loop (the streaming nodes of
    /// `lowered`, a lowering of `ir`) include both kinds.
    pub fn mixes_kinds(ir: &LoopIr, lowered: &Lowered) -> bool {
        let kinds: Vec<bool> = (0..lowered.graph.ops.len())
            .filter(|&v| lowered.graph.ops[v].streaming)
            .map(|v| ir.ops[lowered.op_of_node[v]].name == POINTER_LOAD)
            .collect();
        kinds.contains(&true) && kinds.contains(&false)
    }

    /// The placement `loads=auto` gives the loops of a kernel in which some
    /// loop's streaming loads mix the two kinds ([`Self::mixes_kinds`]):
    /// every load last, one stage deeper than `self.descriptor` (Triton's
    /// own rotation: the same lead and buffers as loads first). Measured on
    /// the H100 (2026-11-24): the two
    /// placements compile to the same instructions per iteration, rotated;
    /// the rotation with the loads last ran 1.5-8% ahead on both loops that
    /// mix TMA and cp.async loads (the FA backward's dK/dV loop, a
    /// block-scaled GEMM), and the backward's other loop (TMA loads only)
    /// gained up to 1% more when rotated with it (Triton 3.9); kernels
    /// whose loops all have TMA loads only ran 0-5% behind with it.
    pub fn rotated(self) -> LoadPlacement {
        LoadPlacement::uniform(true, self.descriptor.extra + 1)
    }
}

/// Where an op goes in the body: 0 a prefetched load issued first, 1 the
/// other ops, 2 a prefetched load issued last.
fn load_rank(prefetched: bool, last: bool) -> u8 {
    match (prefetched, last) {
        (false, _) => 1,
        (true, false) => 0,
        (true, true) => 2,
    }
}

/// The emitted order of the graph nodes for [`ClusterOrder::Program`]:
/// prefetched loads first (or last), then program order, except where Triton's order
/// rule needs a producer earlier: an edge u -> v of distance d with
/// stage(u) = stage(v) + d puts u before v (the schedule never has
/// stage(u) > stage(v) + d). A topological sort of those constraints that
/// prefers (not prefetched, program index); None if they form a cycle.
fn program_order(lowered: &Lowered, stage: &[u32], rank: &[u8]) -> Option<Vec<usize>> {
    let nodes = lowered.graph.ops.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); nodes];
    let mut indeg = vec![0usize; nodes];
    for e in &lowered.graph.edges {
        let (u, v) = (e.from, e.to);
        if u != v && i64::from(stage[u]) - i64::from(stage[v]) == i64::from(e.distance) {
            succ[u].push(v);
            indeg[v] += 1;
        }
    }
    let key = |v: usize| (rank[v], lowered.op_of_node[v]);
    let mut ready: std::collections::BTreeSet<((u8, usize), usize)> = (0..nodes)
        .filter(|&v| indeg[v] == 0)
        .map(|v| (key(v), v))
        .collect();
    let mut out = Vec::with_capacity(nodes);
    while let Some(first) = ready.pop_first() {
        let u = first.1;
        out.push(u);
        for &v in &succ[u] {
            indeg[v] -= 1;
            if indeg[v] == 0 {
                ready.insert((key(v), v));
            }
        }
    }
    (out.len() == nodes).then_some(out)
}

/// Turns a solved schedule into per-op decisions.
///
/// `js.group[v]` is the solver's warp group of graph node v (0 = the
/// variable-latency/producer group); `ws` says whether to emit partitions;
/// `loads` says where each kind of streaming load is issued and how many
/// stages of prefetch it gets on top of the depth that hides its modeled
/// latency (section 5.3's tunable); `order` says how the other ops are
/// ordered within a stage.
///
/// The steps: the stage of every graph node ([`NodeStages::new`]), the
/// loads moved so that they do not refill a ring slot still being read
/// ([`NodeStages::keep_ring_slots`]), the clusters
/// ([`NodeStages::clusters`]), the warp partitions ([`Partitions`]), then
/// the decision of every graph node and of every folded op
/// ([`decide_folded`]).
#[allow(clippy::too_many_arguments)]
pub fn decide(
    ir: &LoopIr,
    lowered: &Lowered,
    js: &JointSchedule,
    streaming: &[Streaming],
    arch: Arch,
    ws: bool,
    order: ClusterOrder,
    loads: LoadPlacement,
) -> LoopDecision {
    let users = users_of(ir);
    let mut nodes = NodeStages::new(ir, lowered, &js.schedule, streaming, loads);
    let moved_last = nodes.keep_ring_slots(ir, lowered, &users, arch, ws, loads);
    let cluster = nodes.clusters(lowered, &js.schedule, order);
    let parts = Partitions::new(ir, lowered, &js.group, arch, ws);

    let mut out: Vec<Option<OpDecision>> = vec![None; ir.ops.len()];
    for v in 0..lowered.graph.ops.len() {
        let name = ir.ops[lowered.op_of_node[v]].name.as_str();
        out[lowered.op_of_node[v]] = Some(OpDecision {
            stage: nodes.stage[v],
            cluster: cluster[v],
            partition: parts.of_node(v, name),
            self_latency: self_latency(arch, name),
        });
    }
    for (i, decision) in out.iter_mut().enumerate() {
        if decision.is_none() {
            *decision = Some(decide_folded(
                ir,
                lowered,
                &users,
                &nodes.stage,
                &cluster,
                &parts,
                i,
            ));
        }
    }
    let mut ops: Vec<OpDecision> = out
        .into_iter()
        .map(|d| d.expect("every op decided"))
        .collect();
    folded_before_users(lowered, &users, &mut ops);
    let max_stage = ops.iter().map(|d| d.stage).max().unwrap_or(0);
    LoopDecision {
        ops,
        max_stage,
        partition_stages: parts.stages(),
        anchor_stores: parts.sm90(),
        moved_last,
    }
}

/// A folded op placed after one of its users (each anchors on its own
/// graph nodes: a compare that feeds an `scf.if` late in the iteration and
/// a select that feeds an MMA of the next iteration) moves to that user's
/// stage and cluster. Body order, users last, so that a chain of folded ops
/// moves as one.
fn folded_before_users(lowered: &Lowered, users: &[Vec<usize>], ops: &mut [OpDecision]) {
    for i in (0..ops.len()).rev() {
        if lowered.ops[i].node.is_some() {
            continue;
        }
        let earliest = users[i]
            .iter()
            .filter(|&&j| j > i)
            .map(|&j| (ops[j].stage, ops[j].cluster))
            .min();
        if let Some((stage, cluster)) = earliest {
            if (stage, cluster) < (ops[i].stage, ops[i].cluster) {
                ops[i].stage = stage;
                ops[i].cluster = cluster;
            }
        }
    }
}

/// Whether an op gets `tt.self_latency = 1`: the MMAs of sm100.
fn self_latency(arch: Arch, name: &str) -> bool {
    arch == Arch::Sm100 && MMA_V5.contains(&name)
}

/// The stage of every graph node of a loop, and where in the body each goes
/// (prefetched loads first or last).
struct NodeStages {
    /// floor(M(v) / I) of the solved schedule.
    raw: Vec<u32>,
    /// Stages a streaming load is issued ahead of its use (0: not
    /// prefetched).
    prefetch: Vec<u32>,
    /// Where the node goes in the body ([`load_rank`]).
    rank: Vec<u8>,
    /// The stage written: `raw`, every node P stages later (P the largest
    /// prefetch) less its own prefetch, so no stage is negative.
    stage: Vec<u32>,
}

impl NodeStages {
    /// The stages of the solved schedule `s`, each streaming load
    /// prefetched and placed as `loads` says.
    fn new(
        ir: &LoopIr,
        lowered: &Lowered,
        s: &Schedule,
        streaming: &[Streaming],
        loads: LoadPlacement,
    ) -> NodeStages {
        let ii = s.ii.max(1);
        let nodes = lowered.graph.ops.len();
        let placement = |v: usize| loads.of_node(ir, lowered, v);
        let prefetch: Vec<u32> = (0..nodes)
            .map(|v| {
                streaming
                    .iter()
                    .find(|x| x.op == lowered.graph.ops[v].name)
                    .map_or(0, |x| x.prefetch + placement(v).extra)
            })
            .collect();
        let rank: Vec<u8> = (0..nodes)
            .map(|v| load_rank(prefetch[v] > 0, placement(v).last))
            .collect();
        let raw: Vec<u32> = (0..nodes).map(|v| s.start[v] / ii).collect();
        let mut out = NodeStages {
            raw,
            prefetch,
            rank,
            stage: Vec::new(),
        };
        out.restage();
        out
    }

    /// Recomputes `stage` from `raw` and `prefetch`.
    fn restage(&mut self) {
        let shift = self.prefetch.iter().copied().max().unwrap_or(0);
        self.stage = (0..self.raw.len())
            .map(|v| self.raw[v] + shift - self.prefetch[v])
            .collect();
    }

    /// Places every load whose use is in a later stage so that its copy
    /// does not land in a ring slot an earlier iteration's reader has yet to
    /// read; returns the nodes moved after their tcgen05 reader.
    ///
    /// Such a load fills a ring of slots, which Triton sizes from the stage
    /// gap: one slot more when the use is in a later cluster (sm90), one
    /// more for an MMA operand (sm100: either). Issued before its reader in
    /// the body, in the same cluster, the copy lands in a slot an earlier
    /// iteration's reader has yet to read, or still reads: an MMA holds its
    /// operands until the wait after the next MMA ([`validate`]'s slot
    /// rule). So such a load goes first in a cluster of its own on sm90 (the
    /// later cluster adds the slot), and after its tcgen05 reader on sm100
    /// (where no slot is added), one stage deeper with the ops it needs of
    /// its own stage to keep the lead the schedule assumed, as `loads=auto`
    /// rotates them; a load placed last by `loads` (the driver's retry where
    /// that stage would exceed the user's `num_stages`) moves after its
    /// reader without it, as Triton's own schedule places its loads. (Where
    /// twill writes sm100 warp partitions, Triton's warp specialization
    /// builds the rings and their barriers itself.)
    fn keep_ring_slots(
        &mut self,
        ir: &LoopIr,
        lowered: &Lowered,
        users: &[Vec<usize>],
        arch: Arch,
        ws: bool,
        loads: LoadPlacement,
    ) -> Vec<usize> {
        let mut moved_last = Vec::new();
        for v in 0..self.stage.len() {
            let l = lowered.op_of_node[v];
            let later_use = lowered
                .graph
                .edges
                .iter()
                .any(|e| e.from == v && !e.order && self.stage[e.to] > self.stage[v]);
            if !LOADS.contains(&ir.ops[l].name.as_str()) || !later_use || self.rank[v] == 2 {
                continue;
            }
            let tcgen05 = mma_reading(ir, users, l)
                .is_some_and(|m| MMA_V5.contains(&ir.ops[m].name.as_str()));
            if arch == Arch::Sm100 && tcgen05 && !ws {
                self.rank[v] = 2;
                if !loads.of_node(ir, lowered, v).last {
                    self.deepen(lowered, v);
                }
                moved_last.push(v);
            } else if self.rank[v] == 1 {
                self.hoist(lowered, v);
            }
        }
        if !moved_last.is_empty() {
            self.restage();
        }
        moved_last
    }

    /// Issues load node `v` one stage earlier, together with what it needs
    /// of its own iteration in its own stage (a pointer load's mask and
    /// addresses, and theirs), so that no producer lands in a later stage
    /// than its user.
    fn deepen(&mut self, lowered: &Lowered, v: usize) {
        let stay = self.rank.iter().map(|&r| r == 2).collect::<Vec<_>>();
        for x in self.with_producers(lowered, v, false, |u| !stay[u]) {
            self.prefetch[x] += 1;
        }
    }

    /// Puts load node `v` first in the body, together with what it needs in
    /// its own stage (its producers of the same iteration and stage, and
    /// theirs).
    fn hoist(&mut self, lowered: &Lowered, v: usize) {
        self.rank[v] = 0;
        let body = self.rank.iter().map(|&r| r == 1).collect::<Vec<_>>();
        for x in self.with_producers(lowered, v, true, |u| body[u]) {
            self.rank[x] = 0;
        }
    }

    /// Node `v` and, transitively, its producers of the same iteration in
    /// the same stage that `may` admits (through data edges, and order
    /// edges too where `order` says so).
    fn with_producers(
        &self,
        lowered: &Lowered,
        v: usize,
        order: bool,
        may: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut seen = vec![false; self.raw.len()];
        seen[v] = true;
        let mut out = vec![v];
        let mut todo = vec![v];
        while let Some(x) = todo.pop() {
            for e in lowered
                .graph
                .edges
                .iter()
                .filter(|e| e.to == x && e.distance == 0 && (order || !e.order))
            {
                let u = e.from;
                if !seen[u] && self.stage[u] == self.stage[x] && may(u) {
                    seen[u] = true;
                    out.push(u);
                    todo.push(u);
                }
            }
        }
        out
    }

    /// The cluster of every node: in program order ([`program_order`],
    /// [`Self::program_clusters`]) when `order` asks for it and Triton's
    /// order rule allows it, else by slot ([`Self::slot_clusters`]).
    fn clusters(&self, lowered: &Lowered, s: &Schedule, order: ClusterOrder) -> Vec<u32> {
        let program = (order == ClusterOrder::Program)
            .then(|| program_order(lowered, &self.stage, &self.rank))
            .flatten();
        match program {
            Some(program) => self.program_clusters(lowered, &program),
            None => self.slot_clusters(lowered, s),
        }
    }

    /// Clusters that make Triton's (cluster, program) order reproduce the
    /// order `program`: a new cluster only where it leaves program order or
    /// switches between prefetched loads and the rest.
    fn program_clusters(&self, lowered: &Lowered, program: &[usize]) -> Vec<u32> {
        let mut cluster = vec![0u32; program.len()];
        let mut next = 0u32;
        let key = |v: usize| (self.rank[v], lowered.op_of_node[v]);
        for (k, &v) in program.iter().enumerate() {
            if k > 0 {
                let (a, b) = (key(program[k - 1]), key(v));
                if a.0 != b.0 || b.1 < a.1 {
                    next += 1;
                }
            }
            cluster[v] = next;
        }
        cluster
    }

    /// One cluster per slot of the kernel, in slot order: prefetched loads
    /// first (or last) in one cluster, the other ops by their slot in the
    /// period, M(v) mod I, then program order.
    ///
    /// Prefetched loads come first in the body, all in one cluster: issued
    /// at the start of the iteration that runs `prefetch` iterations ahead
    /// of their use, they get the prefetch * I cycles of lead time the
    /// solver assumed (Triton adds the buffer this costs), and Triton gives
    /// consecutive TMA loads of one (stage, cluster) a single barrier.
    /// Prefetched loads placed last serve a later iteration: a use in a
    /// later cluster than its load costs Triton one more buffer.
    fn slot_clusters(&self, lowered: &Lowered, s: &Schedule) -> Vec<u32> {
        let ii = s.ii.max(1);
        let nodes = self.stage.len();
        let slot_of = |v: usize| {
            let slot = if self.prefetch[v] > 0 {
                0
            } else {
                s.start[v] % ii
            };
            (self.rank[v], slot)
        };
        let mut order: Vec<usize> = (0..nodes).collect();
        order.sort_by_key(|&v| (slot_of(v), lowered.op_of_node[v]));
        let mut cluster = vec![0u32; nodes];
        let mut next = 0u32;
        let mut last_slot = None;
        for &v in &order {
            let slot = slot_of(v);
            if last_slot.is_some_and(|l| l != slot) {
                next += 1;
            }
            last_slot = Some(slot);
            cluster[v] = next;
        }
        cluster
    }
}

/// The warp partitions [`decide`] writes: the `async_task_id` anchors of
/// Triton's Hopper warp specialization on sm90, a `ttg.partition` per warp
/// group on sm100, none without warp specialization.
struct Partitions<'a> {
    lowered: &'a Lowered,
    /// The solver's warp group of every graph node.
    group: &'a [u32],
    arch: Arch,
    ws: bool,
    /// sm100: Triton's partition of every warp group
    /// ([`sm100_partitions`]); empty elsewhere.
    of_group: BTreeMap<u32, u32>,
}

impl<'a> Partitions<'a> {
    /// The partitions of a loop whose graph nodes the solver put in warp
    /// groups `group`; `ws` says whether to emit any.
    fn new(
        ir: &LoopIr,
        lowered: &'a Lowered,
        group: &'a [u32],
        arch: Arch,
        ws: bool,
    ) -> Partitions<'a> {
        let of_group = if ws && arch == Arch::Sm100 {
            sm100_partitions(ir, lowered, group)
        } else {
            BTreeMap::new()
        };
        Partitions {
            lowered,
            group,
            arch,
            ws,
            of_group,
        }
    }

    /// Whether the loop gets sm90 anchors (`async_task_id`).
    fn sm90(&self) -> bool {
        self.ws && self.arch == Arch::Sm90
    }

    /// Whether the loop gets sm100 partitions (`ttg.partition`).
    fn sm100(&self) -> bool {
        self.ws && self.arch == Arch::Sm100
    }

    /// The partitions of graph node `v`, whose op is named `name`: on sm90
    /// {0} for the producers (variable-latency ops, loads), {1, 2} for the
    /// wgmma and stores, nothing for the rest; on sm100 its group's.
    fn of_node(&self, v: usize, name: &str) -> Vec<u32> {
        if self.sm90() {
            if self.lowered.graph.ops[v].variable_latency || LOADS.contains(&name) {
                vec![0]
            } else if name == WGMMA || STORES.contains(&name) {
                vec![1, 2]
            } else {
                Vec::new()
            }
        } else if self.sm100() {
            vec![self.of_group[&self.group[v]]]
        } else {
            Vec::new()
        }
    }

    /// The partitions of folded op `i`, named `name`, anchored on graph
    /// node `v`. On sm90 only loads and stores are anchors. Elsewhere it
    /// runs where its anchor runs, and a local_alloc absorbed into its load
    /// where the load runs: the tile goes straight from the copy into shared
    /// memory, never through another partition's registers.
    fn of_folded(&self, ir: &LoopIr, i: usize, v: usize, name: &str) -> Vec<u32> {
        if self.sm90() {
            if LOADS.contains(&name) {
                vec![0]
            } else if STORES.contains(&name) {
                vec![1, 2]
            } else {
                Vec::new()
            }
        } else if let Some(load) = absorbed_load(ir, self.lowered, i) {
            self.of_node(load, name)
        } else {
            self.of_node(v, name)
        }
    }

    /// The partitions of a folded op with neither anchor nor producer: the
    /// default region on sm100.
    fn unanchored(&self) -> Vec<u32> {
        if self.sm100() {
            vec![0]
        } else {
            Vec::new()
        }
    }

    /// `ttg.partition.stages` (sm100): one entry per partition, Triton's 1
    /// for the MMA partition and 0 elsewhere; empty without sm100
    /// partitions.
    fn stages(&self) -> Vec<u32> {
        if !self.sm100() {
            return Vec::new();
        }
        let count = self.of_group.values().max().map_or(0, |m| m + 1) as usize;
        (0..count)
            .map(|k| u32::from(k == 1 && self.of_group.values().any(|&p| p == 1)))
            .collect()
    }
}

/// Triton's sm100 partition of every warp group: partition 0 is the default
/// region (the group of the first fixed-latency op outside the MMA's
/// group), the MMA's partition is 1 (one of Triton's fallbacks assumes it),
/// the other groups follow in order of first appearance in the body.
fn sm100_partitions(ir: &LoopIr, lowered: &Lowered, group: &[u32]) -> BTreeMap<u32, u32> {
    let mut partition_of_group: BTreeMap<u32, u32> = BTreeMap::new();
    let nodes = lowered.graph.ops.len();
    let is_mma = |v: usize| MMA_V5.contains(&ir.ops[lowered.op_of_node[v]].name.as_str());
    let mut by_order: Vec<usize> = (0..nodes).collect();
    by_order.sort_by_key(|&v| lowered.op_of_node[v]);
    let mma_group = by_order.iter().find(|&&v| is_mma(v)).map(|&v| group[v]);
    let first_other = by_order
        .iter()
        .find(|&&v| !lowered.graph.ops[v].variable_latency && Some(group[v]) != mma_group)
        .map(|&v| group[v]);
    if let Some(g) = first_other {
        partition_of_group.insert(g, 0);
    }
    if let Some(g) = mma_group {
        partition_of_group.insert(g, 1);
    }
    for &v in &by_order {
        let g = group[v];
        if !partition_of_group.contains_key(&g) {
            let next = partition_of_group.values().max().map_or(0, |m| m + 1);
            // Keep 1 for the MMA even when it is absent from this group list.
            let next = if mma_group.is_none() || next != 1 {
                next
            } else {
                2
            };
            partition_of_group.insert(g, next);
        }
    }
    partition_of_group
}

/// The decision of body op `i`, which the front end folded out of the graph
/// (a scalar, view or broadcast): the stage and cluster of the earliest of
/// its anchors ([`folded_anchors`]), else of its latest producer, and the
/// partitions that go with it ([`Partitions::of_folded`]).
fn decide_folded(
    ir: &LoopIr,
    lowered: &Lowered,
    users: &[Vec<usize>],
    stage: &[u32],
    cluster: &[u32],
    parts: &Partitions,
    i: usize,
) -> OpDecision {
    let at = |v: usize| (stage[v], cluster[v], v);
    let earliest_anchor = folded_anchors(ir, lowered, users, i)
        .iter()
        .filter_map(|&j| lowered.ops[j].node)
        .map(at)
        .min();
    let chosen = earliest_anchor.or_else(|| producer_nodes(ir, lowered, i).map(at).max());
    let name = ir.ops[i].name.as_str();
    let (stage, cluster, partition) = match chosen {
        Some((st, cl, v)) => (st, cl, parts.of_folded(ir, i, v, name)),
        None => (0, 0, parts.unanchored()),
    };
    OpDecision {
        stage,
        cluster,
        partition,
        self_latency: self_latency(parts.arch, name),
    }
}

/// The body ops a folded op `i` is anchored on: the graph-node ops that use
/// it (through other folded ops), else those that use the iteration argument
/// it feeds (directly or through folded ops).
fn folded_anchors(ir: &LoopIr, lowered: &Lowered, users: &[Vec<usize>], i: usize) -> Vec<usize> {
    let n = ir.ops.len();
    let mut anchors = Vec::new();
    forward_nodes(lowered, users, i, &mut vec![false; n], &mut anchors);
    if !anchors.is_empty() {
        return anchors;
    }
    for (k, y) in ir.yields.iter().enumerate() {
        if !matches!(y.src, ValueSrc::Op { op, .. } if op == i) {
            continue;
        }
        for (j, op) in ir.ops.iter().enumerate() {
            let uses_arg = op
                .operands
                .iter()
                .chain(op.region_uses.iter())
                .any(|v| v.src == ValueSrc::IterArg(k));
            if !uses_arg {
                continue;
            }
            if lowered.ops[j].node.is_some() {
                anchors.push(j);
            } else {
                forward_nodes(lowered, users, j, &mut vec![false; n], &mut anchors);
            }
        }
    }
    anchors
}

/// The graph nodes that produce an operand (or a value used in a region) of
/// body op `i`.
fn producer_nodes<'a>(
    ir: &'a LoopIr,
    lowered: &'a Lowered,
    i: usize,
) -> impl Iterator<Item = usize> + 'a {
    ir.ops[i]
        .operands
        .iter()
        .chain(ir.ops[i].region_uses.iter())
        .filter_map(move |v| match v.src {
            ValueSrc::Op { op, .. } => lowered.ops[op].node,
            _ => None,
        })
}

/// The graph node of the load whose tile the absorbed op `i` (a
/// local_alloc) stores; None for an op not absorbed.
fn absorbed_load(ir: &LoopIr, lowered: &Lowered, i: usize) -> Option<usize> {
    if lowered.ops[i].folded != Some("absorbed") {
        return None;
    }
    ir.ops[i].operands.iter().find_map(|v| match v.src {
        ValueSrc::Op { op, .. } => lowered.ops[op].node,
        _ => None,
    })
}

/// Ops through which a loaded tile reaches its reader in shared memory.
const SMEM_VIEWS: &[&str] = &[
    "ttg.local_alloc",
    "ttg.memdesc_trans",
    "ttg.memdesc_reshape",
    "ttg.memdesc_reinterpret",
];

/// The shared-memory ring Triton's pipeliner gives one load of the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    /// The load (body op index).
    pub load: usize,
    /// The op that reads the tile from the ring: the MMA that reads it
    /// straight from shared memory, else the load's first use.
    pub reader: usize,
    /// Stages between the load and its reader: the iterations a slot's tile
    /// waits to be read.
    pub gap: u32,
    /// Slots Triton allocates (LowerLoops): the gap to the first use (one
    /// more when that use is in a later cluster), one more for an operand of
    /// an MMA.
    pub slots: u32,
    /// The reader is an asynchronous MMA (an sm90 wgmma, an sm100 tcgen05
    /// MMA): it holds its slot until the wait after the next MMA.
    pub async_reader: bool,
}

/// The rings Triton allocates for the loads of a decided loop (loads whose
/// first use is in a later stage), from the decision alone: the back end's
/// buffer accounting, and what [`validate`]'s held-slot rule reads.
pub fn rings(ir: &LoopIr, d: &LoopDecision, arch: Arch) -> Vec<Ring> {
    let users = users_of(ir);
    let mut out = Vec::new();
    for (l, op) in ir.ops.iter().enumerate() {
        if !LOADS.contains(&op.name.as_str()) {
            continue;
        }
        // Uses as Triton's getDefUseStageDiff sees them: the load's users
        // and, through a local_alloc, the alloc's users; the first of them.
        let mut uses: Vec<usize> = users[l].clone();
        for &u in &users[l] {
            if ir.ops[u].name == "ttg.local_alloc" {
                uses.extend(users[u].iter().copied());
            }
        }
        let key = |u: usize| (d.ops[u].stage, d.ops[u].cluster, u);
        let Some(&first) = uses.iter().min_by_key(|&&u| key(u)) else {
            continue;
        };
        let (stage, cluster) = (d.ops[l].stage, d.ops[l].cluster);
        if d.ops[first].stage <= stage {
            continue; // not pipelined through shared memory
        }
        let gap = d.ops[first].stage - stage;
        let later = d.ops[first].cluster > cluster;
        let mma = mma_reading(ir, &users, l);
        // Measured on Triton 3.6.0 and 3.9.0 (third_party/triton/tests/
        // test_compile.py): on sm90 a use in a later cluster and a wgmma
        // operand add a slot each; on sm100 either adds one, and none when
        // the load comes after its tcgen05 use in the body.
        let extra = match (arch, mma.is_some()) {
            (Arch::Sm90, m) => u32::from(later) + u32::from(m),
            (Arch::Sm100, true) => u32::from(d.ops[first].cluster >= cluster),
            (Arch::Sm100, false) => u32::from(later),
        };
        let reader = mma.unwrap_or(first);
        out.push(Ring {
            load: l,
            reader,
            gap: d.ops[reader].stage.saturating_sub(stage),
            slots: gap + extra,
            async_reader: mma.is_some(),
        });
    }
    out
}

/// The MMA op (wgmma or tcgen05) that reads the tile of body op `l`
/// straight from shared memory, through a local_alloc and views.
fn mma_reading(ir: &LoopIr, users: &[Vec<usize>], l: usize) -> Option<usize> {
    let mut todo = vec![l];
    let mut seen = vec![false; ir.ops.len()];
    while let Some(i) = todo.pop() {
        for &u in &users[i] {
            if std::mem::replace(&mut seen[u], true) {
                continue;
            }
            let name = ir.ops[u].name.as_str();
            if name == WGMMA || MMA_V5.contains(&name) {
                return Some(u);
            } else if SMEM_VIEWS.contains(&name) {
                todo.push(u);
            }
        }
    }
    None
}

/// users[i]: body ops that use a result of body op i (operands or inside
/// their regions).
fn users_of(ir: &LoopIr) -> Vec<Vec<usize>> {
    let mut users = vec![Vec::new(); ir.ops.len()];
    for (j, op) in ir.ops.iter().enumerate() {
        for v in op.operands.iter().chain(op.region_uses.iter()) {
            if let ValueSrc::Op { op: i, .. } = v.src {
                if !users[i].contains(&j) {
                    users[i].push(j);
                }
            }
        }
    }
    users
}

/// Graph-node ops reachable from body op `i` along uses, through folded ops.
fn forward_nodes(
    lowered: &Lowered,
    users: &[Vec<usize>],
    i: usize,
    seen: &mut Vec<bool>,
    out: &mut Vec<usize>,
) {
    for &j in &users[i] {
        if seen[j] {
            continue;
        }
        seen[j] = true;
        if lowered.ops[j].node.is_some() {
            out.push(j);
        } else {
            forward_nodes(lowered, users, j, seen, out);
        }
    }
}

/// A broken rule of the attribute contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractViolation {
    /// `user` is emitted before the `producer` of one of its operands
    /// (Triton's "operation scheduled before its operands").
    OrderBroken { producer: usize, user: usize },
    /// A warp-group MMA is not in the last stage (Triton < 3.9 on sm90).
    NotLastStage {
        op: usize,
        stage: u32,
        max_stage: u32,
    },
    /// The decision does not cover every body op.
    Incomplete { expected: usize, got: usize },
    /// Load `load` refills its ring's slot before `reader` is done with it:
    /// it is issued before the reader in the body, and the ring's `slots`
    /// do not exceed the `gap` of stages between them (plus one for an
    /// asynchronous reader, a wgmma, which reads until the wait after the
    /// next wgmma retires it). The copy lands in the slot the reader of an
    /// earlier iteration has yet to read, or still reads.
    SlotOverwritten {
        load: usize,
        reader: usize,
        slots: u32,
        gap: u32,
    },
}

impl std::fmt::Display for ContractViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContractViolation::OrderBroken { producer, user } => write!(
                f,
                "body op #{user} is placed before body op #{producer} whose result it uses"
            ),
            ContractViolation::NotLastStage { op, stage, max_stage } => write!(
                f,
                "body op #{op} (a warp-group MMA) is in stage {stage}, not the last stage {max_stage}"
            ),
            ContractViolation::Incomplete { expected, got } => {
                write!(f, "{got} decisions for {expected} body ops")
            }
            ContractViolation::SlotOverwritten {
                load,
                reader,
                slots,
                gap,
            } => write!(
                f,
                "body op #{load} (a load {gap} stages ahead of its reader #{reader}) is issued before that reader in the body, into a ring of {slots} slots: it refills a slot the reader of an earlier iteration has not finished with"
            ),
        }
    }
}

/// Checks a decision against the loop: every op placed, every use inside an
/// iteration respects (stage, cluster, program) order, and the version rule.
pub fn validate(ir: &LoopIr, d: &LoopDecision, target: &TritonTarget) -> Vec<ContractViolation> {
    let mut out = Vec::new();
    if d.ops.len() != ir.ops.len() {
        out.push(ContractViolation::Incomplete {
            expected: ir.ops.len(),
            got: d.ops.len(),
        });
        return out;
    }
    // Triton's verifySchedule: with pos the index in (cluster, IR order) and
    // N the number of ops, cycle(op) = pos + stage * N must satisfy
    // cycle(user) >= cycle(producer) - N * distance for every operand.
    let n = ir.ops.len() as i64;
    let mut order: Vec<usize> = (0..ir.ops.len()).collect();
    order.sort_by_key(|&i| (d.ops[i].cluster, i));
    let mut pos = vec![0i64; ir.ops.len()];
    for (k, &i) in order.iter().enumerate() {
        pos[i] = k as i64;
    }
    let cycle = |i: usize| pos[i] + i64::from(d.ops[i].stage) * n;
    for (j, op) in ir.ops.iter().enumerate() {
        for v in op.operands.iter().chain(op.region_uses.iter()) {
            let (producer, distance) = match v.src {
                ValueSrc::Op { op: i, .. } => (i, 0),
                ValueSrc::IterArg(k) => match ir.yields.get(k).map(|y| y.src) {
                    Some(ValueSrc::Op { op: i, .. }) => (i, 1),
                    _ => continue,
                },
                _ => continue,
            };
            if cycle(j) < cycle(producer) - n * distance {
                out.push(ContractViolation::OrderBroken { producer, user: j });
            }
        }
    }
    // Triton's pipeliner builds these rings; in a loop twill partitions
    // (sm100), Triton's warp specialization builds its own, with barriers.
    let rings_of_pipeliner = if d.partition_stages.is_empty() {
        rings(ir, d, target.arch)
    } else {
        Vec::new()
    };
    for ring in rings_of_pipeliner {
        let held = u32::from(ring.async_reader);
        let before =
            (d.ops[ring.load].cluster, ring.load) < (d.ops[ring.reader].cluster, ring.reader);
        if before && ring.slots <= ring.gap + held {
            out.push(ContractViolation::SlotOverwritten {
                load: ring.load,
                reader: ring.reader,
                slots: ring.slots,
                gap: ring.gap,
            });
        }
    }
    let names = target.last_stage_ops();
    for (i, op) in ir.ops.iter().enumerate() {
        if names.contains(&op.name.as_str()) && d.ops[i].stage != d.max_stage {
            out.push(ContractViolation::NotLastStage {
                op: i,
                stage: d.ops[i].stage,
                max_stage: d.max_stage,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::WarpConfig;
    use crate::frontend::lower::{lower, tests::gemm};
    use crate::joint::{self, Encoding, JointOptions};
    use crate::machine::Machine;
    use crate::problem::{BuildOptions, Problem};

    const SM90_36: TritonTarget = TritonTarget {
        arch: Arch::Sm90,
        version: (3, 6),
    };

    /// The GEMM main loop of [`gemm`], solved and decided for `arch`.
    fn solved(
        arch: Arch,
        ws: bool,
        order: ClusterOrder,
        loads_last: bool,
    ) -> (LoopIr, LoopDecision) {
        let loads = LoadPlacement::uniform(loads_last, 0);
        solved_loop(gemm(), arch, ws, order, loads)
    }

    /// `ir` solved (two compute groups) and decided for `arch` on its
    /// bundled machine, Triton 3.6.
    fn solved_loop(
        ir: LoopIr,
        arch: Arch,
        ws: bool,
        order: ClusterOrder,
        loads: LoadPlacement,
    ) -> (LoopIr, LoopDecision) {
        let (l, r) = lowered_and_solved(&ir, arch);
        let d = decide(&ir, &l, &r.schedule, &r.streaming, arch, ws, order, loads);
        (ir, d)
    }

    /// The loop lowered for `arch`'s default machine and solved jointly.
    fn lowered_and_solved(ir: &LoopIr, arch: Arch) -> (Lowered, joint::JointResult) {
        let m = Machine::select(arch.default_machine()).unwrap();
        let target = TritonTarget {
            arch,
            version: (3, 6),
        };
        let l = lower(ir, &m, target.last_stage_ops()).unwrap();
        let (p, _) = Problem::build(
            &l.graph,
            &m,
            BuildOptions {
                u: 30,
                time_limit: 10.0,
            },
        )
        .unwrap();
        let warps = WarpConfig {
            groups: 2,
            reg_limit: 255,
            cross_warp: true,
        };
        let r = joint::solve(
            &p,
            JointOptions {
                encoding: Encoding::Default,
                warps,
                timeout: 20.0,
                seed: 0,
                threads: 1,
                objective: Default::default(),
                stage_bound: None,
                budget: 0,
                refine_groups: true,
            },
        )
        .unwrap();
        (l, r)
    }

    #[test]
    fn gemm_decision_matches_the_triton_contract() {
        let (ir, d) = solved(Arch::Sm90, true, ClusterOrder::Slot, false);
        assert!(validate(&ir, &d, &SM90_36).is_empty());
        // Loads (and their folded address computation) one stage ahead of
        // the wgmma, which is in the last stage, after it in the body (the
        // loop is bound by shared-memory bandwidth: an iteration covers
        // most of a load's latency).
        let st: Vec<u32> = d.ops.iter().map(|o| o.stage).collect();
        assert_eq!(st, [0, 0, 1, 0, 1, 1, 1]);
        assert_eq!(d.max_stage, 1);
        assert!(d.ops[1].cluster < d.ops[6].cluster && d.ops[1].cluster == d.ops[3].cluster);
        assert_eq!(d.ops[0].cluster, d.ops[1].cluster);
        // Hopper anchors.
        assert_eq!(d.ops[1].partition, [0]);
        assert_eq!(d.ops[3].partition, [0]);
        assert_eq!(d.ops[6].partition, [1, 2]);
        assert!(d.ops[2].partition.is_empty());
        assert!(d.anchor_stores && d.partition_stages.is_empty());
    }

    #[test]
    fn program_order_puts_the_rest_of_a_stage_in_one_cluster() {
        let (ir, d) = solved(Arch::Sm90, true, ClusterOrder::Program, false);
        assert!(validate(&ir, &d, &SM90_36).is_empty());
        // The same stages as with the slot order; the loads (and their
        // folded address computation) first, everything else after them in
        // one cluster, hence in program order.
        let st: Vec<u32> = d.ops.iter().map(|o| o.stage).collect();
        assert_eq!(st, [0, 0, 1, 0, 1, 1, 1]);
        let cl: Vec<u32> = d.ops.iter().map(|o| o.cluster).collect();
        assert_eq!(cl, [0, 0, 1, 0, 1, 1, 1]);
        assert_eq!("program".parse::<ClusterOrder>(), Ok(ClusterOrder::Program));
        assert!("issue".parse::<ClusterOrder>().is_err());
    }

    #[test]
    fn loads_last_puts_the_prefetched_loads_in_the_last_cluster() {
        let (ir, d) = solved(Arch::Sm90, true, ClusterOrder::Program, true);
        assert!(validate(&ir, &d, &SM90_36).is_empty());
        // Same stages; the loads (ops 1 and 3, with their folded address
        // computation, op 0) now after the wgmma's cluster.
        let st: Vec<u32> = d.ops.iter().map(|o| o.stage).collect();
        assert_eq!(st, [0, 0, 1, 0, 1, 1, 1]);
        assert!(d.ops[1].cluster > d.ops[6].cluster && d.ops[1].cluster == d.ops[3].cluster);
    }

    #[test]
    fn pointer_loads_can_be_placed_apart_from_descriptor_loads() {
        // B through a pointer load (`tt.load`, cp.async), A through a
        // descriptor: the pointer load last in the body with one more
        // stage of prefetch, the descriptor load first at its modeled depth.
        let mut ir = gemm();
        ir.ops[3].name = POINTER_LOAD.into();
        let loads = LoadPlacement {
            descriptor: Placement::default(),
            pointer: Placement {
                last: true,
                extra: 1,
            },
        };
        let (ir, d) = solved_loop(ir, Arch::Sm90, false, ClusterOrder::Program, loads);
        assert!(validate(&ir, &d, &SM90_36).is_empty());
        assert!(d.ops[1].cluster < d.ops[6].cluster && d.ops[3].cluster > d.ops[6].cluster);
        assert_eq!(d.ops[3].stage + 1, d.ops[1].stage);
        assert_eq!(d.max_stage, 2);
        // The same placement for both kinds is the uniform one.
        let (_, u) = solved_loop(
            gemm(),
            Arch::Sm90,
            false,
            ClusterOrder::Program,
            LoadPlacement::uniform(false, 0),
        );
        assert_eq!(u.ops[1].stage, u.ops[3].stage);
        assert!(LoadPlacement::uniform(true, 1).is_uniform() && !loads.is_uniform());
    }

    #[test]
    fn auto_loads_rotate_every_load_one_stage_deeper() {
        // TMA loads only: the loop does not mix the kinds.
        let (l, r) = lowered_and_solved(&gemm(), Arch::Sm90);
        assert!(!r.streaming.is_empty());
        assert!(!LoadPlacement::mixes_kinds(&gemm(), &l));
        // B through a pointer load: it does.
        let mut ir = gemm();
        ir.ops[3].name = POINTER_LOAD.into();
        let (l, r) = lowered_and_solved(&ir, Arch::Sm90);
        assert!(LoadPlacement::mixes_kinds(&ir, &l));
        // Every load last, one stage deeper than the descriptor loads'
        // given extra.
        let given = LoadPlacement::uniform(false, 1);
        assert_eq!(given.rotated(), LoadPlacement::uniform(true, 2));
        // Issued at the end of the body with the same lead as loads first:
        // one stage more than at the modeled depth, after the wgmma.
        let rotated = LoadPlacement::default().rotated();
        let decide_with = |loads| {
            decide(
                &ir,
                &l,
                &r.schedule,
                &r.streaming,
                Arch::Sm90,
                false,
                ClusterOrder::Program,
                loads,
            )
        };
        let (d, first) = (decide_with(rotated), decide_with(LoadPlacement::default()));
        assert!(validate(&ir, &d, &SM90_36).is_empty());
        assert!(d.ops[1].cluster > d.ops[6].cluster && d.ops[3].cluster > d.ops[6].cluster);
        assert_eq!(d.max_stage, first.max_stage + 1);
        // Each load one stage further from its wgmma than loads first.
        for load in [1, 3] {
            assert_eq!(
                d.ops[6].stage - d.ops[load].stage,
                first.ops[6].stage - first.ops[load].stage + 1
            );
        }
    }

    #[test]
    fn blackwell_partitions_cover_every_op_with_the_mma_in_one() {
        let mut ir = gemm();
        ir.ops[6].name = "ttng.tc_gen5_mma".into();
        let (_, d) = solved_loop(
            ir,
            Arch::Sm100,
            true,
            ClusterOrder::Slot,
            LoadPlacement::default(),
        );
        assert!(d.ops.iter().all(|o| o.partition.len() == 1));
        assert_eq!(d.ops[6].partition, [1]);
        assert!(d.ops[6].self_latency);
        assert_eq!(d.ops[1].partition, d.ops[3].partition);
        assert_ne!(d.ops[1].partition, [1]);
        // The local_allocs absorbed into the loads run in the loads'
        // partition: the tiles never pass through the MMA partition's
        // registers.
        assert_eq!(d.ops[2].partition, d.ops[1].partition);
        assert_eq!(d.ops[4].partition, d.ops[3].partition);
        // The transpose view follows its user, the MMA.
        assert_eq!(d.ops[5].partition, [1]);
        assert_eq!(d.partition_stages.len(), 3);
        assert_eq!(d.partition_stages[1], 1);
    }

    #[test]
    fn validate_names_broken_rules() {
        let (ir, mut d) = solved(Arch::Sm90, false, ClusterOrder::Slot, false);
        let target = TritonTarget {
            arch: Arch::Sm90,
            version: (3, 9),
        };
        assert!(validate(&ir, &d, &target).is_empty());
        // The wgmma before its shared-memory operand in the same iteration.
        assert_eq!((d.ops[2].stage, d.ops[6].stage, d.max_stage), (1, 1, 1));
        d.ops[6].stage = 0;
        let v = validate(&ir, &d, &target);
        assert!(
            v.contains(&ContractViolation::OrderBroken {
                producer: 2,
                user: 6
            }),
            "{v:?}"
        );
        assert!(
            v.contains(&ContractViolation::NotLastStage {
                op: 6,
                stage: 0,
                max_stage: 1
            }),
            "{v:?}"
        );
        d.ops.pop();
        assert_eq!(
            validate(&ir, &d, &target),
            [ContractViolation::Incomplete {
                expected: 7,
                got: 6
            }]
        );
    }

    #[test]
    fn a_load_in_its_readers_cluster_refills_a_slot_the_wgmma_holds() {
        let (ir, mut d) = solved(Arch::Sm90, false, ClusterOrder::Slot, false);
        let target = TritonTarget {
            arch: Arch::Sm90,
            version: (3, 6),
        };
        assert!(validate(&ir, &d, &target).is_empty());
        // Both loads (ops 1 and 3) feed the wgmma (op 6) a stage later, from
        // an earlier cluster: rings of the gap + 2 slots (the later cluster,
        // the wgmma operand).
        let rs = rings(&ir, &d, Arch::Sm90);
        assert_eq!(
            rs.iter().map(|r| (r.load, r.reader)).collect::<Vec<_>>(),
            [(1, 6), (3, 6)]
        );
        assert!(
            rs.iter()
                .all(|r| r.async_reader && r.gap == 1 && r.slots == 3),
            "{rs:?}"
        );
        // One cluster for the whole body: the copies come before the wgmma
        // and its wait, into rings of gap + 1 slots, the slot the previous
        // iteration's wgmma still reads.
        for o in &mut d.ops {
            o.cluster = 0;
        }
        let v = validate(&ir, &d, &target);
        for load in [1, 3] {
            let broken = ContractViolation::SlotOverwritten {
                load,
                reader: 6,
                slots: 2,
                gap: 1,
            };
            assert!(v.contains(&broken), "{v:?}");
        }
        // On sm100 the tcgen05 operand's slot is there either way, and a
        // tcgen05 MMA, too, holds it until the wait after the next MMA.
        let sm100 = TritonTarget {
            arch: Arch::Sm100,
            version: (3, 6),
        };
        assert!(rings(&ir, &d, Arch::Sm100).iter().all(|r| r.slots == 2));
        assert!(validate(&ir, &d, &sm100)
            .iter()
            .any(|x| matches!(x, ContractViolation::SlotOverwritten { load: 1, .. })));
    }

    #[test]
    fn triton_version_rules_follow_arch_and_version() {
        let target = |arch, version| TritonTarget { arch, version };
        assert!(target(Arch::Sm90, (3, 9)).warp_specializes(4));
        assert!(!target(Arch::Sm90, (3, 9)).warp_specializes(8));
        assert!(target(Arch::Sm100, (3, 6)).warp_specializes(8));
        assert!(target(Arch::Sm100, (3, 6)).partitions_every_ws_loop_itself());
        assert!(!target(Arch::Sm100, (3, 9)).partitions_every_ws_loop_itself());
        assert!(!target(Arch::Sm90, (3, 6)).partitions_every_ws_loop_itself());
        assert_eq!(target(Arch::Sm90, (3, 6)).default_groups(), 2);
        assert_eq!(target(Arch::Sm100, (3, 6)).default_groups(), 4);
    }

    #[test]
    fn versions_parse() {
        assert_eq!(TritonTarget::parse_version("3.6"), Some((3, 6)));
        assert_eq!(TritonTarget::parse_version("3.9.1"), Some((3, 9)));
        assert_eq!(TritonTarget::parse_version("three"), None);
        assert_eq!(TritonTarget::parse_version("3.x"), None);
    }
}
