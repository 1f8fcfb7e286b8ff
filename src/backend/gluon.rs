//! The Gluon route's graph: a loop graph exported from Triton's TTGIR, made
//! to describe the hand-written Gluon kernel that runs twill's schedule of it
//! (`bench/kernels/*_gluon.py`) instead of Triton's own pipeliner.
//!
//! Selected by `--twill-export-graph="target=gluon-sm90 gluon=..."`
//! ([`GraphTarget::parse`]); each change is a typed transformation of the
//! [`Graph`]:
//!
//! * always: no last-stage pins (a rule of Triton's sm90 pipeliner, which
//!   cannot predicate a wgmma, [`crate::backend::TritonTarget::last_stage_ops`];
//!   Gluon issues each wgmma where the schedule puts it), unless
//!   `gluon=keep-pins` (the same problem under Triton's rule, to compare);
//!   and registers per thread of a compute group of one warp group (the
//!   TTGIR's are for all the CTA's warps): scaled by the CTA's warps over the
//!   machine's warp-group size;
//! * `gluon=fp16-crossings`: an fp32 tile that is also truncated to fp16 for
//!   a wgmma's operand crosses to another group as that fp16 tile (the
//!   kernel stages it in shared memory for the wgmma anyway), so its
//!   `cross_bytes` become the fp16 tile's ([`fp16_crossings`]; the FA
//!   backward's dK/dV loop);
//! * `gluon=complete-accumulators`: a wgmma that accumulates across
//!   iterations completes before its chain's next iteration issues (kept in
//!   flight across the kernel's back edge, ptxas serializes every wgmma of
//!   the kernel, warning C7515) ([`complete_accumulators`]; the FA
//!   backward's sub-tiled dQ loop).

use std::collections::{BTreeMap, BTreeSet};

use crate::graph::{Edge, Graph, Timing};

/// The cost class of tensor-core MMAs (wgmma) in the op rules.
const MMA: &str = "mma";

/// Why an added ordering edge exists (its `origin`).
const ACCUMULATOR_ORIGIN: &str = "accumulator completes within its iteration (ptxas C7515)";

/// How far (in same-iteration edges) a truncation may be from the wgmma it
/// feeds: the fp16 tile passes through at most a layout conversion and a
/// shared-memory store on its way.
const TRUNC_TO_MMA_HOPS: usize = 3;

/// Which code generator's loop the exported graph describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphTarget {
    /// Triton's pipeliner: the graph as the schedule pass solves it.
    #[default]
    Triton,
    /// A Gluon kernel on sm90 (one warp group per compute group).
    GluonSm90(GluonChanges),
}

/// The optional changes of the Gluon route (`gluon=a,b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GluonChanges {
    /// `keep-pins`: keep Triton's last-stage pins.
    pub keep_pins: bool,
    /// `fp16-crossings`: see [`fp16_crossings`].
    pub fp16_crossings: bool,
    /// `complete-accumulators`: see [`complete_accumulators`].
    pub complete_accumulators: bool,
}

impl GraphTarget {
    /// Parses the export pass's `target` and `gluon` option values (empty:
    /// not given).
    pub fn parse(target: &str, gluon: &str) -> Result<GraphTarget, String> {
        let mut changes = GluonChanges::default();
        for name in gluon.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "keep-pins" => changes.keep_pins = true,
                "fp16-crossings" => changes.fp16_crossings = true,
                "complete-accumulators" => changes.complete_accumulators = true,
                other => {
                    return Err(format!(
                        "gluon: unknown change `{other}` (expected keep-pins, fp16-crossings or complete-accumulators)"
                    ))
                }
            }
        }
        match target {
            "" | "triton" if changes == GluonChanges::default() => Ok(GraphTarget::Triton),
            "" | "triton" => Err("gluon: changes need target=gluon-sm90".to_string()),
            "gluon-sm90" => Ok(GraphTarget::GluonSm90(changes)),
            other => Err(format!(
                "target: expected triton or gluon-sm90, got `{other}`"
            )),
        }
    }

    /// `graph` (of a loop of a CTA of `cta_warps` warps) as this target runs
    /// it; `group_warps` is the machine's warp-group size.
    pub fn apply(&self, graph: &mut Graph, cta_warps: u32, group_warps: u32) -> Result<(), String> {
        let GraphTarget::GluonSm90(changes) = self else {
            return Ok(());
        };
        if group_warps == 0 || cta_warps % group_warps != 0 {
            return Err(format!(
                "{cta_warps} warps do not split into groups of {group_warps}"
            ));
        }
        let scale = cta_warps / group_warps;
        for op in &mut graph.ops {
            op.regs *= scale;
            op.last_stage &= changes.keep_pins;
        }
        if changes.fp16_crossings {
            fp16_crossings(graph);
        }
        if changes.complete_accumulators {
            complete_accumulators(graph);
        }
        Ok(())
    }
}

fn cost_class(graph: &Graph, v: usize) -> Option<(&str, &str)> {
    match &graph.ops[v].timing {
        Timing::Cost { class, dtype, .. } => Some((class, dtype)),
        Timing::Table(_) => None,
    }
}

fn is_mma(graph: &Graph, v: usize) -> bool {
    cost_class(graph, v).is_some_and(|(c, _)| c == MMA)
}

/// Whether `v` reaches a wgmma within `hops` data edges of one iteration.
fn feeds_mma(graph: &Graph, succs: &[Vec<usize>], v: usize, hops: usize) -> bool {
    hops > 0
        && succs[v]
            .iter()
            .any(|&t| is_mma(graph, t) || feeds_mma(graph, succs, t, hops - 1))
}

/// Each op that feeds an fp16 truncation (an op named `truncf...` priced
/// in f16) which in turn feeds a wgmma within a few data edges crosses
/// groups with the truncation's `cross_bytes` instead of its own (when it
/// crosses at all). With several such truncations, the last data edge's.
pub fn fp16_crossings(graph: &mut Graph) {
    let mut succs = vec![Vec::new(); graph.ops.len()];
    for e in graph.edges.iter().filter(|e| e.distance == 0 && !e.order) {
        succs[e.from].push(e.to);
    }
    let mut fp16 = BTreeMap::new();
    for (v, out) in succs.iter().enumerate() {
        for &t in out {
            let truncation = graph.ops[t].name.starts_with("truncf")
                && cost_class(graph, t).is_some_and(|(_, dtype)| dtype == "f16");
            if truncation && feeds_mma(graph, &succs, t, TRUNC_TO_MMA_HOPS) {
                fp16.insert(v, graph.ops[t].cross_bytes);
            }
        }
    }
    for (v, bytes) in fp16 {
        let op = &mut graph.ops[v];
        if op.cross_bytes > 0 {
            tracing::debug!(op = %op.name, from = op.cross_bytes, to = bytes, "fp16 crossing");
            op.cross_bytes = bytes;
        }
    }
}

/// For each wgmma that accumulates across iterations (a self edge of
/// distance 1), ordering edges of distance 1 to every wgmma it depends on
/// within an iteration (by name): its next iteration's chain starts only
/// after it completes.
pub fn complete_accumulators(graph: &mut Graph) {
    let mut preds = vec![BTreeSet::new(); graph.ops.len()];
    for e in graph.edges.iter().filter(|e| e.distance == 0) {
        preds[e.to].insert(e.from);
    }
    let mut added = Vec::new();
    for e in &graph.edges {
        let acc = e.from;
        if acc != e.to || e.distance != 1 || !is_mma(graph, acc) {
            continue;
        }
        let mut heads: Vec<usize> = ancestors(&preds, acc)
            .into_iter()
            .filter(|&h| is_mma(graph, h))
            .collect();
        heads.sort_by(|&a, &b| graph.ops[a].name.cmp(&graph.ops[b].name));
        for head in heads {
            tracing::debug!(acc = %graph.ops[acc].name, head = %graph.ops[head].name, "accumulator completes");
            added.push(Edge {
                from: acc,
                to: head,
                delay: None,
                distance: 1,
                blocking: false,
                order: true,
                origin: ACCUMULATOR_ORIGIN.to_string(),
            });
        }
    }
    graph.edges.extend(added);
}

/// The ops `v` depends on within an iteration, transitively.
fn ancestors(preds: &[BTreeSet<usize>], v: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![v];
    while let Some(w) = todo.pop() {
        for &p in &preds[w] {
            if seen.insert(p) {
                todo.push(p);
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::load::parse;

    /// A dK/dV-like chain: s (mma) -> exp -> truncf (f16) -> cvt -> dv (mma,
    /// accumulating), with the exponential crossing in fp32.
    const CHAIN: &str = r#"
name = "chain"
[[op]]
name = "s"
cost = { class = "mma", shape = [64, 64, 64], dtype = "f16" }
regs = 32
last_stage = true
[[op]]
name = "exp2_1"
cost = { class = "exp", shape = [64, 64], dtype = "f32" }
regs = 16
cross_bytes = 16384
[[op]]
name = "truncf_2"
cost = { class = "alu", shape = [64, 64], dtype = "f16" }
cross_bytes = 8192
[[op]]
name = "cvt"
cost = { class = "alu", shape = [64, 64], dtype = "f16" }
[[op]]
name = "dv"
cost = { class = "mma", shape = [64, 64, 64], dtype = "f16" }
last_stage = true
[[edge]]
from = "s"
to = "exp2_1"
[[edge]]
from = "exp2_1"
to = "truncf_2"
[[edge]]
from = "truncf_2"
to = "cvt"
[[edge]]
from = "cvt"
to = "dv"
[[edge]]
from = "dv"
to = "dv"
distance = 1
"#;

    fn gluon(changes: &str, warps: u32) -> Result<Graph, String> {
        let mut g = parse("chain.toml", CHAIN).unwrap();
        GraphTarget::parse("gluon-sm90", changes)?.apply(&mut g, warps, 4)?;
        Ok(g)
    }

    #[test]
    fn the_gluon_graph_drops_pins_and_scales_registers_to_a_warp_group() {
        let g = gluon("", 8).unwrap();
        assert!(g.ops.iter().all(|o| !o.last_stage));
        assert_eq!((g.ops[0].regs, g.ops[1].regs), (64, 32));
        assert_eq!(g.ops[1].cross_bytes, 16384);
        assert_eq!(g.edges.len(), 5);
        let kept = gluon("keep-pins", 4).unwrap();
        assert!(kept.ops[0].last_stage && kept.ops[4].last_stage);
        assert_eq!(kept.ops[0].regs, 32);
        assert!(gluon("", 6).unwrap_err().contains("6 warps"));
        let mut triton = parse("chain.toml", CHAIN).unwrap();
        GraphTarget::Triton.apply(&mut triton, 8, 4).unwrap();
        assert_eq!(triton, parse("chain.toml", CHAIN).unwrap());
    }

    #[test]
    fn an_fp32_tile_truncated_for_a_wgmma_crosses_as_fp16() {
        let g = gluon("fp16-crossings", 4).unwrap();
        assert_eq!(g.ops[1].cross_bytes, 8192);
        // Three hops from the truncation is the limit.
        let far = CHAIN.replace(
            "from = \"cvt\"\nto = \"dv\"",
            "from = \"cvt\"\nto = \"cvt2\"\n[[edge]]\nfrom = \"cvt2\"\nto = \"cvt3\"\n\
             [[edge]]\nfrom = \"cvt3\"\nto = \"dv\"",
        );
        let far = far.replace(
            "[[op]]\nname = \"dv\"",
            "[[op]]\nname = \"cvt2\"\ncycles = 1\n[[op]]\nname = \"cvt3\"\ncycles = 1\n\
             [[op]]\nname = \"dv\"",
        );
        let mut g = parse("far.toml", &far).unwrap();
        fp16_crossings(&mut g);
        assert_eq!(g.ops[1].cross_bytes, 16384);
    }

    #[test]
    fn an_accumulating_wgmma_completes_before_its_chain_restarts() {
        let g = gluon("complete-accumulators", 4).unwrap();
        let added = &g.edges[5..];
        assert_eq!(added.len(), 1);
        let e = &added[0];
        assert_eq!((e.from, e.to, e.distance, e.order), (4, 0, 1, true));
        assert_eq!(e.origin, ACCUMULATOR_ORIGIN);
        // Without the change nothing is added.
        assert_eq!(gluon("fp16-crossings", 4).unwrap().edges.len(), 5);
    }

    #[test]
    fn options_name_a_known_target_and_known_changes() {
        assert_eq!(GraphTarget::parse("", ""), Ok(GraphTarget::Triton));
        assert_eq!(GraphTarget::parse("triton", ""), Ok(GraphTarget::Triton));
        let all = GraphTarget::parse(
            "gluon-sm90",
            "keep-pins, fp16-crossings,complete-accumulators",
        );
        assert_eq!(
            all,
            Ok(GraphTarget::GluonSm90(GluonChanges {
                keep_pins: true,
                fp16_crossings: true,
                complete_accumulators: true
            }))
        );
        assert!(GraphTarget::parse("gluon-sm100", "")
            .unwrap_err()
            .contains("target"));
        assert!(GraphTarget::parse("gluon-sm90", "fp8")
            .unwrap_err()
            .contains("`fp8`"));
        assert!(GraphTarget::parse("", "keep-pins")
            .unwrap_err()
            .contains("gluon-sm90"));
    }
}
