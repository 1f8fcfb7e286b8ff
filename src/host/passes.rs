//! The bodies of `twill-schedule` and `twill-export-graph`.
//!
//! Per candidate loop: extract its IR ([`crate::frontend::mlir`]), run the
//! [`crate::driver`]'s steps on it (lower, price, solve, check, decide,
//! validate) and write the attributes ([`crate::backend::mlir::write`]).
//! Every loop yields a typed record ([`crate::report::schedule`]): its
//! remark is rendered from it, and `report=PATH` writes them all as JSON. A
//! loop that fails any step is left untouched with a remark saying why;
//! only invalid pass options (and an unwritable report) fail the pass.

use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use mlir_sys::{mlirOperationGetLocation, MlirLocation, MlirOperation};

use super::ffi::{self, TWILL_ERROR, TWILL_REMARK, TWILL_WARNING};
use crate::backend::gluon::GraphTarget;
use crate::backend::ws::WsPlan;
use crate::backend::{self, Arch, TritonTarget};
use crate::cache::{self, LoopCache};
use crate::driver::{
    self, planned_graph, schedule_loop, LoopJob, LoopOptions, Lower, Scheduled, Skip, Stages, Ties,
};
use crate::frontend::lower::{lower, straight_line_cycles};
use crate::frontend::mlir::{
    enclosing_function, find_loops, has_attr, int_attr, location_text, outside_loops, symbol_name,
    FoundLoop, Scope,
};
use crate::frontend::{LoopIr, Straight};
use crate::graph::load::to_toml;
use crate::joint::{self, Encoding};
use crate::machine::Machine;
use crate::report::schedule::{Decision, FunctionRecord, LoopRecord, ScheduleReport, SkipReason};

/// Options of `--twill-schedule` (see `passes/TwillPasses.cpp` for their
/// MLIR declarations and help texts).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleOptions {
    pub target: TritonTarget,
    pub machine: String,
    pub scope: Scope,
    pub timeout: f64,
    /// Deterministic work budget per kernel, z3 resource units (`budget`,
    /// given in millions; 0: none, the wall-clock `timeout` alone).
    pub budget: u64,
    /// A kernel's loops solved at once (`jobs`; 0: by the cores, see
    /// [`Parallel::new`]). The answer does not depend on it.
    pub jobs: u32,
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
    /// twill's model (measured on the H100, 2026-11-24), so a
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
    /// Where to write the typed report (`report=PATH`, schema
    /// `twill.schedule-report/1`, docs/report-schema.md); none when empty.
    pub report: Option<PathBuf>,
    /// `lower=off|on|only|force` (docs/ws-lowering.md).
    pub lower: Lower,
    /// `ring=schedule|max`: the lowering's ring depth.
    pub ring: crate::backend::ws::RingDepth,
    /// `cache=DIR|off`, else `TWILL_CACHE_DIR`: the schedule cache; none
    /// unless one of them names a directory.
    pub cache: Option<LoopCache>,
    /// `num-stages=N`: Triton's `num_stages` (0: not given); a loop's own
    /// `tt.num_stages` wins for that loop.
    pub num_stages: u32,
    /// `stages=bound|free`: whether it bounds the schedule's stages.
    pub stages: Stages,
    /// `ties=deeper|twill|triton`: whose schedule a tie in twill's model keeps.
    pub ties: Ties,
    /// `unverifiable=schedule|skip`: whether to skip a loop whose pipeline
    /// the pipeline verifier does not model.
    pub skip_unverifiable: bool,
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
            budget: driver::DEFAULT_BUDGET,
            jobs: 0,
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
            report: None,
            lower: Lower::Off,
            ring: Default::default(),
            cache: None,
            num_stages: 0,
            stages: Stages::Bound,
            ties: Ties::Deeper,
            skip_unverifiable: false,
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
        let mut cache = "";
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
                "budget" => {
                    o.budget = v
                        .parse::<f64>()
                        .ok()
                        .filter(|b| {
                            b.is_finite() && *b >= 0.0 && *b * 1e6 <= joint::work::MAX_BUDGET as f64
                        })
                        .map(|b| (b * 1e6).round() as u64)
                        .ok_or_else(|| {
                            format!(
                            "budget: expected millions of z3 resource units, 0 to {}, got `{v}`",
                            joint::work::MAX_BUDGET / 1_000_000
                        )
                        })?
                }
                "jobs" => {
                    o.jobs = v
                        .parse::<u32>()
                        .ok()
                        .filter(|j| *j <= 256)
                        .ok_or_else(|| format!("jobs: expected 0 to 256, got `{v}`"))?
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
                "report" => o.report = (!v.is_empty()).then(|| PathBuf::from(v)),
                "objective" => o.objective = v.parse()?,
                "lower" => o.lower = v.parse()?,
                "ring" => o.ring = v.parse()?,
                "cache" => cache = v,
                "num-stages" => {
                    o.num_stages = v.parse::<u32>().ok().filter(|n| *n <= 64).ok_or_else(|| {
                        format!("num-stages: expected 0..=64 (0: not given), got `{v}`")
                    })?
                }
                "stages" => o.stages = v.parse()?,
                "ties" => o.ties = v.parse()?,
                "unverifiable" => {
                    o.skip_unverifiable = match v {
                        "schedule" => false,
                        "skip" => true,
                        _ => {
                            return Err(format!(
                                "unverifiable: expected `schedule` or `skip`, got `{v}`"
                            ))
                        }
                    }
                }
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
        o.cache = LoopCache::select(cache, std::env::var(cache::ENV).ok().as_deref(), text);
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
            o.groups = o.target.default_groups();
        }
        if !o.ws {
            o.groups = 1;
        }
        Ok(o)
    }
}

impl ScheduleOptions {
    /// What the driver needs of them for one loop.
    pub fn loop_options(&self) -> LoopOptions {
        LoopOptions {
            target: self.target,
            timeout: self.timeout,
            budget: self.budget,
            u: self.u,
            encoding: self.encoding,
            groups: self.groups,
            ws: self.ws,
            partitions: self.partitions,
            order: self.order,
            loads: self.loads,
            auto_loads: self.auto_loads,
            ctas: self.ctas,
            objective: self.objective,
            lower: self.lower,
            ring: self.ring,
            cache: self.cache.clone(),
            num_stages: self.num_stages,
            stages: self.stages,
            ties: self.ties,
            skip_unverifiable: self.skip_unverifiable,
        }
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

    /// The schedule pass's options whose graphs are exported: its defaults
    /// on this arch and machine.
    fn schedule_options(&self) -> ScheduleOptions {
        let text = format!("arch={}\nmachine={}", self.arch.name(), self.machine);
        ScheduleOptions::parse(&text).expect("the schedule pass's defaults parse")
    }
}

/// Why `ctas=N` (N > 1) is refused on a warp-specialized loop: Triton's
/// partitions add warps to the module's `ttg.num-warps`, which a CTA's
/// share of the SM would not count.
fn sharing_refused(ctas: u32) -> String {
    format!(
        "ctas={ctas}: a CTA's share of the SM is not modeled for warp-specialized loops (their partitions add warps)"
    )
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

/// A loop's own `tt.num_stages` (`tl.range(num_stages=...)`), when at
/// least 1. Triton's Hopper warp specialization sets 0 on the loops it
/// split (which it then does not pipeline itself); a 0 is not a bound, and
/// the option applies.
fn loop_num_stages(op: MlirOperation) -> Option<u32> {
    int_attr(op, "tt.num_stages")
        .filter(|n| *n >= 1)
        .map(|n| n.min(i64::from(u32::MAX)) as u32)
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
        let Located { loops, functions } = schedule_module(module, &o, &machine);
        let mut report = ScheduleReport::default();
        for (loc, record) in loops {
            tracing::debug!(target: "twill", index = record.index, decision = ?record.decision, reason = ?record.reason, "loop");
            ffi::emit(loc, TWILL_REMARK, &record.remark());
            if let Some(l) = record.schedule.as_ref().and_then(|s| s.lowering.as_ref()) {
                ffi::emit(loc, TWILL_REMARK, &l.remark());
            }
            report.loops.push(record);
        }
        for (loc, record) in functions {
            if let Some(msg) = record.remark() {
                ffi::emit(loc, TWILL_REMARK, &msg);
            }
            report.functions.push(record);
        }
        if let Some(path) = &o.report {
            let json = serde_json::to_string_pretty(&report).unwrap_or_default();
            if let Err(e) = std::fs::write(path, json + "\n") {
                ffi::emit(
                    module_loc,
                    TWILL_ERROR,
                    &format!("{PASS}: cannot write {}: {e}", path.display()),
                );
                return 1;
            }
        }
        0
    })
}

/// Why every loop of the module gets stages only (Triton partitions), if so:
/// Triton 3.6 lowers a kernel with several warp-specialized loops only when
/// they are partitioned alike ("'nvvm.setmaxregister' op new register size
/// must be in between 24 to 256" otherwise, measured on the causal FA
/// forward). Every loop Triton warp-specializes counts, scheduled by twill
/// or not (a loop twill cannot extract is still partitioned by Triton).
fn stages_only(loops: &[FoundLoop], o: &ScheduleOptions) -> Option<&'static str> {
    let ws_loops = loops
        .iter()
        .filter(|l| has_attr(l.op, "tt.warp_specialize"))
        .count();
    (o.partitions
        && o.ws
        && o.target.partitions_every_ws_loop_itself()
        && ws_loops > 1)
        .then_some(
            "Triton before 3.7 lowers several warp-specialized loops of one kernel only when Triton partitions them all",
        )
}

/// The records of one run, each with the location its remark goes to.
struct Located {
    loops: Vec<(MlirLocation, LoopRecord)>,
    functions: Vec<(MlirLocation, FunctionRecord)>,
}

/// Every candidate loop of the module through [`schedule_loop`] (written
/// where scheduled), and every kernel with loops with its estimate outside
/// them: the records, each with the location its remark goes to.
fn schedule_module(module: MlirOperation, o: &ScheduleOptions, machine: &Machine) -> Located {
    let loops = find_loops(module, o.scope);
    let stages_only = stages_only(&loops, o);
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
            mixes(ir, machine, o.target.last_stage_ops())
        })
    } else {
        vec![None; loops.len()]
    };
    let mut tag = 0;
    let loop_options = o.loop_options();
    let mut shares = BudgetShares::new(&loops, o.budget);
    let parallel = Parallel::new(o.jobs, loops.iter().filter(|l| l.ir.is_ok()).count());
    // Each loop's job, with the share it gets if the loops before it leave
    // their whole shares (its least: see `BudgetShares::first`).
    let mut jobs: Vec<Option<LoopJob>> = loops
        .iter()
        .zip(&rotated_by)
        .map(|(found, mixed)| match &found.ir {
            Ok(ir) if !(o.ctas > 1 && (ir.warp_specialize || found.warp_specialize.is_some())) => {
                Some(LoopJob {
                    ir,
                    machine,
                    o: &loop_options,
                    stages_only,
                    mixed: mixed.as_deref(),
                    loop_num_stages: loop_num_stages(found.op),
                    budget: shares.first(found.op),
                    threads: parallel.threads,
                })
            }
            _ => None,
        })
        .collect();
    let mut presolved = parallel.presolve(&jobs);
    let mut records = Vec::with_capacity(loops.len());
    for (index, found) in loops.iter().enumerate() {
        let started = Instant::now();
        // Read before scheduling: `lower=force` may replace the loop.
        // SAFETY: `find_loops` returns live operations of the module.
        let loc = unsafe { mlirOperationGetLocation(found.op) };
        let place = Place {
            function: enclosing_function(found.op).map(symbol_name),
            location: location_text(found.op),
        };
        let mut seconds = 0.0;
        let outcome = match (&found.ir, jobs[index].take()) {
            (Err(why), _) if found.lowered_by_twill => {
                Err(Skip::new(SkipReason::LoweredByTwill, why.clone()))
            }
            (Err(why), _) => Err(Skip::new(SkipReason::NotExtracted, why.clone())),
            (Ok(ir), Some(mut job)) => {
                job.budget = shares.next(found.op);
                let (op, arch, this_tag) = (found.op, o.target.arch, tag);
                tag += 1;
                let write = move |d: &backend::LoopDecision| {
                    backend::mlir::write(op, d, arch, this_tag).map_err(|e| e.to_string())
                };
                let n = ir.ops.len();
                let gated = o.lower.verified();
                let lower = move |p: &WsPlan| super::lower::lower(op, p, n, gated);
                // Solved ahead with its least share: the same answer where
                // no budget decided anything (or the share is the same).
                let ahead = presolved[index]
                    .take()
                    .filter(|p| p.share.same_answer_with(job.budget));
                tracing::debug!(target: "twill", loop_name = %ir.name, share = job.budget, ahead = ahead.is_some(), "loop");
                catch_unwind(AssertUnwindSafe(|| match ahead {
                    Some(p) => {
                        seconds = p.seconds;
                        let share = job.budget;
                        p.solving
                            .and_then(|s| driver::finish(&job, s.with_share(share), write, lower))
                    }
                    None => schedule_loop(&job, write, lower),
                }))
                .unwrap_or_else(|_| {
                    Err(Skip::new(
                        SkipReason::InternalError,
                        "internal error (a panic); see stderr",
                    ))
                })
            }
            (Ok(_), None) => Err(Skip::new(
                SkipReason::CtasWarpSpecialized,
                sharing_refused(o.ctas),
            )),
        };
        shares.spent(&outcome);
        seconds += started.elapsed().as_secs_f64();
        let record = loop_record(index as u32, found, place, outcome, seconds);
        records.push((loc, record));
    }
    if o.lower != Lower::Off {
        unmark(module, &mut records);
    }
    let functions = functions
        .into_iter()
        .map(|f| {
            // SAFETY: `enclosing_function` returns live operations of the module.
            let loc = unsafe { mlirOperationGetLocation(f) };
            (loc, function_record(f, machine, num_warps))
        })
        .collect();
    Located {
        loops: records,
        functions,
    }
}

/// Loops still marked `tt.warp_specialize` beside a ws op twill lowered
/// lose the mark (Triton's Hopper warp specialization would act on their
/// function); their records say so.
fn unmark(module: MlirOperation, records: &mut [(MlirLocation, LoopRecord)]) {
    const NOTE: &str = "tt.warp_specialize removed: its function holds twill's warp-specialized code, on which Triton's Hopper warp specialization must not act";
    for l in backend::ws::emit::unmark_beside_lowered(module) {
        let at = location_text(l);
        tracing::info!(loop_at = %at, "{NOTE}");
        for (_, r) in records.iter_mut().filter(|(_, r)| r.location == at) {
            r.text = if r.text.is_empty() {
                NOTE.to_string()
            } else {
                format!("{}; {NOTE}", r.text)
            };
        }
    }
}

/// The kernel's work budget shared among its loops: each loop gets what is
/// left of its kernel's budget divided by the kernel's loops not yet
/// solved, so a loop that needs little leaves more to the next. Every
/// amount is deterministic, and so is each share.
struct BudgetShares {
    budget: u64,
    /// Per kernel (function): work left, loops left.
    left: HashMap<usize, (u64, u64)>,
    /// The share handed out last, and its kernel's key until the loop is
    /// accounted.
    share: u64,
    pending: Option<usize>,
}

impl BudgetShares {
    fn new(loops: &[FoundLoop], budget: u64) -> BudgetShares {
        let mut left: HashMap<usize, (u64, u64)> = HashMap::new();
        for l in loops.iter().filter(|l| l.ir.is_ok()) {
            let f = enclosing_function(l.op).map_or(0, |f| f.ptr as usize);
            left.entry(f).or_insert((budget, 0)).1 += 1;
        }
        BudgetShares {
            budget,
            left,
            share: 0,
            pending: None,
        }
    }

    fn key(op: MlirOperation) -> usize {
        enclosing_function(op).map_or(0, |f| f.ptr as usize)
    }

    /// The share of the loop `op` if every loop before it spends its whole
    /// share: the least it can get (0 without a budget).
    fn first(&self, op: MlirOperation) -> u64 {
        match self.left.get(&Self::key(op)) {
            Some(&(_, loops)) => self.share_of(self.budget, loops),
            None => 0,
        }
    }

    /// `work` divided among `loops` loops (0 without a budget).
    fn share_of(&self, work: u64, loops: u64) -> u64 {
        match self.budget {
            0 => 0,
            _ => (work / loops.max(1)).max(1),
        }
    }

    /// The share of the loop `op` (0 without a budget). Called before the
    /// loop is scheduled: `lower=force` may replace the loop's op.
    fn next(&mut self, op: MlirOperation) -> u64 {
        let kernel = Self::key(op);
        self.pending = Some(kernel);
        self.share = match self.left.get(&kernel) {
            Some(&(work, loops)) => self.share_of(work, loops),
            None => 0,
        };
        self.share
    }

    /// Accounts the loop just solved (the one [`BudgetShares::next`] was
    /// last called for; its op may be gone): the work its schedule
    /// reports, or the whole share when the search found none.
    fn spent(&mut self, outcome: &Result<Scheduled, Skip>) {
        let Some(kernel) = self.pending.take() else {
            return;
        };
        let spent = match outcome {
            Ok(s) => s.schedule.proof.work,
            Err(skip) if skip.reason == SkipReason::NoSchedule => self.share,
            Err(_) => 0,
        };
        if let Some((work, loops)) = self.left.get_mut(&kernel) {
            *work = work.saturating_sub(spent);
            *loops = loops.saturating_sub(1);
        }
    }
}

/// How a module's loops are solved: several at once (each search on
/// threads of its own), then finished and written one by one in order.
struct Parallel {
    /// Loops solved at once (1: one by one, none ahead).
    jobs: usize,
    /// Threads of each loop's search (0: the search's own default).
    threads: u32,
}

/// A loop solved ahead of its turn, with the share it was solved with.
struct Presolved<'a> {
    solving: Result<driver::Solving<'a>, Skip>,
    share: driver::ShareUse,
    seconds: f64,
}

impl Parallel {
    /// `jobs` loops at once (0: as many as the search's threads allow, one
    /// per core and at most [`joint::DEFAULT_THREADS_MAX`] in all; never
    /// more than the loops), those threads shared among them (at least one
    /// each). Neither changes an answer: each search is accounted as the
    /// sequential one, and a loop solved ahead with less than its share is
    /// solved again where the budget decided something.
    fn new(jobs: u32, loops: usize) -> Parallel {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let most = cores.min(joint::DEFAULT_THREADS_MAX as usize).max(1);
        let jobs = match jobs {
            0 => most,
            j => j as usize,
        }
        .min(loops)
        .max(1);
        let threads = match jobs {
            1 => 0,
            j => (most / j).max(1) as u32,
        };
        Parallel { jobs, threads }
    }

    /// Every job solved ahead, `self.jobs` at once; none when one at a
    /// time (and for a loop whose solve panicked: it is solved again in
    /// its turn, where the panic is reported).
    fn presolve<'a>(&self, jobs: &[Option<LoopJob<'a>>]) -> Vec<Option<Presolved<'a>>> {
        let todo: Vec<(usize, &LoopJob)> = jobs
            .iter()
            .enumerate()
            .filter_map(|(i, j)| j.as_ref().map(|j| (i, j)))
            .collect();
        let out: Mutex<Vec<Option<Presolved<'a>>>> =
            Mutex::new((0..jobs.len()).map(|_| None).collect());
        if self.jobs <= 1 || todo.len() <= 1 {
            return out.into_inner().unwrap_or_default();
        }
        let next = AtomicUsize::new(0);
        let workers = self.jobs.min(todo.len());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    while let Some(&(i, job)) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let started = Instant::now();
                        let solved = catch_unwind(AssertUnwindSafe(|| driver::solve_loop(job)));
                        if let (Ok((solving, share)), Ok(mut out)) = (solved, out.lock()) {
                            out[i] = Some(Presolved {
                                solving,
                                share,
                                seconds: started.elapsed().as_secs_f64(),
                            });
                        }
                    }
                    // No loop left to start: this worker's threads go to
                    // the searches still under way.
                    joint::lend_threads(self.threads.max(1));
                });
            }
        });
        joint::reclaim_threads(workers as u32 * self.threads.max(1));
        out.into_inner().unwrap_or_default()
    }
}

/// Where a loop is, read before it is scheduled.
struct Place {
    function: Option<String>,
    location: String,
}

/// A loop's record from what [`schedule_loop`] returned.
fn loop_record(
    index: u32,
    found: &FoundLoop,
    place: Place,
    outcome: Result<Scheduled, Skip>,
    seconds: f64,
) -> LoopRecord {
    let mut record = LoopRecord {
        index,
        name: found.ir.as_ref().ok().map(|ir| ir.name.clone()),
        function: place.function,
        location: place.location,
        warp_specialize: found.warp_specialize.map(|w| w as u32),
        decision: Decision::Scheduled,
        reason: None,
        text: String::new(),
        bounds: None,
        units: Vec::new(),
        schedule: None,
        compared: None,
        solve_seconds: seconds,
    };
    match outcome {
        Ok(s) => {
            record.bounds = Some(s.bounds);
            record.units = s.units;
            record.schedule = Some(s.schedule);
        }
        Err(skip) => {
            record.decision = Decision::Skipped;
            record.reason = Some(skip.reason);
            record.text = skip.text;
            record.bounds = skip.bounds;
            record.units = skip.units;
            record.compared = skip.compared.map(|c| *c);
        }
    }
    record
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

/// The critical path of a kernel's code before, between and after its
/// loops (Q tile loads, the output's normalization and store), for models
/// that rank configurations (twill_triton.configure): each CTA spends it
/// besides its loops.
fn function_record(func: MlirOperation, machine: &Machine, num_warps: u32) -> FunctionRecord {
    let estimate = catch_unwind(AssertUnwindSafe(|| {
        let code = outside_loops(func, num_warps);
        Straight::total(&code, &|ir| {
            let c = straight_line_cycles(ir, machine);
            if let Ok(c) = &c {
                tracing::debug!(target: "twill", "{}: {} ops, ~{c} cycles (at {})", ir.name, ir.ops.len(), ir.location);
            }
            c
        })
        .map_err(|e| format!("{} (at {})", e.reason, e.location))
    }))
    .unwrap_or_else(|_| Err("internal error (a panic); see stderr".into()));
    if let Err(why) = &estimate {
        tracing::debug!(target: "twill", "no estimate outside the loops: {why}");
    }
    FunctionRecord {
        function: symbol_name(func),
        location: location_text(func),
        outside_cycles: estimate.as_ref().ok().copied(),
        outside_error: estimate.err(),
    }
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
        let schedule = o.schedule_options();
        let loop_options = schedule.loop_options();
        let loops = find_loops(module, o.scope);
        let stages_only = stages_only(&loops, &schedule);
        for found in loops {
            // SAFETY: `find_loops` returns live operations of the module.
            let loc = unsafe { mlirOperationGetLocation(found.op) };
            let msg = match &found.ir {
                Err(why) => format!("twill: skipped loop: {why}"),
                Ok(ir) => {
                    let job = LoopJob {
                        ir,
                        machine: &machine,
                        o: &loop_options,
                        stages_only,
                        mixed: None,
                        loop_num_stages: loop_num_stages(found.op),
                        budget: loop_options.budget,
                        threads: 0,
                    };
                    match export_loop(&job, &o) {
                        Ok(msg) => msg,
                        Err(ExportError::Skipped(msg)) => msg,
                        Err(ExportError::Failed(e)) => {
                            ffi::emit(loc, TWILL_ERROR, &format!("{PASS}: {e}"));
                            return 1;
                        }
                    }
                }
            };
            ffi::emit(loc, TWILL_REMARK, &msg);
        }
        0
    })
}

/// Why a loop's graph was not written: the loop does not lower (a remark),
/// or the export failed (an error).
enum ExportError {
    Skipped(String),
    Failed(String),
}

/// Writes one loop's graph: the one the schedule pass solves with its
/// defaults ([`planned_graph`]), or the Gluon route's changes of the
/// lowered graph. Returns the remark.
fn export_loop(job: &LoopJob, o: &ExportOptions) -> Result<String, ExportError> {
    let (ir, machine) = (job.ir, job.machine);
    let l = lower(ir, machine, job.o.target.last_stage_ops()).map_err(|e| {
        ExportError::Skipped(format!(
            "twill: skipped loop: {} (at {})",
            e.reason, e.location
        ))
    })?;
    let mut graph = match o.target {
        GraphTarget::Triton => planned_graph(job, &l),
        _ => l.graph.clone(),
    };
    let group = machine.warps.warp_group_size;
    o.target
        .apply(&mut graph, ir.num_warps, group)
        .map_err(ExportError::Failed)?;
    let path = o.dir.join(format!("{}.toml", ir.name));
    std::fs::write(&path, to_toml(&graph))
        .map_err(|e| ExportError::Failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(format!(
        "twill: wrote {} ({} ops, {} edges{})",
        path.display(),
        graph.ops.len(),
        graph.edges.len(),
        if graph.same_group.is_empty() {
            String::new()
        } else {
            format!(", {} same_group sets", graph.same_group.len())
        }
    ))
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
