//! The integer scheduling problem the solvers take.
//!
//! [`Problem::build`] resolves a [`Graph`] against a [`Machine`]: it prices ops
//! with cost rules, checks every unit and memory name, normalizes all
//! durations with the cost-normalization ZLP, and lays out each op's
//! reservation table as one row per (normalized) cycle. Errors name the op's
//! origin (file and line) and field.

use std::collections::BTreeMap;

use crate::error::LoadError;
use crate::graph::{Graph, Op, Segment, Timing};
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
    /// Raw machine cycles the op occupies each bandwidth unit (parallel to
    /// [`Problem::units`]; 0 for functional units): its traffic over the
    /// unit's bytes per cycle. Counted per iteration, not per cycle.
    pub traffic: Vec<u64>,
    /// Raw machine cycles on [`Problem::crossing_unit`] for each consumer of
    /// the op's result on another warp group.
    pub cross_traffic: u64,
}

/// What crossing groups costs on the crossing unit: (a, b, raw cycles)
/// for an unordered pair a < b of ops (see [`Problem::crossing_charges`]).
pub type CrossingCharge = (usize, usize, u64);

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
    /// Cycles past its issue that `to` keeps reading `from`'s result: the
    /// duration of an asynchronous reader (a wgmma, a TMA store) of a value
    /// in memory, which it reads until it completes (its wait retires it);
    /// 0 otherwise, and for a streaming load (its ring's slots are the back
    /// end's: [`crate::backend::rings`]). The value stays live that much
    /// longer.
    pub hold: u32,
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
    /// For a bandwidth unit, the ops' own traffic (crossings excluded).
    pub unit_cycles: Vec<u64>,
    /// Whether each unit is a bandwidth (parallel to `units`): bounded per
    /// iteration by [`Problem::bandwidth_budget`], holding no slots.
    pub bandwidth: Vec<bool>,
    /// The bandwidth unit that tiles handed between warp groups pass
    /// through, if the machine names one.
    pub crossing_unit: Option<usize>,
    /// Raw machine cycles per normalized cycle for the bandwidth budgets, as
    /// an exact fraction (raw, normalized): the busiest functional unit's
    /// (its raw busy cycles over its normalized ones, largest raw
    /// occupancy per instance), so that a bandwidth and the unit that
    /// bounds I are measured alike; normalization rounds each duration on
    /// its own, so the largest duration's ratio (`cycle_scale`) can be off
    /// by a fifth at U = 30. The largest duration's when no unit is busy.
    pub scale: (u64, u64),
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

    /// Raw machine cycles that bandwidth unit `f` offers in an iteration
    /// of `ii` normalized cycles: floor(ii * capacity * raw / normalized).
    pub fn bandwidth_budget(&self, f: usize, ii: u32) -> u64 {
        (u128::from(ii) * u128::from(self.capacity[f]) * u128::from(self.scale.0)
            / u128::from(self.scale.1.max(1)))
        .min(u128::from(u64::MAX)) as u64
    }

    /// Raw cycles of bandwidth unit `f` that the ops take whatever their
    /// warp groups (their own traffic).
    pub fn fixed_traffic(&self, f: usize) -> u64 {
        self.ops.iter().map(|o| o.traffic[f]).sum()
    }

    /// What crossing groups costs on the crossing unit: for each unordered
    /// pair (a, b), a < b, of fixed-latency ops joined by a data edge, the
    /// raw cycles charged when A(a) != A(b): the source's `cross_traffic`
    /// once per distinct directed data edge between them. Pairs that cost
    /// nothing are left out. Empty without a crossing unit.
    /// Variable-latency ops (loads) are left out: their tiles land in
    /// shared memory by the copy, whose traffic the op already carries.
    pub fn crossing_charges(&self) -> Vec<CrossingCharge> {
        if self.crossing_unit.is_none() {
            return Vec::new();
        }
        let mut directed: Vec<(usize, usize)> = self
            .edges
            .iter()
            .filter(|e| e.from != e.to && !e.order)
            .filter(|e| !self.ops[e.from].variable_latency && !self.ops[e.to].variable_latency)
            .map(|e| (e.from, e.to))
            .collect();
        directed.sort_unstable();
        directed.dedup();
        let mut pairs: BTreeMap<(usize, usize), u64> = BTreeMap::new();
        for (u, v) in directed {
            *pairs.entry((u.min(v), u.max(v))).or_insert(0) += self.ops[u].cross_traffic;
        }
        pairs
            .into_iter()
            .filter(|&(_, w)| w > 0)
            .map(|((a, b), w)| (a, b, w))
            .collect()
    }

    /// The smallest I whose budget on bandwidth unit `f` holds `need` raw
    /// cycles: ii * capacity * raw >= need * normalized (the inverse of
    /// [`Problem::bandwidth_budget`]); at least 1.
    pub fn bandwidth_ii(&self, f: usize, need: u64) -> u32 {
        let per = u128::from(self.capacity[f].max(1)) * u128::from(self.scale.0.max(1));
        let ii = (u128::from(need) * u128::from(self.scale.1.max(1))).div_ceil(per);
        ii.clamp(1, u128::from(u32::MAX)) as u32
    }

    /// The smallest I at which every bandwidth unit's fixed traffic fits
    /// its budget (1 without bandwidth units).
    pub fn bandwidth_mii(&self) -> u32 {
        (0..self.units.len())
            .filter(|&f| self.bandwidth[f])
            .map(|f| self.bandwidth_ii(f, self.fixed_traffic(f)))
            .max()
            .unwrap_or(1)
    }

    /// Longest paths from a virtual source joined to every op with weight 0,
    /// over the edges `weight` keeps (Bellman-Ford). `None` when a cycle of
    /// positive weight makes them unbounded.
    pub fn longest_paths(&self, weight: impl Fn(&ProblemEdge) -> Option<i64>) -> Option<Vec<i64>> {
        self.longest_paths_from(vec![0i64; self.ops.len()], weight)
    }

    /// The least values >= `dist` (one per op) closed under every edge
    /// `weight` keeps: dist[to] >= dist[from] + weight (Bellman-Ford).
    /// `None` when a cycle of positive weight makes them unbounded.
    pub fn longest_paths_from(
        &self,
        mut dist: Vec<i64>,
        weight: impl Fn(&ProblemEdge) -> Option<i64>,
    ) -> Option<Vec<i64>> {
        for _ in 0..=self.ops.len() {
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
        let m = MachineUnits::new(machine);
        let traffic = m.traffic_rows(graph)?;
        let (segments, stream_raw) = m.segments(graph)?;
        let busy = busy_cycles(segments.iter().flatten());
        let unit_cycles: Vec<u64> = m
            .units
            .iter()
            .enumerate()
            .map(|(f, u)| {
                busy.get(u).copied().unwrap_or(0) + traffic.iter().map(|t| t[f]).sum::<u64>()
            })
            .collect();
        let norm = normalize_durations(graph, &segments, opts)?;
        let ops = m.problem_ops(graph, &segments, &stream_raw, traffic, &norm)?;
        let edges = problem_edges(graph, &ops, &norm)?;
        check_same_group(graph, &ops)?;
        let (cycle_scale, scale) = m.scales(&norm, &ops, &busy);
        Ok((
            Problem {
                units: m.units,
                capacity: m.capacity,
                asynchronous: m.asynchronous,
                memories: m.memories,
                ops,
                edges,
                same_group: graph.same_group.iter().map(|g| g.ops.clone()).collect(),
                cycle_scale,
                unit_cycles,
                bandwidth: m.bandwidth,
                crossing_unit: m.crossing_unit,
                scale,
            },
            norm,
        ))
    }
}

/// The machine's units and memories as the problem indexes them.
struct MachineUnits<'m> {
    machine: &'m Machine,
    units: Vec<String>,
    capacity: Vec<u32>,
    asynchronous: Vec<bool>,
    memories: Vec<(String, u64)>,
    /// Bandwidth units (with bytes per cycle).
    bandwidth: Vec<bool>,
    crossing_unit: Option<usize>,
}

impl<'m> MachineUnits<'m> {
    fn new(machine: &'m Machine) -> Self {
        MachineUnits {
            machine,
            units: machine.units.iter().map(|u| u.name.clone()).collect(),
            capacity: machine.units.iter().map(|u| u.capacity).collect(),
            asynchronous: machine.units.iter().map(|u| u.asynchronous).collect(),
            memories: machine
                .memories
                .iter()
                .map(|m| (m.name.clone(), m.capacity))
                .collect(),
            bandwidth: machine
                .units
                .iter()
                .map(|u| u.bytes_per_cycle.is_some())
                .collect(),
            crossing_unit: machine.units.iter().position(|u| u.crossings),
        }
    }

    /// Raw cycles `bytes` take on bandwidth unit `f` (0 on other units).
    fn raw_cycles(&self, f: usize, bytes: u64) -> u64 {
        self.machine.units[f]
            .bytes_per_cycle
            .map_or(0, |b| bytes.div_ceil(b.max(1)))
    }

    /// Each op's traffic in raw cycles per unit (0 off bandwidth units);
    /// traffic on another unit is an error.
    fn traffic_rows(&self, graph: &Graph) -> Result<Vec<Vec<u64>>, LoadError> {
        let machine = self.machine;
        let mut traffic: Vec<Vec<u64>> = Vec::with_capacity(graph.ops.len());
        for (i, op) in graph.ops.iter().enumerate() {
            let mut row = vec![0u64; self.units.len()];
            for (unit, &bytes) in &op.traffic {
                match self.units.iter().position(|u| u == unit) {
                    Some(f) if self.bandwidth[f] => row[f] = self.raw_cycles(f, bytes),
                    _ => {
                        let known: Vec<&str> = machine
                            .units
                            .iter()
                            .filter(|u| u.bytes_per_cycle.is_some())
                            .map(|u| u.name.as_str())
                            .collect();
                        return Err(located(
                            &op.origin,
                            format!("op[{i}].traffic.{unit}"),
                            format!(
                                "`{unit}` is not a bandwidth unit of machine `{}` (bandwidth units: {})",
                                machine.name,
                                if known.is_empty() { "none".to_string() } else { known.join(", ") }
                            ),
                        ));
                    }
                }
            }
            traffic.push(row);
        }
        Ok(traffic)
    }

    /// The timing of every op as segments, priced where needed, with the
    /// latency of streaming ops dropped; and the raw cycles of each
    /// streaming op before that (0 for the others).
    fn segments(&self, graph: &Graph) -> Result<(Vec<Vec<Segment>>, Vec<u64>), LoadError> {
        let mut segments: Vec<Vec<Segment>> = Vec::with_capacity(graph.ops.len());
        let mut stream_raw: Vec<u64> = Vec::with_capacity(graph.ops.len());
        for (i, op) in graph.ops.iter().enumerate() {
            let mut segs = priced_segments(&op.timing, self.machine)
                .map_err(|m| located(&op.origin, format!("op[{i}].cost"), m))?;
            self.check_uses(op, i, &segs)?;
            self.check_memories(op, i)?;
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
        Ok((segments, stream_raw))
    }

    /// Every unit op `i` occupies exists and has the capacity it uses.
    fn check_uses(&self, op: &Op, i: usize, segs: &[Segment]) -> Result<(), LoadError> {
        let machine = self.machine;
        for (k, seg) in segs.iter().enumerate() {
            for (unit, &n) in &seg.uses {
                let Some(f) = self.units.iter().position(|u| u == unit) else {
                    return Err(located(
                        &op.origin,
                        format!("op[{i}].uses.{unit}"),
                        format!(
                            "unknown unit `{unit}` for op `{}`: machine `{}` has {}",
                            op.name,
                            machine.name,
                            self.units.join(", ")
                        ),
                    ));
                };
                if n > self.capacity[f] {
                    return Err(located(
                        &op.origin,
                        format!("op[{i}].uses.{unit}"),
                        format!(
                            "op `{}` occupies {n} {unit} in one cycle (segment {k}) but machine `{}` has {}",
                            op.name, machine.name, self.capacity[f]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every memory op `i` holds exists.
    fn check_memories(&self, op: &Op, i: usize) -> Result<(), LoadError> {
        for kind in op.memory.keys() {
            if !self.memories.iter().any(|(m, _)| m == kind) {
                let known: Vec<&str> = self.memories.iter().map(|(m, _)| m.as_str()).collect();
                return Err(located(
                    &op.origin,
                    format!("op[{i}].memory.{kind}"),
                    format!(
                        "unknown memory `{kind}`: machine `{}` has {}",
                        self.machine.name,
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The problem's ops: reservation tables of normalized rows, normalized
    /// spill costs, footprints per memory and traffic.
    fn problem_ops(
        &self,
        graph: &Graph,
        segments: &[Vec<Segment>],
        stream_raw: &[u64],
        traffic: Vec<Vec<u64>>,
        norm: &Normalization,
    ) -> Result<Vec<ProblemOp>, LoadError> {
        let mut ops = Vec::with_capacity(graph.ops.len());
        for (((op, segs), &stream_cycles), traffic) in
            graph.ops.iter().zip(segments).zip(stream_raw).zip(traffic)
        {
            let rrt = self.reservation_table(segs, norm);
            let cycles =
                u32::try_from(rrt.len()).map_err(|_| too_big(graph, rrt.len() as u64, "cycles"))?;
            let spill = norm.map(op.spill_cost);
            let used: Vec<usize> = (0..self.units.len())
                .filter(|&f| rrt.iter().any(|row| row[f] > 0))
                .collect();
            // A conditional op (an `scf.if`) runs its ops in its own
            // region, and the code after it waits for them: never
            // asynchronous, whatever units its branch uses.
            let op_async =
                !op.conditional && !used.is_empty() && used.iter().all(|&f| self.asynchronous[f]);
            ops.push(ProblemOp {
                name: op.name.clone(),
                cycles,
                rrt,
                regs: op.regs,
                memory: self
                    .memories
                    .iter()
                    .map(|(m, _)| op.memory.get(m).copied().unwrap_or(0))
                    .collect(),
                variable_latency: op.variable_latency,
                streaming: op.streaming,
                warp_group: op.warp_group,
                last_stage: op.last_stage,
                spill_cost: u32::try_from(spill)
                    .map_err(|_| too_big(graph, spill, "spill_cost"))?,
                asynchronous: op_async,
                stream_cycles,
                traffic,
                cross_traffic: self
                    .crossing_unit
                    .map_or(0, |f| self.raw_cycles(f, op.cross_bytes)),
            });
        }
        Ok(ops)
    }

    /// One row per normalized cycle of each segment: the units it occupies.
    fn reservation_table(&self, segs: &[Segment], norm: &Normalization) -> Vec<Vec<u32>> {
        let mut rrt: Vec<Vec<u32>> = Vec::new();
        for seg in segs {
            let mut row = vec![0u32; self.units.len()];
            for (unit, &n) in &seg.uses {
                let f = self.units.iter().position(|u| u == unit).unwrap_or(0);
                row[f] = n;
            }
            for _ in 0..norm.map(seg.len) {
                rrt.push(row.clone());
            }
        }
        rrt
    }

    /// Raw machine cycles per normalized cycle: as a float (the largest
    /// duration's ratio), and exactly, as (raw, normalized) of the busiest
    /// functional unit (largest raw occupancy per instance, compared as
    /// fractions busy / capacity).
    fn scales(
        &self,
        norm: &Normalization,
        ops: &[ProblemOp],
        busy: &BTreeMap<String, u64>,
    ) -> (f64, (u64, u64)) {
        let (largest_raw, largest_norm) = match (norm.original.last(), norm.normalized.last()) {
            (Some(&raw), Some(&n)) if n > 0 => (raw, n),
            _ => (1, 1),
        };
        let cycle_scale = largest_raw as f64 / largest_norm as f64;
        let mut scale = (largest_raw, largest_norm);
        let mut best: Option<(u64, u64)> = None; // (raw busy, capacity)
        for f in (0..self.units.len()).filter(|&f| !self.bandwidth[f]) {
            let norm_busy: u64 = ops
                .iter()
                .flat_map(|o| &o.rrt)
                .map(|r| u64::from(r[f]))
                .sum();
            let raw_busy = busy.get(&self.units[f]).copied().unwrap_or(0);
            let cap = u64::from(self.capacity[f].max(1));
            let better = best.is_none_or(|(b, c)| raw_busy * c > b * cap);
            if norm_busy > 0 && raw_busy > 0 && better {
                best = Some((raw_busy, cap));
                scale = (raw_busy, norm_busy);
            }
        }
        (cycle_scale, scale)
    }
}

/// The error of a normalized duration that does not fit its field.
fn too_big(graph: &Graph, v: u64, what: &str) -> LoadError {
    LoadError {
        file: graph.name.clone(),
        line: 0,
        column: 0,
        field: what.into(),
        message: format!("normalized duration {v} too large"),
    }
}

/// Every positive duration (segments, spill costs, edge delays) normalized
/// together.
fn normalize_durations(
    graph: &Graph,
    segments: &[Vec<Segment>],
    opts: BuildOptions,
) -> Result<Normalization, LoadError> {
    let mut durations: Vec<u64> = Vec::new();
    for (op, segs) in graph.ops.iter().zip(segments) {
        durations.extend(segs.iter().map(|s| s.len));
        durations.push(op.spill_cost);
    }
    durations.extend(graph.edges.iter().filter_map(|e| e.delay));
    normalize(&durations, opts.u, opts.time_limit).map_err(|m| LoadError {
        file: graph.name.clone(),
        line: 0,
        column: 0,
        field: "normalization".into(),
        message: m,
    })
}

/// The problem's edges with normalized delays (the producer's cycles when
/// the graph gives none), and the holds of asynchronous readers.
fn problem_edges(
    graph: &Graph,
    ops: &[ProblemOp],
    norm: &Normalization,
) -> Result<Vec<ProblemEdge>, LoadError> {
    let mut edges = Vec::with_capacity(graph.edges.len());
    for e in &graph.edges {
        let delay = match e.delay {
            Some(d) => norm.map(d),
            None => ops[e.from].cycles as u64,
        };
        edges.push(ProblemEdge {
            from: e.from,
            to: e.to,
            delay: u32::try_from(delay).map_err(|_| too_big(graph, delay, "delay"))?,
            distance: e.distance,
            blocking: e.blocking,
            order: e.order,
            hold: 0,
        });
    }
    // An asynchronous reader of a buffer holds it until it completes. A
    // streaming load's buffer is a ring the back end sizes (prefetch
    // depth, and the slot Triton adds for an MMA operand: the hold), not
    // a lifetime of the model.
    for e in &mut edges {
        let buffer = ops[e.from].memory.iter().any(|&m| m > 0) && !ops[e.from].streaming;
        if !e.order && buffer && ops[e.to].asynchronous {
            e.hold = ops[e.to].cycles;
        }
    }
    Ok(edges)
}

/// Colocation sets of graphs built in code are checked as the loader
/// checks those it reads.
fn check_same_group(graph: &Graph, ops: &[ProblemOp]) -> Result<(), LoadError> {
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
    Ok(())
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
