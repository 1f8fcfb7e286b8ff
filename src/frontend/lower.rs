//! Lowering a [`LoopIr`] to a dependence graph with the machine's op rules.
//!
//! * Every top-level body op is classified by the first matching op rule of
//!   the machine. Ops without any tile operand or result (scalar address
//!   arithmetic) and ops whose rule is `free` (views, broadcasts, constants)
//!   cost nothing and are *folded*: dependences run through them, and the
//!   back end places them next to their users.
//! * Data edges come from SSA use-def inside the body (operands and values
//!   used inside nested regions); loop-carried edges (delta = 1) from the
//!   `scf.yield` operand that feeds an iteration argument. A use of an async
//!   token (`!ttg.async.token`, chained by sm_100 tensor-memory ops) only
//!   orders the ops: ordering-only edge.
//! * Memory-ordering edges connect ops touching the same buffer (memdesc
//!   values traced through views to their root) when one of them writes:
//!   program order inside an iteration (delta = 0) and the reverse across
//!   iterations (delta = 1). An edge leaving a pure reader (write after
//!   read) is ordering-only (`order`): it keeps no value live (a data edge
//!   between the same ops stays a data edge).
//! * Ops whose rule says `ordered` (mbarrier waits, arrives and expects,
//!   asynchronous copies: synchronization through memory that no SSA value
//!   shows) keep their program order: ordering-only edges of delay 0 from
//!   each to the next, and of delay 1 from the last to the first across
//!   iterations; an op with a buffer (memdesc) operand between two of them
//!   starts after the one before and completes before the one after (a slot
//!   is released only once read), around the iteration likewise.
//! * Edges leaving an op whose rule says `blocking` are blocking; a
//!   variable-latency op with no incoming edge is streaming (section 5.3).
//! * An `scf.if` is one node (Triton's pipeliner stages it as one op): its
//!   reservation table is the ops of its costlier branch in sequence, each
//!   priced by its rule as a body op would be (worst case: the branch is
//!   taken in every iteration); its dependences are those of every value its
//!   regions use, and its registers those of its results. A body whose `if`
//!   holds a loop or a synchronizing op (an mbarrier, an asynchronous copy)
//!   is refused.
//! * Registers: a register tile result costs elements x bytes / 4 per thread
//!   of the CTA's `num_warps` warps; its cross-warp spill cost is a store
//!   and a load of the tile through shared memory (the `smem_copy` class).

use std::collections::{BTreeMap, BTreeSet};

use petgraph::unionfind::UnionFind;

use super::{element_bytes, parse_tile, IrOp, LoopIr, Tile, ValueSrc};
use crate::graph::{Edge, Graph, Op, SameGroup, Segment, Timing};
use crate::machine::{DtypeFrom, Machine, OpRule, ShapeFrom, TrafficFrom};
use crate::problem::{busy_cycles, priced_segments};

/// Why a loop cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Location of the offending op (or the loop).
    pub location: String,
    pub reason: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reason)
    }
}

/// Cycles of straight-line code (no loop: `ir` holds the ops between a
/// function's loops, see [`super::Straight`]) on its critical path: every op
/// takes its unit occupancy plus latency, and starts when the ops it uses
/// have completed (edges of iteration distance 0; an edge's own delay where
/// it has one); and no less than any unit's total occupancy (ops on one unit
/// queue).
pub fn straight_line_cycles(ir: &LoopIr, machine: &Machine) -> Result<u64, Unsupported> {
    let lowered = lower(ir, machine, &[])?;
    let g = &lowered.graph;
    let mut segments = Vec::with_capacity(g.ops.len());
    for op in &g.ops {
        segments.push(
            priced_segments(&op.timing, machine).map_err(|reason| Unsupported {
                location: op.origin.clone(),
                reason,
            })?,
        );
    }
    let duration: Vec<u64> = segments
        .iter()
        .map(|segs| segs.iter().map(|s| s.len).sum())
        .collect();
    // Nodes come in program order and distance-0 edges point forward.
    let mut start = vec![0u64; g.ops.len()];
    let mut edges: Vec<&Edge> = g
        .edges
        .iter()
        .filter(|e| e.distance == 0 && e.from < e.to)
        .collect();
    edges.sort_by_key(|e| e.to);
    for e in edges {
        let ready = start[e.from] + e.delay.unwrap_or(duration[e.from]);
        start[e.to] = start[e.to].max(ready);
    }
    let path = start
        .iter()
        .zip(&duration)
        .map(|(s, d)| s + d)
        .max()
        .unwrap_or(0);
    // Ops on one unit queue: no shorter than any unit's total occupancy.
    Ok(busy_cycles(segments.iter().flatten())
        .into_values()
        .fold(path, u64::max))
}

/// The cost class that prices moving a register tile between warp groups
/// (a shared-memory store plus a load): the cross-warp spill cost.
const SPILL_CLASS: &str = "smem_copy";

/// Ops whose presence in the body makes the loop unpipelinable here: nested
/// control flow.
pub(crate) const CONTROL_FLOW: &[&str] = &[
    "scf.for",
    "scf.while",
    "scf.if",
    "scf.execute_region",
    "scf.index_switch",
    "scf.parallel",
    "cf.br",
    "cf.cond_br",
    "cf.switch",
];

/// The op that becomes one node of the graph with its regions: an `scf.if`.
pub(crate) const CONDITIONAL: &str = "scf.if";

/// How one body op was classified.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    /// Index of the op's node in the graph; `None` for folded ops.
    pub node: Option<usize>,
    /// The rule that matched (`None` for scalar ops).
    pub rule: Option<usize>,
    /// Why it was folded, for folded ops.
    pub folded: Option<&'static str>,
}

/// The graph of a loop and how its ops map onto graph nodes.
#[derive(Debug, Clone)]
pub struct Lowered {
    pub graph: Graph,
    /// One entry per body op of the [`LoopIr`].
    pub ops: Vec<Classified>,
    /// Body op of each graph node.
    pub op_of_node: Vec<usize>,
    /// Notes for the user (fallback pricing and the like).
    pub notes: Vec<String>,
}

fn short_name(name: &str) -> &str {
    name.split_once('.').map_or(name, |(_, n)| n)
}

/// Lowers `ir` on `machine`.
///
/// Ops named in `last_stage_ops` must be scheduled in the last stage (a
/// Triton-version rule, see [`crate::backend::TritonTarget`]).
pub fn lower(
    ir: &LoopIr,
    machine: &Machine,
    last_stage_ops: &[&str],
) -> Result<Lowered, Unsupported> {
    check_lowerable(ir, machine)?;
    let rules = op_rules(ir, machine)?;
    let mut notes = Vec::new();
    let Nodes {
        classified,
        mut ops,
        op_of_node,
        writers,
    } = classify(ir, machine, &rules, last_stage_ops, &mut notes);
    let mut edges = EdgeMap::new();
    data_edges(ir, &rules, &classified, &mut edges);
    memory_edges(ir, &rules, &classified, &writers, &mut edges);
    let order_chain = sync_order(ir, &rules, &classified);
    let graph_edges = graph_edges(ir, &op_of_node, &edges, order_chain);
    for (v, op) in ops.iter_mut().enumerate() {
        if op.variable_latency && !graph_edges.iter().any(|e| e.to == v) {
            op.streaming = true;
        }
    }
    Ok(Lowered {
        graph: Graph {
            name: ir.name.clone(),
            description: format!(
                "loop at {}, extracted by twill's MLIR front end",
                ir.location
            ),
            ops,
            edges: graph_edges,
            same_group: Vec::new(),
        },
        ops: classified,
        op_of_node,
        notes,
    })
}

/// Refuses a machine without op rules and a body with control flow.
fn check_lowerable(ir: &LoopIr, machine: &Machine) -> Result<(), Unsupported> {
    if machine.ops.is_empty() {
        return Err(Unsupported {
            location: ir.location.clone(),
            reason: format!(
                "machine `{}` has no TTGIR op rules for its arch `{}`, so MLIR ops cannot be priced",
                machine.name, machine.arch
            ),
        });
    }
    for op in &ir.ops {
        // An `scf.if` (holding no other control flow) is a node of its own.
        let conditional = op.name == CONDITIONAL;
        if let Some(cf) = std::iter::once(&op.name)
            .chain(op.nested.iter())
            .filter(|n| !(conditional && n.as_str() == CONDITIONAL))
            .find(|n| CONTROL_FLOW.contains(&n.as_str()))
        {
            return Err(Unsupported {
                location: op.location.clone(),
                reason: format!("control flow inside the loop body (`{cf}`)"),
            });
        }
    }
    Ok(())
}

/// The rule of every op that touches a tile (scalars need none); a tile op
/// without a rule is unsupported.
fn op_rules<'m>(ir: &LoopIr, machine: &'m Machine) -> Result<Vec<Option<&'m OpRule>>, Unsupported> {
    let mut rules: Vec<Option<&OpRule>> = Vec::with_capacity(ir.ops.len());
    for op in &ir.ops {
        if op.name == CONDITIONAL {
            check_branches(op, machine)?;
            rules.push(None);
            continue;
        }
        if !is_tiled(op) {
            rules.push(None);
            continue;
        }
        rules.push(Some(rule_of(op, machine, "")?));
    }
    Ok(rules)
}

/// The machine's rule for tile op `op`; a tile op without one is
/// unsupported (`context` is added to the reason).
fn rule_of<'m>(op: &IrOp, machine: &'m Machine, context: &str) -> Result<&'m OpRule, Unsupported> {
    machine.op_rule(&op.name).ok_or_else(|| Unsupported {
        location: op.location.clone(),
        reason: format!(
            "machine `{}` has no op rule matching `{}`{context}",
            machine.name, op.name
        ),
    })
}

/// Whether `op` has a tile operand or result (ops without one are scalar).
fn is_tiled(op: &IrOp) -> bool {
    op.results
        .iter()
        .chain(op.operands.iter().map(|v| &v.ty))
        .any(|t| parse_tile(t).is_some())
}

/// Every tile op in the branches of `if_op` has a rule, and none is a
/// synchronizing side effect (its program order against the body's others
/// could not be kept from outside the `if`).
fn check_branches(if_op: &IrOp, machine: &Machine) -> Result<(), Unsupported> {
    for op in if_op.branches.iter().flatten().filter(|o| is_tiled(o)) {
        let rule = rule_of(op, machine, " (under `scf.if`)")?;
        if rule.ordered {
            return Err(Unsupported {
                location: op.location.clone(),
                reason: format!("a synchronizing op (`{}`) under `scf.if`", op.name),
            });
        }
    }
    Ok(())
}

/// The classification of the body ops: graph nodes and folded ops.
struct Nodes {
    classified: Vec<Classified>,
    ops: Vec<Op>,
    op_of_node: Vec<usize>,
    /// Body ops (`scf.if`s) that write the buffers they use, by their
    /// regions' ops' rules.
    writers: BTreeSet<usize>,
}

impl Nodes {
    /// Body op `i` (matched by machine rule `rule`) becomes graph node `op`.
    fn push_node(&mut self, i: usize, rule: Option<usize>, op: Op) {
        self.classified.push(Classified {
            node: Some(self.ops.len()),
            rule,
            folded: None,
        });
        self.op_of_node.push(i);
        self.ops.push(op);
    }
}

/// Classifies every body op: a graph node priced by its rule, or folded
/// (scalar, free, absorbed into the load it stores, nothing to price).
fn classify(
    ir: &LoopIr,
    machine: &Machine,
    rules: &[Option<&OpRule>],
    last_stage_ops: &[&str],
    notes: &mut Vec<String>,
) -> Nodes {
    let threads = u64::from(ir.num_warps.max(1)) * 32;
    let is_var = |i: usize| rules[i].is_some_and(|r| r.variable_latency && r.class.is_some());
    let mut nodes = Nodes {
        classified: Vec::with_capacity(ir.ops.len()),
        ops: Vec::new(),
        op_of_node: Vec::new(),
        writers: BTreeSet::new(),
    };
    let mut absorbed_into: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, op) in ir.ops.iter().enumerate() {
        let rule_index = rules[i].and_then(|r| machine.ops.iter().position(|x| std::ptr::eq(x, r)));
        let folded = |why: &'static str, rule: Option<usize>| Classified {
            node: None,
            rule,
            folded: Some(why),
        };
        if op.name == CONDITIONAL {
            let Some(c) = price_if(op, i, machine, threads, last_stage_ops, notes) else {
                nodes.classified.push(folded("no tile work", None));
                continue;
            };
            if c.writes {
                nodes.writers.insert(i);
            }
            nodes.push_node(i, None, c.op);
            continue;
        }
        let Some(rule) = rules[i] else {
            nodes.classified.push(folded("scalar", None));
            continue;
        };
        let Some(class) = &rule.class else {
            nodes.classified.push(folded("free", rule_index));
            continue;
        };
        if rule.absorbs_load {
            if let Some((_, ValueSrc::Op { op: p, .. })) = first_tile_operand(op) {
                if is_var(p) {
                    absorbed_into.entry(p).or_default().push(i);
                    nodes.classified.push(folded("absorbed", rule_index));
                    continue;
                }
            }
        }
        let Some(mut node) = price_op(op, i, rule, class, machine, threads, notes) else {
            // An allocation without a source and the like: no work to price.
            nodes
                .classified
                .push(folded("no tile to price", rule_index));
            continue;
        };
        node.last_stage = last_stage_ops.contains(&op.name.as_str());
        nodes.push_node(i, rule_index, node);
    }
    absorb_loads(ir, &absorbed_into, &mut nodes);
    nodes
}

/// An `scf.if` priced as one node.
struct PricedIf {
    op: Op,
    /// An op of its regions writes the buffers it uses.
    writes: bool,
}

/// The node of `scf.if` body op `i`: the ops of its costlier branch in
/// sequence (each priced by its rule; free and scalar ops cost nothing),
/// issued by a warp group or pinned to the last stage when an op of any
/// branch is; `None` when no branch does tile work.
fn price_if(
    op: &IrOp,
    i: usize,
    machine: &Machine,
    threads: u64,
    last_stage_ops: &[&str],
    notes: &mut Vec<String>,
) -> Option<PricedIf> {
    let mut worst: Option<(u64, Vec<Segment>)> = None;
    let (mut warp_group, mut last_stage, mut writes) = (false, false, false);
    let mut traffic: BTreeMap<String, u64> = BTreeMap::new();
    for branch in &op.branches {
        let mut segments: Vec<Segment> = Vec::new();
        let mut moved: BTreeMap<String, u64> = BTreeMap::new();
        for b in branch.iter().filter(|o| is_tiled(o)) {
            let Some(rule) = machine.op_rule(&b.name) else {
                continue;
            };
            writes |= rule.writes;
            let Some(class) = &rule.class else {
                continue;
            };
            let Some(node) = price_op(b, i, rule, class, machine, threads, notes) else {
                continue;
            };
            warp_group |= rule.warp_group;
            last_stage |= last_stage_ops.contains(&b.name.as_str());
            for (unit, bytes) in node.traffic {
                *moved.entry(unit).or_insert(0) += bytes;
            }
            match priced_segments(&node.timing, machine) {
                Ok(segs) => segs.into_iter().for_each(|s| s.append_to(&mut segments)),
                Err(e) => notes.push(format!("`{}` ({}): {e}", b.name, b.location)),
            }
        }
        for (unit, bytes) in moved {
            let t = traffic.entry(unit).or_insert(0);
            *t = (*t).max(bytes);
        }
        let cycles: u64 = segments.iter().map(|s| s.len).sum();
        if worst.as_ref().is_none_or(|(c, _)| cycles > *c) {
            worst = Some((cycles, segments));
        }
    }
    let (cycles, segments) = worst?;
    if cycles == 0 {
        return None;
    }
    let held = held_results(op, None, machine, threads);
    Some(PricedIf {
        op: Op {
            name: format!("if_{i}"),
            timing: Timing::Table(segments),
            regs: held.regs.min(u64::from(u32::MAX)) as u32,
            memory: held.memory,
            variable_latency: false,
            streaming: false,
            warp_group,
            last_stage,
            spill_cost: held.spill_cost,
            traffic,
            cross_bytes: held.cross_bytes,
            conditional: true,
            origin: op.location.clone(),
        },
        writes,
    })
}

/// The first tile operand of `op` and where it comes from.
fn first_tile_operand(op: &IrOp) -> Option<(Tile, ValueSrc)> {
    op.operands
        .iter()
        .find_map(|v| parse_tile(&v.ty).map(|t| (t, v.src)))
}

/// The graph node of body op `i` priced by `rule` (cost class `class`);
/// `None` when the op has no tile to price.
fn price_op(
    op: &IrOp,
    i: usize,
    rule: &OpRule,
    class: &str,
    machine: &Machine,
    threads: u64,
    notes: &mut Vec<String>,
) -> Option<Op> {
    let result_tile = op.results.first().and_then(|t| parse_tile(t));
    let tile_operands: Vec<Tile> = op
        .operands
        .iter()
        .filter_map(|v| parse_tile(&v.ty))
        .collect();
    let (shape, mut dtype) = shape_and_dtype(rule, result_tile.as_ref(), &tile_operands)?;
    let traffic = rule_traffic(rule, &shape, &dtype, result_tile.as_ref(), &tile_operands);
    if let Some(cost) = machine.cost_rule(class) {
        if !cost.per_cycle.contains_key(&dtype) {
            let fallback = if cost.per_cycle.contains_key("f32") {
                "f32".to_string()
            } else {
                cost.per_cycle.keys().next().cloned().unwrap_or_default()
            };
            notes.push(format!(
                "`{}` ({}): no `{class}` rate for {dtype}; priced as {fallback}",
                op.name, op.location
            ));
            dtype = fallback;
        }
    }
    let held = held_results(op, rule.memory.as_deref(), machine, threads);
    Some(Op {
        name: format!("{}_{i}", short_name(&op.name)),
        timing: Timing::Cost {
            class: class.to_string(),
            shape,
            dtype,
        },
        regs: held.regs.min(u64::from(u32::MAX)) as u32,
        memory: held.memory,
        variable_latency: rule.variable_latency,
        streaming: false,
        warp_group: rule.warp_group,
        last_stage: false,
        spill_cost: held.spill_cost,
        traffic,
        cross_bytes: held.cross_bytes,
        conditional: false,
        origin: op.location.clone(),
    })
}

/// The shape and element type that price an op, as its rule says where to
/// find them; `None` when the op has no such tile.
fn shape_and_dtype(
    rule: &OpRule,
    result_tile: Option<&Tile>,
    tile_operands: &[Tile],
) -> Option<(Vec<u64>, String)> {
    let largest = tile_operands
        .iter()
        .chain(result_tile)
        .max_by_key(|t| t.elements());
    let shape = match rule.shape {
        ShapeFrom::Mnk => match (tile_operands.first(), tile_operands.get(1)) {
            (Some(a), Some(b)) if a.shape.len() >= 2 && b.shape.len() >= 2 => Some(vec![
                a.shape[a.shape.len() - 2],
                b.shape[b.shape.len() - 1],
                a.shape[a.shape.len() - 1],
            ]),
            _ => None,
        },
        ShapeFrom::Result => result_tile
            .or(tile_operands.first())
            .map(|t| t.shape.clone()),
        ShapeFrom::Operand => tile_operands
            .first()
            .or(result_tile)
            .map(|t| t.shape.clone()),
        ShapeFrom::Largest => largest.map(|t| t.shape.clone()),
    };
    let dtype = match rule.dtype {
        DtypeFrom::Result => result_tile.or(tile_operands.first()),
        DtypeFrom::Operand => tile_operands.first().or(result_tile),
        DtypeFrom::Largest => largest,
    }
    .map(|t| t.dtype.clone());
    Some((shape?, dtype?))
}

/// What the op moves through a bandwidth unit (shared memory), by its rule.
fn rule_traffic(
    rule: &OpRule,
    shape: &[u64],
    dtype: &str,
    result_tile: Option<&Tile>,
    tile_operands: &[Tile],
) -> BTreeMap<String, u64> {
    let mut traffic = BTreeMap::new();
    let Some(t) = &rule.traffic else {
        return traffic;
    };
    let bytes = match t.from {
        TrafficFrom::Tile => shape.iter().product::<u64>() * element_bytes(dtype),
        TrafficFrom::SharedOperands { rows } => {
            let m = result_tile
                .and_then(|r| r.shape.len().checked_sub(2).map(|k| r.shape[k]))
                .unwrap_or(1);
            tile_operands
                .iter()
                .take(2)
                .enumerate()
                .filter(|(_, o)| o.memdesc && !o.tensor_memory)
                .map(|(k, o)| {
                    let b = o.elements() * element_bytes(&o.dtype);
                    if k == 1 {
                        b * m.div_ceil(rows).max(1)
                    } else {
                        b
                    }
                })
                .sum()
        }
    };
    if bytes > 0 {
        traffic.insert(t.unit.clone(), bytes);
    }
    traffic
}

/// What an op's results hold while live, and what handing them to another
/// warp group costs.
struct Held {
    regs: u64,
    memory: BTreeMap<String, u64>,
    spill_cost: u64,
    cross_bytes: u64,
}

/// Registers (per thread of `threads`) of the register tiles, memory of
/// the buffers (of kind `memory`, the op's rule's), and the cross-warp
/// spill of the register tiles.
fn held_results(op: &IrOp, memory: Option<&str>, machine: &Machine, threads: u64) -> Held {
    let mut held = Held {
        regs: 0,
        memory: BTreeMap::new(),
        spill_cost: 0,
        cross_bytes: 0,
    };
    for t in op.results.iter().filter_map(|t| parse_tile(t)) {
        if t.memdesc {
            if let Some(kind) = memory {
                held.memory.insert(kind.to_string(), footprint(&t));
            }
        } else {
            held.regs += (t.elements() * element_bytes(&t.dtype)).div_ceil(4 * threads);
            // Handing a register tile to another warp group goes through
            // shared memory: a store and a load of the tile.
            held.cross_bytes += 2 * t.elements() * element_bytes(&t.dtype);
            if let Ok(c) = machine.cost(SPILL_CLASS, &t.shape, &t.dtype) {
                held.spill_cost += 2 * c.occupancy + c.latency;
            } else if let Ok(c) = machine.cost(SPILL_CLASS, &t.shape, "f32") {
                held.spill_cost += 2 * c.occupancy + c.latency;
            }
        }
    }
    held
}

/// A load whose tile lands in shared memory through an absorbed
/// local_alloc holds shared memory, not registers.
fn absorb_loads(ir: &LoopIr, absorbed_into: &BTreeMap<usize, Vec<usize>>, nodes: &mut Nodes) {
    for (load, allocs) in absorbed_into {
        if let Some(n) = nodes.classified[*load].node {
            let op = &mut nodes.ops[n];
            op.regs = 0;
            op.spill_cost = 0;
            op.cross_bytes = 0;
            for &a in allocs {
                for t in ir.ops[a].results.iter().filter_map(|t| parse_tile(t)) {
                    *op.memory.entry("smem".to_string()).or_insert(0) += footprint(&t);
                }
            }
        }
    }
}

/// Edges by (from, to, distance): (blocking, ordering only).
type EdgeMap = BTreeMap<(usize, usize, u32), (bool, bool)>;

/// Adds an edge; an edge that is also a data edge is not ordering-only.
fn add_edge(edges: &mut EdgeMap, u: usize, v: usize, d: u32, blocking: bool, order: bool) {
    let e = edges.entry((u, v, d)).or_insert((false, true));
    e.0 |= blocking;
    e.1 &= order;
}

/// Data edges, through folded ops.
fn data_edges(
    ir: &LoopIr,
    rules: &[Option<&OpRule>],
    classified: &[Classified],
    edges: &mut EdgeMap,
) {
    for (i, op) in ir.ops.iter().enumerate() {
        let Some(v) = classified[i].node else {
            continue;
        };
        for val in op.operands.iter().chain(op.region_uses.iter()) {
            // An async token (sm_100 tensor-memory ops chain them) orders
            // the ops but carries no data: ordering-only.
            let token = val.ty.contains("async.token");
            let mut srcs = BTreeSet::new();
            producers(ir, classified, val.src, 0, &mut BTreeSet::new(), &mut srcs);
            for (p, d) in srcs {
                let Some(u) = classified[p].node else {
                    continue;
                };
                if u == v && d == 0 {
                    continue;
                }
                let blocking = rules[p].is_some_and(|r| r.blocking);
                add_edge(edges, u, v, d, blocking, token);
            }
        }
    }
}

/// Memory-ordering edges between accessors of one buffer.
fn memory_edges(
    ir: &LoopIr,
    rules: &[Option<&OpRule>],
    classified: &[Classified],
    writers: &BTreeSet<usize>,
    edges: &mut EdgeMap,
) {
    let mut accessors: BTreeMap<Root, Vec<(usize, bool)>> = BTreeMap::new();
    for (i, op) in ir.ops.iter().enumerate() {
        if classified[i].node.is_none() {
            continue;
        }
        let writes = rules[i].is_some_and(|r| r.writes) || writers.contains(&i);
        let mut seen = BTreeSet::new();
        for val in op.operands.iter().chain(op.region_uses.iter()) {
            if parse_tile(&val.ty).is_some_and(|t| t.memdesc) {
                let root = root_of(ir, rules, val.src);
                if seen.insert(root) {
                    accessors.entry(root).or_default().push((i, writes));
                }
            }
        }
    }
    for list in accessors.values() {
        for (x, &(a, wa)) in list.iter().enumerate() {
            for &(b, wb) in &list[x + 1..] {
                if !(wa || wb) {
                    continue;
                }
                let (Some(u), Some(v)) = (classified[a].node, classified[b].node) else {
                    continue;
                };
                let blocking_ab = rules[a].is_some_and(|r| r.blocking);
                let blocking_ba = rules[b].is_some_and(|r| r.blocking);
                // An edge leaving a pure reader (a later write after a read)
                // orders the accesses but hands over nothing: ordering only.
                // One leaving a writer hands the buffer's contents over and
                // keeps its footprint live.
                add_edge(edges, u, v, 0, blocking_ab, !wa);
                add_edge(edges, v, u, 1, blocking_ba, !wb);
            }
        }
    }
}

/// Synchronizing side effects keep their program order (issue order only:
/// delay 0), around the iteration too (delay 1 there, so that the next
/// iteration's first one never shares a slot with this one's last). An op
/// that reads or writes a buffer between two of them stays between them:
/// after the one before (delay 0) and complete before the one after (its
/// full delay, `None`: a slot is released only once it has been read).
/// Returns the ordering edges by (from, to, distance) with their delays.
fn sync_order(
    ir: &LoopIr,
    rules: &[Option<&OpRule>],
    classified: &[Classified],
) -> BTreeMap<(usize, usize, u32), Option<u64>> {
    let sync: Vec<(usize, usize)> = (0..ir.ops.len())
        .filter(|&i| rules[i].is_some_and(|r| r.ordered))
        .filter_map(|i| classified[i].node.map(|n| (i, n)))
        .collect();
    let mut order_chain: BTreeMap<(usize, usize, u32), Option<u64>> = BTreeMap::new();
    for w in sync.windows(2) {
        order_chain.insert((w[0].1, w[1].1, 0), Some(0));
    }
    let (Some(&(_, first)), Some(&(_, last))) = (sync.first(), sync.last()) else {
        return order_chain;
    };
    if sync.len() > 1 {
        order_chain.insert((last, first, 1), Some(1));
    }
    for (i, op) in ir.ops.iter().enumerate() {
        let Some(v) = classified[i].node else {
            continue;
        };
        let touches_buffer = op
            .operands
            .iter()
            .chain(op.region_uses.iter())
            .any(|val| parse_tile(&val.ty).is_some_and(|t| t.memdesc));
        if !touches_buffer || sync.iter().any(|&(_, n)| n == v) {
            continue;
        }
        let before = sync.iter().rev().find(|&&(j, _)| j < i);
        let after = sync.iter().find(|&&(j, _)| j > i);
        let (p, dp) = before.map_or((last, 1), |&(_, n)| (n, 0));
        let (q, dq) = after.map_or((first, 1), |&(_, n)| (n, 0));
        order_chain.entry((p, v, dp)).or_insert(Some(0));
        order_chain.insert((v, q, dq), None);
    }
    order_chain
}

/// The graph's edges: the data and memory edges, then the ordering chain's
/// where the ops do not already share an edge, sorted.
fn graph_edges(
    ir: &LoopIr,
    op_of_node: &[usize],
    edges: &EdgeMap,
    order_chain: BTreeMap<(usize, usize, u32), Option<u64>>,
) -> Vec<Edge> {
    let mut graph_edges: Vec<Edge> = edges
        .iter()
        .map(|(&(u, v, d), &(blocking, order))| Edge {
            from: u,
            to: v,
            delay: None,
            distance: d,
            blocking,
            order,
            origin: ir.ops[op_of_node[v]].location.clone(),
        })
        .collect();
    for ((u, v, d), delay) in order_chain {
        if u != v && !edges.contains_key(&(u, v, d)) {
            graph_edges.push(Edge {
                from: u,
                to: v,
                delay,
                distance: d,
                blocking: false,
                order: true,
                origin: ir.ops[op_of_node[v]].location.clone(),
            });
        }
    }
    graph_edges.sort_by_key(|e| (e.from, e.to, e.distance));
    graph_edges
}

/// Colocation constraints of a warp-specialized loop whose partitions a
/// code generator like Triton's (sm_100) builds from per-op partition ids:
/// the MMAs (ops named in `mma_ops`) share one partition, and every other
/// fixed-latency op shares a partition with the fixed-latency, non-MMA ops
/// it exchanges data with (data edges of any iteration distance; tensor
/// memory written by one and read by the other counts, ordering-only edges
/// do not). Values then move between partitions only through the MMAs and
/// the loads, which is what Triton can lower: a tensor-memory buffer is
/// used by the MMA partition and one other, the load and store of an
/// accumulator sit together, and no chain of cheap ops leaves a partition
/// and comes back (Triton 3.9 duplicates such chains and cannot relabel a
/// duplicated `tt.reduce`). Returns one set per class of two or more ops.
pub fn colocation(ir: &LoopIr, lowered: &Lowered, mma_ops: &[&str]) -> Vec<SameGroup> {
    let g = &lowered.graph;
    let n = g.ops.len();
    let is_mma = |v: usize| mma_ops.contains(&ir.ops[lowered.op_of_node[v]].name.as_str());
    let mut classes = UnionFind::new(n);
    let mmas: Vec<usize> = (0..n).filter(|&v| is_mma(v)).collect();
    for pair in mmas.windows(2) {
        classes.union(pair[0], pair[1]);
    }
    for e in &g.edges {
        let (u, v) = (e.from, e.to);
        if e.order || u == v || g.ops[u].variable_latency || g.ops[v].variable_latency {
            continue;
        }
        if is_mma(u) || is_mma(v) {
            continue;
        }
        classes.union(u, v);
    }
    // Sets in order of their first op, members in graph order.
    let mut sets: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut first_of_class: BTreeMap<usize, usize> = BTreeMap::new();
    for v in (0..n).filter(|&v| !g.ops[v].variable_latency) {
        let first = *first_of_class.entry(classes.find(v)).or_insert(v);
        sets.entry(first).or_default().push(v);
    }
    sets.into_values()
        .filter(|ops| ops.len() >= 2)
        .map(|ops| {
            let mma = is_mma(ops[0]);
            SameGroup {
                origin: g.ops[ops[0]].origin.clone(),
                reason: if mma {
                    "the MMAs form one partition".to_string()
                } else {
                    "register values and tensor-memory accesses exchanged between these ops stay in one partition".to_string()
                },
                ops,
            }
        })
        .collect()
}

/// Footprint of a buffer in its memory's unit: bytes for shared memory,
/// 32-bit columns of 128 lanes for tensor memory.
fn footprint(t: &Tile) -> u64 {
    let bytes = t.elements() * element_bytes(&t.dtype);
    if t.tensor_memory {
        (t.elements() * element_bytes(&t.dtype).max(4)).div_ceil(4 * 128)
    } else {
        bytes
    }
}

/// The buffer a memdesc value refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Root {
    Op(usize),
    Src(ValueSrc),
}

fn root_of(ir: &LoopIr, rules: &[Option<&OpRule>], mut src: ValueSrc) -> Root {
    for _ in 0..=ir.ops.len() {
        match src {
            ValueSrc::Op { op, .. } => {
                if rules[op].is_some_and(|r| r.view) {
                    match ir.ops[op].operands.first() {
                        Some(v) => src = v.src,
                        None => return Root::Op(op),
                    }
                } else {
                    return Root::Op(op);
                }
            }
            other => return Root::Src(other),
        }
    }
    Root::Src(src)
}

/// The graph-node ops (with iteration distance) that `src` depends on,
/// looking through folded ops and up to one iteration argument hop.
fn producers(
    ir: &LoopIr,
    classified: &[Classified],
    src: ValueSrc,
    distance: u32,
    visiting: &mut BTreeSet<(usize, u32)>,
    out: &mut BTreeSet<(usize, u32)>,
) {
    match src {
        ValueSrc::Op { op, .. } => {
            if classified[op].node.is_some() {
                out.insert((op, distance));
                return;
            }
            if !visiting.insert((op, distance)) {
                return;
            }
            let o = &ir.ops[op];
            for v in o.operands.iter().chain(o.region_uses.iter()) {
                producers(ir, classified, v.src, distance, visiting, out);
            }
        }
        ValueSrc::IterArg(k) => {
            if distance >= 1 {
                return;
            }
            if let Some(y) = ir.yields.get(k) {
                producers(ir, classified, y.src, distance + 1, visiting, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::frontend::IrValue;

    fn v(src: ValueSrc, ty: &str) -> IrValue {
        IrValue {
            src,
            ty: ty.to_string(),
        }
    }

    fn op(name: &str, operands: Vec<IrValue>, results: &[&str]) -> IrOp {
        IrOp {
            name: name.to_string(),
            location: format!("loc(\"{name}\")"),
            operands,
            results: results.iter().map(|s| s.to_string()).collect(),
            region_uses: Vec::new(),
            nested: Vec::new(),
            triton_stage: None,
            branches: Vec::new(),
        }
    }

    const T: &str = "tensor<128x64xf16, #blocked>";
    const S: &str = "!ttg.memdesc<128x64xf16, #shared, #smem>";
    const ST: &str = "!ttg.memdesc<64x128xf16, #shared1, #smem>";
    const ACC: &str = "tensor<128x128xf32, #mma>";
    const DESC: &str = "!tt.tensordesc<tensor<128x64xf16, #shared>>";

    /// The GEMM main loop of Triton 3.6's TTGIR on sm_90 (see
    /// test/Inputs/triton36/gemm_sm90.before.mlir).
    pub(crate) fn gemm() -> LoopIr {
        let r = |op: usize| ValueSrc::Op { op, result: 0 };
        LoopIr {
            name: "gemm".into(),
            location: "loc(\"loop\")".into(),
            warp_specialize: true,
            num_warps: 4,
            ops: vec![
                op(
                    "arith.muli",
                    vec![
                        v(ValueSrc::InductionVar, "i32"),
                        v(ValueSrc::Outside(0), "i32"),
                    ],
                    &["i32"],
                ),
                op(
                    "tt.descriptor_load",
                    vec![v(ValueSrc::Outside(1), DESC), v(r(0), "i32")],
                    &[T],
                ),
                op("ttg.local_alloc", vec![v(r(1), T)], &[S]),
                op(
                    "tt.descriptor_load",
                    vec![v(ValueSrc::Outside(2), DESC), v(r(0), "i32")],
                    &[T],
                ),
                op("ttg.local_alloc", vec![v(r(3), T)], &[S]),
                op("ttg.memdesc_trans", vec![v(r(4), S)], &[ST]),
                op(
                    "ttng.warp_group_dot",
                    vec![v(r(2), S), v(r(5), ST), v(ValueSrc::IterArg(0), ACC)],
                    &[ACC],
                ),
            ],
            yields: vec![v(r(6), ACC)],
            triton_max_stage: None,
        }
    }

    /// Straight-line code: two independent loads (A and B, 16 KB each: 256
    /// cycles on the TMA plus 500 of latency on the H100 model), a wgmma on
    /// both (128x128x64 f16: 512) and the store of its f32 result (64 KB on
    /// the TMA: 1024).
    fn straight() -> LoopIr {
        let r = |op: usize| ValueSrc::Op { op, result: 0 };
        LoopIr {
            name: "straight".into(),
            location: "loc(\"f\")".into(),
            warp_specialize: false,
            num_warps: 4,
            ops: vec![
                op(
                    "tt.descriptor_load",
                    vec![v(ValueSrc::Outside(0), DESC)],
                    &[T],
                ),
                op("ttg.local_alloc", vec![v(r(0), T)], &[S]),
                op(
                    "tt.descriptor_load",
                    vec![v(ValueSrc::Outside(1), DESC)],
                    &[T],
                ),
                op("ttg.local_alloc", vec![v(r(2), T)], &[S]),
                op("ttg.memdesc_trans", vec![v(r(3), S)], &[ST]),
                op(
                    "ttng.warp_group_dot",
                    vec![v(r(1), S), v(r(4), ST), v(ValueSrc::Outside(2), ACC)],
                    &[ACC],
                ),
                op(
                    "tt.descriptor_store",
                    vec![v(ValueSrc::Outside(3), DESC), v(r(5), ACC)],
                    &[],
                ),
            ],
            yields: Vec::new(),
            triton_max_stage: None,
        }
    }

    #[test]
    fn straight_line_code_takes_its_critical_path_or_its_busiest_unit() {
        let m = Machine::select("h100").unwrap();
        // The loads overlap (756 each, on the TMA 256 each), then the wgmma
        // (512), then the store (1024): 756 + 512 + 1024.
        assert_eq!(straight_line_cycles(&straight(), &m).unwrap(), 2292);
        // Eight more independent loads leave the path as it is, but they
        // queue on the TMA with the others and the store: 10 x 256 + 1024.
        let mut ir = straight();
        for k in 0..8 {
            ir.ops.push(op(
                "tt.descriptor_load",
                vec![v(ValueSrc::Outside(10 + k), DESC)],
                &[T],
            ));
        }
        assert_eq!(straight_line_cycles(&ir, &m).unwrap(), 10 * 256 + 1024);
    }

    #[test]
    fn concurrent_regions_take_the_slowest_and_runs_add_up() {
        use crate::frontend::Straight;
        let code = vec![
            Straight::Code(straight()),
            Straight::Concurrent(vec![
                vec![Straight::Code(straight())],
                vec![Straight::Code(straight()), Straight::Code(straight())],
                Vec::new(),
            ]),
        ];
        let cycles = |ir: &LoopIr| -> Result<u64, ()> { Ok(ir.ops.len() as u64) };
        assert_eq!(Straight::total(&code, &cycles), Ok(7 + 14));
        assert_eq!(Straight::total(&[], &cycles), Ok(0));
    }

    #[test]
    fn gemm_lowers_to_two_streaming_loads_and_a_pinned_wgmma() {
        let m = Machine::select("h100").unwrap();
        let l = lower(&gemm(), &m, &["ttng.warp_group_dot"]).unwrap();
        let names: Vec<&str> = l.graph.ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            names,
            ["descriptor_load_1", "descriptor_load_3", "warp_group_dot_6"]
        );
        let load = &l.graph.ops[0];
        assert!(load.variable_latency && load.streaming);
        // The local_alloc is absorbed: the tile lands in shared memory.
        assert_eq!(
            (load.regs, load.memory.get("smem").copied()),
            (0, Some(16384))
        );
        let dot = &l.graph.ops[2];
        assert!(dot.warp_group && dot.last_stage);
        assert_eq!(
            dot.timing,
            Timing::Cost {
                class: "mma".into(),
                shape: vec![128, 128, 64],
                dtype: "f16".into()
            }
        );
        // 128x128 f32 over 128 threads.
        assert_eq!(dot.regs, 128);
        let e: Vec<(usize, usize, u32, bool)> = l
            .graph
            .edges
            .iter()
            .map(|e| (e.from, e.to, e.distance, e.blocking))
            .collect();
        assert_eq!(e, [(0, 2, 0, true), (1, 2, 0, true), (2, 2, 1, false)]);
        assert_eq!(l.ops[0].folded, Some("scalar"));
        assert_eq!(l.ops[2].folded, Some("absorbed"));
        assert_eq!(l.ops[5].folded, Some("free"));
    }

    #[test]
    fn control_flow_is_unsupported_with_its_location() {
        let mut ir = gemm();
        ir.ops[6].nested = vec!["scf.if".into(), "scf.yield".into()];
        let e = lower(&ir, &Machine::select("h100").unwrap(), &[]).unwrap_err();
        assert!(e.reason.contains("`scf.if`"), "{e}");
        assert_eq!(e.location, "loc(\"ttng.warp_group_dot\")");
    }

    const H: &str = "tensor<128x128xf16, #mma>";

    /// The GEMM with a persistent kernel's epilogue: an `scf.if` on an
    /// outside flag that downcasts the accumulator, stores it and yields
    /// zeros, else yields the accumulator; the `if` feeds the next wgmma.
    fn gemm_with_epilogue(then: Vec<IrOp>, other: Vec<IrOp>) -> LoopIr {
        let mut ir = gemm();
        let acc = v(ValueSrc::Op { op: 6, result: 0 }, ACC);
        let mut epilogue = op("scf.if", vec![v(ValueSrc::Outside(5), "i1")], &[ACC]);
        epilogue.region_uses = vec![acc.clone(), v(ValueSrc::Outside(3), DESC)];
        epilogue.nested = then
            .iter()
            .chain(&other)
            .map(|o| o.name.clone())
            .chain(["scf.yield".to_string(), "scf.yield".to_string()])
            .collect();
        epilogue.branches = vec![then, other];
        ir.ops.push(epilogue);
        ir.yields = vec![v(ValueSrc::Op { op: 7, result: 0 }, ACC)];
        ir
    }

    fn store_epilogue() -> Vec<IrOp> {
        let acc = v(ValueSrc::Op { op: 6, result: 0 }, ACC);
        vec![
            op("arith.truncf", vec![acc], &[H]),
            op(
                "tt.descriptor_store",
                vec![v(ValueSrc::Outside(3), DESC), v(ValueSrc::Local, H)],
                &[],
            ),
        ]
    }

    /// Busy cycles per unit of `ops` lowered on their own, in sequence.
    fn busy_alone(ops: Vec<IrOp>, m: &Machine) -> BTreeMap<String, u64> {
        let mut ir = gemm();
        // Each op on its own: its operands from outside the loop.
        ir.ops = ops
            .into_iter()
            .map(|mut o| {
                for (k, val) in o.operands.iter_mut().enumerate() {
                    val.src = ValueSrc::Outside(20 + k);
                }
                o
            })
            .collect();
        ir.yields = Vec::new();
        let l = lower(&ir, m, &[]).unwrap();
        let segs: Vec<Segment> = l
            .graph
            .ops
            .iter()
            .flat_map(|o| priced_segments(&o.timing, m).unwrap())
            .collect();
        busy_cycles(&segs)
    }

    #[test]
    fn an_if_is_one_node_priced_by_its_costlier_branch() {
        let m = Machine::select("h100").unwrap();
        // The store on either side: the same node, the costlier branch.
        for flip in [false, true] {
            let (then, other) = if flip {
                (Vec::new(), store_epilogue())
            } else {
                (store_epilogue(), Vec::new())
            };
            let ir = gemm_with_epilogue(then, other);
            let l = lower(&ir, &m, &["ttng.warp_group_dot"]).unwrap();
            let names: Vec<&str> = l.graph.ops.iter().map(|o| o.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    "descriptor_load_1",
                    "descriptor_load_3",
                    "warp_group_dot_6",
                    "if_7"
                ]
            );
            let node = &l.graph.ops[3];
            assert!(node.conditional && !node.variable_latency && !node.warp_group);
            assert!(!node.last_stage, "no wgmma under the if");
            // Its table is the downcast and the store in sequence, priced
            // as the same ops in the body would be.
            let Timing::Table(segs) = &node.timing else {
                panic!("an if's timing is a table: {:?}", node.timing);
            };
            assert_eq!(busy_cycles(segs), busy_alone(store_epilogue(), &m));
            assert!(busy_cycles(segs).contains_key("TMA"));
            // It holds the accumulator it yields: 128x128 f32 over 128 threads.
            assert_eq!(node.regs, 128);
            let e: Vec<(usize, usize, u32)> = l
                .graph
                .edges
                .iter()
                .map(|e| (e.from, e.to, e.distance))
                .collect();
            assert!(e.contains(&(2, 3, 0)) && e.contains(&(3, 2, 1)), "{e:?}");
            assert_eq!(l.ops[7].node, Some(3));
        }
    }

    #[test]
    fn an_if_without_tile_work_is_folded_and_one_with_a_wgmma_is_pinned() {
        let m = Machine::select("h100").unwrap();
        let scalar = vec![op(
            "arith.addi",
            vec![v(ValueSrc::InductionVar, "i32")],
            &["i32"],
        )];
        let l = lower(&gemm_with_epilogue(scalar, Vec::new()), &m, &[]).unwrap();
        assert_eq!(l.ops[7].folded, Some("no tile work"));
        assert_eq!(l.graph.ops.len(), 3);
        let dot = op(
            "ttng.warp_group_dot",
            vec![
                v(ValueSrc::Op { op: 2, result: 0 }, S),
                v(ValueSrc::Op { op: 5, result: 0 }, ST),
                v(ValueSrc::Op { op: 6, result: 0 }, ACC),
            ],
            &[ACC],
        );
        let l = lower(
            &gemm_with_epilogue(vec![dot], Vec::new()),
            &m,
            &["ttng.warp_group_dot"],
        )
        .unwrap();
        let node = &l.graph.ops[3];
        assert!(node.conditional && node.warp_group && node.last_stage);
    }

    #[test]
    fn an_if_holding_a_loop_or_a_barrier_is_refused() {
        let m = Machine::select("h100").unwrap();
        let mut ir = gemm_with_epilogue(store_epilogue(), Vec::new());
        ir.ops[7].nested.push("scf.for".into());
        let e = lower(&ir, &m, &[]).unwrap_err();
        assert!(e.reason.contains("`scf.for`"), "{e}");
        let bar = "!ttg.memdesc<1xi64, #shared, #smem, mutable>";
        let wait = op(
            "ttng.wait_barrier",
            vec![
                v(ValueSrc::Outside(9), bar),
                v(ValueSrc::Outside(10), "i32"),
            ],
            &[],
        );
        let e = lower(&gemm_with_epilogue(vec![wait], Vec::new()), &m, &[]).unwrap_err();
        assert!(
            e.reason
                .contains("a synchronizing op (`ttng.wait_barrier`) under `scf.if`"),
            "{e}"
        );
    }

    /// A warp-specialized loop body of 4 warps with `ops`, no loop-carried values.
    fn sm100_loop(ops: Vec<IrOp>) -> LoopIr {
        LoopIr {
            name: "t".into(),
            location: "l".into(),
            warp_specialize: true,
            num_warps: 4,
            ops,
            yields: vec![],
            triton_max_stage: None,
        }
    }

    #[test]
    fn colocation_joins_mmas_and_the_ops_exchanging_data_between_them() {
        // sm_100: S = mma(..) in tensor memory, P = exp2(tmem_load S), the
        // accumulator of a second MMA loaded and scaled by P's values.
        let tm = "!ttg.memdesc<128x128xf32, #tmem, #ttng.tensor_memory, mutable>";
        let r = |op: usize| ValueSrc::Op { op, result: 0 };
        let mma = |acc: usize| {
            op(
                "ttng.tc_gen5_mma",
                vec![
                    v(ValueSrc::Outside(0), S),
                    v(ValueSrc::Outside(1), ST),
                    v(ValueSrc::Outside(acc), tm),
                ],
                &[],
            )
        };
        let ir = sm100_loop(vec![
            mma(2),
            op("ttng.tmem_load", vec![v(ValueSrc::Outside(2), tm)], &[ACC]),
            op("math.exp2", vec![v(r(1), ACC)], &[ACC]),
            op("ttng.tmem_load", vec![v(ValueSrc::Outside(3), tm)], &[ACC]),
            op("arith.mulf", vec![v(r(3), ACC), v(r(2), ACC)], &[ACC]),
            mma(3),
        ]);
        let l = lower(&ir, &Machine::select("b200").unwrap(), &[]).unwrap();
        let sets = colocation(&ir, &l, &["ttng.tc_gen5_mma"]);
        let names: Vec<Vec<&str>> = sets
            .iter()
            .map(|s| {
                s.ops
                    .iter()
                    .map(|&v| l.graph.ops[v].name.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(
            names,
            [
                vec!["tc_gen5_mma_0", "tc_gen5_mma_5"],
                vec!["tmem_load_1", "exp2_2", "tmem_load_3", "mulf_4"],
            ]
        );
        assert!(sets[0].reason.contains("MMAs"));
    }

    #[test]
    fn buffers_written_and_read_get_ordering_edges_both_ways() {
        // tmem accumulator of sm_100: the MMA writes it, tmem_load reads it.
        let tm = "!ttg.memdesc<128x128xf32, #tmem, #ttng.tensor_memory, mutable>";
        let r = |op: usize| ValueSrc::Op { op, result: 0 };
        let ir = sm100_loop(vec![
            op(
                "ttng.tc_gen5_mma",
                vec![
                    v(ValueSrc::Outside(0), S),
                    v(ValueSrc::Outside(1), ST),
                    v(ValueSrc::Outside(2), tm),
                ],
                &[],
            ),
            op("ttng.tmem_load", vec![v(ValueSrc::Outside(2), tm)], &[ACC]),
            op("math.exp2", vec![v(r(1), ACC)], &[ACC]),
        ]);
        let l = lower(&ir, &Machine::select("b200").unwrap(), &[]).unwrap();
        let e: Vec<(usize, usize, u32, bool)> = l
            .graph
            .edges
            .iter()
            .map(|e| (e.from, e.to, e.distance, e.blocking))
            .collect();
        assert_eq!(e, [(0, 1, 0, true), (1, 0, 1, false), (1, 2, 0, false)]);
        // The MMA hands the buffer to the load (data); the load's edge to the
        // next iteration's MMA only orders the write after the read.
        let order: Vec<bool> = l.graph.edges.iter().map(|e| e.order).collect();
        assert_eq!(order, [false, true, false]);
    }
}
