//! The driver: one loop from its extracted IR to written attributes, in
//! named steps that each return a typed value or a typed [`Skip`]:
//!
//! * [`extract`]: the loop's dependence graph under the machine's op rules
//!   (and one CTA's share of the SM when `ctas` CTAs share it);
//! * [`price`]: the graph resolved on the machine, durations normalized;
//! * [`solve`]: the joint search, under the target's colocation rules first
//!   where partitions are written, without them otherwise;
//! * [`check`]: the independent checker on exactly what is written;
//! * [`decide`]: Triton's attributes (stages, clusters, partitions);
//! * [`validate`]: the prefetch rings against shared memory and the
//!   attributes against Triton's contract;
//! * write: a callback of the host (the MLIR pass writes the attributes).
//!
//! A scheduled loop yields the facts of its [`ScheduledLoop`] record
//! (crate::report::schedule). The driver knows nothing about MLIR: the pass
//! (`crate::host`) extracts the loop and writes the attributes; `twill
//! solve` goes through [`price`], [`solve`] and [`check`] on a graph file,
//! the one [`planned_graph`] gives `--twill-export-graph` to write.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Instant;

use crate::backend::ws::{self, Emitted, LowerSkip, WsPlan};
use crate::backend::{self, LoopDecision, Placement as LoadSide, TritonTarget};
use crate::cache::{self, LoopCache, LoopEntry};
use crate::checker::{self, WarpConfig};
use crate::frontend::lower::{colocation, lower, Lowered};
use crate::frontend::LoopIr;
use crate::graph::{Graph, SameGroup};
use crate::joint::{self, Encoding, JointError, JointOptions, JointResult};
use crate::machine::Machine;
use crate::modulo::mii;
use crate::normalize::Normalization;
use crate::problem::{BuildOptions, Problem};
use crate::report::schedule::{
    cycles, Bounds, Compared, Loads, Lowering, NumStages, Partitions, PartitionsCode, Placement,
    Prefetch, Proof, ScheduledLoop, Sharing, SkipReason, SlackRecord, TritonSchedule, UnitCycles,
};

/// The pass's default work budget per kernel, z3 resource units
/// ([`joint::work`]): z3 spends about 8 million a second on one core of the
/// development machine (2 cores, x86-64), so that a kernel's solves add at
/// most about 2 s to its compile there (`BENCHMARKS.md`).
pub const DEFAULT_BUDGET: u64 = 16_000_000;

/// At most this many seconds go to the search under the target's
/// colocation rules before the loop is solved without them (stages only).
const COLOCATED_SECONDS: f64 = 10.0;

/// The options of one loop's schedule (the pass's `ScheduleOptions` less
/// what selects loops and names files).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOptions {
    pub target: TritonTarget,
    /// Wall-clock guard per loop, seconds (the budget decides; this stops a
    /// runaway query).
    pub timeout: f64,
    /// Deterministic work budget per kernel, z3 resource units (0: none;
    /// the pass shares it among the kernel's loops, [`LoopJob::budget`]).
    pub budget: u64,
    pub u: u64,
    pub encoding: Encoding,
    pub groups: u32,
    pub ws: bool,
    pub partitions: bool,
    pub order: backend::ClusterOrder,
    pub loads: backend::LoadPlacement,
    pub auto_loads: bool,
    pub ctas: u32,
    pub objective: joint::Objective,
    /// `lower=`: lower sm90 schedules to warp-specialized TTGIR.
    pub lower: Lower,
    /// `ring=`: how deep the lowering's rings are.
    pub ring: ws::RingDepth,
    /// `cache=` (or `TWILL_CACHE_DIR`): where solved loops are cached.
    pub cache: Option<LoopCache>,
    /// `num-stages=`: Triton's `num_stages` (0: not given).
    pub num_stages: u32,
    /// `stages=`: whether the user's `num_stages` bounds the schedule.
    pub stages: Stages,
    /// `ties=`: whose schedule a tie in twill's model keeps.
    pub ties: Ties,
    /// `unverifiable=skip`: a loop whose pipeline the pipeline verifier
    /// does not model is skipped before it is solved.
    pub skip_unverifiable: bool,
}

/// The pass's `ties=` option: where Triton's own schedule reaches the same
/// I in twill's model as twill's (and twill writes no partitions and
/// lowers nothing), whose schedule the loop gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ties {
    /// The deeper pipeline's (the default): Triton's where it has more
    /// stages than twill's (its loads prefetched further ahead, which the
    /// model's fixed latencies do not value), else twill's.
    #[default]
    Deeper,
    /// twill's.
    Twill,
    /// Triton's: only a predicted gain replaces the schedule Triton would
    /// run (`triton_as_good`).
    Triton,
}

impl std::str::FromStr for Ties {
    type Err = String;
    fn from_str(s: &str) -> Result<Ties, String> {
        match s {
            "deeper" => Ok(Ties::Deeper),
            "twill" => Ok(Ties::Twill),
            "triton" => Ok(Ties::Triton),
            other => Err(format!(
                "ties: expected `deeper`, `twill` or `triton`, got `{other}`"
            )),
        }
    }
}

/// The pass's `stages=` option: what the user's `num_stages` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stages {
    /// At most `num_stages` stages (the default): the buffering the user
    /// asked for is the most twill writes.
    #[default]
    Bound,
    /// Any number of stages; the user's `num_stages` is only reported.
    Free,
}

impl std::str::FromStr for Stages {
    type Err = String;
    fn from_str(s: &str) -> Result<Stages, String> {
        match s {
            "bound" => Ok(Stages::Bound),
            "free" => Ok(Stages::Free),
            other => Err(format!("stages: expected `bound` or `free`, got `{other}`")),
        }
    }
}

/// The pass's `lower=` option (docs/ws-lowering.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lower {
    /// Write attributes only (the default).
    Off,
    /// Lower every loop whose lowering the pipeline verifier proves; the
    /// others take the attribute route with a remark saying why.
    On,
    /// As `On`, but a loop that is not lowered is left untouched (no
    /// attributes): the hook's call before Triton's Hopper warp
    /// specialization.
    Only,
    /// Lower every loop the lowering supports, without the verifier gate
    /// (for tests); the others take the attribute route with a remark.
    Force,
}

impl Lower {
    /// Whether a lowered module must be proved by the verifier first.
    pub fn verified(self) -> bool {
        matches!(self, Lower::On | Lower::Only)
    }
}

impl std::str::FromStr for Lower {
    type Err = String;
    fn from_str(s: &str) -> Result<Lower, String> {
        match s {
            "off" => Ok(Lower::Off),
            "on" => Ok(Lower::On),
            "only" => Ok(Lower::Only),
            "force" => Ok(Lower::Force),
            other => Err(format!(
                "lower: expected `off`, `on`, `only` or `force`, got `{other}`"
            )),
        }
    }
}

/// A loop left to Triton: the reason code, its words, and (for a loop the
/// solver found no schedule for) its bounds and per-unit cycles.
#[derive(Debug)]
pub struct Skip {
    pub reason: SkipReason,
    pub text: String,
    pub bounds: Option<Bounds>,
    pub units: Vec<UnitCycles>,
    /// twill's schedule against Triton's, where Triton's is kept for it
    /// (boxed: a skip is the error of every step).
    pub compared: Option<Box<Compared>>,
}

impl Skip {
    pub fn new(reason: SkipReason, text: impl Into<String>) -> Skip {
        Skip {
            reason,
            text: text.into(),
            bounds: None,
            units: Vec::new(),
            compared: None,
        }
    }
}

/// A scheduled loop's facts.
#[derive(Debug)]
pub struct Scheduled {
    pub schedule: ScheduledLoop,
    pub bounds: Bounds,
    pub units: Vec<UnitCycles>,
}

/// One loop to schedule, with what the module-level pass decided for it.
pub struct LoopJob<'a> {
    pub ir: &'a LoopIr,
    pub machine: &'a Machine,
    pub o: &'a LoopOptions,
    /// Why every loop gets stages only (Triton partitions), if so.
    pub stages_only: Option<&'a str>,
    /// Under `loads=auto`: the mixed loop whose rotation applies here.
    pub mixed: Option<&'a str>,
    /// The loop's own `tt.num_stages` (`tl.range(num_stages=...)`), when
    /// at least 1: it wins over the option, as in Triton.
    pub loop_num_stages: Option<u32>,
    /// This loop's share of the kernel's work budget (0: none).
    pub budget: u64,
    /// Threads of its search (0: one per core, at most
    /// [`joint::DEFAULT_THREADS_MAX`]); the answer does not depend on it.
    pub threads: u32,
}

impl<'a> LoopJob<'a> {
    /// A loop on its own: no kernel-level decisions (stages only, a mixed
    /// loop's rotation, a `tt.num_stages` of its own), the whole of the
    /// options' budget.
    pub fn new(ir: &'a LoopIr, machine: &'a Machine, o: &'a LoopOptions) -> LoopJob<'a> {
        LoopJob {
            ir,
            machine,
            o,
            stages_only: None,
            mixed: None,
            loop_num_stages: None,
            budget: o.budget,
            threads: 0,
        }
    }
}

/// How the loop is solved: warp specialization and the graph as priced.
struct Plan {
    /// The loop is marked for warp specialization and `ws` is on.
    ws_loop: bool,
    /// Triton will warp-specialize it (sm90 also needs num_warps = 4).
    ws: bool,
    graph: Graph,
    colocated: Vec<SameGroup>,
    warps: WarpConfig,
}

impl LoopJob<'_> {
    /// The loop is marked for warp specialization and `ws` is on.
    fn ws_loop(&self) -> bool {
        self.o.ws && self.ir.warp_specialize
    }

    /// Triton will warp-specialize it (sm90 also needs num_warps = 4) and
    /// `ws` is on.
    fn warp_specialized(&self) -> bool {
        self.o.ws && self.marked_for_triton()
    }

    /// Triton warp-specializes the loop, whatever twill's `ws`: it is
    /// marked, and the target does at the loop's warps.
    fn marked_for_triton(&self) -> bool {
        self.ir.warp_specialize && self.o.target.warp_specializes(self.ir.num_warps)
    }

    /// Whether the pipeline verifier models the pipeline Triton builds for
    /// the loop: not where Triton warp-specializes it itself on a target
    /// whose partitions the verifier does not model.
    fn verifiable(&self) -> bool {
        !self.marked_for_triton() || self.o.target.verifier_models_partitions()
    }

    /// The user's `num_stages` for this loop and where it comes from: the
    /// loop's own attribute, else the option; none when neither is given.
    fn user_stages(&self) -> Option<(u32, &'static str)> {
        match self.loop_num_stages {
            Some(n) => Some((n, "loop")),
            None => (self.o.num_stages > 0).then_some((self.o.num_stages, "option")),
        }
    }

    /// The most stages the schedule may have (`stages=bound`).
    fn stage_bound(&self) -> Option<u32> {
        self.user_stages()
            .filter(|_| self.o.stages == Stages::Bound)
            .map(|(n, _)| n)
    }

    /// The stages of Triton's own schedule of the loop where they are more
    /// than the bound (on sm100 Triton gives an MMA's result a stage of its
    /// own beyond `num_stages`): the bound of a second search where none
    /// exists within the first, so that twill never answers "no schedule"
    /// where Triton has one.
    fn tritons_bound(&self) -> Option<u32> {
        let triton = self.ir.triton_max_stage? + 1;
        self.stage_bound().filter(|&n| triton > n).map(|_| triton)
    }

    /// The most stages the written attributes may take: Triton's own
    /// schedule's where they exceed the user's bound, else that bound.
    fn attribute_bound(&self) -> Option<u32> {
        self.tritons_bound().or(self.stage_bound())
    }

    /// Where the loads go: `loads=auto` rotates the loads of a loop that
    /// mixes descriptor and pointer loads, or (`rotate=kernel`) of any loop
    /// of its kernel. Returns the placement and whether it is rotated.
    fn load_placement(&self) -> (backend::LoadPlacement, bool) {
        let rotated = self.o.auto_loads && self.mixed.is_some();
        let loads = if rotated {
            self.o.loads.rotated()
        } else {
            self.o.loads
        };
        (loads, rotated)
    }

    /// What the search tries, for a message: warp specialization or
    /// software pipelining only (and why), within the stage bound.
    fn tried(&self, warps: &WarpConfig) -> String {
        let mut what = if warps.groups > 1 {
            format!("warp specialization, {} compute groups", warps.groups)
        } else if self.ws_loop() {
            "software pipelining, one compute group".to_string()
        } else if self.o.ws {
            "software pipelining only: the loop is not marked tt.warp_specialize".to_string()
        } else {
            "software pipelining only: ws=false".to_string()
        };
        if let Some(n) = self.stage_bound() {
            let _ = write!(what, "; at most {n} stages (num_stages)");
        }
        if let Some(n) = self.tritons_bound() {
            let _ = write!(what, ", then {n} (Triton's own schedule's)");
        }
        what
    }
}

/// The graph the pass solves for the loop, with the target's colocation
/// sets it tries first as its `same_group` sets: what
/// `--twill-export-graph` writes, and what `twill solve --same-group-first`
/// solves as the pass does.
pub fn planned_graph(job: &LoopJob, lowered: &Lowered) -> Graph {
    let mut graph = lowered.graph.clone();
    // Triton warp-specializes only loops marked tt.warp_specialize (and, on
    // sm90, only at num_warps = 4); other loops are software-pipelined by
    // one instruction stream, whose barrier waits do not stop the
    // asynchronous units (TMA, tensor cores) it feeds: no blocking rule.
    if !job.ws_loop() {
        for e in &mut graph.edges {
            e.blocking = false;
        }
    }
    // Partitions that are written must be ones the code generator can
    // build: the target's colocation sets. When no schedule meets them
    // (within two thirds of the work budget, at most COLOCATED_SECONDS of
    // time), the loop
    // is solved without them and only its stages are written.
    if job.warp_specialized() && job.o.partitions && job.stages_only.is_none() {
        if let Some(mmas) = job.o.target.partition_mma_ops() {
            graph.same_group = colocation(job.ir, lowered, mmas);
        }
    }
    graph
}

impl Plan {
    fn new(job: &LoopJob, machine: &Machine, lowered: &Lowered) -> Plan {
        let ws_loop = job.ws_loop();
        let mut graph = planned_graph(job, lowered);
        let colocated = std::mem::take(&mut graph.same_group);
        let warps = WarpConfig {
            groups: if ws_loop { job.o.groups } else { 1 },
            reg_limit: machine.warps.max_regs_per_thread,
            cross_warp: true,
        };
        Plan {
            ws_loop,
            ws: job.warp_specialized(),
            graph,
            colocated,
            warps,
        }
    }

    /// Whether twill's partitions are written when a schedule meets the
    /// colocation sets.
    fn partitioned(&self, job: &LoopJob) -> bool {
        self.ws && job.o.partitions && job.stages_only.is_none()
    }

    /// Whether twill's partitions are written, and why not when for a
    /// reason other than the options.
    fn partitioning(&self, job: &LoopJob, solved: &Solved) -> Partitioning {
        let wanted = self.ws && job.o.partitions;
        let note = match (job.stages_only, &solved.without_colocation) {
            (Some(why), _) if wanted => {
                Some((PartitionsCode::LeftToTritonSeveralLoops, why.to_string()))
            }
            (_, Some(why)) => Some((PartitionsCode::LeftToTritonRules, why.clone())),
            _ => None,
        };
        Partitioning {
            written: wanted && job.stages_only.is_none() && solved.without_colocation.is_none(),
            note,
        }
    }
}

/// What the joint search is asked: shared by the pass and `twill solve`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolveRequest {
    pub encoding: Encoding,
    pub warps: WarpConfig,
    pub objective: joint::Objective,
    pub seed: u32,
    /// Threads searching initiation intervals at once (0: one per core, at most
    /// [`joint::DEFAULT_THREADS_MAX`]).
    pub threads: u32,
    /// Seconds for the whole solve, both attempts (a guard: the budget
    /// decides where it is set).
    pub timeout: f64,
    /// At most this many stages (the user's `num_stages`).
    pub stage_bound: Option<joint::StageBound>,
    /// The bound of the attempt without the colocation sets, whose
    /// partitions are not written (on sm100 the back end then places a
    /// load after its tcgen05 reader: one stage more); None: `stage_bound`.
    pub stage_bound_alone: Option<joint::StageBound>,
    /// Deterministic work budget of the whole solve, both attempts, z3
    /// resource units (0: none).
    pub budget: u64,
    /// Whether the compute groups reach the output (twill's partitions or
    /// its lowering): then the search refines them after L
    /// ([`JointOptions::refine_groups`]).
    pub refine_groups: bool,
}

/// The solver's answer.
#[derive(Debug)]
pub struct Solved {
    pub result: JointResult,
    /// The problem with the colocation sets, when the schedule meets them.
    pub colocated_problem: Option<Problem>,
    /// Why no schedule met the colocation sets, when some were asked for
    /// and none did (the schedule is then of the problem without them).
    pub without_colocation: Option<String>,
    /// Work spent by both attempts, z3 resource units.
    pub work: u64,
    /// The budget of the solve (0: none).
    pub budget: u64,
    /// The answer came from the schedule cache (and the checker accepted
    /// it again).
    pub cached: bool,
    /// The attempt under the colocation sets stopped at its part of the
    /// budget (or its time) without a schedule: a larger budget may find
    /// one.
    pub colocation_cut: bool,
}

/// The partitions a scheduled loop gets.
struct Partitioning {
    /// twill's partitions are written.
    written: bool,
    /// Why partitions are left to Triton, when for a reason other than the
    /// options.
    note: Option<(PartitionsCode, String)>,
}

/// A loop solved, before anything is written: the steps of
/// [`schedule_loop`] that read no MLIR, so that the pass can solve a
/// kernel's loops at once (each on threads of its own) and write them in
/// order.
pub struct Solving<'a> {
    machine: Cow<'a, Machine>,
    lowered: Lowered,
    plan: Plan,
    problem: Problem,
    solved: Solved,
    partitioning: Partitioning,
    iteration: f64,
    decided: Decided,
    tie: Option<String>,
    triton: Option<TritonSchedule>,
}

impl Solving<'_> {
    /// The same answer under another share of the budget (one that
    /// [`ShareUse::same_answer_with`] accepts): the report gives that share.
    pub fn with_share(mut self, share: u64) -> Self {
        self.solved.budget = share;
        self
    }
}

/// Whether a loop solved with one share of the kernel's budget gives the
/// same answer with another: [`Solving`]'s (or its skip's) account of
/// where a budget decided something.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareUse {
    /// The share it was solved with.
    pub share: u64,
    /// A search (or its first attempt) stopped at its part of the share, or
    /// found no schedule: a larger share may answer otherwise.
    pub search_cut: bool,
    /// The evaluation of Triton's schedule stopped undecided with this
    /// much work (whatever stopped it: the same work decides the same).
    pub evaluation_cut: Option<u64>,
    /// twill's I is proven (what the evaluation's work depends on).
    pub ii_proven: bool,
}

impl ShareUse {
    /// Whether solving with `share` instead gives the same answer: the same
    /// share, or a larger one where no budget decided anything (each work
    /// limit only grows with the share, [`triton_budget`]).
    pub fn same_answer_with(&self, share: u64) -> bool {
        share == self.share
            || (self.share > 0
                && share > self.share
                && !self.search_cut
                && self
                    .evaluation_cut
                    .is_none_or(|work| triton_budget(share, self.ii_proven) == work))
    }
}

/// Schedules one extracted loop; `write` writes the attributes when every
/// step holds, unless `lower=force` and `lower` replaced the loop by the
/// warp-specialized form of its plan.
pub fn schedule_loop(
    job: &LoopJob,
    write: impl FnOnce(&LoopDecision) -> Result<(), String>,
    lower: impl FnOnce(&WsPlan) -> Result<Emitted, LowerSkip>,
) -> Result<Scheduled, Skip> {
    finish(job, solve_loop(job).0?, write, lower)
}

/// The loop through its solve and the evaluation of Triton's schedule (no
/// MLIR is read or written), with how its answer used the job's share.
pub fn solve_loop<'a>(job: &LoopJob<'a>) -> (Result<Solving<'a>, Skip>, ShareUse) {
    let mut share = ShareUse {
        share: job.budget,
        search_cut: false,
        evaluation_cut: None,
        ii_proven: false,
    };
    let solving = solving(job, &mut share);
    if solving
        .as_ref()
        .is_err_and(|s| s.reason == SkipReason::NoSchedule)
    {
        share.search_cut = true;
    }
    (solving, share)
}

fn solving<'a>(job: &LoopJob<'a>, share: &mut ShareUse) -> Result<Solving<'a>, Skip> {
    let started = Instant::now();
    let o = job.o;
    let (machine, lowered) = extract(job)?;
    if o.skip_unverifiable && !job.verifiable() {
        return Err(Skip::new(
            SkipReason::Unverifiable,
            "Triton warp-specializes this loop on sm100, and the pipeline verifier does not model the code it builds (tcgen05 MMAs completed through commit barriers, tensor memory): a schedule would be replaced by Triton's own, so none is solved (unverifiable=schedule solves it)",
        ));
    }
    if job.stage_bound() == Some(1) {
        return Err(Skip::new(
            SkipReason::SameAsTriton,
            "num_stages=1: Triton does not pipeline this loop, and within one stage no load is issued ahead (stages=free lifts the bound)",
        ));
    }
    let plan = Plan::new(job, &machine, &lowered);
    // Priced and normalized once; the colocated attempt only adds its sets.
    let problem = price(&plan.graph, &machine, o.u, o.timeout)?.0;
    let request = SolveRequest {
        encoding: o.encoding,
        warps: plan.warps,
        objective: o.objective,
        seed: 0,
        threads: job.threads,
        timeout: o.timeout,
        stage_bound: job.stage_bound().map(|stages| joint::StageBound {
            stages,
            extra: extra_stages(job, &lowered, &problem, plan.partitioned(job)),
        }),
        stage_bound_alone: job.stage_bound().map(|stages| joint::StageBound {
            stages,
            extra: extra_stages(job, &lowered, &problem, false),
        }),
        budget: job.budget,
        // The groups reach the output only through twill's partitions or
        // its lowering (and the slack objective refines after them).
        refine_groups: plan.partitioned(job)
            || o.lower != Lower::Off
            || o.objective == joint::Objective::Slack,
    };
    let mut solved = solve_through_cache(job, &machine, &plan, &problem, &request, started)
        .or_else(|s| match job.tritons_bound() {
            // None within num_stages: within Triton's own stages.
            Some(stages) if s.reason == SkipReason::NoSchedule => {
                tracing::debug!(target: "twill", stages, "no schedule within num_stages; within Triton's stages");
                share.search_cut = true;
                let raise = |b: Option<joint::StageBound>| b.map(|b| joint::StageBound { stages, ..b });
                let raised = SolveRequest {
                    stage_bound: raise(request.stage_bound),
                    stage_bound_alone: raise(request.stage_bound_alone),
                    ..request
                };
                solve_through_cache(job, &machine, &plan, &problem, &raised, started)
            }
            _ => Err(s),
        })
        .map_err(|s| {
            let mut skip = kept(job, s);
            let _ = write!(skip.text, " [tried: {}]", job.tried(&plan.warps));
            skip
        })?;
    tracing::debug!(target: "twill", seconds = started.elapsed().as_secs_f64(), "solved");
    share.search_cut |= solved.result.budget_spent || solved.colocation_cut;
    share.ii_proven = solved.result.ii_proven;
    let partitioning = plan.partitioning(job, &solved);
    let iteration = redepth(&mut solved.result, o.ctas, problem.cycle_scale);
    let solved_problem = solved.colocated_problem.as_ref().unwrap_or(&problem);
    check(solved_problem, &solved.result, &plan.warps)?;
    tracing::debug!(target: "twill", seconds = started.elapsed().as_secs_f64(), "checked");
    let decided = decide(job, &lowered, &solved.result, partitioning.written);
    let tie = tie_to_triton(job, &decided, partitioning.written);
    let triton = triton_schedule(job, &lowered, (solved_problem, &solved, &plan.warps));
    if triton.as_ref().is_some_and(|t| t.ii.is_none()) {
        share.evaluation_cut = Some(triton_budget(job.budget, solved.result.ii_proven));
    }
    Ok(Solving {
        machine,
        lowered,
        plan,
        problem,
        solved,
        partitioning,
        iteration,
        decided,
        tie,
        triton,
    })
}

/// The loop after its solve: Triton's schedule where it is as good, the
/// checks of the decision, then the attributes written (or the loop
/// lowered).
pub fn finish(
    job: &LoopJob,
    solving: Solving,
    write: impl FnOnce(&LoopDecision) -> Result<(), String>,
    lower: impl FnOnce(&WsPlan) -> Result<Emitted, LowerSkip>,
) -> Result<Scheduled, Skip> {
    let o = job.o;
    let Solving {
        machine,
        lowered,
        plan,
        problem,
        solved,
        partitioning,
        iteration,
        decided,
        tie,
        triton,
    } = solving;
    let machine = machine.as_ref();
    if let Some(t) = &triton {
        prefer_triton(
            t,
            solved.result.schedule.schedule.ii,
            problem.cycle_scale,
            tie.as_deref(),
        )?;
    }
    within_bound(job, &decided)?;
    validate(job, machine, &lowered, &decided)?;
    if o.lower == Lower::Off {
        tritons_own(job, &decided, &solved.result, &problem)?;
    }
    let lowering =
        (o.lower != Lower::Off).then(|| lower_loop(job, machine, &lowered, &solved.result, lower));
    if let (Lower::Only, Some(l)) = (o.lower, &lowering) {
        if !l.lowered {
            return Err(Skip::new(
                SkipReason::LoweringRefused,
                format!(
                    "lowering refused: {} (lower=only writes no attributes)",
                    l.text
                ),
            ));
        }
    }
    if !lowering.as_ref().is_some_and(|l| l.lowered) {
        write(&decided.decision).map_err(|e| {
            Skip::new(
                SkipReason::WriteFailed,
                format!("cannot write attributes: {e}"),
            )
        })?;
    }
    for n in &lowered.notes {
        tracing::debug!(target: "twill", "{n}");
    }
    let facts = Facts {
        job,
        machine,
        lowered: &lowered,
        problem: &problem,
        plan: &plan,
        solved: &solved,
        partitioning: &partitioning,
        decided: &decided,
        iteration,
        triton,
    };
    let mut schedule = facts.schedule();
    if let Some(n) = lowering.as_ref().and_then(|l| l.compute_partitions) {
        schedule.partitions = Partitions {
            code: PartitionsCode::Lowered,
            count: Some(n + 1),
            text: match n {
                1 => "lowered (a producer partition and the default region)".into(),
                _ => format!(
                    "lowered (a producer partition, the default region and {} compute partitions)",
                    n - 1
                ),
            },
        };
    }
    schedule.lowering = lowering;
    Ok(Scheduled {
        schedule,
        bounds: bounds(&problem, solved.result.res_mii),
        units: units(&problem),
    })
}

/// Plans the warp-specialized form of a scheduled loop and hands it to
/// `lower`: the record of what became of it.
fn lower_loop(
    job: &LoopJob,
    machine: &Machine,
    lowered: &Lowered,
    result: &JointResult,
    lower: impl FnOnce(&WsPlan) -> Result<Emitted, LowerSkip>,
) -> Lowering {
    let smem = machine.memory("smem").map_or(0, |m| m.capacity);
    let planned = ws::plan(job.ir, lowered, result, &job.o.target, smem, job.o.ring);
    let verified = job.o.lower.verified();
    match planned.and_then(|p| lower(&p).map(|e| (p, e))) {
        Ok((p, e)) => Lowering {
            lowered: true,
            verified,
            text: if verified {
                format!("{}; proved by the pipeline verifier", p.summary(&e))
            } else {
                format!("{}; not verified (lower=force)", p.summary(&e))
            },
            refused: None,
            depth: Some(p.depth),
            expect_bytes: Some(p.expect_bytes),
            smem_bytes: Some(p.smem_bytes + e.init_bytes),
            compute_partitions: Some(p.parts.len() as u32),
        },
        Err(why) => Lowering {
            lowered: false,
            verified: false,
            text: why.to_string(),
            refused: Some(why),
            depth: None,
            expect_bytes: None,
            smem_bytes: None,
            compute_partitions: None,
        },
    }
}

/// The loop's dependence graph under the machine's op rules, and the
/// machine it is solved on: one CTA's share of the SM when `ctas` CTAs
/// are to share it (the pass refuses warp-specialized loops there).
pub fn extract<'a>(job: &LoopJob<'a>) -> Result<(Cow<'a, Machine>, Lowered), Skip> {
    let o = job.o;
    let machine = if o.ctas > 1 {
        let shared = job
            .machine
            .sharing_sm(o.ctas, job.ir.num_warps)
            .map_err(|e| Skip::new(SkipReason::CtasUnfit, format!("ctas={}: {e}", o.ctas)))?;
        Cow::Owned(shared)
    } else {
        Cow::Borrowed(job.machine)
    };
    let lowered = lower(job.ir, &machine, o.target.last_stage_ops()).map_err(|e| {
        Skip::new(
            SkipReason::NotLowered,
            format!("{} (at {})", e.reason, e.location),
        )
    })?;
    if lowered.graph.ops.is_empty() {
        return Err(Skip::new(
            SkipReason::NothingToSchedule,
            "no op of the body costs anything on this machine",
        ));
    }
    Ok((machine, lowered))
}

/// The graph resolved on the machine, durations normalized within `u`.
pub fn price(
    graph: &Graph,
    machine: &Machine,
    u: u64,
    timeout: f64,
) -> Result<(Problem, Normalization), Skip> {
    let build = BuildOptions {
        u,
        time_limit: timeout,
    };
    Problem::build(graph, machine, build).map_err(|e| {
        Skip::new(
            SkipReason::PricingFailed,
            format!("cannot price the loop: {e}"),
        )
    })
}

/// The joint search, under the colocation sets first where some are given
/// (within two thirds of the work budget, and a third of the time, at most
/// COLOCATED_SECONDS), without them
/// when none meets them; no schedule at all is a `no_schedule` skip with
/// the problem's bounds.
pub fn solve(
    problem: &Problem,
    colocated: &[SameGroup],
    request: &SolveRequest,
    started: Instant,
) -> Result<Solved, Skip> {
    let run = |p: &Problem, seconds: f64, budget: u64, alone: bool| {
        joint::solve(
            p,
            JointOptions {
                encoding: request.encoding,
                warps: request.warps,
                timeout: seconds.max(0.01),
                seed: request.seed,
                threads: request.threads,
                objective: request.objective,
                stage_bound: if alone {
                    request.stage_bound_alone.or(request.stage_bound)
                } else {
                    request.stage_bound
                },
                budget,
                refine_groups: request.refine_groups,
            },
        )
    };
    let left = || (request.timeout - started.elapsed().as_secs_f64()).max(0.01);
    let mut colocated_problem = None;
    let mut without_colocation = None;
    let mut colocation_cut = false;
    let mut work = 0;
    let answer = if colocated.is_empty() {
        run(problem, left(), request.budget, false)
    } else {
        let with = with_colocation(problem, colocated);
        let seconds = (left() / 3.0).min(COLOCATED_SECONDS);
        // Two thirds of the work budget: the rules are what Triton can
        // build, and the attempt without them keeps a third.
        let budget = request.budget / 3 * 2;
        match run(&with, seconds, budget, false) {
            Ok(r) => {
                colocated_problem = Some(with);
                Ok(r)
            }
            Err(e) => {
                tracing::debug!(target: "twill", "under the colocation rules: {e}");
                // The attempt spent its whole share only when it ran out.
                work = budget;
                colocation_cut = !matches!(e, JointError::Exhausted { .. });
                // One line: remarks are read line by line.
                let why = format!("no schedule: {e}").replace('\n', " ");
                without_colocation = Some(match e {
                    JointError::Timeout { .. } => format!(
                        "no schedule under Triton's partition rules within {seconds:.0} s: {why}"
                    ),
                    JointError::Budget { .. } => format!(
                        "no schedule under Triton's partition rules within the work budget: {why}"
                    ),
                    _ => format!("none that Triton can build: {why}"),
                });
                run(problem, left(), request.budget.saturating_sub(budget), true)
            }
        }
    };
    let result = answer.map_err(|e| Skip {
        reason: SkipReason::NoSchedule,
        text: format!("no schedule: {e}").replace('\n', " "),
        bounds: Some(Bounds {
            resource_cycles: cycles(f64::from(mii::res_mii(problem)) * problem.cycle_scale),
            sequential_cycles: sequential_cycles(problem),
        }),
        units: units(problem),
        compared: None,
    })?;
    work += result.work;
    Ok(Solved {
        result,
        colocated_problem,
        without_colocation,
        work,
        budget: request.budget,
        cached: false,
        colocation_cut,
    })
}

/// `problem` with the colocation sets.
fn with_colocation(problem: &Problem, colocated: &[SameGroup]) -> Problem {
    let mut with = problem.clone();
    with.same_group = colocated.iter().map(|set| set.ops.clone()).collect();
    with
}

/// [`solve`], through the loop's cache where `cache=` gives one: an entry
/// the checker accepts again is the answer; otherwise the loop is solved
/// and its answer stored.
fn solve_through_cache(
    job: &LoopJob,
    machine: &Machine,
    plan: &Plan,
    problem: &Problem,
    request: &SolveRequest,
    started: Instant,
) -> Result<Solved, Skip> {
    let Some(store) = &job.o.cache else {
        return solve(problem, &plan.colocated, request, started);
    };
    let mut graph = plan.graph.clone();
    graph.same_group = plan.colocated.clone();
    // The loop's share of the kernel's budget decides where a search cut
    // short stops, and its own stage bound (its `tt.num_stages` wins over
    // the option) what it may find, and whether the groups are refined
    // what it answers: any of them differing is another entry.
    let options = format!(
        "{}\nshare={}\nstage_bound={:?}/{:?}\nrefine_groups={}",
        store.options,
        request.budget,
        request.stage_bound,
        request.stage_bound_alone,
        request.refine_groups
    );
    let key = cache::key(&options, machine, &graph, &plan.warps);
    if let Some(hit) = store
        .load(&key)
        .and_then(|e| reuse(e, problem, &plan.colocated, &plan.warps, request.budget))
    {
        tracing::debug!(target: "twill", "{}: schedule from the cache (key {})", job.ir.name, &key[..16]);
        return Ok(hit);
    }
    let solved = solve(problem, &plan.colocated, request, started)?;
    store.store(&LoopEntry {
        schema: cache::SCHEMA.to_string(),
        key,
        result: solved.result.clone(),
        colocated: solved.colocated_problem.is_some(),
        without_colocation: solved.without_colocation.clone(),
        work: solved.work,
    });
    Ok(solved)
}

/// A cache entry as the solver's answer, if it is one for `problem`: a
/// schedule of its ops, under the same warp configuration, that the
/// independent checker accepts (with the colocation sets where the entry
/// says it meets them). Otherwise None, with a warning.
fn reuse(
    entry: LoopEntry,
    problem: &Problem,
    colocated: &[SameGroup],
    warps: &WarpConfig,
    budget: u64,
) -> Option<Solved> {
    let r = &entry.result;
    let ops = problem.ops.len();
    let why = if r.schedule.schedule.start.len() != ops || r.schedule.group.len() != ops {
        Some(format!(
            "a schedule of {} ops, not {ops}",
            r.schedule.group.len()
        ))
    } else if r.warps != *warps {
        Some(format!("solved for {:?}, not {warps:?}", r.warps))
    } else if entry.colocated && colocated.is_empty() {
        Some("colocated, but the loop has no colocation sets".to_string())
    } else {
        None
    };
    let colocated_problem = entry.colocated.then(|| with_colocation(problem, colocated));
    let checked = match why {
        Some(why) => Err(why),
        None => check(colocated_problem.as_ref().unwrap_or(problem), r, warps).map_err(|s| s.text),
    };
    if let Err(why) = checked {
        tracing::warn!(target: "twill", "ignoring the cache entry {}: {why}; solving again", entry.key);
        return None;
    }
    let without_colocation = entry.without_colocation;
    Some(Solved {
        result: entry.result,
        colocated_problem,
        // The work the search spent, as the kernel's budget accounts it
        // (a hit leaves the next loop the same share as a solve).
        work: entry.work,
        budget,
        cached: true,
        // The entry does not say why no schedule met the sets: as if cut.
        colocation_cut: without_colocation.is_some(),
        without_colocation,
    })
}

/// The least work the evaluation of Triton's schedule gets (z3 resource
/// units), whatever the loop's share of the budget, where twill's I is not
/// proven (Triton's schedule may reach a smaller one).
const TRITON_BUDGET_FLOOR: u64 = 1_000_000;

/// The most work the evaluation of Triton's schedule gets where twill's I
/// is proven: it can then at best tie, and its first query (at twill's I)
/// decides a tie. Enough to find Triton's I in the model for most loops,
/// little next to a proof that Triton's stages cannot reach twill's I (a
/// tie not found within it keeps twill's schedule).
const TRITON_PROVEN_BUDGET: u64 = 250_000;

/// A loop without a schedule of twill's keeps Triton's own where it has
/// one: the skip says so.
fn kept(job: &LoopJob, mut skip: Skip) -> Skip {
    if let Some(max) = job.ir.triton_max_stage {
        skip.text.push_str(&format!(
            " (the loop carries Triton's own schedule: {} stages)",
            max + 1
        ));
    }
    skip
}

/// The loop carried Triton's own schedule (every node's op has a
/// `loop.stage`): that schedule in twill's model ([`joint::fixed`]), from
/// the smallest I twill did not refute, within a quarter of the loop's
/// budget (at least [`TRITON_BUDGET_FLOOR`]; at most
/// [`TRITON_PROVEN_BUDGET`] where twill's I is proven). twill's own
/// schedule, moved to Triton's stages, is the first candidate at its I
/// (decisions.md D36).
fn triton_schedule(
    job: &LoopJob,
    lowered: &Lowered,
    (problem, solved, warps): (&Problem, &Solved, &WarpConfig),
) -> Option<TritonSchedule> {
    let max = job.ir.triton_max_stage?;
    let stages: Vec<u32> = lowered
        .op_of_node
        .iter()
        .map(|&op| job.ir.ops[op].triton_stage)
        .collect::<Option<_>>()?;
    // Every I twill refuted is refuted for Triton's stages too.
    let from = solved.result.refuted_below;
    let cap = crate::modulo::search_cap(problem);
    let timeout_ms = (job.o.timeout * 1000.0 / 4.0).max(1.0) as u32;
    let budget = triton_budget(job.budget, solved.result.ii_proven);
    let answer = joint::fixed::smallest_ii(
        problem,
        *warps,
        &stages,
        (from, cap),
        (budget, timeout_ms),
        Some(&solved.result.schedule),
    );
    tracing::debug!(target: "twill", ?answer, "Triton's stages in twill's model");
    let scale = problem.cycle_scale;
    let (ii, at_least) = match answer {
        joint::fixed::StagesAnswer::At(ii, _) => (Some(ii), ii),
        joint::fixed::StagesAnswer::Unknown(ii) => (None, ii),
        joint::fixed::StagesAnswer::Infeasible => (None, cap + 1),
        // Not a schedule of this graph (Triton's graph has other edges).
        joint::fixed::StagesAnswer::Inconsistent { .. } => return None,
    };
    Some(TritonSchedule {
        stages: max + 1,
        ii,
        ii_cycles: ii.map(|ii| cycles(f64::from(ii) * scale)),
        at_least,
    })
}

/// The work the evaluation of Triton's schedule gets from the loop's
/// `share` (0: none), as [`triton_schedule`] describes; it never shrinks
/// as the share grows.
fn triton_budget(share: u64, ii_proven: bool) -> u64 {
    match (share, ii_proven) {
        (0, _) => 0,
        (b, false) => (b / 4).max(TRITON_BUDGET_FLOOR),
        (b, true) => (b / 4).clamp(1, TRITON_PROVEN_BUDGET),
    }
}

/// Whether a tie in the model goes to Triton's schedule, and why (the end
/// of the skip's text): `ties=triton`, or `ties=deeper` where Triton's
/// schedule has more stages than twill's decision. Never where twill
/// writes partitions or lowers the loop (worth more than the stages the
/// comparison sees).
fn tie_to_triton(job: &LoopJob, decided: &Decided, partitions: bool) -> Option<String> {
    if partitions || job.o.lower != Lower::Off {
        return None;
    }
    let ours = decided.decision.max_stage + 1;
    match (job.o.ties, job.ir.triton_max_stage) {
        (Ties::Triton, _) => Some("ties=triton keeps Triton's".into()),
        (Ties::Deeper, Some(max)) if max + 1 > ours => Some(format!(
            "its loads prefetch further ahead ({} stages against twill's {ours}); ties=deeper keeps the deeper pipeline",
            max + 1
        )),
        _ => None,
    }
}

/// Never worse than Triton: where Triton's schedule reaches a smaller I in
/// twill's model than the schedule twill found (cut short by its budget),
/// Triton's is kept; where `tie` says why ([`tie_to_triton`]) also where
/// it reaches the same I, and where its evaluation ran out of budget
/// before it could tell whether it does (a tie not refuted: keeping
/// twill's would need a proof that it is better).
fn prefer_triton(
    triton: &TritonSchedule,
    ours: u32,
    scale: f64,
    tie: Option<&str>,
) -> Result<(), Skip> {
    let (reason, text) = match (triton.ii, tie) {
        (Some(theirs), Some(why)) if theirs == ours => (
            SkipReason::TritonAsGood,
            format!(
                "Triton's own schedule is as good in twill's model: I={theirs} (~{} cycles, {} stages), the I of twill's schedule; {why}",
                cycles(f64::from(theirs) * scale),
                triton.stages,
            ),
        ),
        (Some(theirs), _) if theirs < ours => (
            SkipReason::TritonBetter,
            format!(
                "Triton's own schedule is better in twill's model: I={theirs} (~{} cycles, {} stages) against twill's I={ours} (~{} cycles, not proven within its budget)",
                cycles(f64::from(theirs) * scale),
                triton.stages,
                cycles(f64::from(ours) * scale),
            ),
        ),
        (None, Some(why)) if triton.at_least <= ours => (
            SkipReason::TritonMayTie,
            format!(
                "Triton's own schedule may be as good in twill's model: its stages ({}) reach no I below {}, and whether they reach twill's I={ours} (~{} cycles) was not decided within the evaluation's budget; {why}",
                triton.stages,
                triton.at_least,
                cycles(f64::from(ours) * scale),
            ),
        ),
        _ => return Ok(()),
    };
    let mut skip = Skip::new(reason, text);
    skip.compared = Some(Box::new(Compared {
        ii: ours,
        ii_cycles: cycles(f64::from(ours) * scale),
        triton: triton.clone(),
    }));
    Err(skip)
}

/// The ops back to back, raw cycles.
fn sequential_cycles(problem: &Problem) -> i64 {
    let sequential: u64 = problem.ops.iter().map(|op| u64::from(op.cycles)).sum();
    cycles(sequential as f64 * problem.cycle_scale)
}

fn bounds(problem: &Problem, res_mii: u32) -> Bounds {
    Bounds {
        resource_cycles: cycles(f64::from(res_mii) * problem.cycle_scale),
        sequential_cycles: sequential_cycles(problem),
    }
}

/// The raw cycles one iteration keeps each unit busy (not rounded by
/// normalization; units it does not use left out), so that a model of
/// several CTAs or partitions sharing an SM can add them up per unit.
fn units(problem: &Problem) -> Vec<UnitCycles> {
    problem
        .units
        .iter()
        .zip(&problem.unit_cycles)
        .zip(&problem.capacity)
        .filter(|((_, &c), _)| c > 0)
        .map(|((u, &c), &cap)| UnitCycles {
            unit: u.clone(),
            cycles: c.div_ceil(u64::from(cap.max(1))),
        })
        .collect()
}

/// With `ctas` CTAs on the SM an iteration takes at least `ctas` times the
/// busiest unit's cycles (the CTAs share the units): a load needs fewer
/// iterations of lead to cover its time (and fewer buffers). Alone (I >=
/// ResMII) this is I, and the depths stay the solver's. Returns the
/// iteration's raw cycles.
fn redepth(result: &mut JointResult, ctas: u32, scale: f64) -> f64 {
    let iteration = f64::from(
        result
            .schedule
            .schedule
            .ii
            .max(ctas.saturating_mul(result.res_mii)),
    ) * scale;
    for st in &mut result.streaming {
        st.prefetch = joint::prefetch_depth(st.raw_cycles, iteration);
    }
    iteration
}

/// The independent checker, once more, on exactly what is written: the
/// schedule of `problem` (with the colocation sets when they held).
pub fn check(problem: &Problem, result: &JointResult, warps: &WarpConfig) -> Result<(), Skip> {
    let (view, _) = joint::streaming_view(problem);
    let violations = checker::check_joint(&view, &result.schedule, warps);
    skip_on_violations(
        &violations,
        SkipReason::CheckerRejected,
        "the checker rejected the schedule",
    )
}

/// Ok when there are no `violations`, else a [`Skip`] for `reason` whose
/// text is `what` followed by the violations.
fn skip_on_violations<V: std::fmt::Display>(
    violations: &[V],
    reason: SkipReason,
    what: &str,
) -> Result<(), Skip> {
    if violations.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
    Err(Skip::new(reason, format!("{what}: {}", list.join("; "))))
}

/// Triton's attributes for a schedule: the decision, the load placement it
/// used and each streaming load's placement (in the order of the solver's
/// streaming loads).
pub struct Decided {
    pub decision: LoopDecision,
    pub loads: backend::LoadPlacement,
    /// `loads=auto` rotated the loop.
    pub rotated: bool,
    pub streaming: Vec<LoadSide>,
}

/// Decides Triton's attributes: the options' cluster order where it meets
/// Triton's order rule, the slot order otherwise.
pub fn decide(job: &LoopJob, lowered: &Lowered, result: &JointResult, partitions: bool) -> Decided {
    let (loads, rotated) = job.load_placement();
    let decided = decide_with(job, lowered, result, partitions, loads, rotated);
    // Under the stage bound a `loads=auto` rotation, and a load the back
    // end moves after its tcgen05 reader (sm100), keep their loads last but
    // drop the stage they add where that stage would exceed the bound: one
    // iteration less lead, as Triton's own rotation at that num_stages.
    let bound = job.attribute_bound();
    let deepened = rotated || !decided.decision.moved_last.is_empty();
    match bound {
        Some(n) if deepened && decided.decision.max_stage + 1 > n => {
            tracing::debug!(
                stages = decided.decision.max_stage + 1,
                bound = n,
                "loads placed last without the stage they add"
            );
            let shallow = backend::LoadPlacement::uniform(true, job.o.loads.descriptor.extra);
            decide_with(job, lowered, result, partitions, shallow, rotated)
        }
        _ => decided,
    }
}

/// [`decide`] with the loads placed as `loads` says (`rotated`: by
/// `loads=auto`).
fn decide_with(
    job: &LoopJob,
    lowered: &Lowered,
    result: &JointResult,
    partitions: bool,
    loads: backend::LoadPlacement,
    rotated: bool,
) -> Decided {
    let (o, ir) = (job.o, job.ir);
    let decide = |order| {
        backend::decide(
            ir,
            lowered,
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
    let streaming: Vec<LoadSide> = result
        .streaming
        .iter()
        .map(|st| {
            let v = lowered.graph.ops.iter().position(|g| g.name == st.op);
            let p = v.map_or(loads.descriptor, |v| loads.of_node(ir, lowered, v));
            if v.is_some_and(|v| decision.moved_last.contains(&v)) {
                LoadSide {
                    last: true,
                    extra: p.extra + 1,
                }
            } else {
                p
            }
        })
        .collect();
    Decided {
        decision,
        loads,
        rotated,
        streaming,
    }
}

/// Refuses rings beyond shared memory and attributes that break Triton's
/// contract.
pub fn validate(
    job: &LoopJob,
    machine: &Machine,
    lowered: &Lowered,
    decided: &Decided,
) -> Result<(), Skip> {
    check_rings(job, machine, lowered, decided)?;
    let broken = backend::validate(job.ir, &decided.decision, &job.o.target);
    skip_on_violations(
        &broken,
        SkipReason::ContractViolation,
        "the decision breaks Triton's contract",
    )
}

/// Stages the back end adds to a streaming load's prefetch depth (the
/// `prefetch` options, and on sm100 without partitions written the stage of
/// a load placed after its tcgen05 reader): the most over the loop's
/// streaming loads, for the stage bound. A `loads=auto` rotation's stage is
/// not counted: [`decide`] drops it where it would exceed the bound.
fn extra_stages(job: &LoopJob, lowered: &Lowered, problem: &Problem, partitioned: bool) -> u32 {
    let loads = job.o.loads;
    let after_reader = |v: usize| {
        job.o.target.arch == backend::Arch::Sm100
            && !partitioned
            && backend::stages::feeds_tcgen05(job.ir, lowered.op_of_node[v])
    };
    problem
        .ops
        .iter()
        .filter(|op| op.streaming)
        .filter_map(|op| lowered.graph.ops.iter().position(|g| g.name == op.name))
        .map(|v| loads.of_node(job.ir, lowered, v).extra + u32::from(after_reader(v)))
        .max()
        .unwrap_or(0)
}

/// Refuses attributes with more stages than the bound: the search keeps
/// the schedule's own stages and the loads' prefetch within it, but the
/// back end may move a load one stage deeper after the solve (sm100, a
/// load placed after its tcgen05 reader).
fn within_bound(job: &LoopJob, decided: &Decided) -> Result<(), Skip> {
    let Some(n) = job.attribute_bound() else {
        return Ok(());
    };
    let stages = decided.decision.max_stage + 1;
    if stages <= n {
        return Ok(());
    }
    Err(Skip::new(
        SkipReason::NumStagesExceeded,
        format!(
            "the attributes take {stages} stages, more than num_stages={n}: the back end placed a load deeper than the search counted (stages=free lifts the bound)"
        ),
    ))
}

/// A decision that is Triton's own assignment at the user's `num_stages`
/// ([`backend::stages::is_tritons_assignment`]) is left to Triton, as a
/// `same_as_triton` skip: the code is Triton's either way.
fn tritons_own(
    job: &LoopJob,
    decided: &Decided,
    result: &JointResult,
    problem: &Problem,
) -> Result<(), Skip> {
    let Some((n, _)) = job.user_stages() else {
        return Ok(());
    };
    if !backend::stages::is_tritons_assignment(job.ir, &decided.decision, n) {
        return Ok(());
    }
    let s = &result.schedule.schedule;
    Err(Skip {
        reason: SkipReason::SameAsTriton,
        text: format!(
            "twill's schedule (I={}, L={}, {n} stages) is Triton's own assignment at num_stages={n} (loads in stage 0 after their readers, the rest in stage {})",
            s.ii,
            s.length,
            n - 1
        ),
        bounds: Some(bounds(problem, result.res_mii)),
        units: units(problem),
        compared: None,
    })
}

/// Why a schedule has `stages` stages against the user's `n`, from what
/// the search established: `cut_below` are the Is below the answer's where
/// the bound cut the lengths searched.
fn stages_text(n: u32, stages: u32, cut_below: &[u32], r: &JointResult) -> String {
    let (ii, length) = (r.schedule.schedule.ii, r.schedule.schedule.length);
    if stages > n {
        return format!("{stages} stages, above it (stages=free)");
    }
    let at = if stages == n {
        "at the bound".to_string()
    } else {
        format!("{stages} stages")
    };
    if let (Some(a), Some(b)) = (cut_below.first(), cut_below.last()) {
        let range = if a == b {
            format!("I={a}")
        } else {
            format!("I={a}..{b}")
        };
        return format!(
            "{at}; the bound cut the lengths searched at {range}, where more stages might allow a smaller I (stages=free solves without it)"
        );
    }
    if stages == n {
        return at;
    }
    let why_ii = if r.ii_proven {
        format!("I={ii} is the minimum at any number of stages (every smaller I refuted, none by the bound)")
    } else {
        format!("I={ii} is the smallest found (not proven minimal)")
    };
    let shortest = if r.length_proven {
        "its shortest schedule"
    } else {
        "its schedule found (L not proven shortest)"
    };
    format!(
        "{stages} stages, fewer: {why_ii}, and {shortest} (L={length}) with the loads' prefetch takes {stages}; more stages would add buffers, not speed"
    )
}

/// Triton allocates a ring per pipelined load (the back end's model of
/// LowerLoops: the stage gap to its first use, one more when that use is in
/// a later cluster, one more for an MMA operand). Refuses a pipeline whose
/// rings cannot fit in shared memory (Triton would fail at launch).
fn check_rings(
    job: &LoopJob,
    machine: &Machine,
    lowered: &Lowered,
    decided: &Decided,
) -> Result<(), Skip> {
    let Some(cap) = machine.memory("smem").map(|m| m.capacity) else {
        return Ok(());
    };
    let need: u64 = backend::rings(job.ir, &decided.decision, job.o.target.arch)
        .iter()
        .filter_map(|r| {
            let node = lowered.ops[r.load].node?;
            let bytes = lowered.graph.ops[node].memory.get("smem").copied()?;
            Some(u64::from(r.slots) * bytes)
        })
        .sum();
    if need <= cap {
        return Ok(());
    }
    let pointer = if decided.loads.is_uniform() {
        String::new()
    } else {
        format!(", pointer-prefetch={}", decided.loads.pointer.extra)
    };
    let auto_note = if decided.rotated {
        " (loads=auto: mixed descriptor and pointer loads, all last with one stage more)"
    } else {
        ""
    };
    // The options as given (`loads=auto` adds its stage on top).
    Err(Skip::new(
        SkipReason::SharedMemoryExceeded,
        format!(
            "the prefetch buffers need {need} bytes of shared memory, more than the {cap} of machine `{}` (prefetch={} extra stages{pointer}){auto_note}",
            machine.name, job.o.loads.descriptor.extra
        ),
    ))
}

/// Everything a scheduled loop's record is made of.
struct Facts<'a> {
    job: &'a LoopJob<'a>,
    machine: &'a Machine,
    lowered: &'a Lowered,
    problem: &'a Problem,
    plan: &'a Plan,
    solved: &'a Solved,
    partitioning: &'a Partitioning,
    decided: &'a Decided,
    /// An iteration's raw cycles (with the SM shared by `ctas` CTAs).
    iteration: f64,
    /// Triton's own schedule in twill's model, when the loop carried it.
    triton: Option<TritonSchedule>,
}

impl Facts<'_> {
    fn schedule(&self) -> ScheduledLoop {
        let (o, result) = (self.job.o, &self.solved.result);
        let s = &result.schedule.schedule;
        let scale = self.problem.cycle_scale;
        ScheduledLoop {
            ii: s.ii,
            ii_cycles: cycles(f64::from(s.ii) * scale),
            length: s.length,
            length_cycles: cycles(f64::from(s.length) * scale),
            stages: self.decided.decision.max_stage + 1,
            warp_groups: self.plan.warps.groups,
            partitions: self.partitions(),
            ops: self.lowered.graph.ops.len() as u32,
            proof: Proof {
                checker_accepted: true,
                ii_proven: result.ii_proven,
                length_proven: result.length_proven,
                under_partition_rules: self.solved.colocated_problem.is_some(),
                work: self.solved.work,
                budget: self.solved.budget,
                budget_spent: result.budget_spent,
            },
            prefetch: result
                .streaming
                .iter()
                .zip(&self.decided.streaming)
                .map(|(x, p)| Prefetch {
                    op: x.op.clone(),
                    depth: x.prefetch,
                    extra: p.extra,
                    last: p.last,
                })
                .collect(),
            loads: self.loads(),
            objective: match o.objective {
                joint::Objective::Length => "length",
                joint::Objective::Slack => "slack",
            }
            .to_string(),
            latency_slack: result.latency_slack.as_ref().map(|ls| SlackRecord {
                cycles: cycles(ls.cycles as f64 * scale),
                proven: ls.proven,
                shortest_length: ls.shortest_length,
                shortest_length_slack_cycles: cycles(
                    ls.at_shortest_length.unwrap_or(ls.cycles) as f64 * scale,
                ),
            }),
            ctas: o.ctas,
            sharing: (o.ctas > 1).then(|| Sharing {
                regs_per_thread: self.machine.warps.max_regs_per_thread,
                smem_bytes: self.machine.memory("smem").map_or(0, |m| m.capacity),
                iteration_cycles: cycles(self.iteration),
            }),
            cached: self.solved.cached,
            lowering: None,
            num_stages: self.num_stages(),
            triton: self.triton.clone(),
        }
    }

    /// The user's `num_stages` and why the schedule has its stages.
    fn num_stages(&self) -> Option<NumStages> {
        let (requested, source) = self.job.user_stages()?;
        let result = &self.solved.result;
        let ii = result.schedule.schedule.ii;
        let cut_below: Vec<u32> = result
            .certificate
            .iter()
            .filter_map(|c| match c {
                joint::JointRefuted::StageBound { ii: at, .. } if *at < ii => Some(*at),
                _ => None,
            })
            .collect();
        let stages = self.decided.decision.max_stage + 1;
        let free = self.job.o.stages == Stages::Free;
        Some(NumStages {
            requested,
            source: source.to_string(),
            mode: if free { "free" } else { "bound" }.to_string(),
            text: match self.job.ir.triton_max_stage {
                Some(m) if !free && stages > requested => format!(
                    "{stages} stages, above num_stages={requested}: Triton's own schedule of the loop takes {}, and twill is bound by the larger",
                    m + 1
                ),
                _ => stages_text(requested, stages, &cut_below, result),
            },
            cut_below,
        })
    }

    fn partitions(&self) -> Partitions {
        let (o, plan) = (self.job.o, self.plan);
        let (code, text) = if self.partitioning.written {
            let n = self.decided.decision.partitions();
            return Partitions {
                code: PartitionsCode::Written,
                count: Some(n),
                text: format!("partitions={n}"),
            };
        } else if let Some((code, why)) = &self.partitioning.note {
            (*code, format!("partitions left to Triton ({why})"))
        } else if plan.ws {
            (
                PartitionsCode::LeftToTritonOption,
                "partitions left to Triton (partitions=false)".to_string(),
            )
        } else if plan.ws_loop {
            (
                PartitionsCode::NoneNumWarps,
                "no partitions (Triton's Hopper warp specialization needs num_warps=4)".to_string(),
            )
        } else if o.ws {
            (
                PartitionsCode::NoneNotMarked,
                "no partitions (the loop is not marked tt.warp_specialize)".to_string(),
            )
        } else {
            (
                PartitionsCode::NoneWsOff,
                "no warp specialization (ws=false)".to_string(),
            )
        };
        Partitions {
            code,
            count: None,
            text,
        }
    }

    /// How far ahead of its use each streaming load is issued, against its
    /// modeled time (latency and transfer): iterations ahead times the
    /// iteration, one less when the load comes last in the body (issued at
    /// its end). The least over the loads; negative: exposed latency.
    fn loads(&self) -> Option<Loads> {
        let streaming = &self.solved.result.streaming;
        let sides = &self.decided.streaming;
        if streaming.is_empty() {
            return None;
        }
        let lead = streaming
            .iter()
            .zip(sides)
            .map(|(x, p)| {
                let ahead = (x.prefetch + p.extra).saturating_sub(u32::from(p.last));
                f64::from(ahead) * self.iteration - x.raw_cycles as f64
            })
            .fold(f64::INFINITY, f64::min);
        let placement = if sides.iter().all(|p| p.last) {
            Placement::Last
        } else if sides.iter().any(|p| p.last) {
            Placement::FirstAndLast
        } else {
            Placement::First
        };
        Some(Loads {
            placement,
            lead_cycles: cycles(lead),
            rotated_by: self
                .job
                .mixed
                .filter(|_| self.decided.rotated)
                .map(str::to_string),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::Arch;
    use crate::frontend::lower::tests::gemm;
    use crate::graph::load;

    /// The pass's options at their defaults on sm90 (Triton 3.6).
    pub(crate) fn options() -> LoopOptions {
        LoopOptions {
            target: TritonTarget {
                arch: Arch::Sm90,
                version: (3, 6),
            },
            timeout: 30.0,
            budget: DEFAULT_BUDGET,
            u: 30,
            encoding: Encoding::Default,
            groups: 2,
            ws: true,
            partitions: true,
            order: backend::ClusterOrder::Program,
            loads: backend::LoadPlacement::default(),
            auto_loads: false,
            ctas: 1,
            objective: joint::Objective::Length,
            lower: Lower::Off,
            ring: ws::RingDepth::Schedule,
            cache: None,
            num_stages: 0,
            stages: Stages::Bound,
            ties: Ties::Deeper,
            skip_unverifiable: false,
        }
    }

    /// The request `twill solve` makes under `o` on `machine` with
    /// `groups` compute groups (the machine's register limit, crossings
    /// allowed, no stage bound).
    pub(crate) fn solve_request(o: &LoopOptions, machine: &Machine, groups: u32) -> SolveRequest {
        SolveRequest {
            encoding: o.encoding,
            warps: WarpConfig {
                groups,
                reg_limit: machine.warps.max_regs_per_thread,
                cross_warp: true,
            },
            objective: o.objective,
            seed: 0,
            threads: 0,
            timeout: o.timeout,
            stage_bound: None,
            stage_bound_alone: None,
            budget: o.budget,
            refine_groups: true,
        }
    }

    #[test]
    fn twill_solve_and_the_pass_give_the_same_schedule() {
        let machine = Machine::select("h100").unwrap();
        let ir = gemm();
        let o = options();
        let job = LoopJob::new(&ir, &machine, &o);
        let mut written = None;
        let pass = schedule_loop(
            &job,
            |d| {
                written = Some(d.max_stage);
                Ok(())
            },
            |_| unreachable!(),
        )
        .unwrap();
        let pass = pass.schedule;
        assert_eq!(written, Some(pass.stages - 1));
        // The graph as `--twill-export-graph` writes it and `twill solve`
        // reads it, solved through the steps `twill solve` takes.
        let (_, lowered) = extract(&job).unwrap();
        let graph = planned_graph(&job, &lowered);
        let graph = load::parse("gemm.toml", &crate::graph::load::to_toml(&graph)).unwrap();
        let (problem, _) = price(&graph, &machine, o.u, o.timeout).unwrap();
        let request = solve_request(&o, &machine, o.groups);
        let solved = solve(&problem, &[], &request, Instant::now()).unwrap();
        check(&problem, &solved.result, &request.warps).unwrap();
        let s = &solved.result.schedule.schedule;
        assert_eq!((s.ii, s.length), (pass.ii, pass.length));
        assert_eq!(pass.warp_groups, request.warps.groups);
        let depths: Vec<(String, u32)> = solved
            .result
            .streaming
            .iter()
            .map(|st| (st.op.clone(), st.prefetch))
            .collect();
        let pass_depths: Vec<(String, u32)> = pass
            .prefetch
            .iter()
            .map(|p| (p.op.clone(), p.depth))
            .collect();
        assert_eq!(depths, pass_depths);
        assert!(!depths.is_empty());
        assert_eq!(
            (solved.result.ii_proven, solved.result.length_proven),
            (pass.proof.ii_proven, pass.proof.length_proven)
        );
    }

    /// Triton's schedule in the model: its I (or none within the
    /// evaluation's budget) and the smallest I not refuted for it.
    fn tritons(ii: Option<u32>, at_least: u32) -> TritonSchedule {
        TritonSchedule {
            stages: 3,
            ii,
            ii_cycles: ii.map(|ii| i64::from(ii) * 100),
            at_least,
        }
    }

    #[test]
    fn a_loop_solved_ahead_keeps_its_answer_only_where_no_budget_decided() {
        let ahead = ShareUse {
            share: 4_000_000,
            search_cut: false,
            evaluation_cut: None,
            ii_proven: true,
        };
        // The same share, or more where nothing was cut: the same answer.
        assert!(ahead.same_answer_with(4_000_000));
        assert!(ahead.same_answer_with(9_000_000));
        // Less: a limit the search stayed under may now cut it.
        assert!(!ahead.same_answer_with(3_999_999));
        // A search cut short (or no schedule) may answer otherwise with more.
        let cut = ShareUse {
            search_cut: true,
            ..ahead
        };
        assert!(cut.same_answer_with(4_000_000));
        assert!(!cut.same_answer_with(9_000_000));
        // An undecided evaluation of Triton's schedule: the same only where
        // the larger share gives it the same work (proven: capped).
        let undecided = ShareUse {
            evaluation_cut: Some(triton_budget(4_000_000, true)),
            ..ahead
        };
        assert!(undecided.same_answer_with(9_000_000));
        let unproven = ShareUse {
            evaluation_cut: Some(triton_budget(4_000_000, false)),
            ii_proven: false,
            ..ahead
        };
        assert!(unproven.same_answer_with(4_000_000));
        assert!(!unproven.same_answer_with(9_000_000));
        // Without a budget every share is none.
        let none = ShareUse { share: 0, ..ahead };
        assert!(none.same_answer_with(0));
        assert!(!none.same_answer_with(1));
    }

    #[test]
    fn the_evaluations_work_never_shrinks_as_the_share_grows() {
        for proven in [false, true] {
            let mut last = 0;
            for share in [
                1,
                1000,
                999_999,
                4_000_000,
                4_000_001,
                16_000_000,
                u64::MAX / 2,
            ] {
                let work = triton_budget(share, proven);
                assert!(work >= last, "{share} {proven}");
                last = work;
            }
        }
    }

    #[test]
    fn an_undecided_tie_keeps_tritons_where_a_tie_would() {
        let why = "ties=deeper keeps the deeper pipeline";
        let deeper = Some(why);
        let reason =
            |t: &TritonSchedule, tie| prefer_triton(t, 32, 100.0, tie).err().map(|s| s.reason);
        // Decided: a tie goes where `tie` says; a larger I keeps twill's.
        assert_eq!(
            reason(&tritons(Some(32), 32), deeper),
            Some(SkipReason::TritonAsGood)
        );
        assert_eq!(reason(&tritons(Some(32), 32), None), None);
        assert_eq!(reason(&tritons(Some(33), 33), deeper), None);
        assert_eq!(
            reason(&tritons(Some(31), 31), None),
            Some(SkipReason::TritonBetter)
        );
        // Undecided at twill's I (or below): it may tie, so Triton's is kept
        // where a tie would keep it, twill's otherwise.
        let undecided = tritons(None, 32);
        assert_eq!(reason(&undecided, deeper), Some(SkipReason::TritonMayTie));
        assert_eq!(
            reason(&tritons(None, 30), deeper),
            Some(SkipReason::TritonMayTie)
        );
        assert_eq!(reason(&undecided, None), None);
        // Twill's I refuted for Triton's stages: twill's is better.
        assert_eq!(reason(&tritons(None, 33), deeper), None);
        let skip = prefer_triton(&undecided, 32, 100.0, deeper).unwrap_err();
        assert!(
            skip.text
                .starts_with("Triton's own schedule may be as good"),
            "{}",
            skip.text
        );
        assert!(skip.text.contains("reach no I below 32"), "{}", skip.text);
        assert!(skip.text.ends_with(why), "{}", skip.text);
        assert_eq!(skip.compared.map(|c| c.triton), Some(undecided));
    }

    #[test]
    fn the_loops_own_num_stages_wins_over_the_option() {
        let machine = Machine::select("h100").unwrap();
        let ir = gemm();
        let o = LoopOptions {
            num_stages: 3,
            ..options()
        };
        let job = |loop_num_stages| LoopJob {
            ir: &ir,
            machine: &machine,
            o: &o,
            stages_only: None,
            mixed: None,
            loop_num_stages,
            budget: DEFAULT_BUDGET,
            threads: 0,
        };
        // The loop asks for one stage: Triton does not pipeline it.
        let skip = schedule_loop(&job(Some(1)), |_| Ok(()), |_| unreachable!()).unwrap_err();
        assert_eq!(skip.reason, SkipReason::SameAsTriton);
        // The option's three: the GEMM takes two, and the record says why.
        let s = schedule_loop(&job(None), |_| Ok(()), |_| unreachable!())
            .unwrap()
            .schedule;
        let n = s.num_stages.unwrap();
        assert_eq!((n.requested, n.source.as_str(), s.stages), (3, "option", 2));
        assert!(n.text.starts_with("2 stages, fewer: I="), "{}", n.text);
        // Free: the same schedule, the bound only reported.
        let free = LoopOptions {
            stages: Stages::Free,
            ..o.clone()
        };
        let job = LoopJob {
            o: &free,
            ..job(Some(1))
        };
        let s = schedule_loop(&job, |_| Ok(()), |_| unreachable!())
            .unwrap()
            .schedule;
        let n = s.num_stages.unwrap();
        assert_eq!(
            (n.requested, n.source.as_str(), n.mode.as_str()),
            (1, "loop", "free")
        );
        assert!(n.text.contains("above it (stages=free)"), "{}", n.text);
    }

    /// The GEMM solved for the lowering (one compute group): the plan
    /// the pass hands to the emitter, and the solve it came from.
    fn gemm_lowering() -> (WsPlan, Lowered, JointResult, Scheduled) {
        let machine = Machine::select("h100").unwrap();
        let ir = gemm();
        let o = LoopOptions {
            ws: false,
            groups: 1,
            lower: Lower::Force,
            ..options()
        };
        let job = LoopJob::new(&ir, &machine, &o);
        let mut planned = None;
        let scheduled = schedule_loop(
            &job,
            |_| panic!("a lowered loop gets no attributes"),
            |p| {
                planned = Some(p.clone());
                Ok(Emitted::default())
            },
        )
        .unwrap();
        let (_, lowered) = extract(&job).unwrap();
        let problem = price(&lowered.graph, &machine, o.u, o.timeout).unwrap().0;
        let request = solve_request(&o, &machine, 1);
        let solved = solve(&problem, &[], &request, Instant::now()).unwrap();
        (planned.unwrap(), lowered, solved.result, scheduled)
    }

    #[test]
    fn the_gemm_plan_follows_the_schedule() {
        let (plan, _, result, scheduled) = gemm_lowering();
        let prefetch = result.streaming.iter().map(|s| s.prefetch).max().unwrap();
        // prefetch + 2: the async wgmma holds its slot one more trip.
        assert_eq!(plan.depth, prefetch + 2);
        assert_eq!(plan.loads.len(), 2);
        assert!(plan.loads.iter().all(|l| l.bytes == 16384));
        assert_eq!(plan.expect_bytes, 2 * 16384);
        assert_eq!(plan.full_count, 1);
        assert_eq!(plan.groups.len(), 1);
        assert_eq!(
            (plan.groups[0].empty_count, plan.groups[0].loads.clone()),
            (1, vec![0, 1])
        );
        assert_eq!(plan.parts.len(), 1);
        let part = &plan.parts[0];
        assert_eq!(
            (part.dots.clone(), plan.producer_ops.clone()),
            (vec![6], vec![0])
        );
        // One wait, at the trip's end: it retires the previous trip's
        // wgmma (the accumulator chain stays in flight until then) and
        // passes this trip's through with pendings 1; the slot is held two
        // trips, the wgmma stays in flight carried by iteration argument 0.
        use crate::backend::ws::waits::{InFlight, WaitPoint};
        assert_eq!(
            part.waits.points,
            vec![WaitPoint {
                before: 2,
                retire: vec![InFlight::Carried(0)],
                through: vec![6],
                pendings: 1
            }]
        );
        assert_eq!(
            (part.waits.hold, part.waits.carried.clone()),
            (2, vec![(6, 0)])
        );
        // The default region: the B tile's transpose and the wgmma; the
        // loads' address arithmetic stays with the producer.
        assert_eq!(part.ops, vec![5, 6]);
        assert_eq!((part.registers, part.results.clone()), (None, vec![]));
        assert_eq!(
            plan.loads[0].ring.text(),
            format!(
                "!ttg.memdesc<{}x128x64xf16, #shared, #smem, mutable>",
                plan.depth
            )
        );
        assert!(!plan.captures_on_partitions);
        assert_eq!(scheduled.schedule.partitions.code, PartitionsCode::Lowered);
        let record = scheduled.schedule.lowering.unwrap();
        assert!(
            record.lowered && record.depth == Some(plan.depth),
            "{record:?}"
        );
    }

    #[test]
    fn the_ring_phases_alternate_per_lap() {
        // The consumer waits for parity (it / D) & 1 on `full[it % D]`; the
        // producer for the opposite parity on `empty`, which a fresh
        // barrier passes: it never waits on its first lap.
        let d = 3;
        let slots: Vec<u32> = (0..7).map(|it| ws::slot(it, d)).collect();
        let phases: Vec<u32> = (0..7).map(|it| ws::phase(it, d)).collect();
        assert_eq!(slots, vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(phases, vec![0, 0, 0, 1, 1, 1, 0]);
        assert!((0..d).all(|it| ws::phase(it, d) ^ 1 == 1));
    }

    #[test]
    fn a_wgmma_in_the_producer_group_is_refused() {
        let (_, lowered, mut result, _) = gemm_lowering();
        let ir = gemm();
        let dot = lowered.op_of_node.iter().position(|&o| o == 6).unwrap();
        result.schedule.group[dot] = 0;
        let target = options().target;
        let why = ws::plan(
            &ir,
            &lowered,
            &result,
            &target,
            232_448,
            ws::RingDepth::Schedule,
        )
        .unwrap_err();
        assert_eq!(why, LowerSkip::ProducerOp("ttng.warp_group_dot".into()));
        assert!(why.to_string().contains("variable-latency group"), "{why}");
        // Too little shared memory, and a module of 8 warps.
        let (_, lowered, result, _) = gemm_lowering();
        let why = ws::plan(
            &ir,
            &lowered,
            &result,
            &target,
            65_536,
            ws::RingDepth::Schedule,
        )
        .unwrap_err();
        assert!(matches!(why, LowerSkip::SharedMemory { .. }), "{why}");
        // Eight warps are two warp groups in the default region; six are not
        // whole warp groups.
        let wide = LoopIr {
            num_warps: 8,
            ..gemm()
        };
        assert!(ws::plan(
            &wide,
            &lowered,
            &result,
            &target,
            232_448,
            ws::RingDepth::Schedule
        )
        .is_ok());
        let wide = LoopIr {
            num_warps: 6,
            ..gemm()
        };
        let why = ws::plan(
            &wide,
            &lowered,
            &result,
            &target,
            232_448,
            ws::RingDepth::Schedule,
        )
        .unwrap_err();
        assert_eq!(why, LowerSkip::NumWarps(6));
    }

    #[test]
    fn lower_off_writes_attributes_and_records_nothing() {
        let machine = Machine::select("h100").unwrap();
        let ir = gemm();
        let o = LoopOptions {
            ws: false,
            groups: 1,
            ..options()
        };
        let job = LoopJob::new(&ir, &machine, &o);
        let s = schedule_loop(&job, |_| Ok(()), |_| unreachable!()).unwrap();
        assert!(s.schedule.lowering.is_none());
        assert_eq!("force".parse::<Lower>(), Ok(Lower::Force));
        assert_eq!("on".parse::<Lower>(), Ok(Lower::On));
        assert_eq!("only".parse::<Lower>(), Ok(Lower::Only));
        assert!("auto".parse::<Lower>().is_err());
        assert_eq!("max".parse::<ws::RingDepth>(), Ok(ws::RingDepth::Max));
        assert!("deep".parse::<ws::RingDepth>().is_err());
    }

    #[test]
    fn a_step_that_fails_is_a_typed_skip() {
        let machine = Machine::select("h100").unwrap();
        let ir = gemm();
        let o = LoopOptions {
            ctas: 17,
            ..options()
        };
        let job = LoopJob::new(&ir, &machine, &o);
        let skip = schedule_loop(&job, |_| Ok(()), |_| unreachable!()).unwrap_err();
        assert_eq!(skip.reason, SkipReason::CtasUnfit);
        let o = options();
        let job = LoopJob { o: &o, ..job };
        let skip =
            schedule_loop(&job, |_| Err("read-only".into()), |_| unreachable!()).unwrap_err();
        assert_eq!(skip.reason, SkipReason::WriteFailed);
        assert!(skip.text.contains("read-only"), "{}", skip.text);
    }

    /// The GEMM through `schedule_loop` with the cache in `dir`: the
    /// attributes written and the record.
    fn gemm_through_cache(dir: &std::path::Path) -> (LoopDecision, ScheduledLoop) {
        let machine = Machine::select("h100").unwrap();
        let ir = gemm();
        let o = LoopOptions {
            cache: Some(LoopCache {
                dir: dir.to_path_buf(),
                options: "arch=sm90".into(),
            }),
            ..options()
        };
        let job = LoopJob::new(&ir, &machine, &o);
        let mut written = None;
        let s = schedule_loop(
            &job,
            |d| {
                written = Some(d.clone());
                Ok(())
            },
            |_| unreachable!(),
        )
        .unwrap();
        (written.unwrap(), s.schedule)
    }

    #[test]
    fn a_cached_schedule_is_checked_again_and_written_alike() {
        let dir = std::env::temp_dir().join(format!("twill-driver-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (cold, cold_record) = gemm_through_cache(&dir);
        let (warm, warm_record) = gemm_through_cache(&dir);
        assert!(!cold_record.cached && warm_record.cached);
        assert_eq!(warm, cold);
        assert_eq!(
            ScheduledLoop {
                cached: false,
                ..warm_record
            },
            cold_record
        );
        // An entry the checker rejects (every op issued at once, I = 1) is
        // ignored and the loop solved again; the entry is replaced.
        let path = std::fs::read_dir(dir.join(cache::FOLDER))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut entry: LoopEntry =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let s = &mut entry.result.schedule.schedule;
        s.ii = 1;
        s.start.iter_mut().for_each(|t| *t = 0);
        std::fs::write(&path, serde_json::to_string(&entry).unwrap()).unwrap();
        let (again, record) = gemm_through_cache(&dir);
        assert!(!record.cached);
        assert_eq!(again, cold);
        assert!(gemm_through_cache(&dir).1.cached);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
