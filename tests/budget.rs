//! The deterministic work budget of the joint search (`JointOptions::budget`):
//! a search cut short by the budget gives the same answer however many
//! threads run it and however busy the machine is, never spends more than
//! the budget, and with enough budget is the unbudgeted search.

use twill::checker::{check_joint, WarpConfig};
use twill::graph::load;
use twill::joint::{self, Encoding, JointError, JointOptions, JointResult, Objective};
use twill::problem::{BuildOptions, Problem};
use twill::Machine;

fn problem(graph: &str) -> (Problem, WarpConfig) {
    let path = format!("examples/graphs/{graph}.toml");
    let g = load::load_file(std::path::Path::new(&path)).unwrap();
    let m = Machine::select("h100").unwrap();
    let (p, _) = Problem::build(&g, &m, BuildOptions::default()).unwrap();
    let warps = WarpConfig {
        groups: 2,
        reg_limit: m.warps.max_regs_per_thread,
        cross_warp: true,
    };
    (p, warps)
}

fn solve(
    p: &Problem,
    warps: WarpConfig,
    budget: u64,
    threads: u32,
) -> Result<JointResult, JointError> {
    joint::solve(
        p,
        JointOptions {
            encoding: Encoding::Default,
            warps,
            timeout: 300.0,
            seed: 0,
            threads,
            objective: Objective::Length,
            budget,
            stage_bound: None,
            refine_groups: true,
        },
    )
}

/// The answer as far as what is written depends on it.
fn key(r: &JointResult) -> (Vec<u32>, Vec<u32>, u32, u64, bool, bool) {
    (
        r.schedule.schedule.start.clone(),
        r.schedule.group.clone(),
        r.schedule.schedule.length,
        r.work,
        r.ii_proven,
        r.length_proven,
    )
}

#[test]
fn a_search_cut_short_gives_the_same_answer_on_any_number_of_threads() {
    let (p, warps) = problem("fa_fwd_hopper");
    let budget = 200_000;
    let one = solve(&p, warps, budget, 1).unwrap();
    assert!(one.budget_spent, "the budget is meant to bind here");
    assert!(one.work <= budget, "spent {} of {budget}", one.work);
    let (view, _) = joint::streaming_view(&p);
    assert!(check_joint(&view, &one.schedule, &warps).is_empty());
    for threads in [1, 2, 3] {
        let again = solve(&p, warps, budget, threads).unwrap();
        assert_eq!(key(&again), key(&one), "threads = {threads}");
    }
}

#[test]
fn enough_budget_is_the_unbudgeted_search() {
    let (p, warps) = problem("gemm_mainloop");
    let free = solve(&p, warps, 0, 0).unwrap();
    assert!(free.ii_proven && free.length_proven && !free.budget_spent);
    let budgeted = solve(&p, warps, 1_000_000_000, 0).unwrap();
    assert!(!budgeted.budget_spent);
    assert!(budgeted.work <= 1_000_000_000);
    // The same schedule (z3 counts a few units more or less with a limit
    // set, so the work is compared at one budget only).
    let (mut a, mut b) = (key(&budgeted), key(&free));
    (a.3, b.3) = (0, 0);
    assert_eq!(a, b);
    // The work is accounted as the sequential search spends it, whatever
    // the threads.
    for threads in [1, 2] {
        let again = solve(&p, warps, 1_000_000_000, threads).unwrap();
        assert_eq!(key(&again), key(&budgeted), "threads = {threads}");
    }
}

#[test]
fn a_budget_too_small_for_any_schedule_says_so() {
    let (p, warps) = problem("fa_bwd_hopper");
    let budget = 200_000;
    for threads in [1, 2] {
        match solve(&p, warps, budget, threads) {
            Err(JointError::Budget {
                lower_bound,
                budget: b,
            }) => {
                assert_eq!(b, budget);
                assert!(lower_bound >= 1);
            }
            other => panic!("threads = {threads}: {other:?}"),
        }
    }
    // The proven answer is there with enough budget.
    assert!(solve(&p, warps, 0, 0).unwrap().ii_proven);
}
