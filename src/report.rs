//! Rendering a solved problem: text for people, JSON for tools.
//!
//! Both carry the same facts: normalized costs, I and L with their proof
//! status and the certificate, the schedule per op (cycle and stage), the
//! modular reservation table, and the straight-line program of ceil(L/I)
//! overlapped copies split into prologue, steady state and epilogue (the
//! paper's Figure 1(e)/(f)).

pub mod schedule;

use std::fmt::Write as _;

use serde::Serialize;

use crate::checker::WarpConfig;
use crate::joint::{Encoding, JointRefuted, JointResult, LatencySlack, Objective, Streaming};
use crate::modulo::ModuloResult;
use crate::normalize::Normalization;
use crate::problem::{Problem, Schedule};

/// Which part of the straight-line program a cycle belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Prologue,
    Steady,
    Epilogue,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub name: String,
    /// M(v), the issue cycle within an iteration.
    pub cycle: u32,
    /// floor(M(v) / I).
    pub stage: u32,
    /// Normalized cycles of the op.
    pub cycles: u32,
    /// Units the op occupies (unit name -> instances at its busiest cycle).
    pub units: std::collections::BTreeMap<String, u32>,
    /// Warp group A(v) (0 = variable-latency group); absent without WS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warp_group: Option<u32>,
}

/// The warp-specialization part of a report.
#[derive(Debug, Clone, Serialize)]
pub struct WarpReport {
    pub encoding: Encoding,
    #[serde(flatten)]
    pub config: WarpConfig,
    /// Len(M) of the optimal modulo schedule at this I (Algorithm 1's start).
    pub modulo_length: u32,
    /// Ops per group, group 0 first.
    pub groups: Vec<Vec<String>>,
    /// Streaming ops and the prefetch depth they need (section 5.3).
    pub streaming: Vec<Streaming>,
    pub queries: u32,
    /// How much later than modeled asynchronous ops may complete before
    /// they delay one another (`joint::slack`); absent without such ops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_slack: Option<LatencySlack>,
    /// Why the graph's same_group sets were dropped (`twill solve
    /// --same-group-first` when no schedule met them); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_group_dropped: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    pub original: u64,
    pub normalized: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NormalizationReport {
    pub u: u64,
    pub f: u64,
    pub max_distortion: f64,
    pub proven: bool,
    pub costs: Vec<CostReport>,
}

/// One row of the modular reservation table: for each unit, the ops that
/// occupy it at this steady-state cycle, as `name@c` (c = the op's own cycle).
#[derive(Debug, Clone, Serialize)]
pub struct ModularRow {
    pub residue: u32,
    pub units: std::collections::BTreeMap<String, Vec<String>>,
}

/// An op instance issued in the straight-line program.
#[derive(Debug, Clone, Serialize)]
pub struct Issue {
    pub cycle: u32,
    pub op: String,
    /// Which copy (loop iteration) of the modulo schedule.
    pub iteration: u32,
    pub part: Part,
}

#[derive(Debug, Clone, Serialize)]
pub struct StraightLine {
    /// ceil(L / I) overlapped copies.
    pub copies: u32,
    /// Total cycles (copies - 1) * I + L.
    pub cycles: u32,
    /// [start, end) of each part.
    pub prologue: [u32; 2],
    pub steady: [u32; 2],
    pub epilogue: [u32; 2],
    pub issues: Vec<Issue>,
}

/// What a search proved, as the report needs it.
struct Proof {
    ii_proven: bool,
    length_proven: bool,
    res_mii: u32,
    rec_mii: u32,
    certificate: Vec<JointRefuted>,
}

/// Everything `twill solve` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub graph: String,
    pub machine: String,
    pub ii: u32,
    pub length: u32,
    /// Number of pipeline stages, ceil(L / I).
    pub stages: u32,
    /// Both I and L are proven optimal.
    pub proven: bool,
    pub ii_proven: bool,
    pub length_proven: bool,
    /// Wall-clock seconds of normalization plus scheduling.
    pub seconds: f64,
    pub res_mii: u32,
    pub rec_mii: u32,
    /// Everything refuted before the answer: smaller I with the reason, and
    /// (I, L) ranges without a warp-specialized schedule.
    pub certificate: Vec<JointRefuted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warp_specialization: Option<WarpReport>,
    pub normalization: NormalizationReport,
    pub ops: Vec<OpReport>,
    pub modular_rrt: Vec<ModularRow>,
    pub straight_line: StraightLine,
}

impl Report {
    /// The report of a modulo schedule without warp specialization.
    pub fn from_modulo(
        graph: &str,
        machine: &str,
        p: &Problem,
        norm: &Normalization,
        result: &ModuloResult,
        seconds: f64,
    ) -> Report {
        let proof = Proof {
            ii_proven: result.ii_proven,
            length_proven: result.length_proven,
            res_mii: result.res_mii,
            rec_mii: result.rec_mii,
            certificate: result
                .certificate
                .iter()
                .cloned()
                .map(JointRefuted::Modulo)
                .collect(),
        };
        Report::new(
            graph,
            machine,
            p,
            norm,
            &result.schedule,
            None,
            proof,
            seconds,
        )
    }

    /// The report of a joint (SWP + WS) schedule. `p` is the problem the
    /// joint search solved (its streaming view).
    pub fn from_joint(
        graph: &str,
        machine: &str,
        p: &Problem,
        norm: &Normalization,
        result: &JointResult,
        seconds: f64,
    ) -> Report {
        let js = &result.schedule;
        let proof = Proof {
            ii_proven: result.ii_proven,
            length_proven: result.length_proven,
            res_mii: result.res_mii,
            rec_mii: result.rec_mii,
            certificate: result.certificate.clone(),
        };
        let mut r = Report::new(
            graph,
            machine,
            p,
            norm,
            &js.schedule,
            Some(&js.group),
            proof,
            seconds,
        );
        let ngroups = js.group.iter().copied().max().unwrap_or(0) as usize + 1;
        let mut groups = vec![Vec::new(); ngroups];
        for (v, &g) in js.group.iter().enumerate() {
            groups[g as usize].push(p.ops[v].name.clone());
        }
        r.warp_specialization = Some(WarpReport {
            encoding: result.encoding,
            config: result.warps,
            modulo_length: result.modulo_length,
            groups,
            streaming: result.streaming.clone(),
            queries: result.queries,
            latency_slack: result.latency_slack,
            same_group_dropped: None,
        });
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        graph: &str,
        machine: &str,
        p: &Problem,
        norm: &Normalization,
        s: &Schedule,
        groups: Option<&[u32]>,
        proof: Proof,
        seconds: f64,
    ) -> Report {
        let ops = p
            .ops
            .iter()
            .enumerate()
            .map(|(v, op)| {
                let mut units = std::collections::BTreeMap::new();
                for row in &op.rrt {
                    for (f, &n) in row.iter().enumerate() {
                        if n > 0 {
                            let e = units.entry(p.units[f].clone()).or_insert(0);
                            *e = (*e).max(n);
                        }
                    }
                }
                OpReport {
                    name: op.name.clone(),
                    cycle: s.start[v],
                    stage: s.stage(v),
                    cycles: op.cycles,
                    units,
                    warp_group: groups.map(|g| g[v]),
                }
            })
            .collect();
        let modular_rrt = (0..s.ii)
            .map(|r| {
                let mut units = std::collections::BTreeMap::new();
                for (f, unit) in p.units.iter().enumerate() {
                    let mut who = Vec::new();
                    for (v, op) in p.ops.iter().enumerate() {
                        for (c, row) in op.rrt.iter().enumerate() {
                            if row[f] > 0 && (s.start[v] + c as u32) % s.ii == r {
                                for _ in 0..row[f] {
                                    who.push(format!("{}@{c}", op.name));
                                }
                            }
                        }
                    }
                    if !who.is_empty() {
                        units.insert(unit.clone(), who);
                    }
                }
                ModularRow { residue: r, units }
            })
            .collect();
        let copies = s.copies();
        let total = (copies - 1) * s.ii + s.length;
        let prologue = [0, (copies - 1) * s.ii];
        let steady = [prologue[1], prologue[1] + s.ii];
        let epilogue = [steady[1], total.max(steady[1])];
        let part = |t: u32| {
            if t < prologue[1] {
                Part::Prologue
            } else if t < steady[1] {
                Part::Steady
            } else {
                Part::Epilogue
            }
        };
        let mut issues = Vec::new();
        for j in 0..copies {
            for (v, op) in p.ops.iter().enumerate() {
                let t = j * s.ii + s.start[v];
                issues.push(Issue {
                    cycle: t,
                    op: op.name.clone(),
                    iteration: j,
                    part: part(t),
                });
            }
        }
        issues.sort_by_key(|i| (i.cycle, i.iteration));
        Report {
            graph: graph.to_string(),
            machine: machine.to_string(),
            ii: s.ii,
            length: s.length,
            stages: copies,
            proven: proof.ii_proven && proof.length_proven,
            ii_proven: proof.ii_proven,
            length_proven: proof.length_proven,
            seconds,
            res_mii: proof.res_mii,
            rec_mii: proof.rec_mii,
            certificate: proof.certificate,
            warp_specialization: None,
            normalization: NormalizationReport {
                u: norm.u,
                f: norm.f,
                max_distortion: norm.max_distortion,
                proven: norm.proven,
                costs: norm
                    .original
                    .iter()
                    .zip(&norm.normalized)
                    .map(|(&original, &normalized)| CostReport {
                        original,
                        normalized,
                    })
                    .collect(),
            },
            ops,
            modular_rrt,
            straight_line: StraightLine {
                copies,
                cycles: total,
                prologue,
                steady,
                epilogue,
                issues,
            },
        }
    }

    /// Human-readable rendering.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "graph {} on machine {}", self.graph, self.machine);
        self.write_costs(&mut o);
        self.write_optimality(&mut o);
        self.write_schedule(&mut o);
        if let Some(wr) = &self.warp_specialization {
            self.write_warp_specialization(&mut o, wr);
        }
        self.write_modular_rrt(&mut o);
        self.write_straight_line(&mut o);
        o
    }

    /// The text's normalized costs: each original cost and its normalization.
    fn write_costs(&self, o: &mut String) {
        let n = &self.normalization;
        let _ = writeln!(
            o,
            "\nnormalized costs (U = {}, F = {}, largest ratio distortion {:.2}%{}):",
            n.u,
            n.f,
            100.0 * n.max_distortion,
            if n.proven {
                ""
            } else {
                ", F not proven minimal"
            }
        );
        for c in &n.costs {
            let _ = writeln!(o, "  {:>10} -> {}", c.original, c.normalized);
        }
    }

    /// The text's I, L and stages, what is proven about them, and the
    /// certificate.
    fn write_optimality(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "\nI = {}  L = {}  stages = {}  (ResMII {}, RecMII {})",
            self.ii, self.length, self.stages, self.res_mii, self.rec_mii
        );
        let _ = writeln!(
            o,
            "optimal: {} (I {}, L {})  solved in {:.3} s",
            if self.proven { "proven" } else { "NOT proven" },
            if self.ii_proven {
                "proven minimal"
            } else {
                "not proven"
            },
            match (self.length_proven, &self.warp_specialization) {
                (
                    true,
                    Some(WarpReport {
                        latency_slack:
                            Some(LatencySlack {
                                objective: Objective::Slack,
                                ..
                            }),
                        ..
                    }),
                ) => "proven the shortest with the most latency slack at this I",
                (true, _) => "proven minimal at this I",
                _ => "not proven",
            },
            self.seconds
        );
        if self.certificate.is_empty() {
            let _ = writeln!(o, "certificate: I = {} is the trivial lower bound", self.ii);
        } else {
            let _ = writeln!(o, "certificate (infeasible I):");
            for r in &self.certificate {
                let _ = writeln!(o, "  {r}");
            }
        }
    }

    /// The text's schedule table: cycle, stage, cycles, warp group and units
    /// of every op.
    fn write_schedule(&self, o: &mut String) {
        let w = self
            .ops
            .iter()
            .map(|op| op.name.len())
            .max()
            .unwrap_or(2)
            .max(2);
        let _ = writeln!(o, "\nschedule:");
        let ws = self.warp_specialization.is_some();
        let _ = writeln!(
            o,
            "  {:w$}  cycle  stage  cycles  {}units",
            "op",
            if ws { "group  " } else { "" }
        );
        for op in &self.ops {
            let units: Vec<String> = op.units.iter().map(|(u, n)| format!("{u}x{n}")).collect();
            let group = op
                .warp_group
                .map(|g| format!("{g:>5}  "))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  {:w$}  {:>5}  {:>5}  {:>6}  {group}{}",
                op.name,
                op.cycle,
                op.stage,
                op.cycles,
                units.join(" ")
            );
        }
    }

    /// The text's warp specialization: the configuration, the ops of each
    /// group, the streaming ops and the latency slack.
    fn write_warp_specialization(&self, o: &mut String, wr: &WarpReport) {
        let _ = writeln!(
            o,
            "\nwarp specialization ({} encoding, {} compute groups, {} registers/thread each, {} SMT queries; Len(M) = {}):",
            match wr.encoding {
                Encoding::Default => "default",
                Encoding::Int => "int",
                Encoding::Paper => "paper",
            },
            wr.config.groups,
            wr.config.reg_limit,
            wr.queries,
            wr.modulo_length
        );
        for (g, ops) in wr.groups.iter().enumerate() {
            let role = if g == 0 { " (variable latency)" } else { "" };
            let list = if ops.is_empty() {
                "-".to_string()
            } else {
                ops.join(" ")
            };
            let _ = writeln!(o, "  group {g}{role}: {list}");
        }
        for st in &wr.streaming {
            let _ = writeln!(
                o,
                "  streaming `{}`: latency modeled as 0; its {} raw cycles need {} iteration(s) of prefetch at I = {} (tunable)",
                st.op, st.raw_cycles, st.prefetch, self.ii
            );
        }
        if let Some(ls) = &wr.latency_slack {
            let _ = writeln!(
                o,
                "  latency slack: asynchronous ops may complete {} cycle(s) late before they delay one another ({})",
                ls.cycles,
                self.slack_objective(ls)
            );
        }
        if let Some(why) = &wr.same_group_dropped {
            let _ = writeln!(o, "  same_group sets dropped: {why}");
        }
    }

    /// How the latency slack `ls` was optimized, for the text.
    fn slack_objective(&self, ls: &LatencySlack) -> String {
        match (ls.objective, ls.at_shortest_length) {
            (Objective::Slack, Some(before)) => format!(
                "{} with {} stage(s) at this I; the shortest schedule, L = {}, has {before}",
                if ls.proven {
                    "the most"
                } else {
                    "not proven the most"
                },
                self.stages,
                ls.shortest_length
            ),
            _ => "not optimized: --objective slack optimizes it".to_string(),
        }
    }

    /// The text's modular reservation table: one column per unit, one line
    /// per run of steady-state cycles ([`Self::rrt_runs`]).
    fn write_modular_rrt(&self, o: &mut String) {
        let units: Vec<&String> = {
            let mut u: Vec<&String> = self
                .modular_rrt
                .iter()
                .flat_map(|r| r.units.keys())
                .collect();
            u.sort();
            u.dedup();
            u
        };
        let _ = writeln!(
            o,
            "\nmodular reservation table (steady-state cycle x unit):"
        );
        let cells = self.rrt_lines(&units, &self.rrt_runs(&units));
        let lw = cells.iter().map(|c| c.0.len()).max().unwrap_or(5).max(5);
        let widths: Vec<usize> = (0..units.len())
            .map(|k| {
                cells
                    .iter()
                    .map(|r| r.1[k].len())
                    .chain([units[k].len()])
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        let mut head = format!("  {:>lw$}", "cycle");
        for (k, u) in units.iter().enumerate() {
            let _ = write!(head, "  {:w$}", u, w = widths[k]);
        }
        let _ = writeln!(o, "{}", head.trim_end());
        for (label, row) in &cells {
            let mut line = format!("  {label:>lw$}");
            for (k, c) in row.iter().enumerate() {
                let _ = write!(line, "  {:w$}", c, w = widths[k]);
            }
            let _ = writeln!(o, "{}", line.trim_end());
        }
    }

    /// The runs [first, last] of consecutive steady-state cycles that the
    /// same ops occupy, each a cycle later than in the previous one, so
    /// that the table shows each run on one line.
    fn rrt_runs(&self, units: &[&String]) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for r in &self.modular_rrt {
            let same = runs.last().is_some_and(|&(a, b)| {
                let prev = &self.modular_rrt[b as usize];
                units.iter().all(|u| {
                    let (x, y) = (rrt_cell(prev, u), rrt_cell(r, u));
                    x.len() == y.len()
                        && x.iter().zip(&y).all(|(p, q)| p.0 == q.0 && p.1 + 1 == q.1)
                }) && a <= b
            });
            match runs.last_mut() {
                Some(g) if same => g.1 = r.residue,
                _ => runs.push((r.residue, r.residue)),
            }
        }
        runs
    }

    /// The table's lines, one per run: its label (`a` or `a-b`) and, per
    /// unit, the ops on it as `op@c` (`op@a..b` for a run: the ops' own
    /// cycles).
    fn rrt_lines(&self, units: &[&String], runs: &[(u32, u32)]) -> Vec<(String, Vec<String>)> {
        runs.iter()
            .map(|&(a, b)| {
                let label = if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                };
                let first = &self.modular_rrt[a as usize];
                let last = &self.modular_rrt[b as usize];
                let row = units
                    .iter()
                    .map(|u| {
                        rrt_cell(first, u)
                            .iter()
                            .zip(rrt_cell(last, u))
                            .map(|(p, q)| {
                                if a == b {
                                    format!("{}@{}", p.0, p.1)
                                } else {
                                    format!("{}@{}..{}", p.0, p.1, q.1)
                                }
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                (label, row)
            })
            .collect()
    }

    /// The text's straight-line program: the ops issued at each cycle, under
    /// a heading per part.
    fn write_straight_line(&self, o: &mut String) {
        let sl = &self.straight_line;
        let _ = writeln!(
            o,
            "\nstraight-line program: {} copies, {} cycles; prologue [{}, {}), steady state [{}, {}), epilogue [{}, {})",
            sl.copies,
            sl.cycles,
            sl.prologue[0],
            sl.prologue[1],
            sl.steady[0],
            sl.steady[1],
            sl.epilogue[0],
            sl.epilogue[1]
        );
        let mut current: Option<Part> = None;
        let mut t = 0;
        while t < sl.cycles {
            let here: Vec<String> = sl
                .issues
                .iter()
                .filter(|i| i.cycle == t)
                .map(|i| format!("{}[{}]", i.op, i.iteration))
                .collect();
            let part = if t < sl.prologue[1] {
                Part::Prologue
            } else if t < sl.steady[1] {
                Part::Steady
            } else {
                Part::Epilogue
            };
            if current != Some(part) {
                let name = match part {
                    Part::Prologue => "// prologue",
                    Part::Steady => "// steady state (loop body, repeats every I cycles)",
                    Part::Epilogue => "// epilogue",
                };
                let _ = writeln!(o, "  {name}");
                current = Some(part);
            }
            if !here.is_empty() {
                let _ = writeln!(o, "  {t:>5}: {}", here.join(" "));
            }
            t += 1;
        }
    }
}

/// The ops on unit `u` at one steady-state cycle, as (name, the op's own
/// cycle).
fn rrt_cell(r: &ModularRow, u: &str) -> Vec<(String, u32)> {
    r.units
        .get(u)
        .map(|v| {
            v.iter()
                .map(|x| {
                    let (n, c) = x.rsplit_once('@').unwrap_or((x, "0"));
                    (n.to_string(), c.parse().unwrap_or(0))
                })
                .collect()
        })
        .unwrap_or_default()
}
