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

pub mod int_encoding;
pub mod paper_encoding;
pub mod sat_encoding;
pub mod symmetry;

use std::time::Instant;

use serde::Serialize;
use tracing::{debug, info};

use crate::checker::{self, JointSchedule, WarpConfig};
use crate::modulo::{self, mii, zlp, Infeasibility, Refuted};
use crate::problem::Problem;

/// z3 resource budget of one optional group-minimization query.
const GROUP_RLIMIT: u32 = 20_000_000;

/// What one SMT query answered.
#[derive(Debug, Clone)]
pub enum EncodingOutcome {
    Sat(JointSchedule),
    Unsat,
    Unknown(String),
}

/// An SMT encoding of the joint problem at a fixed I.
pub trait JointEncoding {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Prepares the encoding for initiation interval `ii`.
    fn set_interval(&mut self, ii: u32);
    /// Asks for a joint schedule of length at most `max_length`.
    fn solve(&mut self, max_length: u32, timeout_ms: u32) -> EncodingOutcome {
        self.solve_within(max_length, None, timeout_ms)
    }
    /// Bounds the work of later queries (z3's deterministic `rlimit`; 0 = none).
    fn set_rlimit(&mut self, _rlimit: u32) {}
    /// As [`JointEncoding::solve`], using only compute groups 1..=`max_group`
    /// when given.
    fn solve_within(
        &mut self,
        max_length: u32,
        max_group: Option<u32>,
        timeout_ms: u32,
    ) -> EncodingOutcome;
    /// As [`JointEncoding::solve_within`], with at most `max_cross` of the
    /// [`cross_pairs`] in different groups; `None` when the encoding does
    /// not support the refinement.
    fn solve_limited(
        &mut self,
        _max_length: u32,
        _max_group: Option<u32>,
        _max_cross: u32,
        _timeout_ms: u32,
    ) -> Option<EncodingOutcome> {
        None
    }
}

/// Which encoding to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// Options of the joint search.
#[derive(Debug, Clone, Copy)]
pub struct JointOptions {
    pub encoding: Encoding,
    pub warps: WarpConfig,
    /// Total time budget in seconds.
    pub timeout: f64,
    /// Seed of the SMT solver (results are deterministic for a seed).
    pub seed: u32,
}

/// One entry of the joint certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
                "I = {ii}, L in [{from_length}, {to_length}]: no warp-specialized schedule (SMT unsat)"
            ),
        }
    }
}

/// The pipeline depth a streaming op needs (section 5.3), a tunable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Streaming {
    pub op: String,
    /// Raw machine cycles of the op with its latency, before it was zeroed.
    pub raw_cycles: u64,
    /// Iterations it must run ahead to hide them: ceil(raw / (I * scale)),
    /// with scale the raw cycles per normalized cycle.
    pub prefetch: u32,
}

/// Result of the joint search.
#[derive(Debug, Clone, Serialize)]
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
    /// L is minimal at this I within Algorithm 1's range.
    pub length_proven: bool,
    pub streaming: Vec<Streaming>,
    pub seconds: f64,
    /// Number of SMT queries made.
    pub queries: u32,
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
    CheckerRejected(Vec<checker::Violation>),
    Exhausted {
        cap: u32,
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
            JointError::CheckerRejected(v) => {
                write!(f, "internal error: the checker rejected a joint schedule:")?;
                for x in v {
                    write!(f, "\n  {x}")?;
                }
                Ok(())
            }
            JointError::Exhausted { cap } => {
                write!(f, "no warp-specialized schedule with I <= {cap}")
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

/// Runs Algorithm 1 on `p`, in a z3 context of its own (freed on return, so
/// repeated solves in one process do not accumulate terms).
pub fn solve(p: &Problem, opts: JointOptions) -> Result<JointResult, JointError> {
    z3::with_z3_config(&z3::Config::new(), || solve_in_context(p, opts))
}

fn solve_in_context(p: &Problem, opts: JointOptions) -> Result<JointResult, JointError> {
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
    let mut ii_proven = true;
    let mut queries = 0u32;
    let mut encoding: Box<dyn JointEncoding + '_> = match opts.encoding {
        Encoding::Default => Box::new(sat_encoding::SatEncoding::new(p, opts.warps, opts.seed)),
        Encoding::Int => Box::new(int_encoding::IntEncoding::new(p, opts.warps, opts.seed)),
        Encoding::Paper => Box::new(paper_encoding::PaperEncoding::new(p, opts.warps, opts.seed)),
    };
    let left = |started: &Instant| opts.timeout - started.elapsed().as_secs_f64();
    // Milliseconds left for the next query.
    let budget_ms = |started: &Instant| (left(started) * 1000.0).max(1.0) as u32;
    let cap = modulo::search_cap(p);
    let mut ii = res.max(rec);
    if let Some((bound, a, b, path)) = modulo::last_stage_bound(p) {
        if bound > ii {
            certificate.push(JointRefuted::Modulo(Refuted {
                from: ii,
                to: bound - 1,
                why: Infeasibility::LastStageWindow {
                    first: p.ops[a].name.clone(),
                    second: p.ops[b].name.clone(),
                    path,
                },
            }));
            ii = bound;
        }
    }
    // The smallest I not refuted so far.
    let mut lower_bound = ii;
    while ii <= cap {
        if left(&started) <= 0.0 {
            return Err(JointError::Timeout { lower_bound });
        }
        let modulo = match opts.encoding {
            // The paper: Optimal-Modulo-Schedule as a ZLP.
            Encoding::Paper => zlp::solve_at(p, ii, left(&started)),
            // Ours: the same question in SMT, bisecting the length.
            Encoding::Default | Encoding::Int => smt_modulo(
                p,
                ii,
                opts.encoding,
                opts.seed,
                left(&started),
                &mut queries,
            ),
        };
        let (base, optimal) = match modulo {
            zlp::ZlpOutcome::Infeasible => {
                certificate.push(JointRefuted::Modulo(Refuted {
                    from: ii,
                    to: ii,
                    why: if opts.encoding == Encoding::Paper {
                        Infeasibility::Zlp
                    } else {
                        Infeasibility::ModuloSmt
                    },
                }));
                if ii_proven {
                    lower_bound = ii + 1;
                }
                ii += 1;
                continue;
            }
            zlp::ZlpOutcome::Unknown(why) => {
                debug!(
                    ii,
                    why, "modulo scheduling gave up; I is no longer proven minimal"
                );
                ii_proven = false;
                ii += 1;
                continue;
            }
            zlp::ZlpOutcome::Feasible { schedule, optimal } => (schedule.length, optimal),
        };
        // Len(M) is only a valid lower bound on L when the ZLP proved it minimal.
        let from = if optimal { base } else { 1 };
        let to = base.div_ceil(ii).max(1) * ii;
        encoding.set_interval(ii);
        info!(
            ii,
            from,
            to,
            encoding = encoding.name(),
            "joint search at I"
        );
        let mut found: Option<JointSchedule> = None;
        let mut length_proven = true;
        match opts.encoding {
            Encoding::Paper => {
                // Algorithm 1 literally: one query per L, upward.
                let mut l = from;
                while l <= to {
                    let ms = budget_ms(&started);
                    queries += 1;
                    match encoding.solve(l, ms) {
                        EncodingOutcome::Sat(js) => {
                            found = Some(js);
                            break;
                        }
                        EncodingOutcome::Unsat => {
                            push_smt(&mut certificate, ii, l);
                            if l == to && ii_proven && optimal && length_proven {
                                lower_bound = ii + 1;
                            }
                        }
                        EncodingOutcome::Unknown(why) => {
                            debug!(ii, l, why, "SMT gave up");
                            ii_proven = false;
                            length_proven = false;
                        }
                    }
                    l += 1;
                }
            }
            Encoding::Default | Encoding::Int => {
                // Same answer as the upward search: ask for L <= to at once;
                // if satisfiable, bisect down to the smallest satisfiable L.
                // Unsatisfiability of "L <= x" refutes every L in [from, x].
                let ms = budget_ms(&started);
                queries += 1;
                let t0 = Instant::now();
                let answer = encoding.solve(to, ms);
                debug!(
                    ii,
                    to,
                    seconds = t0.elapsed().as_secs_f64(),
                    sat = matches!(answer, EncodingOutcome::Sat(_)),
                    "joint existence query"
                );
                match answer {
                    EncodingOutcome::Unsat => {
                        certificate.push(JointRefuted::Smt {
                            ii,
                            from_length: from,
                            to_length: to,
                        });
                        if ii_proven && optimal {
                            lower_bound = ii + 1;
                        }
                    }
                    EncodingOutcome::Unknown(why) => {
                        debug!(ii, why, "SMT gave up");
                        ii_proven = false;
                    }
                    EncodingOutcome::Sat(mut best) => {
                        let mut lo = from; // every L < lo is refuted
                        let mut refuted_to: Option<u32> = None;
                        // The answer is usually Len(M) itself: ask for it first.
                        if best.schedule.length > from {
                            let ms = budget_ms(&started);
                            queries += 1;
                            match encoding.solve(from, ms) {
                                EncodingOutcome::Sat(js) => best = js,
                                EncodingOutcome::Unsat => {
                                    lo = from + 1;
                                    refuted_to = Some(from);
                                }
                                EncodingOutcome::Unknown(_) => length_proven = false,
                            }
                        }
                        while length_proven && lo < best.schedule.length {
                            let mid = lo + (best.schedule.length - 1 - lo) / 2;
                            let ms = budget_ms(&started);
                            queries += 1;
                            let t0 = Instant::now();
                            let answer = encoding.solve(mid, ms);
                            debug!(
                                ii,
                                mid,
                                seconds = t0.elapsed().as_secs_f64(),
                                sat = matches!(answer, EncodingOutcome::Sat(_)),
                                "joint query"
                            );
                            match answer {
                                EncodingOutcome::Sat(js) => best = js,
                                EncodingOutcome::Unsat => {
                                    lo = mid + 1;
                                    refuted_to = Some(mid);
                                }
                                EncodingOutcome::Unknown(_) => {
                                    length_proven = false;
                                    break;
                                }
                            }
                        }
                        if let Some(to_length) = refuted_to {
                            certificate.push(JointRefuted::Smt {
                                ii,
                                from_length: from,
                                to_length,
                            });
                        }
                        // Prefer the fewest compute groups at this (I, L). This is
                        // a refinement, not part of the optimum, so each query gets
                        // a deterministic resource budget (z3 rlimit) rather than a
                        // clock: the same input gives the same answer anywhere.
                        let used = best.group.iter().copied().max().unwrap_or(0);
                        for k in 1..used {
                            let ms = budget_ms(&started);
                            queries += 1;
                            encoding.set_rlimit(GROUP_RLIMIT);
                            let answer = encoding.solve_within(best.schedule.length, Some(k), ms);
                            encoding.set_rlimit(0);
                            if let EncodingOutcome::Sat(js) = answer {
                                best = js;
                                break;
                            }
                        }
                        // Then the fewest values crossing between compute
                        // groups (each crossing is a shared-memory channel in
                        // Triton's warp specialization), by bisection under
                        // the same deterministic budget.
                        let used = best.group.iter().copied().max().unwrap_or(0);
                        let pairs = cross_pairs(p);
                        let crossings = |js: &JointSchedule| {
                            pairs
                                .iter()
                                .filter(|&&(u, v)| js.group[u] != js.group[v])
                                .count() as u32
                        };
                        let (mut lo, mut hi) = (0u32, crossings(&best));
                        while lo < hi && left(&started) > 0.0 {
                            let mid = lo + (hi - lo) / 2;
                            let ms = budget_ms(&started);
                            queries += 1;
                            encoding.set_rlimit(GROUP_RLIMIT);
                            let answer =
                                encoding.solve_limited(best.schedule.length, Some(used), mid, ms);
                            encoding.set_rlimit(0);
                            match answer {
                                Some(EncodingOutcome::Sat(js)) => {
                                    hi = crossings(&js).min(mid);
                                    best = js;
                                }
                                Some(EncodingOutcome::Unsat) => lo = mid + 1,
                                _ => break,
                            }
                        }
                        found = Some(best);
                    }
                }
            }
        }
        if let Some(js) = found {
            let violations = checker::check_joint(p, &js, &opts.warps);
            if !violations.is_empty() {
                return Err(JointError::CheckerRejected(violations));
            }
            let streaming = streams
                .iter()
                .map(|&v| {
                    let raw = p.ops[v].stream_cycles;
                    let per_iteration = ii as f64 * p.cycle_scale;
                    Streaming {
                        op: p.ops[v].name.clone(),
                        raw_cycles: raw,
                        prefetch: ((raw as f64 / per_iteration).ceil() as u32).max(1),
                    }
                })
                .collect();
            return Ok(JointResult {
                schedule: js,
                encoding: opts.encoding,
                warps: opts.warps,
                res_mii: res,
                rec_mii: rec,
                modulo_length: base,
                certificate,
                ii_proven,
                length_proven: length_proven && optimal,
                streaming,
                seconds: started.elapsed().as_secs_f64(),
                queries,
            });
        }
        ii += 1;
    }
    Err(JointError::Exhausted { cap })
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

/// Optimal modulo scheduling at `ii` in SMT (rules 1-4 of the checker):
/// bisects the length between a lower bound and the first schedule found.
fn smt_modulo(
    p: &Problem,
    ii: u32,
    encoding: Encoding,
    seed: u32,
    seconds: f64,
    queries: &mut u32,
) -> zlp::ZlpOutcome {
    let started = Instant::now();
    let ms =
        |started: &Instant| ((seconds - started.elapsed().as_secs_f64()) * 1000.0).max(1.0) as u32;
    let mut enc: Box<dyn JointEncoding + '_> = match encoding {
        Encoding::Int => Box::new(int_encoding::IntEncoding::modulo_only(p, seed)),
        _ => Box::new(sat_encoding::SatEncoding::modulo_only(p, seed)),
    };
    enc.set_interval(ii);
    // As the ZLP: a short horizon first (a schedule found there is no longer
    // than the optimum's bound), the proven horizon only if that fails.
    let full = u32::try_from(zlp::horizon(p, ii)).unwrap_or(u32::MAX);
    let short = u32::try_from(zlp::first_horizon(p, ii))
        .unwrap_or(u32::MAX)
        .min(full);
    *queries += 1;
    let t0 = Instant::now();
    let first = enc.solve(short, ms(&started));
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
            enc.solve(full, ms(&started))
        }
        other => other,
    };
    let mut best = match first {
        EncodingOutcome::Sat(js) => js.schedule,
        EncodingOutcome::Unsat => return zlp::ZlpOutcome::Infeasible,
        EncodingOutcome::Unknown(why) => return zlp::ZlpOutcome::Unknown(why),
    };
    let mut lo = length_lower_bound(p);
    while lo < best.length {
        let mid = lo + (best.length - 1 - lo) / 2;
        *queries += 1;
        let t0 = Instant::now();
        let answer = enc.solve(mid, ms(&started));
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
    zlp::ZlpOutcome::Feasible {
        schedule: best,
        optimal: true,
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
            .any(|e| e.from == v && (e.delay > 0 || (e.to == v && e.distance > 0)));
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
