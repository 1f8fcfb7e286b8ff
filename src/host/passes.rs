//! The bodies of `twill-schedule` and `twill-export-graph`.
//!
//! Per candidate loop: extract ([`crate::frontend::mlir`]), lower with the
//! machine's op rules ([`crate::frontend::lower`]), solve the joint problem
//! ([`crate::joint`]), re-check the schedule with the independent checker,
//! turn it into Triton's attributes ([`crate::backend::decide`]), check
//! those against the loop ([`crate::backend::validate`]) and write them. A
//! loop that fails any step is left untouched with a remark saying why; only
//! invalid pass options fail the pass.

use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Instant;

use mlir_sys::{mlirOperationGetLocation, MlirLocation, MlirOperation};

use super::ffi::{self, TWILL_ERROR, TWILL_REMARK, TWILL_WARNING};
use crate::backend::gluon::GraphTarget;
use crate::backend::{self, Arch, TritonTarget};
use crate::checker::{self, WarpConfig};
use crate::frontend::lower::{colocation, lower, straight_line_cycles, Lowered};
use crate::frontend::mlir::{
    enclosing_function, find_loops, has_attr, outside_loops, symbol_name, Scope,
};
use crate::frontend::{LoopIr, Straight};
use crate::graph::load::to_toml;
use crate::joint::{self, Encoding, JointOptions};
use crate::machine::Machine;
use crate::modulo::mii;
use crate::problem::{BuildOptions, Problem};

/// Options of `--twill-schedule` (see `passes/TwillPasses.cpp` for their
/// MLIR declarations and help texts).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleOptions {
    pub target: TritonTarget,
    pub machine: String,
    pub scope: Scope,
    pub timeout: f64,
    pub u: u64,
    pub encoding: Encoding,
    pub groups: u32,
    pub ws: bool,
    /// Write the solved partitions (false: stages only; Triton partitions).
    pub partitions: bool,
    /// Order of the ops within a stage (see [`backend::ClusterOrder`]).
    pub order: backend::ClusterOrder,
    /// Where the streaming loads go in the body (first, or last: one
    /// buffer fewer per load, as Triton adds one when a load's use is in a
    /// later cluster, and one iteration less lead) and their extra stages
    /// of prefetch (section 5.3's tunable): `loads` and `prefetch` for
    /// every load, `pointer-loads` and `pointer-prefetch` for the pointer
    /// loads (`tt.load`, cp.async) apart from the descriptor loads.
    pub loads: backend::LoadPlacement,
    /// `loads=auto` (the default) with no `pointer-*` option given: in a
    /// kernel with a loop whose streaming loads mix descriptor and pointer
    /// loads, every loop gets every load last, one stage deeper (Triton's
    /// own rotation), and `loads` otherwise reads `first` (see
    /// [`backend::LoadPlacement::rotated`]).
    pub auto_loads: bool,
    /// Under `loads=auto`, what is rotated (`rotate`): every loop of a
    /// kernel with a mixed loop (`kernel`, the default: true), or only the
    /// mixed loops themselves (`loop`). The two compile to the same
    /// instructions in a different rotation; which runs faster is below
    /// twill's model (BENCHMARKS.md, probe 9 and runs 26-29), so a
    /// configuration search may offer both and compare what ptxas makes of
    /// them (registers, spills).
    pub rotate_kernel: bool,
    /// CTAs that are to share each SM (`ctas`, default 1): the loop is
    /// solved within one CTA's share of the register file and shared memory
    /// ([`Machine::sharing_sm`]), and its loads are prefetched as deep as
    /// an iteration takes when that many CTAs share the SM's units.
    pub ctas: u32,
    /// What the joint search optimizes after I (`objective`, default
    /// `length`: the paper's shortest L; `slack`: the most latency slack
    /// among schedules with as many stages, see [`joint::Objective`]).
    pub objective: joint::Objective,
}

/// Options of `--twill-export-graph`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportOptions {
    pub dir: PathBuf,
    pub arch: Arch,
    pub machine: String,
    pub scope: Scope,
    /// The code generator the graphs describe (`target=`, `gluon=`).
    pub target: GraphTarget,
}

fn pairs(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

fn parse_scope(v: &str) -> Result<Scope, String> {
    match v {
        "ws" => Ok(Scope::WarpSpecialized),
        "all" => Ok(Scope::All),
        other => Err(format!("scope: expected ws or all, got `{other}`")),
    }
}

fn parse_arch(v: &str) -> Result<Arch, String> {
    Arch::parse(v).ok_or_else(|| format!("arch: expected sm90 or sm100, got `{v}`"))
}

impl ScheduleOptions {
    /// Parses the `key=value` lines the C++ pass renders.
    pub fn parse(text: &str) -> Result<ScheduleOptions, String> {
        let mut arch = Arch::Sm90;
        let mut version = (3, 6);
        let mut o = ScheduleOptions {
            target: TritonTarget { arch, version },
            machine: String::new(),
            scope: Scope::WarpSpecialized,
            timeout: 30.0,
            u: 30,
            encoding: Encoding::Default,
            groups: 0,
            ws: true,
            partitions: true,
            order: backend::ClusterOrder::Program,
            loads: backend::LoadPlacement::default(),
            auto_loads: false, // decided after the keys are read
            rotate_kernel: true,
            ctas: 1,
            objective: joint::Objective::Length,
        };
        let placed = |k: &str, v: &str| match v {
            "first" => Ok(false),
            "last" => Ok(true),
            _ if k == "loads" => Err(format!(
                "{k}: expected `auto`, `first` or `last`, got `{v}`"
            )),
            _ => Err(format!("{k}: expected `first` or `last`, got `{v}`")),
        };
        let extra = |k: &str, v: &str| {
            v.parse::<u32>()
                .ok()
                .filter(|p| *p <= 8)
                .ok_or_else(|| format!("{k}: expected 0..=8 extra stages, got `{v}`"))
        };
        // The pointer loads follow `loads` and `prefetch` unless given
        // (an empty value, or -1 for `pointer-prefetch`, is not given).
        let (mut pointer_last, mut pointer_extra) = (None, None);
        let mut auto = true;
        for (k, v) in pairs(text) {
            match k {
                "arch" => arch = parse_arch(v)?,
                "machine" => o.machine = v.to_string(),
                "triton" => {
                    version = TritonTarget::parse_version(v).ok_or_else(|| {
                        format!("triton: expected a version such as 3.6, got `{v}`")
                    })?
                }
                "scope" => o.scope = parse_scope(v)?,
                "timeout" => {
                    o.timeout = v
                        .parse::<f64>()
                        .ok()
                        .filter(|t| t.is_finite() && *t > 0.0)
                        .ok_or_else(|| format!("timeout: expected positive seconds, got `{v}`"))?
                }
                "u" => {
                    o.u = v
                        .parse::<u64>()
                        .ok()
                        .filter(|u| *u >= 1)
                        .ok_or_else(|| format!("u: expected an integer >= 1, got `{v}`"))?
                }
                "encoding" => o.encoding = v.parse()?,
                "ctas" => {
                    o.ctas = v
                        .parse::<u32>()
                        .ok()
                        // A sanity bound; the machine's own limit is checked
                        // per loop (Machine::sharing_sm).
                        .filter(|c| (1..=32).contains(c))
                        .ok_or_else(|| format!("ctas: expected 1..=32 CTAs per SM, got `{v}`"))?
                }
                "order" => o.order = v.parse()?,
                "objective" => o.objective = v.parse()?,
                "rotate" => {
                    o.rotate_kernel = match v {
                        "kernel" => true,
                        "loop" => false,
                        _ => return Err(format!("rotate: expected `kernel` or `loop`, got `{v}`")),
                    }
                }
                "loads" if v == "auto" => {
                    o.loads.descriptor.last = false;
                    auto = true;
                }
                "loads" => {
                    o.loads.descriptor.last = placed(k, v)?;
                    auto = false;
                }
                "prefetch" => o.loads.descriptor.extra = extra(k, v)?,
                "pointer-loads" if v.is_empty() => pointer_last = None,
                "pointer-loads" => pointer_last = Some(placed(k, v)?),
                "pointer-prefetch" if v == "-1" => pointer_extra = None,
                "pointer-prefetch" => pointer_extra = Some(extra(k, v)?),
                "groups" => {
                    o.groups = v
                        .parse::<u32>()
                        .map_err(|_| format!("groups: expected an integer, got `{v}`"))?
                }
                "ws" | "partitions" => {
                    let b = match v {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        other => return Err(format!("{k}: expected true or false, got `{other}`")),
                    };
                    if k == "ws" {
                        o.ws = b;
                    } else {
                        o.partitions = b;
                    }
                }
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        if !o.objective.implemented_by(o.encoding) {
            return Err(
                "objective=slack needs encoding=default (the only encoding with the refinement)"
                    .to_string(),
            );
        }
        o.target = TritonTarget { arch, version };
        // `auto` decides per loop only where nothing else places the loads.
        o.auto_loads = auto && pointer_last.is_none() && pointer_extra.is_none();
        o.loads.pointer = backend::Placement {
            last: pointer_last.unwrap_or(o.loads.descriptor.last),
            extra: pointer_extra.unwrap_or(o.loads.descriptor.extra),
        };
        if o.machine.is_empty() {
            o.machine = arch.default_machine().to_string();
        }
        if o.groups == 0 {
            // One producer + two consumers on Hopper; loads, MMA issue, two
            // softmax groups and a correction group on Blackwell (FA4).
            o.groups = match arch {
                Arch::Sm90 => 2,
                Arch::Sm100 => 4,
            };
        }
        if !o.ws {
            o.groups = 1;
        }
        Ok(o)
    }
}

impl ExportOptions {
    pub fn parse(text: &str) -> Result<ExportOptions, String> {
        let mut o = ExportOptions {
            dir: PathBuf::new(),
            arch: Arch::Sm90,
            machine: String::new(),
            scope: Scope::WarpSpecialized,
            target: GraphTarget::Triton,
        };
        let (mut target, mut gluon) = ("", "");
        for (k, v) in pairs(text) {
            match k {
                "dir" => o.dir = PathBuf::from(v),
                "arch" => o.arch = parse_arch(v)?,
                "machine" => o.machine = v.to_string(),
                "scope" => o.scope = parse_scope(v)?,
                "target" => target = v,
                "gluon" => gluon = v,
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        o.target = GraphTarget::parse(target, gluon)?;
        if matches!(o.target, GraphTarget::GluonSm90(_)) && o.arch != Arch::Sm90 {
            return Err("target=gluon-sm90 needs arch=sm90".to_string());
        }
        if o.dir.as_os_str().is_empty() {
            return Err("dir: a directory to write the graphs into is required".to_string());
        }
        if o.machine.is_empty() {
            o.machine = o.arch.default_machine().to_string();
        }
        Ok(o)
    }
}

/// At most this many seconds go to the search under the target's
/// colocation rules before the loop is solved without them (stages only).
const COLOCATED_SECONDS: f64 = 10.0;

/// Why `ctas=N` (N > 1) is refused on a warp-specialized loop: Triton's
/// partitions add warps to the module's `ttg.num-warps`, which a CTA's
/// share of the SM would not count.
fn sharing_refused(ctas: u32) -> String {
    format!(
        "ctas={ctas}: a CTA's share of the SM is not modeled for warp-specialized loops (their partitions add warps)"
    )
}

/// What happened to one loop.
enum Outcome {
    Scheduled(String),
    Skipped(String),
}

/// Schedules one extracted loop; writes attributes when everything holds.
fn schedule_loop(
    for_op: MlirOperation,
    ir: &LoopIr,
    machine: &Machine,
    o: &ScheduleOptions,
    tag: u32,
    stages_only: Option<&str>,
    mixed: Option<&str>,
) -> Outcome {
    let started = Instant::now();
    let sharing = o.ctas > 1;
    // One CTA's share of the SM when `ctas` CTAs are to share it (the
    // caller refuses warp-specialized kernels: see `sharing_refused`).
    let shared_sm;
    let machine = if sharing {
        shared_sm = match machine.sharing_sm(o.ctas, ir.num_warps) {
            Ok(m) => m,
            Err(e) => return Outcome::Skipped(format!("ctas={}: {e}", o.ctas)),
        };
        &shared_sm
    } else {
        machine
    };
    let lowered: Lowered = match lower(ir, machine, o.target.last_stage_ops()) {
        Ok(l) => l,
        Err(e) => return Outcome::Skipped(format!("{} (at {})", e.reason, e.location)),
    };
    if lowered.graph.ops.is_empty() {
        return Outcome::Skipped("no op of the body costs anything on this machine".to_string());
    }
    let build = BuildOptions {
        u: o.u,
        time_limit: o.timeout,
    };
    // Triton warp-specializes only loops marked tt.warp_specialize (and, on
    // sm90, only at num_warps = 4); other loops are software-pipelined by
    // one instruction stream, whose barrier waits do not stop the
    // asynchronous units (TMA, tensor cores) it feeds: no blocking rule.
    let ws_loop = o.ws && ir.warp_specialize;
    let ws = ws_loop && !(o.target.arch == Arch::Sm90 && ir.num_warps != 4);
    let mut graph = lowered.graph.clone();
    if !ws_loop {
        for e in &mut graph.edges {
            e.blocking = false;
        }
    }
    // Partitions that are written must be ones the code generator can
    // build: the target's colocation sets. When no schedule meets them
    // (within a third of the budget, at most COLOCATED_SECONDS), the loop is
    // solved without them and only its stages are written: Triton
    // partitions around them.
    let colocated = if ws && o.partitions && stages_only.is_none() {
        o.target
            .partition_mma_ops()
            .map(|mmas| colocation(ir, &lowered, mmas))
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let warps = WarpConfig {
        groups: if ws_loop { o.groups } else { 1 },
        reg_limit: machine.warps.max_regs_per_thread,
        cross_warp: true,
    };
    // Priced and normalized once; the colocated attempt only adds its sets.
    let problem = match Problem::build(&graph, machine, build) {
        Ok((p, _)) => p,
        Err(e) => return Outcome::Skipped(format!("cannot price the loop: {e}")),
    };
    let solve = |p: &Problem, seconds: f64| {
        joint::solve(
            p,
            JointOptions {
                encoding: o.encoding,
                warps,
                timeout: seconds.max(0.01),
                seed: 0,
                threads: 0,
                objective: o.objective,
            },
        )
        .map_err(|e| format!("no schedule: {e}"))
    };
    let left = |started: &Instant| (o.timeout - started.elapsed().as_secs_f64()).max(0.01);
    let mut partitions = ws && o.partitions && stages_only.is_none();
    let mut partition_note = stages_only
        .filter(|_| ws && o.partitions)
        .map(str::to_string);
    // The problem whose schedule is written (with the colocation sets when
    // they held), for the checker below.
    let mut colocated_problem = None;
    let solved = if colocated.is_empty() {
        solve(&problem, left(&started))
    } else {
        let mut with = problem.clone();
        with.same_group = colocated.into_iter().map(|set| set.ops).collect();
        let budget = (left(&started) / 3.0).min(COLOCATED_SECONDS);
        match solve(&with, budget) {
            Ok(r) => {
                colocated_problem = Some(with);
                Ok(r)
            }
            Err(why) => {
                tracing::debug!(target: "twill", "{}: under Triton's partition rules: {why}", ir.name);
                partitions = false;
                // One line: remarks are read line by line.
                let why = why.replace('\n', " ");
                partition_note = Some(if why.contains("timed out") {
                    format!(
                        "no schedule under Triton's partition rules within {budget:.0} s: {why}"
                    )
                } else {
                    format!("none that Triton can build: {why}")
                });
                solve(&problem, left(&started))
            }
        }
    };
    let mut result = match solved {
        Ok(r) => r,
        Err(why) => {
            // What the loop costs at least and at most, for models that rank
            // configurations (twill_triton.configure): the busiest unit's
            // cycles per iteration and the ops back to back.
            let sequential: u64 = problem.ops.iter().map(|op| u64::from(op.cycles)).sum();
            return Outcome::Skipped(format!(
                "{} [resource bound ~{:.0} cycles, sequential ~{:.0} cycles]{}",
                why.replace('\n', " "),
                f64::from(mii::res_mii(&problem)) * problem.cycle_scale,
                sequential as f64 * problem.cycle_scale,
                unit_note(&problem)
            ));
        }
    };
    // With `ctas` CTAs on the SM an iteration takes at least `ctas` times
    // the busiest unit's cycles (the CTAs share the units): a load needs
    // fewer iterations of lead to cover its time (and fewer buffers). Alone
    // (I >= ResMII) this is I, and the depths stay the solver's.
    let iteration = f64::from(
        result
            .schedule
            .schedule
            .ii
            .max(o.ctas.saturating_mul(result.res_mii)),
    ) * problem.cycle_scale;
    for st in &mut result.streaming {
        st.prefetch = joint::prefetch_depth(st.raw_cycles, iteration);
    }
    // The independent checker, once more, on exactly what is written.
    let (view, _) = joint::streaming_view(colocated_problem.as_ref().unwrap_or(&problem));
    let violations = checker::check_joint(&view, &result.schedule, &warps);
    if !violations.is_empty() {
        let list: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
        return Outcome::Skipped(format!(
            "the checker rejected the schedule: {}",
            list.join("; ")
        ));
    }
    // `loads=auto`: the loads of a loop that mixes descriptor and pointer
    // loads, or (`rotate=kernel`) of any loop of its kernel, are rotated;
    // `mixed` names that loop (found by the caller).
    let rotated = o.auto_loads && mixed.is_some();
    let loads = if rotated { o.loads.rotated() } else { o.loads };
    let decide = |order| {
        backend::decide(
            ir,
            &lowered,
            &result.schedule,
            &result.streaming,
            o.target.arch,
            partitions,
            order,
            loads,
        )
    };
    let mut decision = decide(o.order);
    // The program order keeps the solver's stages; where it cannot meet
    // Triton's order rule, the slot order (the schedule's issue times) is
    // written instead.
    if o.order == backend::ClusterOrder::Program
        && !backend::validate(ir, &decision, &o.target).is_empty()
    {
        tracing::debug!("program order breaks Triton's order rule; writing the slot order");
        decision = decide(backend::ClusterOrder::Slot);
    }
    // Each streaming load's node and placement (by the MLIR op behind it),
    // in the order of `result.streaming`.
    let streaming: Vec<(Option<usize>, backend::Placement)> = result
        .streaming
        .iter()
        .map(|st| {
            let v = lowered.graph.ops.iter().position(|g| g.name == st.op);
            let mut p = v.map_or(loads.descriptor, |v| loads.of_node(ir, &lowered, v));
            if v.is_some_and(|v| decision.moved_last.contains(&v)) {
                p = backend::Placement {
                    last: true,
                    extra: p.extra + 1,
                };
            }
            (v, p)
        })
        .collect();
    // Triton allocates a ring per pipelined load (the back end's model of
    // LowerLoops: the stage gap to its first use, one more when that use is
    // in a later cluster, one more for an MMA operand). Refuse a pipeline
    // whose rings cannot fit in shared memory (Triton would fail at launch).
    if let Some(cap) = machine.memory("smem").map(|m| m.capacity) {
        let need: u64 = backend::rings(ir, &decision, o.target.arch)
            .iter()
            .filter_map(|r| {
                let node = lowered.ops[r.load].node?;
                let bytes = lowered.graph.ops[node].memory.get("smem").copied()?;
                Some(u64::from(r.slots) * bytes)
            })
            .sum();
        if need > cap {
            let pointer = if loads.is_uniform() {
                String::new()
            } else {
                format!(", pointer-prefetch={}", loads.pointer.extra)
            };
            let auto_note = if rotated {
                " (loads=auto: mixed descriptor and pointer loads, all last with one stage more)"
            } else {
                ""
            };
            // The options as given (`loads=auto` adds its stage on top).
            return Outcome::Skipped(format!(
                "the prefetch buffers need {need} bytes of shared memory, more than the {cap} of machine `{}` (prefetch={} extra stages{pointer}){auto_note}",
                machine.name, o.loads.descriptor.extra
            ));
        }
    }
    let broken = backend::validate(ir, &decision, &o.target);
    if !broken.is_empty() {
        let list: Vec<String> = broken.iter().map(|v| v.to_string()).collect();
        return Outcome::Skipped(format!(
            "the decision breaks Triton's contract: {}",
            list.join("; ")
        ));
    }
    if let Err(e) = backend::mlir::write(for_op, &decision, o.target.arch, tag) {
        return Outcome::Skipped(format!("cannot write attributes: {e}"));
    }
    let s = &result.schedule.schedule;
    let proven = if result.ii_proven && result.length_proven {
        "proven optimal"
    } else if result.ii_proven {
        "I proven optimal, L not proven"
    } else {
        "not proven optimal"
    };
    let mut msg = format!(
        "twill: scheduled {}: I={} (~{:.0} cycles) L={} stages={} {}, {} ops in the graph, {:.2}s",
        ir.name,
        s.ii,
        f64::from(s.ii) * problem.cycle_scale,
        s.length,
        decision.max_stage + 1,
        if partitions {
            format!("partitions={}", decision.partitions())
        } else if let Some(why) = &partition_note {
            format!("partitions left to Triton ({why})")
        } else if ws {
            "partitions left to Triton (partitions=false)".to_string()
        } else if ws_loop {
            "no partitions (Triton's Hopper warp specialization needs num_warps=4)".to_string()
        } else if o.ws {
            "no partitions (the loop is not marked tt.warp_specialize)".to_string()
        } else {
            "no warp specialization (ws=false)".to_string()
        },
        lowered.graph.ops.len(),
        started.elapsed().as_secs_f64()
    );
    msg.push_str(&format!(" ({proven}"));
    if colocated_problem.is_some() {
        // The optimum under the colocation rules, not of the loop alone.
        msg.push_str(" under Triton's partition rules");
    }
    if !result.streaming.is_empty() {
        // The extra stages asked for (`prefetch=N`) come after a `+`: a
        // reader (twill_triton.configure) can tell the depth that hides the
        // modeled latency from the slack on top.
        let pf: Vec<String> = result
            .streaming
            .iter()
            .zip(&streaming)
            .map(|(x, (_, p))| {
                let extra = p.extra;
                let extra = if extra > 0 {
                    format!("+{extra}")
                } else {
                    String::new()
                };
                format!("{} prefetch {}{extra}", x.op, x.prefetch)
            })
            .collect();
        msg.push_str(&format!("; {}", pf.join(", ")));
    }
    msg.push(')');
    // Under `objective=slack`, L is the shortest with the most latency
    // slack at as many stages as the shortest schedule: say so, with the
    // slack of both.
    if o.objective == joint::Objective::Slack {
        match result.latency_slack.as_ref() {
            Some(ls) => {
                let cycles = |c: i64| c as f64 * problem.cycle_scale;
                msg.push_str(&format!(
                    " [objective slack: latency slack ~{:.0} cycles ({}), the shortest L={} has ~{:.0}]",
                    cycles(ls.cycles),
                    if ls.proven {
                        "the most at this I and stage count within its groups and crossings"
                    } else {
                        "not proven the most"
                    },
                    ls.shortest_length,
                    cycles(ls.at_shortest_length.unwrap_or(ls.cycles))
                ));
            }
            None => msg.push_str(
                " [objective slack: no two asynchronous ops joined by dependences; L is the shortest]",
            ),
        }
    }
    // How far ahead of its use each streaming load is issued, against its
    // modeled time (latency and transfer): iterations ahead times I, one
    // iteration less when the load comes last in the body (issued at its
    // end). The least over the loads; negative: latency the schedule leaves
    // exposed (for configuration choice, e.g. twill_triton). `first and
    // last`: the pointer loads are placed apart from the others.
    if !result.streaming.is_empty() {
        let slack = result
            .streaming
            .iter()
            .zip(&streaming)
            .map(|(x, (_, p))| {
                let ahead = (x.prefetch + p.extra).saturating_sub(u32::from(p.last));
                f64::from(ahead) * iteration - x.raw_cycles as f64
            })
            .fold(f64::INFINITY, f64::min);
        let place = if streaming.iter().all(|(_, p)| p.last) {
            "last"
        } else if streaming.iter().any(|(_, p)| p.last) {
            "first and last"
        } else {
            "first"
        };
        msg.push_str(&format!(
            " [loads {place}: lead over the load time ~{slack:.0} cycles]"
        ));
        match mixed.filter(|_| rotated) {
            Some(name) if name == ir.name => msg.push_str(
                " [loads=auto: descriptor and pointer loads mixed, all last, one stage deeper]",
            ),
            Some(name) => msg.push_str(&format!(
                " [loads=auto: {name} of this kernel mixes descriptor and pointer loads, all last, one stage deeper]"
            )),
            None => {}
        }
    }
    // The busiest unit's cycles per iteration: what one iteration costs when
    // several CTAs share the SM (for configuration choice, e.g. twill_triton).
    msg.push_str(&format!(
        " [resource bound ~{:.0} cycles, L ~{:.0} cycles]",
        f64::from(result.res_mii) * problem.cycle_scale,
        f64::from(s.length) * problem.cycle_scale
    ));
    msg.push_str(&unit_note(&problem));
    if sharing {
        // The budget the schedule was solved in (configure reads the
        // compiled kernel's own registers and shared memory).
        msg.push_str(&format!(
            " [ctas={}: within {} registers per thread and {} bytes of shared memory; an iteration ~{:.0} cycles with the SM shared]",
            o.ctas,
            machine.warps.max_regs_per_thread,
            machine.memory("smem").map_or(0, |m| m.capacity),
            iteration
        ));
    }
    for n in &lowered.notes {
        tracing::debug!(target: "twill", "{n}");
    }
    Outcome::Scheduled(msg)
}

/// ` [units per iteration: TC 1024, SFU 520 cycles]`: the raw cycles one
/// iteration keeps each unit busy (not rounded by normalization; units it
/// does not use left out), so that a model of several CTAs or partitions
/// sharing an SM can add them up per unit (twill_triton.configure).
fn unit_note(problem: &Problem) -> String {
    let used: Vec<String> = problem
        .units
        .iter()
        .zip(&problem.unit_cycles)
        .zip(&problem.capacity)
        .filter(|((_, &c), _)| c > 0)
        .map(|((u, &c), &cap)| format!("{u} {}", c.div_ceil(u64::from(cap.max(1)))))
        .collect();
    if used.is_empty() {
        return String::new();
    }
    format!(" [units per iteration: {} cycles]", used.join(", "))
}

fn options_text(options: *const c_char, len: usize) -> String {
    if options.is_null() {
        return String::new();
    }
    // SAFETY: the shim passes a pointer/length pair to its own std::string.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(options as *const u8, len) })
        .into_owned()
}

/// Runs one pass body on `module` with its option text: a panic anywhere
/// becomes a warning on the module (the module is left as it was), never a
/// crash of the host.
fn guarded(
    pass: &str,
    module: MlirOperation,
    options: *const c_char,
    len: usize,
    body: impl FnOnce(MlirLocation, &str) -> c_int,
) -> c_int {
    let text = options_text(options, len);
    // SAFETY (both calls): the shim hands us a live module operation.
    let module_loc = unsafe { mlirOperationGetLocation(module) };
    catch_unwind(AssertUnwindSafe(|| body(module_loc, &text))).unwrap_or_else(|_| {
        ffi::emit(
            unsafe { mlirOperationGetLocation(module) },
            TWILL_WARNING,
            &format!("{pass}: internal error (a panic); the module is left as it was"),
        );
        0
    })
}

/// The machine named by a pass option, or an error on the module.
fn select_machine(pass: &str, module_loc: MlirLocation, name: &str) -> Option<Machine> {
    Machine::select(name)
        .map_err(|e| ffi::emit(module_loc, TWILL_ERROR, &format!("{pass}: machine: {e}")))
        .ok()
}

/// `--twill-schedule`.
///
/// # Safety
/// `module` must be a live operation and `options`/`len` a valid buffer;
/// the C++ shim guarantees both.
pub unsafe extern "C" fn schedule_body(
    module: MlirOperation,
    options: *const c_char,
    len: usize,
) -> c_int {
    const PASS: &str = "twill-schedule";
    guarded(PASS, module, options, len, |module_loc, text| {
        let o = match ScheduleOptions::parse(text) {
            Ok(o) => o,
            Err(e) => {
                ffi::emit(module_loc, TWILL_ERROR, &format!("{PASS}: {e}"));
                return 1;
            }
        };
        let Some(machine) = select_machine(PASS, module_loc, &o.machine) else {
            return 1;
        };
        let loops = find_loops(module, o.scope);
        // Triton 3.6 lowers a kernel with several warp-specialized loops
        // only when they are partitioned alike ("'nvvm.setmaxregister' op
        // new register size must be in between 24 to 256" otherwise,
        // measured on the causal FA forward): all loops get Triton's
        // partitions there, around twill's stages.
        // Every loop Triton warp-specializes counts, scheduled by twill or
        // not (a loop twill cannot extract is still partitioned by Triton).
        let ws_loops = loops
            .iter()
            .filter(|l| has_attr(l.op, "tt.warp_specialize"))
            .count();
        let stages_only = (o.partitions
            && o.ws
            && o.target.partition_mma_ops().is_some()
            && o.target.version < (3, 7)
            && ws_loops > 1)
            .then_some(
                "Triton before 3.7 lowers several warp-specialized loops of one kernel only when Triton partitions them all",
            );
        let mut tag = 0;
        // Warps of the CTA (for register counts only; cycles do not use it).
        let num_warps = loops
            .iter()
            .find_map(|l| l.ir.as_ref().ok().map(|ir| ir.num_warps))
            .unwrap_or(4);
        let mut functions: Vec<MlirOperation> = Vec::new();
        for f in loops.iter().filter_map(|l| enclosing_function(l.op)) {
            if !functions.iter().any(|g| g.ptr == f.ptr) {
                functions.push(f);
            }
        }
        // `loads=auto`: for each loop, the mixed loop that rotates it (see
        // `rotations`).
        let rotated_by = if o.auto_loads {
            let kernels: Vec<_> = loops
                .iter()
                .map(|l| (enclosing_function(l.op).map(|f| f.ptr), l.ir.as_ref().ok()))
                .collect();
            rotations(&kernels, o.rotate_kernel, |ir| {
                mixes(ir, &machine, o.target.last_stage_ops())
            })
        } else {
            vec![None; loops.len()]
        };
        for (found, mixed) in loops.into_iter().zip(rotated_by) {
            // SAFETY: `find_loops` returns live operations of the module.
            let loc = unsafe { mlirOperationGetLocation(found.op) };
            let outcome = match &found.ir {
                Err(why) => Outcome::Skipped(why.clone()),
                Ok(ir) if o.ctas > 1 && (ir.warp_specialize || found.warp_specialize.is_some()) => {
                    Outcome::Skipped(sharing_refused(o.ctas))
                }
                Ok(ir) => {
                    let out = catch_unwind(AssertUnwindSafe(|| {
                        schedule_loop(
                            found.op,
                            ir,
                            &machine,
                            &o,
                            tag,
                            stages_only,
                            mixed.as_deref(),
                        )
                    }))
                    .unwrap_or_else(|_| {
                        Outcome::Skipped("internal error (a panic); see stderr".into())
                    });
                    tag += 1;
                    out
                }
            };
            let mut msg = match outcome {
                Outcome::Scheduled(msg) => msg,
                Outcome::Skipped(why) => {
                    format!("twill: skipped loop: {why}; Triton's own schedule applies")
                }
            };
            // Loops of one ttg.warp_specialize run at the same time, one per
            // partition: a model of the kernel's time (twill_triton.configure)
            // takes the slowest of them, not their sum.
            if let Some(w) = found.warp_specialize {
                msg.push_str(&format!(" [warp_specialize #{w}]"));
            }
            ffi::emit(loc, TWILL_REMARK, &msg);
        }
        for f in functions {
            // SAFETY: `enclosing_function` returns live operations of the module.
            let loc = unsafe { mlirOperationGetLocation(f) };
            let msg = catch_unwind(AssertUnwindSafe(|| outside_note(f, &machine, num_warps)))
                .unwrap_or_else(|_| Err("internal error (a panic); see stderr".into()));
            match msg {
                Ok(msg) => ffi::emit(loc, TWILL_REMARK, &msg),
                Err(why) => {
                    tracing::debug!(target: "twill", "no estimate outside the loops: {why}")
                }
            }
        }
        0
    })
}

/// Whether a loop's streaming loads mix descriptor and pointer loads (a
/// loop that does not lower does not).
fn mixes(ir: &LoopIr, machine: &Machine, last_stage_ops: &[&str]) -> bool {
    catch_unwind(AssertUnwindSafe(|| {
        lower(ir, machine, last_stage_ops)
            .is_ok_and(|l| backend::LoadPlacement::mixes_kinds(ir, &l))
    }))
    .unwrap_or(false)
}

/// For `loads=auto`: per loop of `loops` (in module order, each with its
/// kernel, an identity such as the function op's pointer, and its IR where
/// it was extracted), the name of the loop whose mixed loads rotate it: the
/// loop itself when it mixes (`mixes`); otherwise, with `rotate_kernel`,
/// the first mixed loop of its kernel; else None. A mixed loop rotates its
/// kernel's other loops even where twill then skips it: Triton's own
/// schedule of it is the rotated one.
fn rotations<K: PartialEq + Copy>(
    loops: &[(Option<K>, Option<&LoopIr>)],
    rotate_kernel: bool,
    mixes: impl Fn(&LoopIr) -> bool,
) -> Vec<Option<String>> {
    let mixed: Vec<bool> = loops.iter().map(|(_, ir)| ir.is_some_and(&mixes)).collect();
    let first_of = |kernel: K| {
        loops
            .iter()
            .zip(&mixed)
            .find(|((k, _), &m)| m && *k == Some(kernel))
            .and_then(|((_, ir), _)| ir.map(|ir| ir.name.clone()))
    };
    loops
        .iter()
        .zip(&mixed)
        .map(|((kernel, ir), &m)| match (ir, kernel) {
            (Some(ir), _) if m => Some(ir.name.clone()),
            (_, Some(k)) if rotate_kernel => first_of(*k),
            _ => None,
        })
        .collect()
}

/// `twill: outside loops of @k: ~N cycles per CTA`: the critical path of a
/// kernel's code before, between and after its loops (Q tile loads, the
/// output's normalization and store), for models that rank configurations
/// (twill_triton.configure): each CTA spends it besides its loops.
fn outside_note(func: MlirOperation, machine: &Machine, num_warps: u32) -> Result<String, String> {
    let code = outside_loops(func, num_warps);
    let cycles = Straight::total(&code, &|ir| {
        let c = straight_line_cycles(ir, machine);
        if let Ok(c) = &c {
            tracing::debug!(target: "twill", "{}: {} ops, ~{c} cycles (at {})", ir.name, ir.ops.len(), ir.location);
        }
        c
    })
        .map_err(|e| format!("{} (at {})", e.reason, e.location))?;
    Ok(format!(
        "twill: outside loops of @{}: ~{cycles} cycles per CTA (critical path of the code before, between and after its loops)",
        symbol_name(func)
    ))
}

/// `--twill-export-graph`.
///
/// # Safety
/// As [`schedule_body`].
pub unsafe extern "C" fn export_graph_body(
    module: MlirOperation,
    options: *const c_char,
    len: usize,
) -> c_int {
    const PASS: &str = "twill-export-graph";
    guarded(PASS, module, options, len, |module_loc, text| {
        let o = match ExportOptions::parse(text) {
            Ok(o) => o,
            Err(e) => {
                ffi::emit(module_loc, TWILL_ERROR, &format!("{PASS}: {e}"));
                return 1;
            }
        };
        let Some(machine) = select_machine(PASS, module_loc, &o.machine) else {
            return 1;
        };
        if let Err(e) = std::fs::create_dir_all(&o.dir) {
            ffi::emit(
                module_loc,
                TWILL_ERROR,
                &format!("{PASS}: cannot create {}: {e}", o.dir.display()),
            );
            return 1;
        }
        let target = TritonTarget {
            arch: o.arch,
            version: (3, 6),
        };
        for found in find_loops(module, o.scope) {
            // SAFETY: `find_loops` returns live operations of the module.
            let loc = unsafe { mlirOperationGetLocation(found.op) };
            let msg = match &found.ir {
                Err(why) => format!("twill: skipped loop: {why}"),
                Ok(ir) => match lower(ir, &machine, target.last_stage_ops()) {
                    Err(e) => format!("twill: skipped loop: {} (at {})", e.reason, e.location),
                    Ok(l) => {
                        // The graph the schedule pass solves when it writes
                        // partitions: with the target's colocation sets.
                        let mut graph = l.graph.clone();
                        if ir.warp_specialize {
                            if let Some(mmas) = target.partition_mma_ops() {
                                graph.same_group = colocation(ir, &l, mmas);
                            }
                        }
                        let group = machine.warps.warp_group_size;
                        if let Err(e) = o.target.apply(&mut graph, ir.num_warps, group) {
                            ffi::emit(loc, TWILL_ERROR, &format!("{PASS}: {e}"));
                            return 1;
                        }
                        let path = o.dir.join(format!("{}.toml", ir.name));
                        if let Err(e) = std::fs::write(&path, to_toml(&graph)) {
                            ffi::emit(
                                loc,
                                TWILL_ERROR,
                                &format!("{PASS}: cannot write {}: {e}", path.display()),
                            );
                            return 1;
                        }
                        format!(
                            "twill: wrote {} ({} ops, {} edges{})",
                            path.display(),
                            graph.ops.len(),
                            graph.edges.len(),
                            if graph.same_group.is_empty() {
                                String::new()
                            } else {
                                format!(", {} same_group sets", graph.same_group.len())
                            }
                        )
                    }
                },
            };
            ffi::emit(loc, TWILL_REMARK, &msg);
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_mixes_when_its_streaming_loads_are_of_both_kinds() {
        let machine = Machine::select("h100").unwrap();
        let last = TritonTarget {
            arch: Arch::Sm90,
            version: (3, 6),
        }
        .last_stage_ops();
        let tma = crate::frontend::lower::tests::gemm();
        assert!(!mixes(&tma, &machine, last));
        // B through a pointer load (cp.async), A through a descriptor.
        let mut mixed = tma.clone();
        let b = mixed
            .ops
            .iter()
            .rposition(|op| op.name == "tt.descriptor_load")
            .unwrap();
        mixed.ops[b].name = "tt.load".into();
        assert!(mixes(&mixed, &machine, last));
    }

    #[test]
    fn auto_loads_rotate_every_loop_of_a_kernel_with_a_mixed_loop() {
        let named = |name: &str| {
            let mut ir = crate::frontend::lower::tests::gemm();
            ir.name = name.into();
            ir
        };
        let (a, b, c, d, e, f) = (
            named("k0_tma"),
            named("k0_mixed"),
            named("k1_tma"),
            named("k2_mixed_a"),
            named("k2_tma"),
            named("k2_mixed_b"),
        );
        // Kernel 0: a TMA-only loop before its mixed loop, and one that was
        // not extracted; kernel 1: TMA only; kernel 2: two mixed loops around
        // a TMA-only one; last, a loop outside any function.
        let loops = [
            (Some(0), Some(&a)),
            (Some(0), Some(&b)),
            (Some(0), None),
            (Some(1), Some(&c)),
            (Some(2), Some(&d)),
            (Some(2), Some(&e)),
            (Some(2), Some(&f)),
            (None, Some(&a)),
        ];
        let by = |kernel: bool| rotations(&loops, kernel, |ir| ir.name.contains("mixed"));
        let names = |expected: [Option<&str>; 8]| expected.map(|n| n.map(String::from)).to_vec();
        let s = Some;
        assert_eq!(
            by(true),
            names([
                s("k0_mixed"),
                s("k0_mixed"),
                s("k0_mixed"),
                None,
                s("k2_mixed_a"),
                s("k2_mixed_a"),
                s("k2_mixed_b"),
                None
            ])
        );
        assert_eq!(
            by(false),
            names([
                None,
                s("k0_mixed"),
                None,
                None,
                s("k2_mixed_a"),
                None,
                s("k2_mixed_b"),
                None
            ])
        );
        let rotate = |text: &str| ScheduleOptions::parse(text).map(|o| o.rotate_kernel);
        assert_eq!(rotate(""), Ok(true));
        assert_eq!(rotate("rotate=loop"), Ok(false));
        assert!(rotate("rotate=kernels")
            .unwrap_err()
            .contains("`kernel` or `loop`"));
    }

    #[test]
    fn schedule_options_default_by_arch() {
        let o = ScheduleOptions::parse("arch=sm100\nmachine=\ntriton=3.9.0\n").unwrap();
        assert_eq!(
            o.target,
            TritonTarget {
                arch: Arch::Sm100,
                version: (3, 9)
            }
        );
        assert_eq!((o.machine.as_str(), o.groups, o.u), ("b200", 4, 30));
        let o = ScheduleOptions::parse("arch=sm90\nws=false\ngroups=3\nscope=all").unwrap();
        assert_eq!(
            (o.machine.as_str(), o.groups, o.ws, o.scope),
            ("h100", 1, false, Scope::All)
        );
    }

    #[test]
    fn pointer_loads_follow_loads_unless_given() {
        use backend::{LoadPlacement, Placement};
        // The C++ pass renders every key; an empty `pointer-loads` and a
        // `pointer-prefetch` of -1 mean "as the other loads".
        let o =
            ScheduleOptions::parse("loads=last\nprefetch=1\npointer-loads=\npointer-prefetch=-1")
                .unwrap();
        assert_eq!(o.loads, LoadPlacement::uniform(true, 1));
        // Keys in any order.
        let o =
            ScheduleOptions::parse("pointer-prefetch=1\npointer-loads=last\nloads=first").unwrap();
        assert_eq!(
            o.loads,
            LoadPlacement {
                descriptor: Placement::default(),
                pointer: Placement {
                    last: true,
                    extra: 1
                },
            }
        );
        assert_eq!(o.loads.of("tt.load").extra, 1);
        assert_eq!(o.loads.of("tt.descriptor_load").extra, 0);
        assert!(!o.auto_loads);
    }

    #[test]
    fn loads_are_auto_unless_placed() {
        use backend::LoadPlacement;
        // What the C++ pass renders by default: per loop (first, or every
        // load last one stage deeper where the loop mixes the kinds).
        let o =
            ScheduleOptions::parse("loads=auto\nprefetch=1\npointer-loads=\npointer-prefetch=-1")
                .unwrap();
        assert!(o.auto_loads);
        assert_eq!(o.loads, LoadPlacement::uniform(false, 1));
        assert!(ScheduleOptions::parse("").unwrap().auto_loads);
        // Any explicit placement turns it off.
        // The last `loads` key wins, and `auto` puts the loads first again.
        let o = ScheduleOptions::parse("loads=last\nloads=auto").unwrap();
        assert!(o.auto_loads && !o.loads.descriptor.last);
        for text in [
            "loads=first",
            "loads=last",
            "loads=auto\npointer-loads=first",
            "pointer-prefetch=0",
        ] {
            assert!(!ScheduleOptions::parse(text).unwrap().auto_loads, "{text}");
        }
        let e = ScheduleOptions::parse("loads=middle").unwrap_err();
        assert!(e.contains("`auto`, `first` or `last`"), "{e}");
    }

    #[test]
    fn objective_is_length_unless_given() {
        let parse = |t: &str| ScheduleOptions::parse(t).unwrap().objective;
        assert_eq!(parse(""), joint::Objective::Length);
        assert_eq!(parse("objective=length"), joint::Objective::Length);
        assert_eq!(parse("objective=slack"), joint::Objective::Slack);
    }

    #[test]
    fn schedule_options_reject_bad_values() {
        for (text, needle) in [
            ("arch=sm75", "arch"),
            ("timeout=-1", "timeout"),
            ("u=0", "u:"),
            ("encoding=x", "encoding"),
            ("groups=two", "groups"),
            ("ws=maybe", "ws"),
            ("frobnicate=1", "unknown option"),
            ("pointer-loads=middle", "pointer-loads"),
            ("ctas=0", "ctas"),
            ("ctas=33", "ctas"),
            ("pointer-prefetch=9", "pointer-prefetch"),
            ("objective=fast", "objective"),
            ("objective=slack\nencoding=int", "encoding=default"),
            ("encoding=paper\nobjective=slack", "encoding=default"),
        ] {
            let e = ScheduleOptions::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
        assert!(ExportOptions::parse("arch=sm90")
            .unwrap_err()
            .contains("dir"));
        assert_eq!(ExportOptions::parse("dir=/tmp/x").unwrap().machine, "h100");
        let gluon = ExportOptions::parse("dir=/tmp/x\ntarget=gluon-sm90\ngluon=keep-pins").unwrap();
        assert!(matches!(gluon.target, GraphTarget::GluonSm90(c) if c.keep_pins));
        let e = ExportOptions::parse("dir=/tmp/x\narch=sm100\ntarget=gluon-sm90").unwrap_err();
        assert!(e.contains("arch=sm90"), "{e}");
    }
}
