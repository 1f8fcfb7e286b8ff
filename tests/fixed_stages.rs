//! Another scheduler's stages in twill's model ([`twill::joint::fixed`]):
//! twill's own schedule, moved to those stages by whole Is, answers where
//! the checker accepts it (no search), and is passed over where it breaks
//! a rule.

use std::time::Instant;

use twill::checker::{self, JointSchedule, WarpConfig};
use twill::driver::{self, SolveRequest};
use twill::graph::load;
use twill::joint::fixed::{restaged, smallest_ii, StagesAnswer};
use twill::problem::Problem;
use twill::Machine;

const WARPS: WarpConfig = WarpConfig {
    groups: 1,
    reg_limit: 255,
    cross_warp: true,
};

/// A TMA load, a wgmma accumulating into itself and an epilogue-like op
/// reading the wgmma, priced on the H100.
fn gemm() -> Problem {
    let text = "name = 'g'\n\
         [[op]]\nname = 'load'\ncost = { class = 'tma_load', shape = [128, 64], dtype = 'f16' }\n\
         memory = { smem = 16384 }\nvariable_latency = true\n\
         [[op]]\nname = 'mma'\ncost = { class = 'mma', shape = [64, 128, 64], dtype = 'f16' }\n\
         regs = 64\nwarp_group = true\n\
         [[op]]\nname = 'scale'\ncost = { class = 'alu', shape = [64, 128], dtype = 'f32' }\n\
         regs = 64\n\
         [[edge]]\nfrom = 'load'\nto = 'mma'\n\
         [[edge]]\nfrom = 'mma'\nto = 'mma'\ndistance = 1\n\
         [[edge]]\nfrom = 'mma'\nto = 'scale'\n";
    let g = load::parse("g.toml", text).unwrap();
    let m = Machine::select("h100").unwrap();
    driver::price(&g, &m, 30, 60.0).unwrap().0
}

fn solved(p: &Problem) -> JointSchedule {
    let request = SolveRequest {
        encoding: twill::joint::Encoding::Default,
        warps: WARPS,
        objective: Default::default(),
        seed: 0,
        threads: 1,
        timeout: 60.0,
        stage_bound: None,
        stage_bound_alone: None,
        budget: 0,
        refine_groups: true,
    };
    let r = driver::solve(p, &[], &request, Instant::now())
        .unwrap()
        .result;
    assert!(r.ii_proven);
    r.schedule
}

fn stages_of(js: &JointSchedule) -> Vec<u32> {
    js.schedule
        .start
        .iter()
        .map(|&m| m / js.schedule.ii)
        .collect()
}

#[test]
fn a_schedule_in_its_own_stages_is_its_own_witness() {
    let p = gemm();
    let js = solved(&p);
    let (ii, stages) = (js.schedule.ii, stages_of(&js));
    let top = stages.iter().max().unwrap() + 1;
    assert_eq!(restaged(&p, &js, &stages, top), Some(js.clone()));
    // One resource unit: any query would run out of it.
    let tight = (1, 60_000);
    assert_eq!(
        smallest_ii(&p, WARPS, &stages, (ii, 64), tight, None),
        StagesAnswer::Unknown(ii)
    );
    match smallest_ii(&p, WARPS, &stages, (ii, 64), tight, Some(&js)) {
        StagesAnswer::At(at, w) => assert_eq!((at, *w), (ii, js)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deeper_stages_take_the_hint_moved_by_whole_is() {
    let p = gemm();
    let js = solved(&p);
    let ii = js.schedule.ii;
    // Everything after the load one stage later: the load prefetches one
    // iteration further ahead.
    let stages: Vec<u32> = stages_of(&js)
        .iter()
        .zip(&p.ops)
        .map(|(&s, op)| if op.variable_latency { s } else { s + 1 })
        .collect();
    let searched = smallest_ii(&p, WARPS, &stages, (ii, 64), (0, 60_000), None);
    let hinted = smallest_ii(&p, WARPS, &stages, (ii, 64), (0, 60_000), Some(&js));
    let (StagesAnswer::At(a, _), StagesAnswer::At(b, w)) = (&searched, &hinted) else {
        panic!("{searched:?} / {hinted:?}");
    };
    assert_eq!((*a, *b), (ii, ii));
    assert!(checker::check_joint(&p, w, &WARPS).is_empty());
    assert_eq!(stages_of(w), stages);
    // The residues are the hint's.
    for (m, h) in w.schedule.start.iter().zip(&js.schedule.start) {
        assert_eq!(m % ii, h % ii);
    }
}

#[test]
fn a_hint_that_breaks_a_rule_is_passed_over() {
    let p = gemm();
    let js = solved(&p);
    let (ii, stages) = (js.schedule.ii, stages_of(&js));
    // A compute op in the variable-latency group: the checker refuses it.
    let mut broken = js.clone();
    let mma = p.ops.iter().position(|o| o.name == "mma").unwrap();
    broken.group[mma] = 0;
    assert!(!checker::check_joint(&p, &broken, &WARPS).is_empty());
    let tight = (1, 60_000);
    assert_eq!(
        smallest_ii(&p, WARPS, &stages, (ii, 64), tight, Some(&broken)),
        StagesAnswer::Unknown(ii)
    );
    match smallest_ii(&p, WARPS, &stages, (ii, 64), (0, 60_000), Some(&broken)) {
        StagesAnswer::At(at, w) => {
            assert_eq!(at, ii);
            assert!(checker::check_joint(&p, &w, &WARPS).is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_op_pushed_out_of_its_stage_gives_no_candidate() {
    let p = gemm();
    let js = solved(&p);
    // The load one stage after the wgmma that reads it in the same
    // iteration: the wgmma, delayed behind it, leaves its stage.
    let stages: Vec<u32> = p
        .ops
        .iter()
        .map(|op| u32::from(op.variable_latency))
        .collect();
    assert_eq!(restaged(&p, &js, &stages, 2), None);
    assert!(matches!(
        smallest_ii(
            &p,
            WARPS,
            &stages,
            (js.schedule.ii, 64),
            (0, 60_000),
            Some(&js)
        ),
        StagesAnswer::Inconsistent { .. }
    ));
}
