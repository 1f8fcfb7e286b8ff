//! The integer scheduling problem the solvers take.
//!
//! [`Problem::build`] resolves a [`Graph`] against a [`Machine`]: it prices ops
//! with cost rules, checks every unit and memory name, normalizes all
//! durations with the cost-normalization ZLP, and lays out each op's
//! reservation table as one row per (normalized) cycle. Errors name the op's
//! origin (file and line) and field.

use std::collections::BTreeMap;

use crate::error::LoadError;
use crate::graph::{Graph, Segment, Timing};
use crate::machine::Machine;
use crate::normalize::{normalize, Normalization};

/// An op of the resolved problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemOp {
    pub name: String,
    /// cycles(v): rows of the reservation table.
    pub cycles: u32,
    /// rrt[c][f]: instances of unit f occupied at cycle c of the op.
    pub rrt: Vec<Vec<u32>>,
    pub regs: u32,
    /// Footprint per memory kind, indexed like [`Problem::memories`].
    pub memory: Vec<u64>,
    pub variable_latency: bool,
    pub streaming: bool,
    pub warp_group: bool,
    /// Must be in the last stage (see [`crate::graph::Op::last_stage`]).
    pub last_stage: bool,
    pub spill_cost: u32,
    /// Every unit the op occupies is asynchronous (and it occupies one):
    /// its warp issues it and goes on, so it does not count as executing
    /// for blocking concurrency (rule 8).
    pub asynchronous: bool,
    /// For streaming ops: the raw cycles (with latency) before the latency
    /// was dropped (section 5.3); 0 otherwise.
    pub stream_cycles: u64,
}

/// An edge (u, v, d, delta) of the resolved problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemEdge {
    pub from: usize,
    pub to: usize,
    pub delay: u32,
    pub distance: u32,
    pub blocking: bool,
    /// Ordering only: not a use of `from`'s result (no liveness).
    pub order: bool,
}

/// A modulo-scheduling problem: units with capacities, ops, edges.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub units: Vec<String>,
    pub capacity: Vec<u32>,
    /// Whether each unit is asynchronous (parallel to `units`; see
    /// [`crate::machine::Unit::asynchronous`]).
    pub asynchronous: Vec<bool>,
    /// Memory kinds and capacities (from the machine).
    pub memories: Vec<(String, u64)>,
    pub ops: Vec<ProblemOp>,
    pub edges: Vec<ProblemEdge>,
    /// Sets of fixed-latency ops that must share a warp group (from
    /// [`crate::graph::Graph::same_group`]); rule 5 of the checker.
    pub same_group: Vec<Vec<usize>>,
    /// Raw machine cycles per normalized cycle (the largest duration's
    /// ratio), to translate normalized results back; 1 when not normalized.
    pub cycle_scale: f64,
    /// Raw machine cycles that one iteration occupies each unit (parallel
    /// to `units`), before normalization rounds op durations: what the
    /// iteration costs the SM when other work (other CTAs, other
    /// partitions) shares its units. Divide by `capacity` for the time.
    pub unit_cycles: Vec<u64>,
}

/// Options of problem construction.
#[derive(Debug, Clone, Copy)]
pub struct BuildOptions {
    /// U of the cost normalization.
    pub u: u64,
    /// Time limit of the normalization ZLP, seconds.
    pub time_limit: f64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            u: 300,
            time_limit: 30.0,
        }
    }
}

fn located(origin: &str, field: String, message: String) -> LoadError {
    // Origins are `file:line` for TOML input, an MLIR location otherwise.
    let (file, line) = match origin.rsplit_once(':') {
        Some((f, l)) if l.parse::<usize>().is_ok() => (f.to_string(), l.parse().unwrap_or(0)),
        _ => (origin.to_string(), 0),
    };
    LoadError {
        file,
        line,
        column: if line > 0 { 1 } else { 0 },
        field,
        message,
    }
}

impl Problem {
    /// Instance-cycles of unit `f` that one iteration occupies.
    pub fn occupancy(&self, f: usize) -> u64 {
        self.ops
            .iter()
            .flat_map(|o| &o.rrt)
            .map(|row| row[f] as u64)
            .sum()
    }

    /// Cycles one iteration needs on unit `f` at least: ceil(occupancy / capacity).
    pub fn unit_bound(&self, f: usize) -> u64 {
        self.occupancy(f).div_ceil(self.capacity[f].max(1) as u64)
    }

    /// Longest paths from a virtual source joined to every op with weight 0,
    /// over the edges `weight` keeps (Bellman-Ford). `None` when a cycle of
    /// positive weight makes them unbounded.
    pub fn longest_paths(&self, weight: impl Fn(&ProblemEdge) -> Option<i64>) -> Option<Vec<i64>> {
        let n = self.ops.len();
        let mut dist = vec![0i64; n];
        for _ in 0..=n {
            let mut changed = false;
            for e in &self.edges {
                if let Some(w) = weight(e) {
                    if dist[e.from] + w > dist[e.to] {
                        dist[e.to] = dist[e.from] + w;
                        changed = true;
                    }
                }
            }
            if !changed {
                return Some(dist);
            }
        }
        None
    }

    /// Resolves `graph` on `machine` and normalizes its durations.
    pub fn build(
        graph: &Graph,
        machine: &Machine,
        opts: BuildOptions,
    ) -> Result<(Problem, Normalization), LoadError> {
        let units: Vec<String> = machine.units.iter().map(|u| u.name.clone()).collect();
        let capacity: Vec<u32> = machine.units.iter().map(|u| u.capacity).collect();
        let asynchronous: Vec<bool> = machine.units.iter().map(|u| u.asynchronous).collect();
        let memories: Vec<(String, u64)> = machine
            .memories
            .iter()
            .map(|m| (m.name.clone(), m.capacity))
            .collect();

        // Timing of every op as segments, priced where needed.
        let mut segments: Vec<Vec<Segment>> = Vec::with_capacity(graph.ops.len());
        let mut stream_raw: Vec<u64> = Vec::with_capacity(graph.ops.len());
        for (i, op) in graph.ops.iter().enumerate() {
            let segs = priced_segments(&op.timing, machine)
                .map_err(|m| located(&op.origin, format!("op[{i}].cost"), m))?;
            for (k, seg) in segs.iter().enumerate() {
                for (unit, &n) in &seg.uses {
                    let Some(f) = units.iter().position(|u| u == unit) else {
                        return Err(located(
                            &op.origin,
                            format!("op[{i}].uses.{unit}"),
                            format!(
                                "unknown unit `{unit}` for op `{}`: machine `{}` has {}",
                                op.name,
                                machine.name,
                                units.join(", ")
                            ),
                        ));
                    };
                    if n > capacity[f] {
                        return Err(located(
                            &op.origin,
                            format!("op[{i}].uses.{unit}"),
                            format!(
                                "op `{}` occupies {n} {unit} in one cycle (segment {k}) but machine `{}` has {}",
                                op.name, machine.name, capacity[f]
                            ),
                        ));
                    }
                }
            }
            for kind in op.memory.keys() {
                if !memories.iter().any(|(m, _)| m == kind) {
                    let known: Vec<&str> = memories.iter().map(|(m, _)| m.as_str()).collect();
                    return Err(located(
                        &op.origin,
                        format!("op[{i}].memory.{kind}"),
                        format!(
                            "unknown memory `{kind}`: machine `{}` has {}",
                            machine.name,
                            known.join(", ")
                        ),
                    ));
                }
            }
            let mut segs = segs;
            let raw: u64 = segs.iter().map(|s| s.len).sum();
            if op.streaming {
                // Section 5.3: a streaming op is modeled with zero latency;
                // only its unit occupancy stays.
                while segs.last().is_some_and(|s| s.uses.is_empty()) {
                    segs.pop();
                }
            }
            stream_raw.push(if op.streaming { raw } else { 0 });
            segments.push(segs);
        }

        let busy = busy_cycles(segments.iter().flatten());
        let unit_cycles: Vec<u64> = units
            .iter()
            .map(|u| busy.get(u).copied().unwrap_or(0))
            .collect();

        // Every positive duration takes part in one normalization.
        let mut durations: Vec<u64> = Vec::new();
        for (op, segs) in graph.ops.iter().zip(&segments) {
            durations.extend(segs.iter().map(|s| s.len));
            durations.push(op.spill_cost);
        }
        durations.extend(graph.edges.iter().filter_map(|e| e.delay));
        let norm = normalize(&durations, opts.u, opts.time_limit).map_err(|m| LoadError {
            file: graph.name.clone(),
            line: 0,
            column: 0,
            field: "normalization".into(),
            message: m,
        })?;
        let too_big = |v: u64, what: &str| LoadError {
            file: graph.name.clone(),
            line: 0,
            column: 0,
            field: what.into(),
            message: format!("normalized duration {v} too large"),
        };

        let mut ops = Vec::with_capacity(graph.ops.len());
        for ((op, segs), &stream_cycles) in graph.ops.iter().zip(&segments).zip(&stream_raw) {
            let mut rrt: Vec<Vec<u32>> = Vec::new();
            for seg in segs {
                let mut row = vec![0u32; units.len()];
                for (unit, &n) in &seg.uses {
                    let f = units.iter().position(|u| u == unit).unwrap_or(0);
                    row[f] = n;
                }
                for _ in 0..norm.map(seg.len) {
                    rrt.push(row.clone());
                }
            }
            let cycles =
                u32::try_from(rrt.len()).map_err(|_| too_big(rrt.len() as u64, "cycles"))?;
            let spill = norm.map(op.spill_cost);
            let used: Vec<usize> = (0..units.len())
                .filter(|&f| rrt.iter().any(|row| row[f] > 0))
                .collect();
            let op_async = !used.is_empty() && used.iter().all(|&f| asynchronous[f]);
            ops.push(ProblemOp {
                name: op.name.clone(),
                cycles,
                rrt,
                regs: op.regs,
                memory: memories
                    .iter()
                    .map(|(m, _)| op.memory.get(m).copied().unwrap_or(0))
                    .collect(),
                variable_latency: op.variable_latency,
                streaming: op.streaming,
                warp_group: op.warp_group,
                last_stage: op.last_stage,
                spill_cost: u32::try_from(spill).map_err(|_| too_big(spill, "spill_cost"))?,
                asynchronous: op_async,
                stream_cycles,
            });
        }
        let mut edges = Vec::with_capacity(graph.edges.len());
        for e in &graph.edges {
            let delay = match e.delay {
                Some(d) => norm.map(d),
                None => ops[e.from].cycles as u64,
            };
            edges.push(ProblemEdge {
                from: e.from,
                to: e.to,
                delay: u32::try_from(delay).map_err(|_| too_big(delay, "delay"))?,
                distance: e.distance,
                blocking: e.blocking,
                order: e.order,
            });
        }
        // Colocation sets of graphs built in code are checked as the loader
        // checks those it reads.
        for (k, set) in graph.same_group.iter().enumerate() {
            if let Some(&v) = set.ops.iter().find(|&&v| v >= ops.len()) {
                return Err(located(
                    &set.origin,
                    format!("same_group[{k}]"),
                    format!("op index {v} out of range ({} ops)", ops.len()),
                ));
            }
            if let Some(&v) = set.ops.iter().find(|&&v| ops[v].variable_latency) {
                return Err(located(
                    &set.origin,
                    format!("same_group[{k}]"),
                    format!(
                        "`{}` has variable latency and always runs on group 0",
                        ops[v].name
                    ),
                ));
            }
        }
        let cycle_scale = match (norm.original.last(), norm.normalized.last()) {
            (Some(&raw), Some(&n)) if n > 0 => raw as f64 / n as f64,
            _ => 1.0,
        };
        Ok((
            Problem {
                units,
                capacity,
                asynchronous,
                memories,
                ops,
                edges,
                same_group: graph.same_group.iter().map(|g| g.ops.clone()).collect(),
                cycle_scale,
                unit_cycles,
            },
            norm,
        ))
    }
}

/// An op's reservation segments: a given table as it is, or a cost class
/// priced by `machine` on a tile: its occupancy on the rule's unit, then its
/// latency (if any) on no unit.
pub fn priced_segments(timing: &Timing, machine: &Machine) -> Result<Vec<Segment>, String> {
    match timing {
        Timing::Table(s) => Ok(s.clone()),
        Timing::Cost {
            class,
            shape,
            dtype,
        } => {
            let c = machine.cost(class, shape, dtype)?;
            let mut s = vec![Segment {
                len: c.occupancy,
                uses: BTreeMap::from([(c.unit, 1)]),
            }];
            if c.latency > 0 {
                s.push(Segment {
                    len: c.latency,
                    uses: BTreeMap::new(),
                });
            }
            Ok(s)
        }
    }
}

/// Cycles that `segments` keep each unit busy (length times instances), by
/// unit name.
pub fn busy_cycles<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> BTreeMap<String, u64> {
    let mut busy = BTreeMap::new();
    for seg in segments {
        for (unit, &n) in &seg.uses {
            *busy.entry(unit.clone()).or_insert(0) += seg.len * u64::from(n);
        }
    }
    busy
}

/// A modulo schedule: initiation interval I, issue cycle M(v) of every op
/// within its iteration, and schedule length L (all ops complete by L).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Schedule {
    pub ii: u32,
    pub start: Vec<u32>,
    pub length: u32,
}

impl Schedule {
    /// The schedule with issue cycles `start` whose length is the completion
    /// of its last op, max M(v) + cycles(v).
    pub fn tight(p: &Problem, ii: u32, start: Vec<u32>) -> Schedule {
        let length = p
            .ops
            .iter()
            .zip(&start)
            .map(|(o, &s)| s + o.cycles)
            .max()
            .unwrap_or(0);
        Schedule { ii, start, length }
    }

    /// Stage of op `v`: floor(M(v) / I).
    pub fn stage(&self, v: usize) -> u32 {
        self.start[v] / self.ii
    }

    /// Number of overlapped copies ceil(L / I) in the straight-line program.
    pub fn copies(&self) -> u32 {
        self.length.div_ceil(self.ii).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{load, SameGroup};

    #[test]
    fn colocation_sets_built_in_code_are_checked() {
        let mut g = load::parse(
            "g.toml",
            "[[op]]\nname = \"a\"\ncycles = 1\n[[op]]\nname = \"l\"\ncycles = 1\nvariable_latency = true\n",
        )
        .unwrap();
        let m = Machine::select("h100").unwrap();
        let set = |ops: Vec<usize>| SameGroup {
            ops,
            reason: String::new(),
            origin: "code".into(),
        };
        g.same_group = vec![set(vec![0, 7])];
        let e = Problem::build(&g, &m, BuildOptions::default()).unwrap_err();
        assert!(e.message.contains("op index 7 out of range"), "{e}");
        g.same_group = vec![set(vec![0, 1])];
        let e = Problem::build(&g, &m, BuildOptions::default()).unwrap_err();
        assert!(e.message.contains("`l` has variable latency"), "{e}");
        assert_eq!(e.field, "same_group[0]");
    }
}
