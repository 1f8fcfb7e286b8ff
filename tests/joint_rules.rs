//! One small graph per warp-specialization rule, showing that the rule
//! changes the answer, with both encodings agreeing.

mod common;

use twill::checker::{check_joint, JointSchedule, Violation, WarpConfig};
use twill::graph::load;
use twill::joint::{self, Encoding, JointOptions, JointResult, Objective};
use twill::problem::{BuildOptions, Problem, Schedule};
use twill::Machine;

fn problem(text: &str) -> Problem {
    problem_on(text, false)
}

/// `problem` on the test machine with an asynchronous tensor-core unit or not.
fn problem_on(text: &str, tc_async: bool) -> Problem {
    let g = load::parse("rules.toml", text).unwrap();
    let m = Machine::parse("test.toml", &common::machine_toml_async(1, 1, tc_async)).unwrap();
    Problem::build(&g, &m, BuildOptions::default()).unwrap().0
}

fn both(p: &Problem, groups: u32) -> Option<JointResult> {
    let warps = WarpConfig {
        groups,
        reg_limit: 255,
        cross_warp: true,
    };
    let run = |encoding| {
        joint::solve(
            p,
            JointOptions {
                encoding,
                warps,
                timeout: 60.0,
                seed: 0,
                threads: 1,
                objective: Default::default(),
                stage_bound: None,
                budget: 0,
                refine_groups: true,
            },
        )
    };
    let int = run(Encoding::Int);
    match (run(Encoding::Default), run(Encoding::Paper)) {
        (Ok(a), Ok(b)) => {
            let c = int.expect("int encoding agrees");
            assert_eq!(
                (a.schedule.schedule.ii, a.schedule.schedule.length),
                (c.schedule.schedule.ii, c.schedule.schedule.length),
                "default and int encodings disagree"
            );
            assert!(check_joint(p, &c.schedule, &warps).is_empty());
            assert_eq!(
                (a.schedule.schedule.ii, a.schedule.schedule.length),
                (b.schedule.schedule.ii, b.schedule.schedule.length),
                "encodings disagree"
            );
            for r in [&a, &b] {
                assert!(check_joint(p, &r.schedule, &warps).is_empty());
                assert!(r.ii_proven && r.length_proven);
            }
            Some(a)
        }
        (Err(_), Err(_)) => {
            assert!(int.is_err());
            None
        }
        (a, b) => panic!("one encoding failed: {:?} / {:?}", a.err(), b.err()),
    }
}

/// A and B (200 registers each) are both live until C consumes them.
const TWO_WIDE_VALUES: &str = r#"
[[op]]
name = "A"
cycles = 1
uses = { TC = 1 }
regs = 200
[[op]]
name = "B"
cycles = 1
uses = { TC = 1 }
regs = 200
[[op]]
name = "C"
cycles = 1
uses = { SFU = 1 }
[[edge]]
from = "A"
to = "C"
[[edge]]
from = "B"
to = "C"
"#;

#[test]
fn register_limit_splits_values_across_groups() {
    let p = problem(TWO_WIDE_VALUES);
    assert!(
        both(&p, 1).is_none(),
        "one group of 255 registers cannot hold 400"
    );
    let r = both(&p, 2).unwrap();
    let g = &r.schedule.group;
    assert_ne!(g[0], g[1], "A and B on different groups");
    assert_eq!(r.schedule.schedule.ii, 2);
}

#[test]
fn same_group_keeps_ops_together() {
    // The graph above with A and B colocated: both are live until C issues,
    // 400 registers in one group, so no schedule exists at any I. With B
    // and C colocated instead, A goes to the other group.
    let base = TWO_WIDE_VALUES;
    let together = format!("{base}\n[[same_group]]\nops = [\"A\", \"B\"]\nreason = \"test\"\n");
    assert!(
        both(&problem(&together), 2).is_none(),
        "A and B on one group cannot hold 400 registers"
    );
    let with_c = format!("{base}\n[[same_group]]\nops = [\"B\", \"C\"]\n");
    let r = both(&problem(&with_c), 2).unwrap();
    let g = &r.schedule.group;
    assert_eq!(g[1], g[2], "B and C share a group");
    assert_ne!(g[0], g[1], "A on the other group");
    // The checker names the broken colocation.
    let p = problem(&with_c);
    let js = JointSchedule {
        schedule: r.schedule.schedule.clone(),
        group: vec![1, 1, 2],
    };
    let warps = WarpConfig {
        groups: 2,
        reg_limit: 1000,
        cross_warp: true,
    };
    let v = check_joint(&p, &js, &warps);
    assert!(
        v.iter().any(|x| matches!(x, Violation::SameGroup { set: 0, op, other, .. } if op == "B" && other == "C")),
        "{v:?}"
    );
}

/// C keeps the TC (and its group) busy for 4 cycles; B waits on A with
/// blocking synchronization.
const WAIT_BESIDE_A_GEMM: &str = r#"
[[op]]
name = "C"
cycles = 4
uses = { TC = 1 }
[[op]]
name = "A"
cycles = 1
uses = { SFU = 1 }
[[op]]
name = "B"
cycles = 1
uses = { SFU = 1 }
[[edge]]
from = "A"
to = "B"
blocking = true
"#;

#[test]
fn blocking_wait_cannot_interrupt_its_own_group() {
    let text = WAIT_BESIDE_A_GEMM;
    let p = problem(text);
    assert_eq!(both(&p, 1).unwrap().schedule.schedule.ii, 5);
    let two = both(&p, 2).unwrap();
    assert_eq!(two.schedule.schedule.ii, 4);
    assert_ne!(two.schedule.group[0], two.schedule.group[2]);
    // Without the blocking flag one group suffices at I = 4.
    let p = problem(&text.replace("blocking = true", ""));
    assert_eq!(both(&p, 1).unwrap().schedule.schedule.ii, 4);
}

#[test]
fn blocking_wait_runs_under_an_asynchronous_unit() {
    // The graph above on a machine whose tensor cores are asynchronous (a
    // wgmma is one instruction; the unit finishes it while the warp waits):
    // B's wait no longer interrupts C, and one group reaches I = 4.
    let text = WAIT_BESIDE_A_GEMM;
    let p = problem_on(text, true);
    assert!(p.ops[0].asynchronous && !p.ops[1].asynchronous);
    let one = both(&p, 1).unwrap();
    assert_eq!(one.schedule.schedule.ii, 4);
    // C's 4 cycles fill every residue of I = 4, so B, in C's group, issues
    // while C executes: allowed on this machine, a rule-8 violation where
    // the tensor cores are synchronous.
    assert_eq!(one.schedule.group[0], one.schedule.group[2]);
    let sync = problem_on(text, false);
    let warps = WarpConfig {
        groups: 1,
        reg_limit: 255,
        cross_warp: true,
    };
    let v = check_joint(&sync, &one.schedule, &warps);
    assert!(
        v.iter().any(|x| matches!(x, Violation::Concurrency { blocked, other, .. } if blocked == "B" && other == "C")),
        "{v:?}"
    );
    // A synchronous op of the same group still may not execute under B's
    // wait: with C on the SFU (synchronous) one group needs I = 6 (C, A, B
    // share the SFU) and B never issues while C runs.
    let on_sfu = problem_on(
        &text.replacen("uses = { TC = 1 }", "uses = { SFU = 1 }", 1),
        true,
    );
    assert!(!on_sfu.ops[0].asynchronous);
    let r = both(&on_sfu, 1).unwrap();
    assert_eq!(r.schedule.schedule.ii, 6);
    assert!(check_joint(&on_sfu, &r.schedule, &warps).is_empty());
}

#[test]
fn cross_warp_spill_delays_the_consumer() {
    // X has variable latency, so it lives on group 0 and Y on a compute
    // group: the edge crosses warps and pays X's spill cost of 3.
    let text = r#"
[[op]]
name = "X"
cycles = 1
uses = { TC = 1 }
variable_latency = true
spill_cost = 3
[[op]]
name = "Y"
cycles = 1
uses = { SFU = 1 }
[[edge]]
from = "X"
to = "Y"
"#;
    let r = both(&problem(text), 1).unwrap();
    assert_eq!(r.schedule.group, vec![0, 1]);
    assert_eq!(
        r.schedule.schedule.start[1] - r.schedule.schedule.start[0],
        4
    );
    assert_eq!(r.schedule.schedule.length, 5);
    let r = both(&problem(&text.replace("spill_cost = 3", "")), 1).unwrap();
    assert_eq!(r.schedule.schedule.length, 2);
}

#[test]
fn memory_capacity_limits_overlapping_lifetimes() {
    // A's 600-byte result lives 2 cycles; two instances would need 1200 > 1000.
    let text = r#"
[[op]]
name = "A"
cycles = 1
uses = { TC = 1 }
memory = { smem = 600 }
[[op]]
name = "B"
cycles = 1
uses = { SFU = 1 }
[[edge]]
from = "A"
to = "B"
delay = 2
"#;
    let r = both(&problem(text), 1).unwrap();
    assert_eq!(r.schedule.schedule.ii, 2);
    let r = both(&problem(&text.replace("smem = 600", "smem = 400")), 1).unwrap();
    assert_eq!(r.schedule.schedule.ii, 1);
}

#[test]
fn checker_names_each_joint_rule() {
    let p = problem(
        r#"
[[op]]
name = "X"
cycles = 1
uses = { TC = 1 }
variable_latency = true
spill_cost = 3
regs = 200
[[op]]
name = "Y"
cycles = 2
uses = { SFU = 1 }
regs = 200
[[op]]
name = "Z"
cycles = 1
uses = { TC = 1 }
[[edge]]
from = "X"
to = "Y"
[[edge]]
from = "Y"
to = "Z"
[[edge]]
from = "Y"
to = "Y"
distance = 1
"#,
    );
    let warps = WarpConfig {
        groups: 1,
        reg_limit: 255,
        cross_warp: true,
    };
    // Y waits on X from another group at cycle 1 (needs 1 + 3), Z is put on
    // group 0 although it has fixed latency.
    let js = JointSchedule {
        schedule: Schedule {
            ii: 4,
            start: vec![0, 1, 3],
            length: 4,
        },
        group: vec![0, 1, 0],
    };
    let v = check_joint(&p, &js, &warps);
    assert!(
        v.iter().any(
            |x| matches!(x, Violation::Spill { from, to, spill: 3, .. } if from == "X" && to == "Y")
        ),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|x| matches!(x, Violation::Group { op, group: 0, .. } if op == "Z")),
        "{v:?}"
    );
    // Put Z with Y: Z waits on Y with both in group 1 while Y (2 cycles)... and
    // Y blocks (cross-warp input) while Z of the previous iteration executes.
    let js = JointSchedule {
        schedule: Schedule {
            ii: 2,
            start: vec![0, 4, 6],
            length: 7,
        },
        group: vec![0, 1, 1],
    };
    let v = check_joint(
        &p,
        &js,
        &WarpConfig {
            groups: 1,
            reg_limit: 150,
            cross_warp: true,
        },
    );
    assert!(
        v.iter()
            .any(|x| matches!(x, Violation::Registers { group: 1, .. })),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|x| matches!(x, Violation::Concurrency { blocked, .. } if blocked == "Y")),
        "{v:?}"
    );
    for x in &v {
        assert!(!x.to_string().is_empty());
    }
}

#[test]
fn last_stage_pin_counts_the_latest_occupied_stage() {
    // Found by the property test: the pin asks for no op in a later stage
    // than the pinned one, where stages are those the schedule occupies, not
    // ceil(L / I). I = 2: op0 at 1, op1 at 2 and op2 at 3 put op1 and op2
    // in stage 1 and end at cycle 5.
    let p = problem(
        r#"
name = "pin"
[[op]]
name = "op0"
cycles = 1
uses = { SFU = 1 }
[[op]]
name = "op1"
cycles = 1
uses = { SFU = 1 }
last_stage = true
[[op]]
name = "op2"
cycles = 2
uses = { TC = 1 }
[[edge]]
from = "op0"
to = "op2"
delay = 2
[[edge]]
from = "op1"
to = "op0"
distance = 1
"#,
    );
    let r = both(&p, 1).expect("schedulable");
    assert_eq!((r.schedule.schedule.ii, r.schedule.schedule.length), (2, 5));
}

#[test]
fn last_stage_window_refutes_what_pairwise_bounds_miss() {
    // op0 is pinned to the last stage; op1 and op2 follow it 2 cycles later
    // in the same iteration, so they share its stage: all three issue within
    // one window of I cycles. At I = 4 (ResMII: 4 SFU cycles) op1 and op2
    // can only issue at cycles 2 and 3 of the window, and their two SFU rows
    // collide there, so I = 4 has no schedule; ResMII, RecMII and the
    // pairwise last-stage bound (3) do not see it. The window relaxation
    // proves it, and the exhaustive search agrees.
    let p = problem(
        r#"
name = "window"
[[op]]
name = "op0"
cycles = 1
uses = { TC = 1 }
last_stage = true
[[op]]
name = "op1"
cycles = 2
uses = { SFU = 1 }
[[op]]
name = "op2"
cycles = 2
uses = { SFU = 1 }
[[edge]]
from = "op0"
to = "op1"
delay = 2
[[edge]]
from = "op0"
to = "op2"
delay = 2
"#,
    );
    assert_eq!(twill::modulo::mii::res_mii(&p), 4);
    assert!(twill::modulo::last_stage_bound(&p).is_none_or(|b| b.0 <= 4));
    assert_eq!(
        joint::last_stage_window_refutes(&p, 4, 0, 10_000, joint::WINDOW_RLIMIT),
        Some(3)
    );
    assert_eq!(common::min_length(&p, 4), None);
    assert_eq!(
        joint::last_stage_window_refutes(&p, 5, 0, 10_000, joint::WINDOW_RLIMIT),
        None
    );
    let r = both(&p, 1).expect("schedulable");
    assert_eq!(r.schedule.schedule.ii, 5);
    assert!(r.certificate.iter().any(|c| matches!(
        c,
        joint::JointRefuted::Modulo(twill::modulo::Refuted {
            from: 4,
            to: 4,
            why: twill::modulo::Infeasibility::LastStageWindowSmt { ops: 3 },
        })
    )));
}

const SOFTMAX_BETWEEN_GEMMS: &str = r#"
[[op]]
name = "Q"
cycles = 2
uses = { TC = 1 }
[[op]]
name = "S"
cycles = 3
uses = { SFU = 1 }
[[op]]
name = "P"
cycles = 2
uses = { TC = 1 }
[[edge]]
from = "Q"
to = "S"
delay = 2
[[edge]]
from = "S"
to = "P"
delay = 3
[[edge]]
from = "Q"
to = "P"
delay = 1
[[edge]]
from = "P"
to = "Q"
delay = 2
distance = 1
"#;

#[test]
fn latency_slack_is_the_least_path_slack_between_asynchronous_ops() {
    use twill::checker::latency_slack;
    let p = problem_on(SOFTMAX_BETWEEN_GEMMS, true);
    // (I, issue cycles of Q, S, P, latency slack).
    let cases: [(u32, [u32; 3], i64); 5] = [
        // Q -> P: the heavier path through S (2 + 3) leaves 6 - 0 - 5 = 1;
        // P -> Q of the next iteration: 0 + 8 - 6 - 2 = 0. The least: 0.
        (8, [0, 2, 6], 0),
        (9, [0, 2, 6], 1),
        // Later S and P: more on Q -> P (2), less on P -> Q (9 - 7 - 2 = 0).
        (9, [0, 3, 7], 0),
        (10, [0, 3, 7], 1),
        (11, [0, 3, 7], 2),
    ];
    for (ii, start, slack) in cases {
        let s = Schedule::tight(&p, ii, start.to_vec());
        assert_eq!(latency_slack(&p, &s), Some(slack), "I = {ii}, {start:?}");
    }
    let s = Schedule::tight(&p, 8, vec![0, 2, 6]);
    // Synchronous tensor cores: no asynchronous op, no measure.
    let sync = problem_on(SOFTMAX_BETWEEN_GEMMS, false);
    assert_eq!(latency_slack(&sync, &s), None);
    // The search: the paper's objective (shortest L) and the slack objective
    // at the same I and stages, the latter with more slack.
    let warps = WarpConfig {
        groups: 1,
        reg_limit: 255,
        cross_warp: true,
    };
    let run = |objective| {
        joint::solve(
            &p,
            JointOptions {
                encoding: Encoding::Default,
                warps,
                timeout: 60.0,
                seed: 0,
                threads: 1,
                objective,
                stage_bound: None,
                budget: 0,
                refine_groups: true,
            },
        )
        .unwrap()
    };
    let short = run(Objective::Length);
    let long = run(Objective::Slack);
    let (a, b) = (&short.schedule.schedule, &long.schedule.schedule);
    assert_eq!(a.ii, b.ii);
    assert_eq!(a.copies(), b.copies());
    let (x, y) = (short.latency_slack.unwrap(), long.latency_slack.unwrap());
    assert!(!x.proven && y.proven);
    assert_eq!(y.at_shortest_length, Some(x.cycles));
    assert_eq!(Some(y.cycles), latency_slack(&p, b));
    assert!(y.cycles >= x.cycles);
}

#[test]
fn bandwidth_bounds_the_interval_and_names_its_unit() {
    // A and B move 3 + 2 raw cycles through BW (1 byte per cycle): no I
    // below 5 holds their traffic, whatever the schedule.
    let text = r#"
[[op]]
name = "A"
cycles = 1
uses = { TC = 1 }
traffic = { BW = 3 }
[[op]]
name = "B"
cycles = 1
uses = { SFU = 1 }
traffic = { BW = 2 }
[[edge]]
from = "A"
to = "B"
"#;
    let p = problem(text);
    assert_eq!(twill::modulo::mii::res_mii(&p), 5);
    let r = both(&p, 2).unwrap();
    assert_eq!(r.schedule.schedule.ii, 5);
    assert!(r.certificate.iter().any(|c| matches!(
        c,
        joint::JointRefuted::Modulo(twill::modulo::Refuted {
            from: 1,
            to: 4,
            why: twill::modulo::Infeasibility::Bandwidth { unit, demand: 5, budget: 4 },
        }) if unit == "BW"
    )));
    let r = both(&problem(&text.replace("traffic = { BW = 3 }", "")), 2).unwrap();
    assert_eq!(r.schedule.schedule.ii, 2);
}

#[test]
fn a_crossing_pays_its_bandwidth() {
    // A's result handed to B on another group costs 3 raw cycles of BW on
    // top of the ops' own 1: at I = 3 that exceeds the budget, on one group
    // it does not.
    let p = problem(
        r#"
[[op]]
name = "A"
cycles = 1
uses = { TC = 1 }
traffic = { BW = 1 }
cross_bytes = 3
[[op]]
name = "B"
cycles = 1
uses = { SFU = 1 }
[[edge]]
from = "A"
to = "B"
"#,
    );
    assert_eq!(p.crossing_charges(), vec![(0, 1, 3)]);
    let warps = WarpConfig {
        groups: 2,
        reg_limit: 255,
        cross_warp: true,
    };
    let at = |group: Vec<u32>, ii: u32| JointSchedule {
        schedule: Schedule {
            ii,
            start: vec![0, 1],
            length: 2,
        },
        group,
    };
    assert!(check_joint(&p, &at(vec![1, 1], 3), &warps).is_empty());
    let v = check_joint(&p, &at(vec![1, 2], 3), &warps);
    assert_eq!(
        v,
        vec![Violation::Bandwidth {
            unit: "BW".into(),
            used: 4,
            budget: 3,
            crossings: vec![("A".into(), "B".into(), 3)],
        }]
    );
    assert!(
        v[0].to_string().starts_with("bandwidth: BW carries 4"),
        "{}",
        v[0]
    );
    assert!(check_joint(&p, &at(vec![1, 2], 4), &warps).is_empty());
}

#[test]
fn an_asynchronous_reader_holds_its_buffer_until_it_completes() {
    // A's 600-byte tile is read by B, three cycles on the tensor core. When
    // the tensor core is asynchronous (a wgmma), B reads the tile until it
    // completes: the tile lives from A's issue to B's completion, at least
    // 4 cycles, so two instances overlap at I = 3 (1200 > 1000) and I = 4.
    // A synchronous B reads it when it issues: I = 3 (the tensor core).
    let text = r#"
[[op]]
name = "A"
cycles = 1
uses = { SFU = 1 }
memory = { smem = 600 }
[[op]]
name = "B"
cycles = 3
uses = { TC = 1 }
[[edge]]
from = "A"
to = "B"
delay = 1
"#;
    let held = problem_on(text, true);
    assert_eq!(held.edges[0].hold, 3);
    assert_eq!(both(&held, 1).unwrap().schedule.schedule.ii, 4);
    let plain = problem_on(text, false);
    assert_eq!(plain.edges[0].hold, 0);
    assert_eq!(both(&plain, 1).unwrap().schedule.schedule.ii, 3);
    // The synchronous answer, checked against the asynchronous reader: rule
    // 11 (the memory fits without the hold), naming the value and reader.
    let js = JointSchedule {
        schedule: Schedule::tight(&held, 3, vec![0, 1]),
        group: vec![1, 1],
    };
    let warps = WarpConfig {
        groups: 1,
        reg_limit: 255,
        cross_warp: true,
    };
    let v = check_joint(&held, &js, &warps);
    assert!(
        v.iter().any(
            |x| matches!(x, Violation::HeldBuffers { held, used: 1200, .. }
            if held == &vec![("A".to_string(), "B".to_string())])
        ),
        "{v:?}"
    );
    assert!(
        !v.iter().any(|x| matches!(x, Violation::Memory { .. })),
        "{v:?}"
    );
}
