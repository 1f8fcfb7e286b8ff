//! The TOML dependence-graph format: reading with located errors, writing.
//!
//! The format is documented in `docs/graph-format.md`. In short:
//!
//! ```toml
//! name = "fa_simplified"
//! [[op]]
//! name = "S"
//! cycles = 1
//! uses = { TC = 1 }          # or rrt = [{ TC = 1 }], or cost = { class = ..., shape = [...], dtype = ... }
//! [[edge]]
//! from = "S"
//! to = "P"
//! delay = 1                  # default: cycles of `from`
//! distance = 0               # iteration delay delta, default 0
//! ```
//!
//! Every error names the file, line, column and field. Checks that need a
//! machine (unknown unit, unknown cost class) happen in [`crate::problem`].

use std::collections::{BTreeMap, HashMap};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use serde::Deserialize;
use toml::Spanned;

use super::{Edge, Graph, Op, SameGroup, Segment, Timing};
use crate::error::{LoadError, SourceMap};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGraph {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    op: Vec<Spanned<RawOp>>,
    #[serde(default)]
    edge: Vec<Spanned<RawEdge>>,
    #[serde(default)]
    same_group: Vec<Spanned<RawSameGroup>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSameGroup {
    ops: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    origin: Option<String>,
}

/// One RRT row as written: unit name -> instances.
type RawRow = BTreeMap<String, Spanned<i64>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    name: Spanned<String>,
    cycles: Option<Spanned<i64>>,
    uses: Option<Spanned<RawRow>>,
    rrt: Option<Spanned<Vec<Spanned<RawRow>>>>,
    cost: Option<Spanned<RawCost>>,
    regs: Option<Spanned<i64>>,
    #[serde(default)]
    memory: BTreeMap<String, Spanned<i64>>,
    #[serde(default)]
    variable_latency: bool,
    #[serde(default)]
    streaming: Option<Spanned<bool>>,
    #[serde(default)]
    warp_group: bool,
    #[serde(default)]
    last_stage: bool,
    spill_cost: Option<Spanned<i64>>,
    #[serde(default)]
    traffic: BTreeMap<String, Spanned<i64>>,
    cross_bytes: Option<Spanned<i64>>,
    #[serde(default)]
    conditional: Option<Spanned<bool>>,
    #[serde(default)]
    origin: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCost {
    class: String,
    shape: Spanned<Vec<Spanned<i64>>>,
    dtype: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEdge {
    from: Spanned<String>,
    to: Spanned<String>,
    delay: Option<Spanned<i64>>,
    distance: Option<Spanned<i64>>,
    #[serde(default)]
    blocking: bool,
    #[serde(default)]
    order: bool,
    #[serde(default)]
    origin: Option<String>,
}

/// Largest cycle count, delay or footprint accepted (keeps all arithmetic exact).
pub const MAX_VALUE: i64 = 1 << 40;

/// What parsing one file shares: its source map (for located errors) and
/// its name.
struct Ctx<'a> {
    map: &'a SourceMap,
    file: &'a str,
}

impl Ctx<'_> {
    fn int(&self, v: &Spanned<i64>, field: &str, min: i64, what: &str) -> Result<u64, LoadError> {
        let x = *v.get_ref();
        if x < min {
            let msg = if min == 0 {
                format!("{what} must not be negative, got {x}")
            } else {
                format!("{what} must be at least {min}, got {x}")
            };
            return Err(self.map.error(Some(v.span()), field, msg));
        }
        if x > MAX_VALUE {
            return Err(self.map.error(
                Some(v.span()),
                field,
                format!("{what} {x} exceeds the limit {MAX_VALUE}"),
            ));
        }
        Ok(x as u64)
    }

    fn uses(
        &self,
        row: &BTreeMap<String, Spanned<i64>>,
        field: &str,
    ) -> Result<BTreeMap<String, u32>, LoadError> {
        let mut out = BTreeMap::new();
        for (unit, n) in row {
            let f = format!("{field}.{unit}");
            let n = self.int(n, &f, 0, "unit usage")?;
            let n =
                u32::try_from(n).map_err(|_| self.map.error(None, &f, "unit usage too large"))?;
            if n > 0 {
                out.insert(unit.clone(), n);
            }
        }
        Ok(out)
    }
}

/// Reads a graph file.
pub fn load_file(path: &std::path::Path) -> Result<Graph, LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| LoadError {
        file: file.clone(),
        line: 0,
        column: 0,
        field: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    parse(&file, &text)
}

/// Parses graph TOML text; `file` names it in errors and op origins.
pub fn parse(file: &str, text: &str) -> Result<Graph, LoadError> {
    let map = SourceMap::new(file, text);
    let raw: RawGraph = toml::from_str(text).map_err(|e| map.toml_error(&e))?;
    let cx = Ctx { map: &map, file };

    let mut ops: Vec<Op> = Vec::with_capacity(raw.op.len());
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, sop) in raw.op.iter().enumerate() {
        let op = cx.op(i, sop, &index)?;
        index.insert(op.name.clone(), i);
        ops.push(op);
    }
    let mut edges = Vec::with_capacity(raw.edge.len());
    for (i, sedge) in raw.edge.iter().enumerate() {
        edges.push(cx.edge(i, sedge, &index, &ops)?);
    }
    let mut same_group = Vec::with_capacity(raw.same_group.len());
    for (i, sg) in raw.same_group.iter().enumerate() {
        same_group.push(cx.same_group(i, sg, &index, &ops)?);
    }

    let graph = Graph {
        name: raw.name.unwrap_or_else(|| {
            std::path::Path::new(file)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("graph")
                .to_string()
        }),
        description: raw.description.unwrap_or_default(),
        ops,
        edges,
        same_group,
    };
    if let Some((i, cycle, positive)) = zero_distance_cycle(&graph) {
        let span = raw.edge[i].span();
        let why = if positive {
            "and positive total delay: no schedule can satisfy it"
        } else {
            "(an op cannot depend on itself within one iteration of an SSA loop body)"
        };
        return Err(map.error(
            Some(span),
            format!("edge[{i}]"),
            format!(
                "dependence cycle with iteration distance 0 {why}: {}",
                cycle.join(" -> ")
            ),
        ));
    }
    Ok(graph)
}

impl Ctx<'_> {
    /// The default origin of an entry: `file:line` of its span.
    fn at(&self, span: std::ops::Range<usize>) -> String {
        let (l, _) = self.map.position(span.start);
        format!("{}:{l}", self.file)
    }

    /// Op `i`; `index` holds the ops before it, by name.
    fn op(
        &self,
        i: usize,
        sop: &Spanned<RawOp>,
        index: &HashMap<String, usize>,
    ) -> Result<Op, LoadError> {
        let map = self.map;
        let op = sop.get_ref();
        let field = |f: &str| format!("op[{i}].{f}");
        let name = op.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(map.error(
                Some(op.name.span()),
                field("name"),
                "op name must not be empty",
            ));
        }
        if let Some(&j) = index.get(&name) {
            return Err(map.error(
                Some(op.name.span()),
                field("name"),
                format!("duplicate op name `{name}` (first defined as op[{j}])"),
            ));
        }
        let timing = self.timing(i, sop)?;
        let regs = match &op.regs {
            Some(r) => {
                let r = self.int(r, &field("regs"), 0, "registers")?;
                u32::try_from(r).map_err(|_| {
                    map.error(
                        op.regs.as_ref().map(|r| r.span()),
                        field("regs"),
                        "too many registers",
                    )
                })?
            }
            None => 0,
        };
        let memory = self.amounts(&op.memory, &field("memory"), "memory footprint")?;
        let streaming = op.streaming.as_ref().is_some_and(|s| *s.get_ref());
        if streaming && !op.variable_latency {
            return Err(map.error(
                op.streaming.as_ref().map(|s| s.span()),
                field("streaming"),
                "a streaming op must also be `variable_latency = true` (section 5.3)",
            ));
        }
        let conditional = op.conditional.as_ref().is_some_and(|c| *c.get_ref());
        if conditional && op.variable_latency {
            return Err(map.error(
                op.conditional.as_ref().map(|c| c.span()),
                field("conditional"),
                "a conditional op (an `scf.if`) runs at a fixed latency: it cannot be `variable_latency`",
            ));
        }
        let spill_cost = match &op.spill_cost {
            Some(s) => self.int(s, &field("spill_cost"), 0, "spill cost")?,
            None => 0,
        };
        let traffic = self.amounts(&op.traffic, &field("traffic"), "traffic")?;
        let cross_bytes = match &op.cross_bytes {
            Some(s) => self.int(s, &field("cross_bytes"), 0, "crossing bytes")?,
            None => 0,
        };
        Ok(Op {
            traffic,
            cross_bytes,
            conditional,
            name,
            timing,
            regs,
            memory,
            variable_latency: op.variable_latency,
            streaming,
            warp_group: op.warp_group,
            last_stage: op.last_stage,
            spill_cost,
            origin: op.origin.clone().unwrap_or_else(|| self.at(sop.span())),
        })
    }

    /// Non-negative amounts by key (memory footprints, traffic); `field`
    /// is the table's field, `what` names an amount in errors.
    fn amounts(
        &self,
        table: &BTreeMap<String, Spanned<i64>>,
        field: &str,
        what: &str,
    ) -> Result<BTreeMap<String, u64>, LoadError> {
        let mut out = BTreeMap::new();
        for (key, v) in table {
            out.insert(
                key.clone(),
                self.int(v, &format!("{field}.{key}"), 0, what)?,
            );
        }
        Ok(out)
    }

    /// The timing of op `i`: a cost class, an `rrt`, or `cycles` with
    /// `uses` (at most one of the three).
    fn timing(&self, i: usize, sop: &Spanned<RawOp>) -> Result<Timing, LoadError> {
        let map = self.map;
        let op = sop.get_ref();
        let field = |f: &str| format!("op[{i}].{f}");
        let given = [op.uses.is_some(), op.rrt.is_some(), op.cost.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(map.error(
                Some(sop.span()),
                field("uses"),
                "give at most one of `uses`, `rrt` and `cost`",
            ));
        }
        let cycles = match &op.cycles {
            Some(c) => Some(self.int(c, &field("cycles"), 0, "cycles")?),
            None => None,
        };
        if let Some(cost) = &op.cost {
            if let Some(c) = &op.cycles {
                return Err(map.error(
                    Some(c.span()),
                    field("cycles"),
                    "`cycles` conflicts with `cost`: the machine's cost rule gives the cycles",
                ));
            }
            return self.cost(i, cost);
        }
        if let Some(rrt) = &op.rrt {
            return self.rrt(i, op, rrt, cycles);
        }
        let Some(c) = cycles else {
            return Err(map.error(
                Some(op.name.span()),
                field("cycles"),
                "missing: give `cycles` (with `uses`), `rrt`, or `cost`",
            ));
        };
        let uses = match &op.uses {
            Some(u) => self.uses(u.get_ref(), &field("uses"))?,
            None => BTreeMap::new(),
        };
        if c == 0 && !uses.is_empty() {
            return Err(map.error(
                op.cycles.as_ref().map(|c| c.span()),
                field("cycles"),
                "an op that occupies a unit needs at least one cycle",
            ));
        }
        Ok(Timing::Table(if c == 0 {
            Vec::new()
        } else {
            vec![Segment { len: c, uses }]
        }))
    }

    /// A cost-class timing of op `i`.
    fn cost(&self, i: usize, cost: &Spanned<RawCost>) -> Result<Timing, LoadError> {
        let c = cost.get_ref();
        let mut shape = Vec::new();
        for (k, d) in c.shape.get_ref().iter().enumerate() {
            shape.push(self.int(d, &format!("op[{i}].cost.shape[{k}]"), 1, "dimension")?);
        }
        if shape.is_empty() {
            return Err(self.map.error(
                Some(c.shape.span()),
                format!("op[{i}].cost.shape"),
                "shape must have at least one dimension",
            ));
        }
        Ok(Timing::Cost {
            class: c.class.clone(),
            shape,
            dtype: c.dtype.clone(),
        })
    }

    /// A reservation-table timing of op `i`: equal rows merged into
    /// segments, padded with idle cycles up to `cycles` when given.
    fn rrt(
        &self,
        i: usize,
        op: &RawOp,
        rrt: &Spanned<Vec<Spanned<RawRow>>>,
        cycles: Option<u64>,
    ) -> Result<Timing, LoadError> {
        let mut segs: Vec<Segment> = Vec::new();
        for (r, row) in rrt.get_ref().iter().enumerate() {
            let uses = self.uses(row.get_ref(), &format!("op[{i}].rrt[{r}]"))?;
            Segment { len: 1, uses }.append_to(&mut segs);
        }
        let rows = rrt.get_ref().len() as u64;
        if let Some(c) = cycles {
            if c < rows {
                return Err(self.map.error(
                    op.cycles.as_ref().map(|c| c.span()),
                    format!("op[{i}].cycles"),
                    format!("cycles {c} is shorter than the {rows} rows of `rrt`"),
                ));
            }
            if c > rows {
                segs.push(Segment {
                    len: c - rows,
                    uses: BTreeMap::new(),
                });
            }
        }
        Ok(Timing::Table(segs))
    }

    /// Edge `i` between the named ops of `index`.
    fn edge(
        &self,
        i: usize,
        sedge: &Spanned<RawEdge>,
        index: &HashMap<String, usize>,
        ops: &[Op],
    ) -> Result<Edge, LoadError> {
        let map = self.map;
        let e = sedge.get_ref();
        let field = |f: &str| format!("edge[{i}].{f}");
        let end = |s: &Spanned<String>, f: &str| -> Result<usize, LoadError> {
            index.get(s.get_ref().trim()).copied().ok_or_else(|| {
                map.error(
                    Some(s.span()),
                    field(f),
                    format!("dangling edge: no op named `{}`", s.get_ref()),
                )
            })
        };
        let from = end(&e.from, "from")?;
        let to = end(&e.to, "to")?;
        let delay = match &e.delay {
            Some(d) => Some(self.int(d, &field("delay"), 0, "delay")?),
            None => None,
        };
        let distance = match &e.distance {
            Some(d) => {
                let d = self.int(d, &field("distance"), 0, "iteration distance")?;
                u32::try_from(d).map_err(|_| {
                    map.error(
                        e.distance.as_ref().map(|d| d.span()),
                        field("distance"),
                        "too large",
                    )
                })?
            }
            None => 0,
        };
        if from == to && distance == 0 {
            return Err(map.error(
                Some(e.to.span()),
                field("to"),
                format!(
                    "self edge on `{}` needs a positive iteration distance",
                    ops[from].name
                ),
            ));
        }
        if ops[to].streaming && distance == 0 {
            return Err(map.error(
                Some(e.to.span()),
                field("to"),
                format!(
                    "`{}` is streaming and must have no incoming dependence inside the iteration",
                    ops[to].name
                ),
            ));
        }
        Ok(Edge {
            from,
            to,
            delay,
            distance,
            blocking: e.blocking,
            order: e.order,
            origin: e.origin.clone().unwrap_or_else(|| self.at(sedge.span())),
        })
    }

    /// Colocation set `i`: at least two different fixed-latency ops.
    fn same_group(
        &self,
        i: usize,
        sg: &Spanned<RawSameGroup>,
        index: &HashMap<String, usize>,
        ops: &[Op],
    ) -> Result<SameGroup, LoadError> {
        let map = self.map;
        let g = sg.get_ref();
        let field = format!("same_group[{i}].ops");
        let mut members: Vec<usize> = Vec::new();
        for name in g.ops.get_ref() {
            let Some(&v) = index.get(name.get_ref().trim()) else {
                return Err(map.error(
                    Some(name.span()),
                    field,
                    format!("no op named `{}`", name.get_ref()),
                ));
            };
            if ops[v].variable_latency {
                return Err(map.error(
                    Some(name.span()),
                    field,
                    format!(
                        "`{}` has variable latency and always runs on group 0; only fixed-latency ops can be kept together",
                        ops[v].name
                    ),
                ));
            }
            if !members.contains(&v) {
                members.push(v);
            }
        }
        if members.len() < 2 {
            return Err(map.error(
                Some(g.ops.span()),
                field,
                "a same_group constraint needs at least two different ops",
            ));
        }
        Ok(SameGroup {
            ops: members,
            reason: g.reason.clone().unwrap_or_default(),
            origin: g.origin.clone().unwrap_or_else(|| self.at(sg.span())),
        })
    }
}

/// Whether an edge's delay is certainly positive (default delays are the
/// source's cycles; a priced op always takes at least one cycle).
fn positive_delay(g: &Graph, e: &Edge) -> bool {
    match e.delay {
        Some(d) => d > 0,
        None => match &g.ops[e.from].timing {
            Timing::Table(segs) => segs.iter().any(|s| s.len > 0),
            Timing::Cost { .. } => true,
        },
    }
}

/// Finds an edge inside a strongly connected component of the distance-0
/// subgraph (preferring one with positive delay), a cycle through it, and
/// whether the cycle's total delay is positive.
fn zero_distance_cycle(g: &Graph) -> Option<(usize, Vec<String>, bool)> {
    let mut dg = DiGraph::<usize, usize>::new();
    let nodes: Vec<_> = (0..g.ops.len()).map(|i| dg.add_node(i)).collect();
    for (i, e) in g.edges.iter().enumerate() {
        if e.distance == 0 {
            dg.add_edge(nodes[e.from], nodes[e.to], i);
        }
    }
    let mut comp = vec![usize::MAX; g.ops.len()];
    for (c, scc) in tarjan_scc(&dg).iter().enumerate() {
        for n in scc {
            comp[dg[*n]] = c;
        }
    }
    let inside = |e: &Edge| e.distance == 0 && comp[e.from] == comp[e.to];
    let pick = g
        .edges
        .iter()
        .position(|e| inside(e) && positive_delay(g, e))
        .map(|i| (i, true))
        .or_else(|| g.edges.iter().position(inside).map(|i| (i, false)));
    if let Some((i, positive)) = pick {
        let e = &g.edges[i];
        {
            // Path back from e.to to e.from inside the component.
            let path =
                petgraph::algo::astar(&dg, nodes[e.to], |n| n == nodes[e.from], |_| 1, |_| 0)
                    .map(|(_, p)| p)
                    .unwrap_or_default();
            let mut names: Vec<String> = vec![g.ops[e.from].name.clone()];
            names.extend(path.iter().map(|n| g.ops[dg[*n]].name.clone()));
            return Some((i, names, positive));
        }
    }
    None
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn table(m: &BTreeMap<String, u32>) -> String {
    let items: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{} = {v}", quote_key(k)))
        .collect();
    format!("{{ {} }}", items.join(", "))
}

/// `name = { key = value, ... }` for a non-empty map (nothing when empty).
fn push_table(out: &mut String, name: &str, map: &BTreeMap<String, u64>) {
    if !map.is_empty() {
        let items: Vec<String> = map
            .iter()
            .map(|(k, v)| format!("{} = {v}", quote_key(k)))
            .collect();
        out.push_str(&format!("{name} = {{ {} }}\n", items.join(", ")));
    }
}

fn quote_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        quote(k)
    }
}

/// Writes a graph in the TOML format that [`parse`] reads back to an equal graph.
pub fn to_toml(g: &Graph) -> String {
    let mut out = String::new();
    out.push_str(&format!("name = {}\n", quote(&g.name)));
    if !g.description.is_empty() {
        out.push_str(&format!("description = {}\n", quote(&g.description)));
    }
    for op in &g.ops {
        out.push_str(&format!("\n[[op]]\nname = {}\n", quote(&op.name)));
        match &op.timing {
            Timing::Cost {
                class,
                shape,
                dtype,
            } => {
                let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
                out.push_str(&format!(
                    "cost = {{ class = {}, shape = [{}], dtype = {} }}\n",
                    quote(class),
                    dims.join(", "),
                    quote(dtype)
                ));
            }
            Timing::Table(segs) => {
                let cycles: u64 = segs.iter().map(|s| s.len).sum();
                match segs.as_slice() {
                    [] => out.push_str("cycles = 0\n"),
                    [s] => {
                        out.push_str(&format!("cycles = {cycles}\n"));
                        if !s.uses.is_empty() {
                            out.push_str(&format!("uses = {}\n", table(&s.uses)));
                        }
                    }
                    _ => {
                        out.push_str(&format!("cycles = {cycles}\n"));
                        // Rows up to the last busy one; trailing idle rows come from `cycles`.
                        let busy: u64 = {
                            let mut acc = 0;
                            let mut last = 0;
                            for s in segs {
                                acc += s.len;
                                if !s.uses.is_empty() {
                                    last = acc;
                                }
                            }
                            last
                        };
                        let mut rows = Vec::new();
                        let mut t = 0;
                        for s in segs {
                            for _ in 0..s.len {
                                if t < busy {
                                    rows.push(table(&s.uses));
                                }
                                t += 1;
                            }
                        }
                        out.push_str(&format!("rrt = [{}]\n", rows.join(", ")));
                    }
                }
            }
        }
        if op.regs > 0 {
            out.push_str(&format!("regs = {}\n", op.regs));
        }
        push_table(&mut out, "memory", &op.memory);
        if op.variable_latency {
            out.push_str("variable_latency = true\n");
        }
        if op.streaming {
            out.push_str("streaming = true\n");
        }
        if op.warp_group {
            out.push_str("warp_group = true\n");
        }
        if op.last_stage {
            out.push_str("last_stage = true\n");
        }
        if op.spill_cost > 0 {
            out.push_str(&format!("spill_cost = {}\n", op.spill_cost));
        }
        push_table(&mut out, "traffic", &op.traffic);
        if op.cross_bytes > 0 {
            out.push_str(&format!("cross_bytes = {}\n", op.cross_bytes));
        }
        if op.conditional {
            out.push_str("conditional = true\n");
        }
        out.push_str(&format!("origin = {}\n", quote(&op.origin)));
    }
    for e in &g.edges {
        out.push_str(&format!(
            "\n[[edge]]\nfrom = {}\nto = {}\n",
            quote(&g.ops[e.from].name),
            quote(&g.ops[e.to].name)
        ));
        if let Some(d) = e.delay {
            out.push_str(&format!("delay = {d}\n"));
        }
        if e.distance > 0 {
            out.push_str(&format!("distance = {}\n", e.distance));
        }
        if e.blocking {
            out.push_str("blocking = true\n");
        }
        if e.order {
            out.push_str("order = true\n");
        }
        out.push_str(&format!("origin = {}\n", quote(&e.origin)));
    }
    for sg in &g.same_group {
        let names: Vec<String> = sg.ops.iter().map(|&v| quote(&g.ops[v].name)).collect();
        out.push_str(&format!("\n[[same_group]]\nops = [{}]\n", names.join(", ")));
        if !sg.reason.is_empty() {
            out.push_str(&format!("reason = {}\n", quote(&sg.reason)));
        }
        out.push_str(&format!("origin = {}\n", quote(&sg.origin)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FA: &str = r#"
name = "fa"
[[op]]
name = "S"
cycles = 1
uses = { TC = 1 }
[[op]]
name = "P"
rrt = [{ SFU = 1 }]
[[op]]
name = "O"
cycles = 1
uses = { TC = 1 }
[[edge]]
from = "S"
to = "P"
[[edge]]
from = "P"
to = "O"
[[edge]]
from = "O"
to = "O"
distance = 1
"#;

    fn err(text: &str) -> LoadError {
        parse("g.toml", text).unwrap_err()
    }

    #[test]
    fn parses_and_round_trips() {
        let g = parse("g.toml", FA).unwrap();
        assert_eq!(g.ops.len(), 3);
        assert_eq!(g.edges[2].distance, 1);
        assert_eq!(g.ops[0].origin, "g.toml:3");
        let again = parse("g.toml", &to_toml(&g)).unwrap();
        assert_eq!(g, again);
    }

    #[test]
    fn same_group_parses_round_trips_and_rejects_bad_sets() {
        let text =
            format!("{FA}\n[[same_group]]\nops = [\"S\", \"O\"]\nreason = \"one partition\"\n");
        let g = parse("g.toml", &text).unwrap();
        assert_eq!(g.same_group.len(), 1);
        assert_eq!(g.same_group[0].ops, [0, 2]);
        assert_eq!(g.same_group[0].reason, "one partition");
        assert_eq!(g.same_group[0].origin, "g.toml:25");
        assert_eq!(parse("g.toml", &to_toml(&g)).unwrap(), g);

        let e = err(&format!("{FA}\n[[same_group]]\nops = [\"S\", \"Q\"]\n"));
        assert_eq!((e.field.as_str(), e.line), ("same_group[0].ops", 26));
        assert!(e.message.contains("no op named `Q`"), "{e}");
        let e = err(&format!("{FA}\n[[same_group]]\nops = [\"S\", \"S\"]\n"));
        assert!(e.message.contains("at least two different ops"), "{e}");
        let vl = FA.replacen(
            "uses = { TC = 1 }",
            "uses = { TC = 1 }\nvariable_latency = true",
            1,
        );
        let e = err(&format!("{vl}\n[[same_group]]\nops = [\"S\", \"P\"]\n"));
        assert!(e.message.contains("`S` has variable latency"), "{e}");
    }

    #[test]
    fn dangling_edge_names_line_and_field() {
        let e = err(&FA.replace("to = \"O\"\ndistance", "to = \"Q\"\ndistance"));
        assert_eq!(e.field, "edge[2].to");
        assert_eq!(e.line, 22);
        assert!(e.message.contains("dangling"), "{e}");
    }

    #[test]
    fn negative_delay_is_rejected() {
        let e = err(&FA.replace("to = \"P\"\n", "to = \"P\"\ndelay = -3\n"));
        assert_eq!(e.field, "edge[0].delay");
        assert!(e.message.contains("negative"), "{e}");
    }

    #[test]
    fn zero_distance_cycle_with_delay_is_rejected() {
        let text = format!("{FA}\n[[edge]]\nfrom = \"P\"\nto = \"S\"\n");
        let e = err(&text);
        assert!(
            e.message.contains("S -> P -> S") || e.message.contains("P -> S -> P"),
            "{e}"
        );
        // The first distance-0 edge on the cycle with positive delay is named.
        assert_eq!(e.field, "edge[0]");
        assert_eq!(e.line, 14);
    }

    #[test]
    fn zero_distance_cycle_of_zero_delays_is_rejected_too() {
        let text = FA.replace("to = \"P\"\n", "to = \"P\"\ndelay = 0\n")
            + "\n[[edge]]\nfrom = \"P\"\nto = \"S\"\ndelay = 0\n";
        let e = err(&text);
        assert!(e.message.contains("SSA"), "{e}");
    }

    #[test]
    fn unknown_field_is_located() {
        let e = err(&FA.replace(
            "cycles = 1\nuses = { TC = 1 }\n[[op]]\nname = \"P\"",
            "cycels = 1\n[[op]]\nname = \"P\"",
        ));
        assert!(e.message.contains("cycels"), "{e}");
        assert_eq!(e.line, 5);
    }

    #[test]
    fn duplicate_names_and_conflicts() {
        let e = err(&FA.replace("name = \"P\"", "name = \"S\""));
        assert!(e.message.contains("duplicate"), "{e}");
        let e = err(&FA.replace(
            "rrt = [{ SFU = 1 }]",
            "rrt = [{ SFU = 1 }]\ncycles = 1\nuses = { SFU = 1 }",
        ));
        assert!(e.message.contains("at most one"), "{e}");
        let e = err(&FA.replace("rrt = [{ SFU = 1 }]", "rrt = [{ SFU = 1 }, {}]\ncycles = 1"));
        assert_eq!(e.field, "op[1].cycles");
    }

    #[test]
    fn streaming_needs_variable_latency_and_no_inputs() {
        let e = err(&FA.replace("name = \"P\"", "name = \"P\"\nstreaming = true"));
        assert_eq!(e.field, "op[1].streaming");
        let e = err(&FA.replace(
            "name = \"P\"",
            "name = \"P\"\nstreaming = true\nvariable_latency = true",
        ));
        assert_eq!(e.field, "edge[0].to");
    }
}
