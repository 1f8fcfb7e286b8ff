//! The stage bound (the user's `num_stages`): the joint search keeps the
//! written stages (the schedule's own plus the deepest prefetch) within it,
//! the checker accepts the answer, and the certificate names the Is where
//! the bound cut the lengths searched.

use std::time::Instant;

use twill::checker::WarpConfig;
use twill::driver::{self, SolveRequest};
use twill::graph::load;
use twill::joint::{JointRefuted, JointResult, StageBound};
use twill::problem::Problem;
use twill::Machine;

fn request(stage_bound: Option<StageBound>) -> SolveRequest {
    SolveRequest {
        encoding: twill::joint::Encoding::Default,
        warps: WarpConfig {
            groups: 1,
            reg_limit: 255,
            cross_warp: true,
        },
        objective: Default::default(),
        seed: 0,
        threads: 1,
        timeout: 60.0,
        stage_bound,
        stage_bound_alone: None,
        budget: 0,
        refine_groups: true,
    }
}

/// The stages the back end writes for `r`: the schedule's own stages plus
/// the deepest prefetch (no extra stages asked for).
fn written_stages(r: &JointResult) -> u32 {
    let s = &r.schedule.schedule;
    let own = s.start.iter().map(|&m| m / s.ii).max().unwrap_or(0) + 1;
    own + r.streaming.iter().map(|x| x.prefetch).max().unwrap_or(0)
}

fn solve(p: &Problem, bound: Option<u32>) -> Result<JointResult, driver::Skip> {
    let bound = bound.map(|stages| StageBound { stages, extra: 0 });
    let r = driver::solve(p, &[], &request(bound), Instant::now())?.result;
    driver::check(p, &r, &request(None).warps)?;
    Ok(r)
}

/// A TMA load feeding a small accumulating wgmma: the load takes longer
/// than an iteration at the minimum I, so the free optimum prefetches it
/// more than one iteration ahead.
fn streaming_gemm(n: u32) -> Problem {
    let text = format!(
        "name = 'g'\n\
         [[op]]\nname = 'load'\ncost = {{ class = 'tma_load', shape = [128, 64], dtype = 'f16' }}\n\
         memory = {{ smem = 16384 }}\nvariable_latency = true\nstreaming = true\n\
         [[op]]\nname = 'mma'\ncost = {{ class = 'mma', shape = [64, {n}, 64], dtype = 'f16' }}\n\
         regs = 64\nwarp_group = true\n\
         [[edge]]\nfrom = 'load'\nto = 'mma'\n\
         [[edge]]\nfrom = 'mma'\nto = 'mma'\ndistance = 1\n"
    );
    let g = load::parse("g.toml", &text).unwrap();
    let m = Machine::select("h100").unwrap();
    driver::price(&g, &m, 30, 60.0).unwrap().0
}

#[test]
fn the_bound_keeps_the_written_stages_and_the_checker_accepts() {
    let p = streaming_gemm(256);
    // Free: I = 2 with the load two iterations ahead, three stages.
    let free = solve(&p, None).unwrap();
    assert_eq!(written_stages(&free), 3);
    assert!(free.ii_proven && free.length_proven);
    assert!(!free
        .certificate
        .iter()
        .any(|c| matches!(c, JointRefuted::StageBound { .. })));
    // Bounded to two: the load may run one iteration ahead only, so I grows
    // until an iteration covers its time; optimal within the bound.
    let bounded = solve(&p, Some(2)).unwrap();
    assert!(written_stages(&bounded) <= 2, "{bounded:?}");
    assert!(bounded.schedule.schedule.ii > free.schedule.schedule.ii);
    assert!(bounded.ii_proven && bounded.length_proven);
    assert_eq!(bounded.streaming[0].prefetch, 1);
    // The I just below is excluded by the bound: the load alone would take
    // both stages there.
    let below = bounded.schedule.schedule.ii - 1;
    assert!(
        bounded.certificate.contains(&JointRefuted::StageBound {
            ii: below,
            max_length: 0
        }),
        "{:?}",
        bounded.certificate
    );
    // A bound at or above the free optimum's stages changes nothing.
    for n in [3, 4] {
        let r = solve(&p, Some(n)).unwrap();
        assert_eq!(
            (r.schedule.schedule.ii, r.schedule.schedule.length),
            (free.schedule.schedule.ii, free.schedule.schedule.length)
        );
    }
}

#[test]
fn extra_stages_count_against_the_bound() {
    let p = streaming_gemm(256);
    // One extra stage of prefetch on top: within three stages the load may
    // be only one iteration ahead by itself, as in the bound of two.
    let extra = StageBound {
        stages: 3,
        extra: 1,
    };
    let r = driver::solve(&p, &[], &request(Some(extra)), Instant::now())
        .unwrap()
        .result;
    let two = solve(&p, Some(2)).unwrap();
    assert_eq!(r.schedule.schedule.ii, two.schedule.schedule.ii);
    // With the extra stage: at most three written.
    assert!(written_stages(&r) + extra.extra <= extra.stages);
}

#[test]
fn a_bound_the_prefetch_alone_fills_has_no_schedule_and_says_what_was_tried() {
    let p = streaming_gemm(256);
    let skip = solve(&p, Some(1)).unwrap_err();
    assert_eq!(skip.reason, twill::report::schedule::SkipReason::NoSchedule);
    assert!(
        skip.text
            .contains("no software-pipelined schedule with I <= ")
            && skip.text.contains("within 1 stage"),
        "{}",
        skip.text
    );
}
