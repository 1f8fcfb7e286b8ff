//! The joint software-pipelining and warp-specialization problem (paper
//! section 4) and its search (Algorithm 1, sections 5.1 and 5.3).
//!
//! The validity rules of a joint schedule are stated once, in
//! [`crate::checker`] (rules 1-8); both encodings implement them and every
//! schedule they return is validated there before it leaves this module.
//!
//! Algorithm 1: I goes upward from the modulo lower bound; at each I the
//! optimal-modulo-scheduling ZLP gives Len(M) (or proves I infeasible, which
//! also refutes the joint problem, a superset of its constraints); then L goes
//! upward from Len(M) while ceil(L/I) is unchanged, asking the SMT encoding
//! for a schedule of length <= L with a warp assignment. The first success is
//! returned with its certificate: every (I, L) proven unsatisfiable before it.
//!
//! Streaming ops (section 5.3) get zero latency: their outgoing edges have
//! delay 0, and the prefetch depth they need is reported as a tunable.

pub mod fixed;
pub mod int_encoding;
pub mod paper_encoding;
pub mod sat_encoding;
pub mod slack;
pub mod symmetry;
pub mod work;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{debug, info};

use crate::checker::{self, JointSchedule, WarpConfig};
use crate::modulo::{self, mii, zlp, Infeasibility, Refuted};
use crate::problem::{CrossingCharge, Problem, Schedule};

/// Length ranges at most this wide are searched downward from the best
/// length found (one unsatisfiable query) rather than bisected.
const DESCEND_WITHIN: u32 = 32;

/// The next length to ask about when every length below `lo` is refuted
/// and `best` is the shortest found: bisection while the range is wider
/// than [`DESCEND_WITHIN`], then one step down from `best`.
fn next_length(lo: u32, best: u32) -> u32 {
    if best - lo > DESCEND_WITHIN {
        lo + (best - 1 - lo) / 2
    } else {
        best - 1
    }
}

/// z3 resource budget of the last-stage window relaxation at one I.
pub const WINDOW_RLIMIT: u32 = 20_000_000;

/// z3 resource budget of one optional group-minimization query.
const GROUP_RLIMIT: u32 = 20_000_000;

/// What one SMT query answered.
#[derive(Debug, Clone)]
pub enum EncodingOutcome {
    Sat(JointSchedule),
    Unsat,
    Unknown(String),
}

/// A lower bound on the latency slack over a set of pairs (see [`slack`]):
/// M(w) >= M(u) + lag + `at_least` for each pair.
#[derive(Debug, Clone, Copy)]
pub struct SlackBound<'a> {
    /// The [`slack::pairs`] at the encoding's I.
    pub pairs: &'a [slack::SlackPair],
    pub at_least: i64,
}

/// What one SMT query asks of a [`JointEncoding`] at its I: a joint
/// schedule of length at most `max_length`, under the optional bounds of
/// the refinements (groups, crossings, latency slack), within a budget.
///
/// Built with [`Query::length`] and narrowed with the other constructors:
/// `Query::length(l, ms).groups(k).crossings(c)`.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The length bound L.
    pub max_length: u32,
    /// Only compute groups 1..=`max_group` (all when `None`).
    pub max_group: Option<u32>,
    /// At most this many of the [`cross_pairs`] in different groups.
    pub max_cross: Option<u32>,
    /// A lower bound on the latency slack.
    pub slack: Option<SlackBound<'a>>,
    /// Every op's stage fixed (stage `s`: its start in [s * I, (s + 1) * I)):
    /// another scheduler's stage assignment evaluated in twill's model.
    pub stages: Option<&'a [u32]>,
    /// z3's deterministic resource budget (`rlimit`; 0: none).
    pub rlimit: u32,
    /// Wall-clock limit of the query in milliseconds.
    pub timeout_ms: u32,
}

impl<'a> Query<'a> {
    /// A schedule of length at most `max_length`, nothing else bounded.
    pub fn length(max_length: u32, timeout_ms: u32) -> Self {
        Query {
            max_length,
            max_group: None,
            max_cross: None,
            slack: None,
            stages: None,
            rlimit: 0,
            timeout_ms,
        }
    }

    /// The same query with every op's stage fixed to `stages` (indexed as
    /// the problem's ops).
    pub fn fixed_stages(self, stages: &'a [u32]) -> Self {
        Query {
            stages: Some(stages),
            ..self
        }
    }

    /// The same query using only compute groups 1..=`max_group` when given.
    pub fn groups(self, max_group: Option<u32>) -> Self {
        Query { max_group, ..self }
    }

    /// The same query with at most `max_cross` crossings when given.
    pub fn crossings(self, max_cross: Option<u32>) -> Self {
        Query { max_cross, ..self }
    }

    /// The same query with latency slack at least `at_least` over `pairs`.
    pub fn slack(self, pairs: &'a [slack::SlackPair], at_least: i64) -> Self {
        Query {
            slack: Some(SlackBound { pairs, at_least }),
            ..self
        }
    }

    /// The same query under z3's resource budget `rlimit` (0: none).
    pub fn rlimit(self, rlimit: u32) -> Self {
        Query { rlimit, ..self }
    }

    /// Whether the query bounds more than the length and the groups (the
    /// refinements only [`Encoding::Default`] states).
    pub fn refines(&self) -> bool {
        self.max_cross.is_some() || self.slack.is_some() || self.stages.is_some()
    }
}

/// An SMT encoding of the joint problem at a fixed I.
pub trait JointEncoding {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Prepares the encoding for initiation interval `ii`.
    fn set_interval(&mut self, ii: u32);
    /// Whether the encoding states every bound of `q`. Every encoding
    /// states the length and group bounds; by default, no other.
    fn supports(&self, q: &Query) -> bool {
        !q.refines()
    }
    /// Answers `q`: a joint schedule within its bounds, a proof that none
    /// exists, or why neither was found (among them, a bound the encoding
    /// does not state: see [`JointEncoding::supports`]).
    fn solve(&mut self, q: &Query) -> EncodingOutcome;
}

/// The answer of an encoding to a query with a bound it does not state.
fn unsupported(encoding: &dyn JointEncoding) -> EncodingOutcome {
    EncodingOutcome::Unknown(format!(
        "the {} encoding bounds neither crossings nor latency slack nor stages",
        encoding.name()
    ))
}

/// Which encoding to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// twill's Boolean order encoding of one folded copy (default).
    Default,
    /// twill's integer encoding: start = I*stage + residue, pairwise modulo
    /// non-overlap (an alternative, kept for comparison).
    Int,
    /// The paper's boolean op[v, i, t] encoding of Figures 4-6.
    Paper,
}

impl std::str::FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "default" => Ok(Encoding::Default),
            "int" => Ok(Encoding::Int),
            "paper" => Ok(Encoding::Paper),
            other => Err(format!(
                "unknown encoding `{other}` (expected default, int or paper)"
            )),
        }
    }
}

/// The most threads `threads: 0` starts. Beyond a few, the Is searched at
/// once are mostly above the answer: their work is thrown away, and the
/// solver's threads slow one another (decisions.md D35).
pub const DEFAULT_THREADS_MAX: u32 = 4;

/// Options of the joint search.
#[derive(Debug, Clone, Copy)]
pub struct JointOptions {
    pub encoding: Encoding,
    pub warps: WarpConfig,
    /// Total time budget in seconds.
    pub timeout: f64,
    /// Seed of the SMT solver (results are deterministic for a seed).
    pub seed: u32,
    /// Threads searching initiation intervals at once (0: one per core, at
    /// most [`DEFAULT_THREADS_MAX`]). The result does not depend on it,
    /// except where a time limit cuts a search short.
    pub threads: u32,
    /// What is optimized after I.
    pub objective: Objective,
    /// At most this many stages (the user's `num_stages`); none: no bound.
    pub stage_bound: Option<StageBound>,
    /// Deterministic work budget of the whole search, in z3 resource units
    /// ([`work`]; 0: none, the wall-clock `timeout` alone). The search is
    /// accounted as the sequential one: the Is in increasing order, each
    /// spending its own work, until the budget is spent; the answer is
    /// then the same on any machine and under any load. `timeout` stays a
    /// guard against a runaway query.
    pub budget: u64,
    /// After L, the fewest compute groups and the fewest values crossing
    /// between them (and under [`Objective::Slack`] the slack refinement).
    /// Off where the groups reach no output (no partitions written, no
    /// lowering): the schedule at the same (I, L), without those queries.
    pub refine_groups: bool,
}

/// A bound on the stages the back end writes for a schedule (Triton's
/// `num_stages`): with P the deepest prefetch at I (streaming ops issued
/// `prefetch_depth` iterations ahead, plus `extra`), the written stages are
/// the schedule's own plus P, so the search keeps L <= (stages - P) * I at
/// each I: every op then starts in one of the schedule's first
/// stages - P stages. The answer is optimal among the schedules within
/// that length (the certificate's `stage_bound` entries name the Is where
/// it cut Algorithm 1's range).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StageBound {
    /// Stages at most (`tt.scheduled_max_stage` + 1).
    pub stages: u32,
    /// Stages the back end adds to a load's prefetch depth (the `prefetch`
    /// options, a `loads=auto` rotation).
    pub extra: u32,
}

impl StageBound {
    /// The longest L within the bound at `ii` (0: none), for the streaming
    /// view `p`.
    pub fn max_length(&self, p: &Problem, ii: u32) -> u32 {
        let iteration = f64::from(ii.max(1)) * p.cycle_scale;
        let deepest = p
            .ops
            .iter()
            .filter(|op| op.streaming)
            .map(|op| prefetch_depth(op.stream_cycles, iteration) + self.extra)
            .max()
            .unwrap_or(0);
        self.stages.saturating_sub(deepest).saturating_mul(ii)
    }
}

/// One entry of the joint certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JointRefuted {
    /// Every I in [from, to] admits no modulo schedule at all.
    Modulo(Refuted),
    /// At this I, no joint schedule of any length in [from_length, to_length].
    Smt {
        ii: u32,
        from_length: u32,
        to_length: u32,
    },
    /// At this I, lengths above `max_length` were not searched: the stage
    /// bound ([`StageBound`]) excludes them.
    StageBound { ii: u32, max_length: u32 },
}

impl std::fmt::Display for JointRefuted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JointRefuted::Modulo(r) => write!(f, "{r}"),
            JointRefuted::Smt {
                ii,
                from_length,
                to_length,
            } => write!(
                f,
                "I = {ii}, L in [{from_length}, {to_length}]: no joint schedule (SMT unsat)"
            ),
            JointRefuted::StageBound { ii, max_length } => write!(
                f,
                "I = {ii}: L > {max_length} not searched (the stage bound)"
            ),
        }
    }
}

/// The pipeline depth a streaming op needs (section 5.3), a tunable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Streaming {
    pub op: String,
    /// Raw machine cycles of the op with its latency, before it was zeroed.
    pub raw_cycles: u64,
    /// Iterations it must run ahead to hide them: ceil(raw / (I * scale)),
    /// with scale the raw cycles per normalized cycle.
    pub prefetch: u32,
}

/// Result of the joint search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JointResult {
    pub schedule: JointSchedule,
    pub encoding: Encoding,
    pub warps: WarpConfig,
    pub res_mii: u32,
    pub rec_mii: u32,
    /// Len(M) of the optimal modulo schedule at the answer's I.
    pub modulo_length: u32,
    pub certificate: Vec<JointRefuted>,
    /// I is minimal: every smaller I is refuted in the certificate.
    pub ii_proven: bool,
    /// Every I below this one is refuted (the schedule's I when
    /// `ii_proven`).
    pub refuted_below: u32,
    /// L is minimal at this I within Algorithm 1's range; under
    /// [`Objective::Slack`], L is the shortest with the most latency slack
    /// (and Algorithm 1's shortest L, `latency_slack.shortest_length`, is
    /// proven).
    pub length_proven: bool,
    pub streaming: Vec<Streaming>,
    pub seconds: f64,
    /// Number of SMT queries made.
    pub queries: u32,
    /// Work spent by the search as the sequential search accounts it, in z3
    /// resource units ([`JointOptions::budget`]).
    pub work: u64,
    /// The budget the search had (0: none).
    pub budget: u64,
    /// The budget ran out before the search was complete: the answer is
    /// the best schedule found within it (`ii_proven` and `length_proven`
    /// say what is still proven).
    pub budget_spent: bool,
    /// The schedule's latency slack as the checker measures it
    /// ([`checker::latency_slack`]); absent without two asynchronous ops
    /// joined by dependences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_slack: Option<LatencySlack>,
}

/// The latency slack of the answer (see [`slack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySlack {
    /// Normalized cycles.
    pub cycles: i64,
    /// Under [`Objective::Slack`]: no schedule at this I with as many
    /// stages, groups and crossings has more.
    pub proven: bool,
    pub objective: Objective,
    /// Algorithm 1's shortest length at this I (the answer's length under
    /// [`Objective::Length`]).
    pub shortest_length: u32,
    /// Under [`Objective::Slack`]: the latency slack of the schedule the
    /// search had at `shortest_length`, before the refinement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_shortest_length: Option<i64>,
}

/// What the search optimizes after the initiation interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// The paper's: the shortest L at the minimum I; among schedules of
    /// that (I, L), the fewest compute groups, then the fewest values
    /// crossing between groups.
    #[default]
    Length,
    /// The fewest stages ceil(L / I) at the minimum I (the same as
    /// `Length`'s); with the groups and crossings `Length` finds, the
    /// largest latency slack ([`slack`]) at any length of that many stages;
    /// then the shortest L with it. For a kernel whose prologue and
    /// epilogue are written once (a Gluon kernel), L costs nothing per
    /// iteration; the slack absorbs asynchronous units' late completions in
    /// every iteration. Implemented by [`Encoding::Default`]; the other
    /// encodings return `Length`'s schedule with the slack not proven.
    Slack,
}

impl Objective {
    /// Whether `encoding` implements this objective (front ends refuse the
    /// other combinations rather than return `Length`'s schedule).
    pub fn implemented_by(self, encoding: Encoding) -> bool {
        self == Objective::Length || encoding == Encoding::Default
    }
}

impl std::str::FromStr for Objective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "length" => Ok(Objective::Length),
            "slack" => Ok(Objective::Slack),
            other => Err(format!(
                "unknown objective `{other}` (expected length or slack)"
            )),
        }
    }
}

/// Why the joint search produced nothing.
#[derive(Debug, Clone)]
pub enum JointError {
    NoRecurrenceBound,
    /// A value can never fit: it is live for at least one cycle and needs
    /// more registers (or memory) than a group (or the SM) has.
    TooLarge {
        op: String,
        what: String,
        need: u64,
        limit: u64,
    },
    /// Time ran out; `lower_bound` is the smallest I not yet refuted.
    Timeout {
        lower_bound: u32,
    },
    /// The work budget ran out before any schedule was found;
    /// `lower_bound` is the smallest I not yet refuted.
    Budget {
        lower_bound: u32,
        budget: u64,
    },
    CheckerRejected(Vec<checker::Violation>),
    /// No schedule at any I up to `cap`, with `groups` compute groups
    /// (1: software pipelining only) and within `stages` when bounded.
    Exhausted {
        cap: u32,
        groups: u32,
        stages: Option<u32>,
    },
}

impl std::fmt::Display for JointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JointError::NoRecurrenceBound => {
                write!(f, "a dependence cycle of distance 0 has positive delay")
            }
            JointError::TooLarge { op, what, need, limit } => write!(
                f,
                "`{op}` needs {need} {what} while its result is live, but the limit is {limit}: no schedule exists at any I"
            ),
            JointError::Timeout { lower_bound } => write!(
                f,
                "timed out before finding a schedule; every I < {lower_bound} is refuted"
            ),
            JointError::Budget { lower_bound, budget } => write!(
                f,
                "the work budget ({budget} z3 resource units) ran out before a schedule was found; every I < {lower_bound} is refuted"
            ),
            JointError::CheckerRejected(v) => {
                write!(f, "internal error: the checker rejected a joint schedule:")?;
                for x in v {
                    write!(f, "\n  {x}")?;
                }
                Ok(())
            }
            JointError::Exhausted { cap, groups, stages } => {
                let kind = if *groups > 1 {
                    "warp-specialized"
                } else {
                    "software-pipelined"
                };
                write!(f, "no {kind} schedule with I <= {cap}")?;
                match stages {
                    Some(1) => write!(f, " within 1 stage"),
                    Some(n) => write!(f, " within {n} stages"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for JointError {}

/// The problem as the joint search sees it: outgoing edges of streaming ops
/// have delay 0 (section 5.3). Returns the view and the streaming report
/// (prefetch depths are filled in once I is known).
pub fn streaming_view(p: &Problem) -> (Problem, Vec<usize>) {
    let mut q = p.clone();
    let streams: Vec<usize> = (0..p.ops.len()).filter(|&v| p.ops[v].streaming).collect();
    for e in &mut q.edges {
        if q.ops[e.from].streaming {
            e.delay = 0;
        }
    }
    (q, streams)
}

/// Iterations a streaming load of `raw_cycles` must be issued ahead when
/// an iteration lasts `iteration_cycles`: at least one.
pub fn prefetch_depth(raw_cycles: u64, iteration_cycles: f64) -> u32 {
    ((raw_cycles as f64 / iteration_cycles).ceil() as u32).max(1)
}

/// Runs Algorithm 1 on `p`. Each I is searched in a z3 context of its own
/// (freed when done, so repeated solves in one process do not accumulate
/// terms); with more than one thread (see [`JointOptions::threads`]) several
/// Is are searched at once, and the answer is the same as the sequential
/// search's: the smallest I not refuted, with every smaller I in the
/// certificate.
pub fn solve(p: &Problem, opts: JointOptions) -> Result<JointResult, JointError> {
    let started = Instant::now();
    let (q, streams) = streaming_view(p);
    let p = &q;
    check_fits(p, &opts.warps)?;
    let res = mii::res_mii(p);
    let rec = mii::rec_mii(p).ok_or(JointError::NoRecurrenceBound)?;
    let mut certificate: Vec<JointRefuted> = modulo::lower_bound_certificate(p, res, rec)
        .into_iter()
        .map(JointRefuted::Modulo)
        .collect();
    let cap = modulo::search_cap(p);
    let mut first = res.max(rec);
    if let Some((bound, a, b, path)) = modulo::last_stage_bound(p) {
        if bound > first {
            certificate.push(JointRefuted::Modulo(Refuted {
                from: first,
                to: bound - 1,
                why: Infeasibility::LastStageWindow {
                    first: p.ops[a].name.clone(),
                    second: p.ops[b].name.clone(),
                    path,
                },
            }));
            first = bound;
        }
    }
    if let Some(b) = opts.stage_bound {
        // The prefetch alone fills every stage of the bound at the largest
        // I, so at every I (a load's depth does not grow with I): nothing
        // to search.
        if b.max_length(p, cap) == 0 {
            debug!(
                stages = b.stages,
                "the prefetch fills the stage bound at every I"
            );
            return Err(JointError::Exhausted {
                cap,
                groups: opts.warps.groups,
                stages: Some(b.stages),
            });
        }
    }
    let deadline = started + Duration::from_secs_f64(opts.timeout.max(0.0));
    // The paper's search stays sequential: Algorithm 1 literally, and its
    // ZLP (HiGHS) cannot be interrupted from another thread.
    let threads = match (opts.encoding, opts.threads) {
        (Encoding::Paper, _) => 1,
        (_, 0) => std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u32)
            .min(DEFAULT_THREADS_MAX),
        (_, t) => t,
    }
    .clamp(1, cap.saturating_sub(first).saturating_add(1).max(1));
    let outcomes = search_is(p, first, cap, threads, &opts, deadline);
    debug!(seconds = started.elapsed().as_secs_f64(), "Is searched");

    // Walk the outcomes in the order of Algorithm 1, accounting the work
    // as the sequential search spends it.
    let budget = opts.budget.min(work::MAX_BUDGET);
    let mut walk = Walk {
        res_mii: res,
        rec_mii: rec,
        ii_proven: true,
        lower_bound: first,
        queries: 0,
        work: 0,
        budget_spent: false,
    };
    for ii in first..=cap {
        let Some(o) = outcomes.get(&ii) else {
            break;
        };
        walk.queries += o.queries;
        let left = budget.saturating_sub(walk.work);
        if budget > 0 && o.spent > left {
            // The sequential search runs out of work at this I: the last
            // schedule it held within the budget, if any, is the answer.
            walk.budget_spent = true;
            let Some(snap) = o.snapshots.iter().rev().find(|s| s.spent <= left) else {
                walk.work = budget;
                break;
            };
            walk.work += snap.spent;
            certificate.extend(snap.entries.iter().cloned());
            let f = Found {
                schedule: snap.schedule.clone(),
                entries: Vec::new(),
                modulo_length: snap.modulo_length,
                length_proven: false,
                slack_search: None,
            };
            return answer(p, ii, &f, &streams, certificate, &walk, &opts, started);
        }
        walk.work += o.spent;
        match &o.at {
            AtIi::Refuted { entries, complete } => {
                certificate.extend(entries.iter().cloned());
                if !complete {
                    walk.ii_proven = false;
                }
                if walk.ii_proven {
                    walk.lower_bound = ii + 1;
                }
            }
            AtIi::Unknown { entries } => {
                certificate.extend(entries.iter().cloned());
                walk.ii_proven = false;
            }
            AtIi::Found(f) => {
                certificate.extend(f.entries.iter().cloned());
                return answer(p, ii, f, &streams, certificate, &walk, &opts, started);
            }
        }
    }
    let lower_bound = walk.lower_bound;
    let cut_short = walk.budget_spent || (budget > 0 && walk.work >= budget);
    if cut_short || Instant::now() >= deadline {
        // Anytime: the greedy schedule with one compute group, where the
        // checker accepts it, rather than none.
        walk.budget_spent = cut_short;
        if let Some((ii, f)) = greedy_fallback(p, lower_bound, cap, &opts.warps) {
            debug!(ii, "no proven schedule within the budget: the greedy one");
            walk.ii_proven = false;
            return answer(p, ii, &f, &streams, certificate, &walk, &opts, started);
        }
    }
    if cut_short {
        Err(JointError::Budget {
            lower_bound,
            budget,
        })
    } else if Instant::now() >= deadline {
        Err(JointError::Timeout { lower_bound })
    } else {
        Err(JointError::Exhausted {
            cap,
            groups: opts.warps.groups,
            stages: opts.stage_bound.map(|b| b.stages),
        })
    }
}

/// The first I from `from` up to `cap` at which the greedy modulo schedule
/// with every compute op in one group (group 0: the variable-latency ops)
/// passes the checker: a valid schedule that costs no SMT work.
fn greedy_fallback(p: &Problem, from: u32, cap: u32, warps: &WarpConfig) -> Option<(u32, Found)> {
    let group: Vec<u32> = p
        .ops
        .iter()
        .map(|o| u32::from(!o.variable_latency))
        .collect();
    (from.max(1)..=cap).find_map(|ii| {
        let schedule = modulo::heuristic::schedule(p, ii)?;
        let js = JointSchedule {
            schedule,
            group: group.clone(),
        };
        checker::check_joint(p, &js, warps).is_empty().then(|| {
            let modulo_length = js.schedule.length;
            (
                ii,
                Found {
                    schedule: js,
                    entries: Vec::new(),
                    modulo_length,
                    length_proven: false,
                    slack_search: None,
                },
            )
        })
    })
}

/// What the walk over the outcomes has established so far.
struct Walk {
    res_mii: u32,
    rec_mii: u32,
    ii_proven: bool,
    /// The smallest I not refuted so far.
    lower_bound: u32,
    queries: u32,
    /// Work spent, as the sequential search accounts it.
    work: u64,
    budget_spent: bool,
}

/// The search's answer: the schedule `f` found at `ii`, checked by the
/// independent checker, with its certificate and what is proven.
#[allow(clippy::too_many_arguments)]
fn answer(
    p: &Problem,
    ii: u32,
    f: &Found,
    streams: &[usize],
    certificate: Vec<JointRefuted>,
    walk: &Walk,
    opts: &JointOptions,
    started: Instant,
) -> Result<JointResult, JointError> {
    let js = f.schedule.clone();
    let violations = checker::check_joint(p, &js, &opts.warps);
    if !violations.is_empty() {
        return Err(JointError::CheckerRejected(violations));
    }
    // The search's own measure must agree with the checker's for a proof
    // of the largest slack to stand.
    let measured = checker::latency_slack(p, &js.schedule);
    let latency_slack = measured.map(|cycles| LatencySlack {
        cycles,
        proven: f
            .slack_search
            .as_ref()
            .is_some_and(|x| x.proven && x.slack == cycles),
        objective: opts.objective,
        shortest_length: f
            .slack_search
            .as_ref()
            .map_or(js.schedule.length, |x| x.shortest_length),
        at_shortest_length: f.slack_search.as_ref().map(|x| x.at_shortest),
    });
    let streaming = streams
        .iter()
        .map(|&v| {
            let raw = p.ops[v].stream_cycles;
            let per_iteration = ii as f64 * p.cycle_scale;
            Streaming {
                op: p.ops[v].name.clone(),
                raw_cycles: raw,
                prefetch: prefetch_depth(raw, per_iteration),
            }
        })
        .collect();
    Ok(JointResult {
        schedule: js,
        encoding: opts.encoding,
        warps: opts.warps,
        res_mii: walk.res_mii,
        rec_mii: walk.rec_mii,
        modulo_length: f.modulo_length,
        certificate: merge_ranges(certificate),
        ii_proven: walk.ii_proven,
        refuted_below: if walk.ii_proven { ii } else { walk.lower_bound },
        // Under Objective::Slack, L is the shortest with the most slack:
        // proven when Algorithm 1's shortest L is, the slack is, and every
        // shorter L with it is refuted.
        length_proven: f.length_proven
            && f.slack_search
                .as_ref()
                .is_none_or(|x| x.length_proven && latency_slack.is_some_and(|l| l.proven)),
        streaming,
        seconds: started.elapsed().as_secs_f64(),
        queries: walk.queries,
        work: walk.work,
        budget: opts.budget.min(work::MAX_BUDGET),
        budget_spent: walk.budget_spent,
        latency_slack,
    })
}

/// Joins consecutive modulo refutations of adjacent I ranges that give the
/// same reason into one entry (I = 36..44 rather than nine lines).
fn merge_ranges(certificate: Vec<JointRefuted>) -> Vec<JointRefuted> {
    let mut out: Vec<JointRefuted> = Vec::with_capacity(certificate.len());
    for c in certificate {
        if let (Some(JointRefuted::Modulo(last)), JointRefuted::Modulo(next)) = (out.last_mut(), &c)
        {
            if last.why == next.why && last.to.checked_add(1) == Some(next.from) {
                last.to = next.to;
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The search at one I: what it established, the SMT queries it made, the
/// work it spent (z3 resource units, [`work`]) and the schedules it held on
/// the way, each with the work spent when it had it (the answer of the
/// same search cut short by a smaller budget).
struct IiOutcome {
    at: AtIi,
    queries: u32,
    spent: u64,
    snapshots: Vec<Snapshot>,
}

/// A schedule the search at one I held after `spent` units of work, with
/// the refutations made by then.
struct Snapshot {
    spent: u64,
    schedule: JointSchedule,
    entries: Vec<JointRefuted>,
    modulo_length: u32,
}

/// What the search established at one I.
enum AtIi {
    /// No joint schedule in Algorithm 1's length range at this I;
    /// `complete` when the refutation provably covers the whole range.
    Refuted {
        entries: Vec<JointRefuted>,
        complete: bool,
    },
    /// A solver gave up: nothing proven at this I.
    Unknown { entries: Vec<JointRefuted> },
    /// A joint schedule (refuted shorter lengths in `entries`).
    Found(Box<Found>),
}

struct Found {
    schedule: JointSchedule,
    entries: Vec<JointRefuted>,
    modulo_length: u32,
    length_proven: bool,
    /// What the latency-slack refinement established (Objective::Slack).
    slack_search: Option<SlackSearch>,
}

/// The outcome of the latency-slack refinement at one I.
struct SlackSearch {
    /// No schedule with as many stages, groups and crossings has more.
    proven: bool,
    /// Every shorter length with that slack is refuted.
    length_proven: bool,
    /// The latency slack of the schedule returned, by the search's own
    /// measure (the checker's must agree for `proven` to stand).
    slack: i64,
    /// Algorithm 1's shortest length at this I, and the latency slack of
    /// the schedule found there (the search's own measure).
    shortest_length: u32,
    at_shortest: i64,
}

/// Threads lent to searches under way: a search takes one when it has Is
/// left to start, and gives it back when its thread runs out of Is. The
/// pass lends the threads of loops solved to the loops still searching
/// (decisions.md D37). No answer depends on it: the Is are accounted as the
/// sequential search spends them, whatever thread searched them.
static SPARE_THREADS: AtomicU32 = AtomicU32::new(0);

/// The most threads a search adds to its own from [`SPARE_THREADS`].
const SPARE_MAX: usize = DEFAULT_THREADS_MAX as usize;

/// Lends `n` threads to the searches under way (and to those to come, until
/// [`reclaim_threads`]).
pub fn lend_threads(n: u32) {
    SPARE_THREADS.fetch_add(n, Ordering::SeqCst);
}

/// Takes back `n` lent threads, as many as are not in use (those in use
/// are not given back to the pool when their search ends past `n`).
pub fn reclaim_threads(n: u32) {
    let _ = SPARE_THREADS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
        Some(v.saturating_sub(n))
    });
}

/// One search over Is, shared by its threads.
struct IiPool<'a> {
    p: &'a Problem,
    opts: &'a JointOptions,
    first: u32,
    cap: u32,
    deadline: Instant,
    next: AtomicU32,
    found_at: AtomicU32,
    outcomes: Mutex<BTreeMap<u32, IiOutcome>>,
    /// Per thread: the I it works on and its z3 context (as an address),
    /// for interruption; cleared under the lock before the context is
    /// freed. The first `threads` slots are the search's own threads, the
    /// rest those it borrows.
    running: Vec<Mutex<Option<(u32, usize)>>>,
    /// The next slot for a borrowed thread.
    borrowed: AtomicUsize,
}

impl<'a> IiPool<'a> {
    /// No I above `at` matters: stop starting them, interrupt those running.
    fn cut(&self, me: usize, at: u32) {
        self.found_at.fetch_min(at, Ordering::SeqCst);
        for (k, slot) in self.running.iter().enumerate() {
            if k == me {
                continue;
            }
            let slot = lock(slot);
            if let Some((other, ctx)) = *slot {
                if other > at {
                    if let Some(c) = std::ptr::NonNull::new(ctx as *mut z3_sys::_Z3_context) {
                        // SAFETY: the context is alive while it is
                        // registered in `slot`, whose lock is held;
                        // Z3_interrupt is thread-safe.
                        unsafe { z3_sys::Z3_interrupt(c) };
                    }
                }
            }
        }
    }

    /// Whether the I `ii` is still to be searched.
    fn wanted(&self, ii: u32) -> bool {
        ii <= self.cap
            && ii <= self.found_at.load(Ordering::SeqCst)
            && Instant::now() < self.deadline
    }

    /// Whether Is are left to start.
    fn open(&self) -> bool {
        self.wanted(self.next.load(Ordering::SeqCst))
    }

    /// A thread of the search (slot `me`): takes Is in increasing order
    /// until none is left, starting a borrowed thread beside it whenever one
    /// is spare and Is are left.
    fn work<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>, me: usize) {
        loop {
            self.borrow(scope);
            let ii = self.next.fetch_add(1, Ordering::SeqCst);
            if !self.wanted(ii) {
                break;
            }
            let o = z3::with_z3_config(&z3::Config::new(), || {
                let ctx = z3::Context::thread_local().get_z3_context().as_ptr() as usize;
                *lock(&self.running[me]) = Some((ii, ctx));
                // Once I is known to be feasible, no larger I matters.
                // A smaller I with a schedule makes this one moot.
                let moot = || self.found_at.load(Ordering::SeqCst) < ii;
                let o = search_at(
                    self.p,
                    ii,
                    self.opts,
                    self.deadline,
                    (&|| self.cut(me, ii), &moot),
                );
                *lock(&self.running[me]) = None;
                o
            });
            let found = matches!(o.at, AtIi::Found(_));
            let mut all = lock(&self.outcomes);
            all.insert(ii, o);
            if found {
                self.cut(me, ii);
            }
            if let Some(spent_at) = budget_spent_at(&all, self.first, self.opts.budget) {
                self.cut(me, spent_at);
            }
        }
        if me >= self.running.len() - SPARE_MAX {
            lend_threads(1);
        }
    }

    /// Starts a borrowed thread where one is spare, a slot is free and Is
    /// are left.
    fn borrow<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>) {
        if !self.open() || self.borrowed.load(Ordering::SeqCst) >= self.running.len() {
            return;
        }
        let took =
            SPARE_THREADS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1));
        if took.is_err() {
            return;
        }
        let slot = self.borrowed.fetch_add(1, Ordering::SeqCst);
        if slot >= self.running.len() {
            lend_threads(1);
            return;
        }
        scope.spawn(move || self.work(scope, slot));
    }
}

/// Searches Is from `first` on `threads` threads (one: the sequential
/// search), and on threads lent to searches under way ([`lend_threads`]),
/// each I in a z3 context of its own. Threads take Is in increasing order;
/// once a schedule is certain at some I, or the Is from `first` up to some
/// I have spent the work budget between them, no larger I is started and
/// the searches of larger Is under way are interrupted. Every I up to that
/// one is searched in full, each under the whole budget, so the outcomes
/// the walk reads are those of the sequential search.
fn search_is(
    p: &Problem,
    first: u32,
    cap: u32,
    threads: u32,
    opts: &JointOptions,
    deadline: Instant,
) -> BTreeMap<u32, IiOutcome> {
    let own = threads as usize;
    let search = IiPool {
        p,
        opts,
        first,
        cap,
        deadline,
        next: AtomicU32::new(first),
        found_at: AtomicU32::new(u32::MAX),
        outcomes: Mutex::new(BTreeMap::new()),
        running: (0..own + SPARE_MAX).map(|_| Mutex::new(None)).collect(),
        borrowed: AtomicUsize::new(own),
    };
    std::thread::scope(|scope| {
        for me in 0..own {
            let search = &search;
            scope.spawn(move || search.work(scope, me));
        }
    });
    search
        .outcomes
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
}

/// The I at which the searches of the Is from `first` on, in order and
/// without a gap, have spent `budget` between them (None without a budget
/// or before then).
fn budget_spent_at(outcomes: &BTreeMap<u32, IiOutcome>, first: u32, budget: u64) -> Option<u32> {
    if budget == 0 {
        return None;
    }
    let mut spent = 0u64;
    for (at, (&ii, o)) in (first..).zip(outcomes) {
        if ii != at {
            return None;
        }
        spent += o.spent;
        if spent >= budget.min(work::MAX_BUDGET) {
            return Some(ii);
        }
    }
    None
}

/// A mutex's data, also after a panic elsewhere (the data stay consistent:
/// each critical section is a single store).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Algorithm 1's step at one I (in the calling thread's z3 context):
/// refute it, or find the shortest joint schedule in its length range.
fn search_at(
    p: &Problem,
    ii: u32,
    opts: &JointOptions,
    deadline: Instant,
    (on_feasible, moot): (&dyn Fn(), &dyn Fn() -> bool),
) -> IiOutcome {
    let mut search = IiSearch {
        p,
        ii,
        opts,
        deadline,
        moot,
        meter: work::Meter::start(opts.budget),
        queries: 0,
        entries: Vec::new(),
        cut: false,
        snapshots: Vec::new(),
        modulo_length: None,
    };
    let at = search.run(on_feasible).unwrap_or_else(|stop| stop);
    IiOutcome {
        at,
        queries: search.queries,
        spent: search.meter.spent(),
        snapshots: search.snapshots,
    }
}

/// A new encoding of `p` of the kind `opts` names.
fn new_encoding<'p>(p: &'p Problem, opts: &JointOptions) -> Box<dyn JointEncoding + 'p> {
    match opts.encoding {
        Encoding::Default => Box::new(sat_encoding::SatEncoding::new(p, opts.warps, opts.seed)),
        Encoding::Int => Box::new(int_encoding::IntEncoding::new(p, opts.warps, opts.seed)),
        Encoding::Paper => Box::new(paper_encoding::PaperEncoding::new(p, opts.warps, opts.seed)),
    }
}

/// The search at one I: what its steps share. Each step either leaves the
/// search going (`Ok`) or ends it with the outcome at this I (`Err`).
struct IiSearch<'a> {
    p: &'a Problem,
    ii: u32,
    opts: &'a JointOptions,
    deadline: Instant,
    /// Whether a smaller I has a schedule (another thread found it): this
    /// I's answer is not read, so no more queries are asked of it.
    moot: &'a dyn Fn() -> bool,
    /// The work spent at this I, against the budget.
    meter: work::Meter,
    /// SMT queries made so far.
    queries: u32,
    /// The (I, L) refuted so far.
    entries: Vec<JointRefuted>,
    /// The stage bound cut a length range at this I (its entry is in
    /// `entries`).
    cut: bool,
    /// The schedules held so far, with the work spent when each was had.
    snapshots: Vec<Snapshot>,
    /// The best modulo-schedule length known at this I.
    modulo_length: Option<u32>,
}

/// The result of one step of [`IiSearch`]: `Err` ends the search at this I.
type Step<T> = Result<T, AtIi>;

impl IiSearch<'_> {
    /// Seconds left before the deadline.
    fn left(&self) -> f64 {
        self.deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    }

    /// Milliseconds left for the next query.
    fn budget_ms(&self) -> u32 {
        (self.left() * 1000.0).max(1.0) as u32
    }

    /// Whether the search may go on: time and work are left.
    fn going(&self) -> bool {
        self.left() > 0.0 && !self.meter.exhausted()
    }

    /// A query of length at most `max_length` within what is left of the
    /// time and of the work budget.
    fn query(&self, max_length: u32) -> Query<'static> {
        Query::length(max_length, self.budget_ms()).rlimit(self.meter.rlimit(0))
    }

    /// `q` within what is left of the work budget as well as its own.
    fn within<'q>(&self, q: Query<'q>) -> Query<'q> {
        let rlimit = self.meter.rlimit(q.rlimit);
        q.rlimit(rlimit)
    }

    /// Asks `q` of `encoding`, within the budget; a spent budget answers
    /// unknown without a query.
    fn ask(&mut self, encoding: &mut dyn JointEncoding, q: Query) -> EncodingOutcome {
        if self.meter.exhausted() {
            return EncodingOutcome::Unknown("the work budget is spent".into());
        }
        if (self.moot)() {
            return EncodingOutcome::Unknown("a smaller I has a schedule".into());
        }
        self.queries += 1;
        encoding.solve(&self.within(q))
    }

    /// Keeps `js` as the schedule this I holds now (see [`Snapshot`]).
    fn hold(&mut self, js: &JointSchedule) {
        self.snapshots.push(Snapshot {
            spent: self.meter.spent(),
            schedule: js.clone(),
            entries: self.entries.clone(),
            modulo_length: self.modulo_length.unwrap_or(js.schedule.length),
        });
    }

    /// Ends the search: no schedule in the range at this I.
    fn refuted(&mut self, complete: bool) -> AtIi {
        AtIi::Refuted {
            entries: std::mem::take(&mut self.entries),
            complete,
        }
    }

    /// Ends the search: a solver gave up.
    fn unknown(&mut self) -> AtIi {
        AtIi::Unknown {
            entries: std::mem::take(&mut self.entries),
        }
    }

    /// `to` within the stage bound at this I: the first cut is recorded in
    /// the certificate.
    fn within_bound(&mut self, to: u32) -> u32 {
        let Some(bound) = self.opts.stage_bound else {
            return to;
        };
        let max_length = bound.max_length(self.p, self.ii);
        if max_length < to && !self.cut {
            self.cut = true;
            self.entries.push(JointRefuted::StageBound {
                ii: self.ii,
                max_length,
            });
        }
        to.min(max_length)
    }

    fn run(&mut self, on_feasible: &dyn Fn()) -> Step<AtIi> {
        let (p, ii, opts) = (self.p, self.ii, self.opts);
        if self.within_bound(1) == 0 {
            // The prefetch alone takes every stage of the bound.
            return Err(self.refuted(true));
        }
        self.last_stage_window()?;
        let mut encoding = new_encoding(p, opts);
        // Ours: a greedy modulo schedule bounds Len(M) from above.
        let greedy = (opts.encoding != Encoding::Paper)
            .then(|| modulo::heuristic::schedule(p, ii))
            .flatten()
            .filter(|h| checker::check(p, h).is_empty());
        let early = match &greedy {
            Some(h) => Some(self.greedy_bound(encoding.as_mut(), h, on_feasible)?),
            None => None,
        };
        let (base, optimal) = self.modulo_length(greedy.as_ref(), early.as_ref())?;
        // Len(M) is only a valid lower bound on L when it is proven minimal.
        let from = if optimal { base } else { 1 };
        let to = self.within_bound(base.div_ceil(ii).max(1) * ii);
        if to < from {
            // Len(M) is proven: no schedule at this I within the bound.
            return Err(self.refuted(true));
        }
        if early.is_none() {
            encoding.set_interval(ii);
        }
        info!(
            ii,
            from,
            to,
            encoding = encoding.name(),
            "joint search at I"
        );
        let mut length_proven = optimal;
        let range = LengthRange { from, to, optimal };
        let (schedule, slack_search) = match opts.encoding {
            Encoding::Paper => (
                self.paper_lengths(encoding.as_mut(), range, &mut length_proven)?,
                // The paper's search has no refinements.
                None,
            ),
            Encoding::Default | Encoding::Int => {
                let best = self.exists_in_range(encoding.as_mut(), early, range)?;
                on_feasible();
                self.shortest(encoding.as_mut(), from, best, &mut length_proven)
            }
        };
        Ok(AtIi::Found(Box::new(Found {
            schedule,
            entries: std::mem::take(&mut self.entries),
            modulo_length: base,
            length_proven,
            slack_search,
        })))
    }

    /// Ours: the last-stage window relaxation, a small modulo problem,
    /// refutes this I before any joint query when it is unsatisfiable.
    fn last_stage_window(&mut self) -> Step<()> {
        if self.opts.encoding == Encoding::Paper {
            return Ok(());
        }
        let t0 = Instant::now();
        let rlimit = self.meter.rlimit(WINDOW_RLIMIT);
        let refuted =
            last_stage_window_refutes(self.p, self.ii, self.opts.seed, self.budget_ms(), rlimit);
        debug!(
            ii = self.ii,
            seconds = t0.elapsed().as_secs_f64(),
            refuted = refuted.is_some(),
            "last-stage window relaxation"
        );
        let Some(ops) = refuted else {
            return Ok(());
        };
        self.queries += 1;
        self.entries.push(JointRefuted::Modulo(Refuted {
            from: self.ii,
            to: self.ii,
            why: Infeasibility::LastStageWindowSmt { ops: ops as u32 },
        }));
        Err(self.refuted(true))
    }

    /// Ours: with the greedy modulo schedule `h` bounding Len(M) from
    /// above, one joint query over L <= ceil(UB / I) * I covers Algorithm
    /// 1's range [Len(M), ceil(Len(M) / I) * I] at this I; if it is
    /// unsatisfiable, the exact modulo schedule is never needed. Returns
    /// the joint schedule found.
    fn greedy_bound(
        &mut self,
        encoding: &mut dyn JointEncoding,
        h: &Schedule,
        on_feasible: &dyn Fn(),
    ) -> Step<JointSchedule> {
        let ii = self.ii;
        let upper = self.within_bound(h.length.div_ceil(ii).max(1) * ii);
        let lb = length_lower_bound(self.p);
        if upper < lb {
            // No schedule is that short: none at this I within the bound.
            return Err(self.refuted(true));
        }
        encoding.set_interval(ii);
        let t0 = Instant::now();
        let answer = self.ask(encoding, self.query(upper));
        debug!(
            ii,
            upper,
            seconds = t0.elapsed().as_secs_f64(),
            sat = matches!(answer, EncodingOutcome::Sat(_)),
            "joint query over the greedy bound"
        );
        match answer {
            EncodingOutcome::Unsat => {
                self.entries.push(JointRefuted::Smt {
                    ii,
                    from_length: lb,
                    to_length: upper,
                });
                Err(self.refuted(true))
            }
            EncodingOutcome::Unknown(why) => {
                debug!(ii, why, "SMT gave up");
                Err(self.unknown())
            }
            EncodingOutcome::Sat(js) => {
                // Algorithm 1's range at I ends at ceil(Len(M) / I) * I >=
                // ceil(LB / I) * I: within that, the answer is at this I.
                if upper <= lb.div_ceil(ii).max(1) * ii {
                    on_feasible();
                }
                self.modulo_length = Some(h.length);
                self.hold(&js);
                Ok(js)
            }
        }
    }

    /// Len(M), the optimal modulo schedule's length at this I, and whether
    /// it is proven minimal: the paper's ZLP, or ours in SMT starting from
    /// the shorter of the greedy and the joint schedule.
    fn modulo_length(
        &mut self,
        greedy: Option<&Schedule>,
        early: Option<&JointSchedule>,
    ) -> Step<(u32, bool)> {
        let (p, ii, opts) = (self.p, self.ii, self.opts);
        let modulo = match opts.encoding {
            Encoding::Paper => zlp::solve_at(p, ii, self.left()),
            Encoding::Default | Encoding::Int => {
                let known = match (greedy, early) {
                    (Some(h), Some(js)) if js.schedule.length < h.length => {
                        Some(js.schedule.clone())
                    }
                    (Some(h), _) => Some(h.clone()),
                    (None, _) => None,
                };
                let seconds = self.left();
                smt_modulo(
                    p,
                    ii,
                    (opts.encoding, opts.seed),
                    (seconds, &self.meter),
                    &mut self.queries,
                    known,
                )
            }
        };
        match modulo {
            zlp::ZlpOutcome::Infeasible => {
                self.entries.push(JointRefuted::Modulo(Refuted {
                    from: ii,
                    to: ii,
                    why: if opts.encoding == Encoding::Paper {
                        Infeasibility::Zlp
                    } else {
                        Infeasibility::ModuloSmt
                    },
                }));
                Err(self.refuted(true))
            }
            zlp::ZlpOutcome::Unknown(why) => {
                debug!(
                    ii,
                    why, "modulo scheduling gave up; I is no longer proven minimal"
                );
                Err(self.unknown())
            }
            zlp::ZlpOutcome::Feasible { schedule, optimal } => {
                self.modulo_length = Some(schedule.length);
                Ok((schedule.length, optimal))
            }
        }
    }

    /// Algorithm 1 literally (the paper's search): one query per L, upward.
    fn paper_lengths(
        &mut self,
        encoding: &mut dyn JointEncoding,
        range: LengthRange,
        length_proven: &mut bool,
    ) -> Step<JointSchedule> {
        let mut gave_up = false;
        for l in range.from..=range.to {
            match self.ask(encoding, self.query(l)) {
                EncodingOutcome::Sat(js) => return Ok(js),
                EncodingOutcome::Unsat => push_smt(&mut self.entries, self.ii, l),
                EncodingOutcome::Unknown(why) => {
                    debug!(ii = self.ii, l, why, "SMT gave up");
                    gave_up = true;
                    *length_proven = false;
                }
            }
        }
        Err(if gave_up {
            self.unknown()
        } else {
            self.refuted(range.optimal)
        })
    }

    /// Ours: the same answer as the upward search, from one query for
    /// L <= `to` (the greedy bound's answer when it already lies in range);
    /// its unsatisfiability refutes every L in the range.
    fn exists_in_range(
        &mut self,
        encoding: &mut dyn JointEncoding,
        early: Option<JointSchedule>,
        range: LengthRange,
    ) -> Step<JointSchedule> {
        let (ii, to) = (self.ii, range.to);
        let t0 = Instant::now();
        let answer = match early {
            Some(js) if js.schedule.length <= to => EncodingOutcome::Sat(js),
            _ => self.ask(encoding, self.query(to)),
        };
        debug!(
            ii,
            to,
            seconds = t0.elapsed().as_secs_f64(),
            sat = matches!(answer, EncodingOutcome::Sat(_)),
            "joint existence query"
        );
        match answer {
            EncodingOutcome::Unsat => {
                self.entries.push(JointRefuted::Smt {
                    ii,
                    from_length: range.from,
                    to_length: to,
                });
                Err(self.refuted(range.optimal))
            }
            EncodingOutcome::Unknown(why) => {
                debug!(ii, why, "SMT gave up");
                Err(self.unknown())
            }
            EncodingOutcome::Sat(best) => {
                self.hold(&best);
                Ok(best)
            }
        }
    }

    /// From a joint schedule of length <= Algorithm 1's bound at this I,
    /// the shortest one (searched down to `from`), then, under a
    /// deterministic budget, the one with the fewest compute groups, the
    /// fewest values crossing between groups and (under
    /// [`Objective::Slack`]) the largest latency slack. Returns it and what
    /// the latency-slack refinement established.
    fn shortest(
        &mut self,
        encoding: &mut dyn JointEncoding,
        from: u32,
        best: JointSchedule,
        length_proven: &mut bool,
    ) -> (JointSchedule, Option<SlackSearch>) {
        let best = self.descend_length(encoding, from, best, length_proven);
        if !self.opts.refine_groups {
            return (best, None);
        }
        let best = self.fewest_groups(encoding, best);
        // The later refinements keep to the groups used now.
        let used = best.group.iter().copied().max().unwrap_or(0);
        let best = self.fewest_crossings(encoding, best, used);
        if self.opts.objective == Objective::Length {
            return (best, None);
        }
        self.largest_slack(encoding, best, used)
    }

    /// The shortest length from `from` up to `best`'s. Unsatisfiable
    /// queries are the expensive ones: bisect while the range is wide, then
    /// step down from the best length found, so that a small range costs
    /// one refutation (none when the answer is `from`).
    fn descend_length(
        &mut self,
        encoding: &mut dyn JointEncoding,
        from: u32,
        mut best: JointSchedule,
        length_proven: &mut bool,
    ) -> JointSchedule {
        let ii = self.ii;
        let mut lo = from; // every L < lo is refuted
        let mut refuted_to: Option<u32> = None;
        while *length_proven && lo < best.schedule.length {
            let mid = next_length(lo, best.schedule.length);
            let t0 = Instant::now();
            let answer = self.ask(encoding, self.query(mid));
            debug!(
                ii,
                mid,
                seconds = t0.elapsed().as_secs_f64(),
                sat = matches!(answer, EncodingOutcome::Sat(_)),
                "joint query"
            );
            match answer {
                EncodingOutcome::Sat(js) => {
                    self.hold(&js);
                    best = js;
                }
                EncodingOutcome::Unsat => {
                    lo = mid + 1;
                    refuted_to = Some(mid);
                }
                EncodingOutcome::Unknown(_) => {
                    *length_proven = false;
                    break;
                }
            }
        }
        if let Some(to_length) = refuted_to {
            self.entries.push(JointRefuted::Smt {
                ii,
                from_length: from,
                to_length,
            });
        }
        best
    }

    /// The fewest compute groups at `best`'s (I, L). This is a refinement,
    /// not part of the optimum, so each query gets a deterministic resource
    /// budget (z3 rlimit) rather than a clock: the same input gives the
    /// same answer anywhere.
    fn fewest_groups(
        &mut self,
        encoding: &mut dyn JointEncoding,
        best: JointSchedule,
    ) -> JointSchedule {
        let used = best.group.iter().copied().max().unwrap_or(0);
        for k in 1..used {
            let query = self.query(best.schedule.length).groups(Some(k));
            if let EncodingOutcome::Sat(js) = self.ask(encoding, query.rlimit(GROUP_RLIMIT)) {
                self.hold(&js);
                return js;
            }
        }
        best
    }

    /// The fewest values crossing between compute groups (each crossing is
    /// a shared-memory channel in Triton's warp specialization), by
    /// bisection under the same deterministic budget as the groups',
    /// using only compute groups 1..=`used`.
    fn fewest_crossings(
        &mut self,
        encoding: &mut dyn JointEncoding,
        mut best: JointSchedule,
        used: u32,
    ) -> JointSchedule {
        let pairs = cross_pairs(self.p);
        let (mut lo, mut hi) = (0u32, crossings(&pairs, &best));
        while lo < hi && self.going() {
            let mid = lo + (hi - lo) / 2;
            let query = self
                .query(best.schedule.length)
                .groups(Some(used))
                .crossings(Some(mid))
                .rlimit(GROUP_RLIMIT);
            match self.ask(encoding, query) {
                EncodingOutcome::Sat(js) => {
                    hi = crossings(&pairs, &js).min(mid);
                    self.hold(&js);
                    best = js;
                }
                EncodingOutcome::Unsat => lo = mid + 1,
                EncodingOutcome::Unknown(_) => break,
            }
        }
        best
    }

    /// Objective::Slack: the largest latency slack (see [`slack`]) with
    /// `best`'s crossings and compute groups 1..=`used` at any length of as
    /// many stages, by bisection under the groups' budget, then the
    /// shortest length with it.
    fn largest_slack(
        &mut self,
        encoding: &mut dyn JointEncoding,
        best: JointSchedule,
        used: u32,
    ) -> (JointSchedule, Option<SlackSearch>) {
        let (p, ii) = (self.p, self.ii);
        let slack_pairs = slack::pairs(p, ii);
        let shortest_length = best.schedule.length;
        let top = shortest_length.div_ceil(ii).max(1) * ii;
        let (Some(lo), Some(hi)) = (
            slack::of(&slack_pairs, &best.schedule.start),
            slack::upper_bound(p, &slack_pairs, top),
        ) else {
            return (best, None);
        };
        let mut refine = SlackRefinement {
            groups: used,
            crossings: crossings(&cross_pairs(p), &best),
            pairs: &slack_pairs,
            best,
        };
        let at_shortest = lo;
        let (lo, proven) = refine.most_slack(self, encoding, top, lo, hi);
        let length_proven = refine.shortest_with(self, encoding, shortest_length, lo);
        let best = refine.best;
        let measured = slack::of(&slack_pairs, &best.schedule.start).unwrap_or(lo);
        debug!(
            ii,
            slack = lo,
            at_shortest,
            proven,
            length = best.schedule.length,
            pairs = slack_pairs.len(),
            "latency slack"
        );
        (
            best,
            Some(SlackSearch {
                proven,
                length_proven,
                slack: measured,
                shortest_length,
                at_shortest,
            }),
        )
    }
}

/// Algorithm 1's length range [from, to] at one I; `optimal` when `from`
/// is the proven Len(M) (a refutation of the range is then complete).
#[derive(Debug, Clone, Copy)]
struct LengthRange {
    from: u32,
    to: u32,
    optimal: bool,
}

/// How many of `pairs` lie in different groups of `js`.
fn crossings(pairs: &[(usize, usize)], js: &JointSchedule) -> u32 {
    pairs
        .iter()
        .filter(|&&(u, v)| js.group[u] != js.group[v])
        .count() as u32
}

/// The latency-slack refinement's queries: at most `groups` compute groups
/// and `crossings` crossings, slack over `pairs`; `best` is the schedule
/// with the most slack found.
struct SlackRefinement<'a> {
    groups: u32,
    crossings: u32,
    pairs: &'a [slack::SlackPair],
    best: JointSchedule,
}

impl SlackRefinement<'_> {
    /// Asks for a schedule of length at most `length` with latency slack at
    /// least `at_least`; `None` when the encoding does not state slack.
    fn ask(
        &self,
        search: &mut IiSearch,
        encoding: &mut dyn JointEncoding,
        length: u32,
        at_least: i64,
    ) -> Option<EncodingOutcome> {
        let query = Query::length(length, search.budget_ms())
            .groups(Some(self.groups))
            .crossings(Some(self.crossings))
            .slack(self.pairs, at_least)
            .rlimit(GROUP_RLIMIT);
        if !encoding.supports(&query) {
            return None;
        }
        let answer = search.ask(encoding, query);
        if let EncodingOutcome::Sat(js) = &answer {
            search.hold(js);
        }
        Some(answer)
    }

    /// The largest slack in [lo, hi] at lengths up to `top`, by bisection;
    /// returns it and whether it is proven largest.
    fn most_slack(
        &mut self,
        search: &mut IiSearch,
        encoding: &mut dyn JointEncoding,
        top: u32,
        mut lo: i64,
        mut hi: i64,
    ) -> (i64, bool) {
        while lo < hi {
            if !search.going() {
                return (lo, false);
            }
            let mid = lo + (hi - lo + 1) / 2;
            match self.ask(search, encoding, top, mid) {
                Some(EncodingOutcome::Sat(js)) => {
                    lo = slack::of(self.pairs, &js.schedule.start)
                        .unwrap_or(mid)
                        .max(mid);
                    self.best = js;
                }
                Some(EncodingOutcome::Unsat) => hi = mid - 1,
                _ => return (lo, false),
            }
        }
        (lo, true)
    }

    /// The shortest length (at least `shortest_length`) with slack
    /// `slack`; returns whether every shorter one is refuted.
    fn shortest_with(
        &mut self,
        search: &mut IiSearch,
        encoding: &mut dyn JointEncoding,
        shortest_length: u32,
        slack: i64,
    ) -> bool {
        let (mut short, mut long) = (shortest_length, self.best.schedule.length);
        while short < long && search.going() {
            let mid = short + (long - short) / 2;
            match self.ask(search, encoding, mid, slack) {
                Some(EncodingOutcome::Sat(js)) => {
                    long = js.schedule.length.min(mid);
                    self.best = js;
                }
                Some(EncodingOutcome::Unsat) => short = mid + 1,
                _ => break,
            }
        }
        short >= long
    }
}

/// The crossings' share of the bandwidth at `ii` (rule 10 of the checker):
/// the pairs whose crossing costs raw cycles on the crossing unit
/// ([`Problem::crossing_charges`]), and the raw cycles left for them after
/// the ops' own traffic. `None` when no crossing can exceed what is left
/// (nothing to encode); the remainder saturates at 0 (then any charged
/// crossing is excluded; ResMII already refutes an I whose own traffic
/// does not fit).
pub fn crossing_budget(p: &Problem, ii: u32) -> Option<(Vec<CrossingCharge>, u64)> {
    let f = p.crossing_unit?;
    let charges = p.crossing_charges();
    let left = p.bandwidth_budget(f, ii).saturating_sub(p.fixed_traffic(f));
    let total: u64 = charges.iter().map(|c| c.2).sum();
    (total > left).then_some((charges, left))
}

/// Unordered pairs of distinct compute (fixed-latency) ops joined by an
/// edge: the values that cross between groups when their ends differ.
pub fn cross_pairs(p: &Problem) -> Vec<(usize, usize)> {
    let mut pairs: Vec<(usize, usize)> = p
        .edges
        .iter()
        .filter(|e| e.from != e.to)
        .filter(|e| !p.ops[e.from].variable_latency && !p.ops[e.to].variable_latency)
        .map(|e| (e.from.min(e.to), e.from.max(e.to)))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// The last-stage window relaxation at `ii`: the ops that a pinned op
/// reaches along a path of non-negative lag (delay - I * distance) issue no
/// earlier than it, so in the last stage too, within one window of I cycles.
/// Restricted to those ops (a relaxation: the other ops and their edges and
/// unit rows are dropped) and shifted to stage 0, a schedule issues every op
/// in [0, I) and ends by I - 1 + the longest op. Returns the number of ops in
/// the window when that small modulo problem is unsatisfiable (then `ii`
/// has no schedule at all), None otherwise or when undecided in time.
pub fn last_stage_window_refutes(
    p: &Problem,
    ii: u32,
    seed: u32,
    timeout_ms: u32,
    rlimit: u32,
) -> Option<usize> {
    let n = p.ops.len();
    const NONE: i64 = i64::MIN / 4;
    let iv = ii as i64;
    // Longest lag paths from the pinned ops (all sources at once): an op
    // at a non-negative distance from some pinned op is in the window.
    let mut d = vec![NONE; n];
    for a in (0..n).filter(|&a| p.ops[a].last_stage) {
        d[a] = 0;
    }
    for _ in 0..=n {
        let mut changed = false;
        for e in &p.edges {
            if d[e.from] > NONE {
                let c = d[e.from] + e.delay as i64 - iv * e.distance as i64;
                if c > d[e.to] {
                    d[e.to] = c;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let window: Vec<bool> = d.iter().map(|&x| x >= 0).collect();
    let ops: Vec<usize> = (0..n).filter(|&v| window[v]).collect();
    if ops.len() < 2 {
        return None;
    }
    let mut index = vec![usize::MAX; n];
    for (i, &v) in ops.iter().enumerate() {
        index[v] = i;
    }
    let mut q = p.clone();
    q.ops = ops.iter().map(|&v| p.ops[v].clone()).collect();
    // A modulo relaxation: no groups, so no colocation either.
    q.same_group = Vec::new();
    q.edges = p
        .edges
        .iter()
        .filter(|e| window[e.from] && window[e.to])
        .map(|e| {
            let mut e = *e;
            e.from = index[e.from];
            e.to = index[e.to];
            e
        })
        .collect();
    let longest = q.ops.iter().map(|o| o.cycles).max().unwrap_or(0);
    let mut enc = sat_encoding::SatEncoding::modulo_only(&q, seed);
    enc.set_interval(ii);
    // A resource budget, not only the clock, keeps the certificate
    // independent of the machine's speed.
    match enc.solve(&Query::length(ii - 1 + longest, timeout_ms).rlimit(rlimit)) {
        EncodingOutcome::Unsat => Some(ops.len()),
        _ => None,
    }
}

/// Optimal modulo scheduling at `ii` in SMT (rules 1-4 of the checker):
/// bisects the length between a lower bound and the first schedule found.
fn smt_modulo(
    p: &Problem,
    ii: u32,
    (encoding, seed): (Encoding, u32),
    (seconds, meter): (f64, &work::Meter),
    queries: &mut u32,
    known: Option<Schedule>,
) -> zlp::ZlpOutcome {
    let started = Instant::now();
    let limits = Limits {
        started,
        seconds,
        meter,
    };
    let mut enc: Box<dyn JointEncoding + '_> = match encoding {
        Encoding::Int => Box::new(int_encoding::IntEncoding::modulo_only(p, seed)),
        _ => Box::new(sat_encoding::SatEncoding::modulo_only(p, seed)),
    };
    enc.set_interval(ii);
    // A known modulo schedule is the first upper bound; the encoding is
    // built for the longest length the bisection can ask about.
    if let Some(known) = known {
        let mut best = known;
        let lo = length_lower_bound(p);
        if lo < best.length {
            *queries += 1;
            match enc.solve(&limits.query(best.length - 1)) {
                EncodingOutcome::Sat(js) => best = js.schedule,
                EncodingOutcome::Unsat => {
                    return zlp::ZlpOutcome::Feasible {
                        schedule: best,
                        optimal: true,
                    }
                }
                EncodingOutcome::Unknown(_) => {
                    return zlp::ZlpOutcome::Feasible {
                        schedule: best,
                        optimal: false,
                    }
                }
            }
        }
        return bisect_modulo(ii, enc.as_mut(), best, lo, &limits, queries);
    }
    // As the ZLP: a short horizon first (a schedule found there is no longer
    // than the optimum's bound), the proven horizon only if that fails.
    let full = u32::try_from(zlp::horizon(p, ii)).unwrap_or(u32::MAX);
    let short = u32::try_from(zlp::first_horizon(p, ii))
        .unwrap_or(u32::MAX)
        .min(full);
    *queries += 1;
    let t0 = Instant::now();
    let first = enc.solve(&limits.query(short));
    debug!(
        ii,
        short,
        seconds = t0.elapsed().as_secs_f64(),
        "smt modulo first query"
    );
    let first = match first {
        EncodingOutcome::Unsat if short < full => {
            enc.set_interval(ii);
            *queries += 1;
            enc.solve(&limits.query(full))
        }
        other => other,
    };
    let best = match first {
        EncodingOutcome::Sat(js) => js.schedule,
        EncodingOutcome::Unsat => return zlp::ZlpOutcome::Infeasible,
        EncodingOutcome::Unknown(why) => return zlp::ZlpOutcome::Unknown(why),
    };
    let lo = length_lower_bound(p);
    bisect_modulo(ii, enc.as_mut(), best, lo, &limits, queries)
}

/// The clock and the work budget of the modulo search at one I.
struct Limits<'m> {
    started: Instant,
    seconds: f64,
    meter: &'m work::Meter,
}

impl Limits<'_> {
    /// A query of length at most `max_length` within what is left of both.
    fn query(&self, max_length: u32) -> Query<'static> {
        let ms = ((self.seconds - self.started.elapsed().as_secs_f64()) * 1000.0).max(1.0) as u32;
        Query::length(max_length, ms).rlimit(self.meter.rlimit(0))
    }
}

/// Bisects the minimum modulo-schedule length between `lo` and `best`.
fn bisect_modulo(
    ii: u32,
    enc: &mut dyn JointEncoding,
    mut best: Schedule,
    mut lo: u32,
    limits: &Limits,
    queries: &mut u32,
) -> zlp::ZlpOutcome {
    while lo < best.length && !limits.meter.exhausted() {
        let mid = next_length(lo, best.length);
        *queries += 1;
        let t0 = Instant::now();
        let answer = enc.solve(&limits.query(mid));
        debug!(
            ii,
            mid,
            seconds = t0.elapsed().as_secs_f64(),
            sat = matches!(answer, EncodingOutcome::Sat(_)),
            "smt modulo query"
        );
        match answer {
            EncodingOutcome::Sat(js) => best = js.schedule,
            EncodingOutcome::Unsat => lo = mid + 1,
            EncodingOutcome::Unknown(_) => {
                return zlp::ZlpOutcome::Feasible {
                    schedule: best,
                    optimal: false,
                }
            }
        }
    }
    // Optimal unless the budget stopped the bisection.
    let optimal = lo >= best.length;
    zlp::ZlpOutcome::Feasible {
        schedule: best,
        optimal,
    }
}

/// Rejects problems where a single value can never be held: its result is
/// live for at least one cycle in every schedule (a user waits a positive
/// delay, or the op feeds its own next iteration, which comes I > 0 cycles
/// later) and alone exceeds the register limit of a group or a memory's
/// capacity.
fn check_fits(p: &Problem, warps: &WarpConfig) -> Result<(), JointError> {
    for (v, op) in p.ops.iter().enumerate() {
        let lives = p
            .edges
            .iter()
            .any(|e| e.from == v && !e.order && (e.delay > 0 || (e.to == v && e.distance > 0)));
        if !lives {
            continue;
        }
        if op.regs > warps.reg_limit {
            return Err(JointError::TooLarge {
                op: op.name.clone(),
                what: "registers per thread".into(),
                need: op.regs as u64,
                limit: warps.reg_limit as u64,
            });
        }
        for (m, (kind, cap)) in p.memories.iter().enumerate() {
            if op.memory[m] > *cap {
                return Err(JointError::TooLarge {
                    op: op.name.clone(),
                    what: kind.clone(),
                    need: op.memory[m],
                    limit: *cap,
                });
            }
        }
    }
    Ok(())
}

/// A lower bound on the length of any modulo schedule, whatever I:
/// * the critical path: issue cycles along distance-0 edges (a DAG) plus the
///   last op's cycles;
/// * per unit, all of one iteration's occupancy lies inside [0, L) and never
///   exceeds the capacity in any cycle, so L >= ceil(busy / capacity).
pub fn length_lower_bound(p: &Problem) -> u32 {
    // Distance-0 edges form a DAG (the loaders reject their cycles).
    let earliest = p
        .longest_paths(|e| (e.distance == 0).then_some(e.delay as i64))
        .unwrap_or_else(|| vec![0; p.ops.len()]);
    let path = (0..p.ops.len())
        .map(|v| earliest[v] + p.ops[v].cycles as i64)
        .max()
        .unwrap_or(0) as u64;
    let busy = (0..p.capacity.len())
        .map(|f| p.unit_bound(f))
        .max()
        .unwrap_or(0);
    u32::try_from(path.max(busy)).unwrap_or(u32::MAX)
}

/// Records an unsat (I, L), merging with the previous entry when contiguous.
fn push_smt(cert: &mut Vec<JointRefuted>, ii: u32, l: u32) {
    if let Some(JointRefuted::Smt {
        ii: last_ii,
        to_length,
        ..
    }) = cert.last_mut()
    {
        if *last_ii == ii && *to_length + 1 == l {
            *to_length = l;
            return;
        }
    }
    cert.push(JointRefuted::Smt {
        ii,
        from_length: l,
        to_length: l,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::load;
    use crate::problem::BuildOptions;
    use crate::Machine;

    /// The paper's Figure 1 loop on the H100, as the joint search sees it.
    fn figure_1() -> Problem {
        let text = include_str!("../../examples/graphs/fa_simplified.toml");
        let g = load::parse("fa_simplified.toml", text).unwrap();
        let m = Machine::select("h100").unwrap();
        streaming_view(&Problem::build(&g, &m, BuildOptions::default()).unwrap().0).0
    }

    fn warps() -> WarpConfig {
        WarpConfig {
            groups: 2,
            reg_limit: 255,
            cross_warp: true,
        }
    }

    fn crossings_of(p: &Problem, js: &JointSchedule) -> u32 {
        crossings(&cross_pairs(p), js)
    }

    #[test]
    fn every_encoding_answers_the_length_query_of_the_optimum() {
        let p = figure_1();
        let opts = JointOptions {
            encoding: Encoding::Default,
            warps: warps(),
            timeout: 60.0,
            seed: 0,
            threads: 1,
            objective: Objective::Length,
            stage_bound: None,
            budget: 0,
            refine_groups: true,
        };
        let r = solve(&p, opts).unwrap();
        let (ii, length) = (r.schedule.schedule.ii, r.schedule.schedule.length);
        assert!(r.length_proven);
        for encoding in [Encoding::Default, Encoding::Int, Encoding::Paper] {
            let mut enc = new_encoding(&p, &JointOptions { encoding, ..opts });
            enc.set_interval(ii);
            let at = enc.solve(&Query::length(length, 60_000));
            let EncodingOutcome::Sat(js) = at else {
                panic!("{encoding:?} at (I, L) = ({ii}, {length}): {at:?}");
            };
            assert!(checker::check_joint(&p, &js, &warps()).is_empty());
            assert!(js.schedule.length <= length);
            let shorter = enc.solve(&Query::length(length - 1, 60_000));
            assert!(
                matches!(shorter, EncodingOutcome::Unsat),
                "{encoding:?} below the proven length: {shorter:?}"
            );
        }
    }

    #[test]
    fn refinements_are_stated_by_the_default_encoding_only() {
        let p = figure_1();
        let r = solve(
            &p,
            JointOptions {
                encoding: Encoding::Default,
                warps: warps(),
                timeout: 60.0,
                seed: 0,
                threads: 1,
                objective: Objective::Length,
                stage_bound: None,
                budget: 0,
                refine_groups: true,
            },
        )
        .unwrap();
        let (ii, length) = (r.schedule.schedule.ii, r.schedule.schedule.length);
        let pairs = slack::pairs(&p, ii);
        let one_group = Query::length(length, 60_000).groups(Some(1));
        let refined = one_group.crossings(Some(0)).slack(&pairs, 0);
        assert!(!one_group.refines() && refined.refines());
        let mut default = sat_encoding::SatEncoding::new(&p, warps(), 0);
        let mut int = int_encoding::IntEncoding::new(&p, warps(), 0);
        let mut paper = paper_encoding::PaperEncoding::new(&p, warps(), 0);
        assert!(default.supports(&refined));
        for enc in [&mut int as &mut dyn JointEncoding, &mut paper] {
            assert!(enc.supports(&one_group) && !enc.supports(&refined));
            enc.set_interval(ii);
            match enc.solve(&refined) {
                EncodingOutcome::Unknown(why) => assert!(why.contains("bounds neither"), "{why}"),
                other => panic!("{} answered a refined query: {other:?}", enc.name()),
            }
        }
        // The default encoding keeps to every bound it is given.
        default.set_interval(ii);
        for q in [
            one_group,
            refined,
            Query::length(length, 60_000).crossings(Some(0)),
        ] {
            if let EncodingOutcome::Sat(js) = default.solve(&q) {
                assert!(checker::check_joint(&p, &js, &warps()).is_empty());
                assert!(js.schedule.length <= length);
                if q.max_group == Some(1) {
                    assert!(js.group.iter().all(|&g| g <= 1), "{:?}", js.group);
                }
                if q.max_cross == Some(0) {
                    assert_eq!(crossings_of(&p, &js), 0);
                }
            }
        }
    }
}
