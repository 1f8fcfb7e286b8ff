//! Another scheduler's stage assignment in twill's model: the smallest I at
//! which a joint schedule exists with every op in the stage it was given
//! (its start in [stage * I, (stage + 1) * I)), the times within the stages
//! and the warp groups free. This is the best that assignment can do in the
//! model, so twill's own schedule can be compared with it (Triton's
//! `schedule_loops` is the other scheduler; `driver` reads its stages).

use tracing::debug;

use super::{
    sat_encoding::SatEncoding, streaming_view, work, EncodingOutcome, JointEncoding, Query,
};
use crate::checker::{self, JointSchedule, WarpConfig};
use crate::problem::Problem;

/// What the evaluation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagesAnswer {
    /// The smallest I with such a schedule (every I from the search's start
    /// below it refuted), and the schedule.
    At(u32, Box<JointSchedule>),
    /// No I up to the cap admits one.
    Infeasible,
    /// The stages break a dependence of the problem at any I: `to`'s stage
    /// plus the edge's distance is below `from`'s stage.
    Inconsistent { from: String, to: String },
    /// The budget or the time ran out first; every I below this one is
    /// refuted.
    Unknown(u32),
}

/// Is at most this many are tried, each one query on an encoding of its
/// own (building it costs time the work budget does not count).
pub const MAX_TRIES: u32 = 6;

/// The smallest I in `from..=cap` (at most [`MAX_TRIES`] of them) at which `p` (as the joint search sees
/// it, [`streaming_view`]) has a joint schedule with op `v` in stage
/// `stages[v]`, within `budget` z3 resource units (0: none) and
/// `timeout_ms`. Each I gets a fresh z3 context, so the answer does not
/// depend on the machine or its load. Where `hint` (a joint schedule of
/// `p`) moved to the stages ([`restaged`]) is accepted by the checker, the
/// search stops at its I without a query there.
pub fn smallest_ii(
    p: &Problem,
    warps: WarpConfig,
    stages: &[u32],
    (from, cap): (u32, u32),
    (budget, timeout_ms): (u64, u32),
    hint: Option<&JointSchedule>,
) -> StagesAnswer {
    let (view, _) = streaming_view(p);
    // A dependence u -> v of distance d needs M(v) + d * I >= M(u), so
    // stage(v) + d >= stage(u) at any I.
    if let Some(e) = view
        .edges
        .iter()
        .find(|e| i64::from(stages[e.to]) + i64::from(e.distance) < i64::from(stages[e.from]))
    {
        return StagesAnswer::Inconsistent {
            from: view.ops[e.from].name.clone(),
            to: view.ops[e.to].name.clone(),
        };
    }
    let top = stages.iter().copied().max().unwrap_or(0) + 1;
    let cap = cap.min(from.max(1).saturating_add(MAX_TRIES - 1));
    let mut spent = 0u64;
    for ii in from.max(1)..=cap {
        let left = if budget == 0 {
            0
        } else {
            budget.saturating_sub(spent)
        };
        if let Some(js) = hint
            .filter(|h| h.schedule.ii == ii)
            .and_then(|h| witness(&view, h, stages, top, &warps))
        {
            debug!(ii, "another scheduler's stages at I: the hint, restaged");
            return StagesAnswer::At(ii, Box::new(js));
        }
        if budget > 0 && left == 0 {
            return StagesAnswer::Unknown(ii);
        }
        let (answer, used) = z3::with_z3_config(&z3::Config::new(), || {
            let meter = work::Meter::start(left);
            let mut enc = SatEncoding::new(&view, warps, 0);
            enc.set_interval(ii);
            let q = Query::length(top * ii, timeout_ms)
                .fixed_stages(stages)
                .rlimit(meter.rlimit(0));
            (enc.solve(&q), meter.spent())
        });
        spent += used;
        debug!(ii, spent, "another scheduler's stages at I");
        match answer {
            EncodingOutcome::Sat(js) if checker::check_joint(&view, &js, &warps).is_empty() => {
                return StagesAnswer::At(ii, Box::new(js))
            }
            EncodingOutcome::Sat(_) | EncodingOutcome::Unknown(_) => {
                return StagesAnswer::Unknown(ii)
            }
            EncodingOutcome::Unsat => {}
        }
    }
    if cap < crate::modulo::search_cap(p) {
        StagesAnswer::Unknown(cap + 1)
    } else {
        StagesAnswer::Infeasible
    }
}

/// `hint` in the stages ([`restaged`]) where the checker accepts it.
fn witness(
    view: &Problem,
    hint: &JointSchedule,
    stages: &[u32],
    top: u32,
    warps: &WarpConfig,
) -> Option<JointSchedule> {
    let js = restaged(view, hint, stages, top)?;
    let broken = checker::check_joint(view, &js, warps);
    if let Some(first) = broken.first() {
        debug!(ii = js.schedule.ii, %first, "the hint, restaged, breaks a rule");
        return None;
    }
    Some(js)
}

/// `js` with every op moved to its stage in `stages` by whole Is (its
/// cycle within the stage, hence its residue, kept: the warp groups, the
/// modulo resource use and the concurrency mostly stay as they were), then
/// each op delayed within its stage as far as its dependences need: a
/// candidate for the stages at `js`'s I that the checker judges. None
/// where an op would leave its stage or not fit in `top` stages.
pub fn restaged(
    p: &Problem,
    js: &JointSchedule,
    stages: &[u32],
    top: u32,
) -> Option<JointSchedule> {
    let ii = i64::from(js.schedule.ii);
    if js.schedule.start.len() != p.ops.len()
        || js.group.len() != p.ops.len()
        || stages.len() != p.ops.len()
    {
        return None;
    }
    let moved: Vec<i64> = js
        .schedule
        .start
        .iter()
        .zip(stages)
        .map(|(&m, &s)| i64::from(s) * ii + i64::from(m) % ii)
        .collect();
    // Across warp groups the value is handed over (its spill).
    let start = p.longest_paths_from(moved, |e| {
        let handover = if js.group[e.from] != js.group[e.to] {
            i64::from(p.ops[e.from].spill_cost)
        } else {
            0
        };
        Some(i64::from(e.delay) + handover - ii * i64::from(e.distance))
    })?;
    let fits = (0..p.ops.len()).all(|v| {
        start[v] < (i64::from(stages[v]) + 1) * ii
            && start[v] + i64::from(p.ops[v].cycles) <= i64::from(top) * ii
    });
    fits.then(|| JointSchedule {
        schedule: crate::problem::Schedule::tight(
            p,
            js.schedule.ii,
            start.iter().map(|&m| m as u32).collect(),
        ),
        group: js.group.clone(),
    })
}
