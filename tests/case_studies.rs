//! The paper's case studies (section 6) on twill's FlashAttention graphs:
//! the structure of the schedules the default encoding proves optimal.

use twill::checker::{check_joint, latency_slack, WarpConfig};
use twill::graph::load;
use twill::joint::{self, Encoding, JointOptions, JointRefuted, JointResult, Objective};
use twill::problem::{BuildOptions, Problem};
use twill::Machine;

fn solve(graph: &str, machine: &str, groups: u32) -> (Problem, JointResult) {
    solve_for(graph, machine, groups, Objective::Length)
}

fn solve_for(
    graph: &str,
    machine: &str,
    groups: u32,
    objective: Objective,
) -> (Problem, JointResult) {
    let g = load::load_file(std::path::Path::new(&format!(
        "examples/graphs/{graph}.toml"
    )))
    .unwrap();
    let m = Machine::select(machine).unwrap();
    let (p, _) = Problem::build(&g, &m, BuildOptions::default()).unwrap();
    let warps = WarpConfig {
        groups,
        reg_limit: m.warps.max_regs_per_thread,
        cross_warp: true,
    };
    let r = joint::solve(
        &p,
        JointOptions {
            encoding: Encoding::Default,
            warps,
            timeout: 120.0,
            seed: 0,
            threads: 0,
            objective,
            stage_bound: None,
            budget: 0,
            refine_groups: true,
        },
    )
    .unwrap();
    let (view, _) = joint::streaming_view(&p);
    assert!(check_joint(&view, &r.schedule, &warps).is_empty());
    assert!(r.ii_proven && r.length_proven, "{graph}: not proven");
    (view, r)
}

fn group_of(p: &Problem, r: &JointResult, name: &str) -> u32 {
    let v = p.ops.iter().position(|o| o.name == name).unwrap();
    r.schedule.group[v]
}

#[test]
fn hopper_forward_is_fa3_ping_pong() {
    let (p, r) = solve("fa_fwd_hopper", "h100", 2);
    let s = &r.schedule.schedule;
    // The tensor core is saturated: I = ResMII.
    assert_eq!(s.ii, r.res_mii);
    // Loads on their own (variable-latency) warp.
    assert_eq!(group_of(&p, &r, "load_k"), 0);
    assert_eq!(group_of(&p, &r, "load_v"), 0);
    // Each sub-tile's GEMMs and exponential on one consumer group, the two
    // sub-tiles on different groups: ping-pong.
    for x in ["a", "b"] {
        let g = group_of(&p, &r, &format!("qk_{x}"));
        assert_eq!(g, group_of(&p, &r, &format!("pv_{x}")));
        assert_eq!(g, group_of(&p, &r, &format!("exp_{x}")));
    }
    assert_ne!(group_of(&p, &r, "qk_a"), group_of(&p, &r, "qk_b"));
    // The pipeline spans two stages (the next QK^T overlaps the softmax).
    assert_eq!(s.copies(), 2);
}

#[test]
fn hopper_forward_with_the_slack_objective_is_fa3_intra_warpgroup() {
    let (p, short) = solve("fa_fwd_hopper", "h100", 2);
    let (q, r) = solve_for("fa_fwd_hopper", "h100", 2, Objective::Slack);
    let (a, s) = (&short.schedule.schedule, &r.schedule.schedule);
    // The same I and stages; a longer L that buys latency slack.
    assert_eq!((s.ii, s.copies()), (a.ii, a.copies()));
    assert!(s.length > a.length);
    let ls = r.latency_slack.unwrap();
    assert!(ls.proven);
    assert_eq!(ls.shortest_length, a.length);
    assert_eq!(Some(ls.cycles), latency_slack(&q, s));
    let before = short.latency_slack.unwrap().cycles;
    assert_eq!(ls.at_shortest_length, Some(before));
    assert!(
        ls.cycles > before + s.ii as i64 / 2,
        "{} vs {before}",
        ls.cycles
    );
    for x in ["a", "b"] {
        let at = |n: &str| s.start[q.ops.iter().position(|o| o.name == n).unwrap()];
        let was = |n: &str| a.start[p.ops.iter().position(|o| o.name == n).unwrap()];
        let (qk, pv) = (format!("qk_{x}"), format!("pv_{x}"));
        // QK^T of iteration j + 1 issues before PV of j (FA3's
        // intra-warpgroup order); the shortest L has PV first.
        assert!(at(&pv) > at(&qk) + s.ii, "{x}: {} {}", at(&qk), at(&pv));
        assert!(was(&pv) < was(&qk) + a.ii, "{x}: {} {}", was(&qk), was(&pv));
        // The same ping-pong groups.
        assert_eq!(group_of(&q, &r, &qk), group_of(&q, &r, &pv));
    }
    assert_ne!(group_of(&q, &r, "qk_a"), group_of(&q, &r, "qk_b"));
}

#[test]
fn hopper_forward_with_one_group_needs_a_larger_interval() {
    let (_, two) = solve("fa_fwd_hopper", "h100", 2);
    let (_, one) = solve("fa_fwd_hopper", "h100", 1);
    assert!(one.schedule.schedule.ii > two.schedule.schedule.ii);
    assert!(one
        .certificate
        .iter()
        .any(|c| matches!(c, JointRefuted::Smt { ii, .. } if *ii == two.schedule.schedule.ii)));
}

#[test]
fn blackwell_forward_without_subtiling_cannot_reach_res_mii() {
    let (_, r) = solve("fa_fwd_blackwell_nosubtile", "b200", 4);
    assert!(r.schedule.schedule.ii > r.res_mii);
    assert!(r
        .certificate
        .iter()
        .any(|c| matches!(c, JointRefuted::Smt { ii, .. } if *ii == r.res_mii)));
}

#[test]
fn hopper_backward_has_no_cross_iteration_overlap() {
    // The paper (section 6.3.1): register capacity rules out ILP across
    // iterations, as in FlashAttention-3.
    let (_, r) = solve("fa_bwd_hopper", "h100", 3);
    let s = &r.schedule.schedule;
    assert_eq!(s.copies(), 1, "L = {} with I = {}", s.length, s.ii);
}
