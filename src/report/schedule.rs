//! The typed report of `--twill-schedule` (schema `twill.schedule-report/1`,
//! docs/report-schema.md): one [`LoopRecord`] per loop the pass sees and one
//! [`FunctionRecord`] per kernel with loops. The pass's remarks are rendered
//! from these records ([`LoopRecord::remark`], [`FunctionRecord::remark`]),
//! so the prose and the JSON never disagree; tools read the JSON.
//!
//! Cycle counts are raw machine cycles (normalized units times the
//! problem's scale), rounded half to even as the remarks print them.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The schema name and version of the document; a change that removes or
/// retypes a field bumps the version, new optional fields do not.
pub const SCHEMA: &str = "twill.schedule-report/1";

/// One `--twill-schedule` run: every loop, then every kernel with loops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleReport {
    pub schema: String,
    pub loops: Vec<LoopRecord>,
    pub functions: Vec<FunctionRecord>,
}

impl Default for ScheduleReport {
    fn default() -> Self {
        ScheduleReport {
            schema: SCHEMA.to_string(),
            loops: Vec::new(),
            functions: Vec::new(),
        }
    }
}

/// Scheduled (twill's attributes written) or skipped (the loop left as it
/// was: Triton's own schedule applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Scheduled,
    Skipped,
}

/// Why a loop was skipped; serialized as a stable snake_case code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The loop is not a candidate as found (e.g. inside a
    /// `ttg.warp_specialize` partition under `scope=ws`).
    NotExtracted,
    /// `ctas` > 1 on a warp-specialized loop.
    CtasWarpSpecialized,
    /// `ctas` CTAs do not fit the machine's SM with this loop's warps.
    CtasUnfit,
    /// The body holds what the lowering does not support (control flow,
    /// an op the machine's rules do not cover).
    NotLowered,
    /// No op of the body costs anything on the machine.
    NothingToSchedule,
    /// The loop's graph could not be priced on the machine.
    PricingFailed,
    /// The solver found no schedule (within the time limit or at all).
    NoSchedule,
    /// The independent checker rejected the solver's schedule.
    CheckerRejected,
    /// The prefetch rings do not fit in shared memory.
    SharedMemoryExceeded,
    /// The attributes would break Triton's contract.
    ContractViolation,
    /// Writing the attributes failed.
    WriteFailed,
    /// A panic inside twill (a bug); the loop is left as it was.
    InternalError,
    /// `lower=only`: the loop could not be lowered (the record's text says
    /// why), and that option writes no attributes.
    LoweringRefused,
    /// Triton's own schedule of the loop (on it when the pass ran) is
    /// better in twill's model than the schedule twill found within its
    /// budget: Triton's is kept (the record's text gives both).
    TritonBetter,
    /// A loop without warp partitions whose own Triton schedule reaches
    /// the same I in twill's model as twill's, where the tie goes to
    /// Triton's (`ties=triton`, or `ties=deeper` with Triton's schedule
    /// deeper): Triton's is kept (the record's text gives both, and why).
    TritonAsGood,
    /// Where a tie would keep Triton's schedule (as for
    /// [`SkipReason::TritonAsGood`]), the evaluation of Triton's schedule
    /// ran out of its budget at twill's I: it may tie, and nothing shows
    /// twill's is better, so Triton's is kept.
    TritonMayTie,
    /// A loop twill lowered earlier (marked `twill.lowered`): it runs as
    /// twill's warp-specialized code, not as a candidate.
    LoweredByTwill,
    /// What twill would write is what Triton writes by itself: the user's
    /// `num_stages` is 1 under the stage bound (Triton does not pipeline
    /// the loop, and within one stage no load is issued ahead), or the
    /// schedule's stages are Triton's own assignment at `num_stages`
    /// ([`crate::backend::stages`]). The loop is left to Triton.
    SameAsTriton,
    /// The back end's stages exceed the user's `num_stages` (a load moved
    /// a stage deeper after the solve); the bound holds, so the loop is
    /// left to Triton.
    NumStagesExceeded,
    /// `unverifiable=skip`: Triton warp-specializes the loop on a target
    /// whose partitions the pipeline verifier does not model (sm100), so a
    /// host that verifies every pipeline would replace any schedule by
    /// Triton's own: the loop is left to Triton before it is solved.
    Unverifiable,
}

/// What the loop costs at least and at most: the busiest unit's cycles per
/// iteration and the ops back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub resource_cycles: i64,
    pub sequential_cycles: i64,
}

/// Raw cycles one iteration keeps a unit busy (not rounded by
/// normalization), per instance of the unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitCycles {
    pub unit: String,
    pub cycles: u64,
}

/// One loop the pass saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopRecord {
    /// Position among the pass's candidate loops, module order.
    pub index: u32,
    /// The loop's name (kernel and position, e.g. `matmul_kernel_loop1`);
    /// absent when the loop could not be extracted.
    pub name: Option<String>,
    /// The enclosing function's symbol name.
    pub function: Option<String>,
    /// The loop's MLIR location, printed.
    pub location: String,
    /// The `ttg.warp_specialize` op (numbered in module order) whose
    /// partition the loop is: loops with the same number run concurrently.
    pub warp_specialize: Option<u32>,
    pub decision: Decision,
    /// Present when skipped.
    pub reason: Option<SkipReason>,
    /// Why it was skipped, in words (empty when scheduled).
    pub text: String,
    /// Present when the loop was priced (a `no_schedule` skip included).
    pub bounds: Option<Bounds>,
    /// Per-unit cycles per iteration (units it does not use left out).
    pub units: Vec<UnitCycles>,
    /// Present when scheduled.
    pub schedule: Option<ScheduledLoop>,
    /// Present when skipped as `triton_as_good`, `triton_may_tie` or
    /// `triton_better`: twill's schedule against Triton's own, both in
    /// twill's model.
    #[serde(default)]
    pub compared: Option<Compared>,
    /// Seconds spent on the loop (extraction to write-back).
    pub solve_seconds: f64,
}

/// The I of the schedule twill found for a loop it left to Triton's own
/// schedule, and that schedule, both in twill's model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compared {
    /// twill's I, normalized and in raw cycles.
    pub ii: u32,
    pub ii_cycles: i64,
    pub triton: TritonSchedule,
}

/// The schedule twill wrote for a loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledLoop {
    /// I and L in normalized cycles, and in raw cycles.
    pub ii: u32,
    pub ii_cycles: i64,
    pub length: u32,
    pub length_cycles: i64,
    /// Pipeline stages written (max stage + 1).
    pub stages: u32,
    /// Warp groups the solver used (1 without warp specialization).
    pub warp_groups: u32,
    pub partitions: Partitions,
    /// Ops of the loop's dependence graph.
    pub ops: u32,
    pub proof: Proof,
    /// One per streaming load, in the solver's order.
    pub prefetch: Vec<Prefetch>,
    /// Present when the loop has streaming loads.
    pub loads: Option<Loads>,
    /// `length` (the paper's shortest L) or `slack`.
    pub objective: String,
    /// Under `objective=slack`: the latency slack achieved (absent when no
    /// two asynchronous ops are joined by dependences).
    pub latency_slack: Option<SlackRecord>,
    /// CTAs per SM the loop was solved for (`ctas`).
    pub ctas: u32,
    /// Present when `ctas` > 1: the share of the SM it was solved within.
    pub sharing: Option<Sharing>,
    /// The solver's answer came from the schedule cache (`cache=`; checked
    /// again, as a fresh one).
    #[serde(default)]
    pub cached: bool,
    /// Present under `lower=force`: the loop lowered to warp-specialized
    /// TTGIR, or why not (it then has the attributes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowering: Option<Lowering>,
    /// Present when the loop carried Triton's own schedule: that schedule
    /// in twill's model, next to twill's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton: Option<TritonSchedule>,
    /// Present when the user's `num_stages` is known (the `num-stages`
    /// option or the loop's `tt.num_stages`): the bound, and why the
    /// schedule has the stages it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_stages: Option<NumStages>,
}

/// Triton's own schedule of a loop (`loop.stage` of each op, written by its
/// `schedule_loops`) evaluated in twill's model: the smallest I at which a
/// joint schedule keeps every op in Triton's stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TritonSchedule {
    /// Triton's stages (its last stage + 1).
    pub stages: u32,
    /// The smallest such I, normalized and in raw cycles; absent when the
    /// evaluation's budget ran out first (`at_least` then bounds it).
    pub ii: Option<u32>,
    pub ii_cycles: Option<i64>,
    /// Every smaller I is refuted for Triton's stages.
    pub at_least: u32,
}

impl TritonSchedule {
    /// ` [Triton's schedule: 3 stages, I=40 (~4000 cycles) in twill's model]`.
    pub fn words(&self) -> String {
        match (self.ii, self.ii_cycles) {
            (Some(ii), Some(c)) => format!(
                " [Triton's schedule: {} stages, I={ii} (~{c} cycles) in twill's model]",
                self.stages
            ),
            _ => format!(
                " [Triton's schedule: {} stages, I >= {} in twill's model (not evaluated further within the budget)]",
                self.stages, self.at_least
            ),
        }
    }
}

/// The user's `num_stages` and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumStages {
    /// The user's `num_stages` for this loop.
    pub requested: u32,
    /// `option` (the pass's `num-stages`, Triton's `num_stages`) or `loop`
    /// (the loop's own `tt.num_stages`, from `tl.range(num_stages=...)`).
    pub source: String,
    /// `bound` (at most `requested` stages, the default) or `free`.
    pub mode: String,
    /// The Is below the answer's where the bound cut the length range the
    /// search covers (a schedule with more stages might exist there);
    /// empty when it cut nothing below the answer's I.
    pub cut_below: Vec<u32>,
    /// Why the schedule has the stages it has, in words (the remark's).
    pub text: String,
}
/// What `lower=` made of a scheduled loop (docs/ws-lowering.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lowering {
    /// The loop was replaced by a `ttg.warp_specialize` op.
    pub lowered: bool,
    /// The pipeline verifier proved the lowered code before it was emitted
    /// (`lower=on`/`only`; false under `force` and when not lowered).
    pub verified: bool,
    /// The plan in words, or the refusal.
    pub text: String,
    /// Why not, when not lowered.
    pub refused: Option<crate::backend::ws::LowerSkip>,
    /// Slots per ring, bytes per slot (all loads of a trip) and shared
    /// memory of the rings and barriers, when lowered.
    pub depth: Option<u32>,
    pub expect_bytes: Option<u64>,
    pub smem_bytes: Option<u64>,
    /// Compute partitions (the default region and the workers), when
    /// lowered.
    #[serde(default)]
    pub compute_partitions: Option<u32>,
}

impl Lowering {
    pub fn remark(&self) -> String {
        if self.lowered {
            format!("twill: {}", self.text)
        } else {
            format!(
                "twill: lowering refused: {}; the schedule is written as attributes",
                self.text
            )
        }
    }
}

/// What happened to the warp partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionsCode {
    /// twill's partitions were written (`count` of them).
    Written,
    /// `lower=force` replaced the loop by a `ttg.warp_specialize` (`count`
    /// partitions, the default region included); no attributes.
    Lowered,
    /// Stages only: no schedule met Triton's colocation rules.
    LeftToTritonRules,
    /// Stages only: Triton before 3.7 with several warp-specialized loops.
    LeftToTritonSeveralLoops,
    /// Stages only: `partitions=false`.
    LeftToTritonOption,
    /// Not warp-specialized: Hopper's needs num_warps = 4.
    NoneNumWarps,
    /// Not warp-specialized: the loop is not marked `tt.warp_specialize`.
    NoneNotMarked,
    /// Not warp-specialized: `ws=false`.
    NoneWsOff,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partitions {
    pub code: PartitionsCode,
    /// Partitions written (`written` only).
    pub count: Option<u32>,
    /// The remark's words for it.
    pub text: String,
}

/// The proof status of a written schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// The independent checker accepted the schedule (always true for a
    /// written one: a rejected schedule is a `checker_rejected` skip).
    pub checker_accepted: bool,
    pub ii_proven: bool,
    pub length_proven: bool,
    /// The optimum is under Triton's colocation rules, not of the loop alone.
    pub under_partition_rules: bool,
    /// Work the search spent, in z3 resource units (deterministic: the same
    /// on any machine and under any load).
    #[serde(default)]
    pub work: u64,
    /// The loop's share of the kernel's work budget (0: none).
    #[serde(default)]
    pub budget: u64,
    /// The budget ran out before the search was complete: the schedule is
    /// the best found within it, and `ii_proven` / `length_proven` say what
    /// was proven by then.
    #[serde(default)]
    pub budget_spent: bool,
}

/// One streaming load's prefetch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefetch {
    pub op: String,
    /// Iterations ahead that hide its modeled time.
    pub depth: u32,
    /// Extra stages on top (`prefetch=N`, and one under a `loads=auto`
    /// rotation).
    pub extra: u32,
    /// Issued last in the body.
    pub last: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    First,
    Last,
    /// Pointer loads placed apart from descriptor loads.
    FirstAndLast,
}

/// Where the streaming loads go and how far ahead they are issued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loads {
    pub placement: Placement,
    /// The least, over the loads, of iterations ahead times the iteration's
    /// cycles minus the load's modeled time; negative: exposed latency.
    pub lead_cycles: i64,
    /// Present when `loads=auto` rotated the loop (all loads last, one
    /// stage deeper; that stage is in `Prefetch::extra` but was not asked
    /// for): the mixed loop that caused it.
    pub rotated_by: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlackRecord {
    pub cycles: i64,
    pub proven: bool,
    /// Algorithm 1's shortest L at this I, and the slack it had.
    pub shortest_length: u32,
    pub shortest_length_slack_cycles: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sharing {
    pub regs_per_thread: u32,
    pub smem_bytes: u64,
    /// An iteration's cycles with the SM's units shared by the CTAs.
    pub iteration_cycles: i64,
}

/// A kernel with loops: the critical path of its code outside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionRecord {
    pub function: String,
    pub location: String,
    /// Absent when it could not be estimated (`outside_error` says why).
    pub outside_cycles: Option<u64>,
    pub outside_error: Option<String>,
}

/// Raw cycles as the report (and the remark) gives them.
pub fn cycles(raw: f64) -> i64 {
    raw.round_ties_even() as i64
}

impl LoopRecord {
    /// The remark the pass emits for this loop.
    pub fn remark(&self) -> String {
        let mut msg = match &self.schedule {
            Some(s) => s.remark(self),
            None => {
                let mut why = self.text.clone();
                if let Some(b) = self.bounds {
                    let _ = write!(
                        why,
                        " [resource bound ~{} cycles, sequential ~{} cycles]",
                        b.resource_cycles, b.sequential_cycles
                    );
                    why.push_str(&unit_note(&self.units));
                }
                format!("twill: skipped loop: {why}; Triton's own schedule applies")
            }
        };
        if let Some(w) = self.warp_specialize {
            let _ = write!(msg, " [warp_specialize #{w}]");
        }
        msg
    }
}

/// ` [units per iteration: TC 1024, SFU 520 cycles]` (empty without units).
fn unit_note(units: &[UnitCycles]) -> String {
    if units.is_empty() {
        return String::new();
    }
    let used: Vec<String> = units
        .iter()
        .map(|u| format!("{} {}", u.unit, u.cycles))
        .collect();
    format!(" [units per iteration: {} cycles]", used.join(", "))
}

impl ScheduledLoop {
    fn remark(&self, record: &LoopRecord) -> String {
        let name = record.name.as_deref().unwrap_or("?");
        let mut msg = format!(
            "twill: scheduled {name}: I={} (~{} cycles) L={} stages={} {}, {} ops in the graph, {:.2}s ({}",
            self.ii,
            self.ii_cycles,
            self.length,
            self.stages,
            self.partitions.text,
            self.ops,
            record.solve_seconds,
            self.proof.words()
        );
        if self.proof.under_partition_rules {
            msg.push_str(" under Triton's partition rules");
        }
        if self.proof.budget_spent {
            let _ = write!(
                msg,
                "; work budget of {} spent: the best schedule found within it",
                work_words(self.proof.budget)
            );
        }
        if !self.prefetch.is_empty() {
            let pf: Vec<String> = self.prefetch.iter().map(Prefetch::words).collect();
            let _ = write!(msg, "; {}", pf.join(", "));
        }
        if self.cached {
            msg.push_str("; from the cache");
        }
        msg.push(')');
        self.objective_note(&mut msg);
        if let Some(t) = &self.triton {
            msg.push_str(&t.words());
        }
        if let Some(l) = &self.loads {
            l.note(name, &mut msg);
        }
        let _ = write!(
            msg,
            " [resource bound ~{} cycles, L ~{} cycles]",
            record.bounds.map_or(0, |b| b.resource_cycles),
            self.length_cycles
        );
        msg.push_str(&unit_note(&record.units));
        if let Some(n) = &self.num_stages {
            let _ = write!(
                msg,
                " [num_stages={} ({}): {}]",
                n.requested, n.source, n.text
            );
        }
        if let Some(sh) = &self.sharing {
            let _ = write!(
                msg,
                " [ctas={}: within {} registers per thread and {} bytes of shared memory; an iteration ~{} cycles with the SM shared]",
                self.ctas, sh.regs_per_thread, sh.smem_bytes, sh.iteration_cycles
            );
        }
        msg
    }

    /// Under `objective=slack`: the slack of the answer and of the shortest L.
    fn objective_note(&self, msg: &mut String) {
        if self.objective != "slack" {
            return;
        }
        match &self.latency_slack {
            Some(ls) => {
                let _ = write!(
                    msg,
                    " [objective slack: latency slack ~{} cycles ({}), the shortest L={} has ~{}]",
                    ls.cycles,
                    if ls.proven {
                        "the most at this I and stage count within its groups and crossings"
                    } else {
                        "not proven the most"
                    },
                    ls.shortest_length,
                    ls.shortest_length_slack_cycles
                );
            }
            None => msg.push_str(
                " [objective slack: no two asynchronous ops joined by dependences; L is the shortest]",
            ),
        }
    }
}

/// A work amount in z3 resource units, in millions (`12.5M units`).
pub fn work_words(units: u64) -> String {
    format!("{:.1}M units", units as f64 / 1e6)
}

impl Proof {
    fn words(&self) -> &'static str {
        match (self.ii_proven, self.length_proven) {
            (true, true) => "proven optimal",
            (true, false) => "I proven optimal, L not proven",
            _ => "not proven optimal",
        }
    }
}

impl Prefetch {
    /// `a prefetch 2`, or `a prefetch 2+1` with extra stages.
    fn words(&self) -> String {
        if self.extra > 0 {
            format!("{} prefetch {}+{}", self.op, self.depth, self.extra)
        } else {
            format!("{} prefetch {}", self.op, self.depth)
        }
    }
}

impl Loads {
    fn note(&self, loop_name: &str, msg: &mut String) {
        let place = match self.placement {
            Placement::First => "first",
            Placement::Last => "last",
            Placement::FirstAndLast => "first and last",
        };
        let _ = write!(
            msg,
            " [loads {place}: lead over the load time ~{} cycles]",
            self.lead_cycles
        );
        match &self.rotated_by {
            Some(by) if by == loop_name => msg.push_str(
                " [loads=auto: descriptor and pointer loads mixed, all last, one stage deeper]",
            ),
            Some(by) => {
                let _ = write!(
                    msg,
                    " [loads=auto: {by} of this kernel mixes descriptor and pointer loads, all last, one stage deeper]"
                );
            }
            None => {}
        }
    }
}

impl FunctionRecord {
    /// `twill: outside loops of @k: ~N cycles per CTA (...)`, when estimated.
    pub fn remark(&self) -> Option<String> {
        self.outside_cycles.map(|c| {
            format!(
                "twill: outside loops of @{}: ~{c} cycles per CTA (critical path of the code before, between and after its loops)",
                self.function
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheduled() -> LoopRecord {
        LoopRecord {
            index: 0,
            name: Some("k_loop1".into()),
            function: Some("k".into()),
            location: "loc(\"k.py\":3:4)".into(),
            warp_specialize: None,
            decision: Decision::Scheduled,
            reason: None,
            text: String::new(),
            bounds: Some(Bounds {
                resource_cycles: 500,
                sequential_cycles: 900,
            }),
            units: vec![
                UnitCycles {
                    unit: "TC".into(),
                    cycles: 512,
                },
                UnitCycles {
                    unit: "TMA".into(),
                    cycles: 64,
                },
            ],
            schedule: Some(ScheduledLoop {
                ii: 2,
                ii_cycles: 527,
                length: 3,
                length_cycles: 790,
                stages: 3,
                warp_groups: 1,
                partitions: Partitions {
                    code: PartitionsCode::NoneNotMarked,
                    count: None,
                    text: "no partitions (the loop is not marked tt.warp_specialize)".into(),
                },
                ops: 3,
                proof: Proof {
                    checker_accepted: true,
                    ii_proven: true,
                    length_proven: true,
                    under_partition_rules: false,
                    work: 0,
                    budget: 0,
                    budget_spent: false,
                },
                prefetch: vec![Prefetch {
                    op: "a".into(),
                    depth: 2,
                    extra: 1,
                    last: true,
                }],
                loads: Some(Loads {
                    placement: Placement::Last,
                    lead_cycles: -229,
                    rotated_by: None,
                }),
                objective: "length".into(),
                latency_slack: None,
                ctas: 1,
                cached: false,
                sharing: None,
                lowering: None,
                num_stages: None,
                triton: None,
            }),
            compared: None,
            solve_seconds: 0.041,
        }
    }

    #[test]
    fn the_remark_is_rendered_from_the_record() {
        let r = scheduled();
        assert_eq!(
            r.remark(),
            "twill: scheduled k_loop1: I=2 (~527 cycles) L=3 stages=3 no partitions (the loop is not marked tt.warp_specialize), \
             3 ops in the graph, 0.04s (proven optimal; a prefetch 2+1) [loads last: lead over the load time ~-229 cycles] \
             [resource bound ~500 cycles, L ~790 cycles] [units per iteration: TC 512, TMA 64 cycles]"
        );
        let mut skipped = scheduled();
        skipped.schedule = None;
        skipped.decision = Decision::Skipped;
        skipped.reason = Some(SkipReason::NoSchedule);
        skipped.text = "no schedule: timed out".into();
        skipped.warp_specialize = Some(1);
        assert_eq!(
            skipped.remark(),
            "twill: skipped loop: no schedule: timed out [resource bound ~500 cycles, sequential ~900 cycles] \
             [units per iteration: TC 512, TMA 64 cycles]; Triton's own schedule applies [warp_specialize #1]"
        );
    }

    #[test]
    fn reason_codes_are_stable_strings_and_the_document_round_trips() {
        let code = serde_json::to_string(&SkipReason::SharedMemoryExceeded).unwrap();
        assert_eq!(code, "\"shared_memory_exceeded\"");
        let doc = ScheduleReport {
            loops: vec![scheduled()],
            ..ScheduleReport::default()
        };
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.starts_with("{\"schema\":\"twill.schedule-report/1\""));
        let back: ScheduleReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn the_num_stages_record_is_in_the_remark_and_round_trips() {
        let mut r = scheduled();
        let s = r.schedule.as_mut().unwrap();
        s.num_stages = Some(NumStages {
            requested: 4,
            source: "loop".into(),
            mode: "bound".into(),
            cut_below: vec![],
            text: "3 stages, fewer: why".into(),
        });
        assert!(r
            .remark()
            .ends_with("[units per iteration: TC 512, TMA 64 cycles] [num_stages=4 (loop): 3 stages, fewer: why]"));
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"num_stages\":{\"requested\":4,\"source\":\"loop\""));
        let back: LoopRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        // Absent, the field is not written (a reader of the older records
        // sees no change).
        assert!(!serde_json::to_string(&scheduled())
            .unwrap()
            .contains("num_stages"));
        for (code, text) in [
            (SkipReason::SameAsTriton, "\"same_as_triton\""),
            (SkipReason::TritonAsGood, "\"triton_as_good\""),
            (SkipReason::TritonMayTie, "\"triton_may_tie\""),
            (SkipReason::NumStagesExceeded, "\"num_stages_exceeded\""),
            (SkipReason::Unverifiable, "\"unverifiable\""),
        ] {
            assert_eq!(serde_json::to_string(&code).unwrap(), text);
        }
    }

    #[test]
    fn cycles_round_as_the_remarks_print_them() {
        for x in [0.5, 1.5, 2.5, -229.4, 526.6, 1e6 + 0.5] {
            assert_eq!(cycles(x).to_string(), format!("{x:.0}"), "{x}");
        }
    }
}
