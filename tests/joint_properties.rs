//! Property tests of the joint SWP + WS solver on random small graphs with
//! register footprints, memory footprints, variable-latency ops, spill costs,
//! shared-memory traffic and crossing charges on a bandwidth unit,
//! blocking and ordering-only edges, colocation (same_group) pairs: all three encodings return schedules the checker accepts,
//! they agree on (I, L), and an exhaustive search following Algorithm 1
//! finds the same (I, L); the parallel search over I (three threads) gives
//! the sequential answer and certificate.
//!
//! Cases: PROPTEST_CASES (default 500) / 2.

mod common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use twill::checker::{self, WarpConfig};
use twill::graph::{Edge, Graph, Op, SameGroup, Segment, Timing};
use twill::joint::{self, sat_encoding::SatEncoding, Encoding, JointOptions, Objective};
use twill::problem::{BuildOptions, Problem};
use twill::Machine;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(500)
        / 2
}

#[derive(Debug, Clone)]
struct RawOp {
    unit: u8,
    cycles: u64,
    regs: u32,
    smem: u64,
    vl: bool,
    spill: u64,
    pin: bool,
    /// Bytes (= raw cycles) on the test machine's bandwidth unit BW.
    traffic: u64,
    cross: u64,
    /// A conditional op (an `scf.if`): its table goes on with a cycle on
    /// the other unit, as a branch's ops run in sequence.
    cond: bool,
}

fn op_strategy() -> impl Strategy<Value = RawOp> {
    (
        0u8..=3,
        1u64..=2,
        prop::sample::select(vec![0u32, 0, 100, 150]),
        prop::sample::select(vec![0u64, 0, 600]),
        prop::bool::weighted(0.25),
        0u64..=1,
        prop::bool::weighted(0.15),
        prop::sample::select(vec![0u64, 0, 1, 2]),
        prop::sample::select(vec![0u64, 0, 1, 2]),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(unit, cycles, regs, smem, vl, spill, pin, traffic, cross, cond)| RawOp {
                unit,
                cycles,
                regs,
                smem,
                vl,
                spill,
                pin,
                traffic,
                cross,
                cond,
            },
        )
}

fn graph_strategy() -> impl Strategy<Value = Graph> {
    (1usize..=3)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(op_strategy(), n),
                prop::collection::vec(
                    (
                        0..n,
                        0..n,
                        prop::option::of(0u64..=2),
                        0u32..=1,
                        prop::bool::weighted(0.3),
                        prop::bool::weighted(0.2),
                    ),
                    0..=n + 1,
                ),
                // Up to two colocation sets of two or three ops (they may
                // overlap: the relation is their transitive closure).
                prop::collection::vec(prop::collection::vec(0..n, 2..=3), 0..=2),
            )
        })
        .prop_map(|(ops, edges, together)| {
            let ops = ops
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut uses = BTreeMap::new();
                    match r.unit {
                        0 => {
                            uses.insert("TC".to_string(), 1);
                        }
                        1 => {
                            uses.insert("SFU".to_string(), 1);
                        }
                        // On both units: asynchronous only if every unit
                        // it occupies is, so never (SFU is synchronous).
                        2 => {
                            uses.insert("TC".to_string(), 1);
                            uses.insert("SFU".to_string(), 1);
                        }
                        _ => {}
                    }
                    let mut memory = BTreeMap::new();
                    if r.smem > 0 {
                        memory.insert("smem".to_string(), r.smem);
                    }
                    let cond = r.cond && !r.vl;
                    let then = if uses.contains_key("SFU") {
                        "TC"
                    } else {
                        "SFU"
                    };
                    let mut table = vec![Segment {
                        len: r.cycles,
                        uses,
                    }];
                    if cond {
                        table.push(Segment {
                            len: 1,
                            uses: BTreeMap::from([(then.to_string(), 1)]),
                        });
                    }
                    Op {
                        name: format!("op{i}"),
                        timing: Timing::Table(table),
                        regs: r.regs,
                        memory,
                        variable_latency: r.vl,
                        streaming: false,
                        warp_group: false,
                        last_stage: r.pin,
                        spill_cost: r.spill,
                        traffic: if r.traffic > 0 {
                            BTreeMap::from([("BW".to_string(), r.traffic)])
                        } else {
                            BTreeMap::new()
                        },
                        cross_bytes: r.cross,
                        conditional: cond,
                        origin: format!("generated:{i}"),
                    }
                })
                .collect();
            let edges = edges
                .into_iter()
                .map(|(from, to, delay, distance, blocking, order)| Edge {
                    blocking,
                    order,
                    ..generated_edge(from, to, delay, distance)
                })
                .collect();
            // Colocation sets over distinct fixed-latency ops (sets that
            // end up with fewer than two are dropped, as the loader would
            // reject them).
            let same_group = together
                .into_iter()
                .filter_map(|set| {
                    let ops: &Vec<Op> = &ops;
                    let mut members: Vec<usize> = Vec::new();
                    for v in set {
                        if !ops[v].variable_latency && !members.contains(&v) {
                            members.push(v);
                        }
                    }
                    (members.len() >= 2).then(|| SameGroup {
                        ops: members,
                        reason: "generated".into(),
                        origin: "generated".into(),
                    })
                })
                .collect();
            Graph {
                name: "random".into(),
                description: String::new(),
                ops,
                edges,
                same_group,
            }
        })
}

fn build(g: &Graph, tc_async: bool) -> Problem {
    let m = Machine::parse("test.toml", &common::machine_toml_async(1, 1, tc_async))
        .expect("test machine");
    Problem::build(g, &m, BuildOptions::default())
        .expect("valid")
        .0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn joint_encodings_agree_with_brute_force(g in graph_strategy(), groups in 1u32..=2, tc_async in prop::bool::ANY) {
        let p = build(&g, tc_async);
        let warps = WarpConfig { groups, reg_limit: 255, cross_warp: true };
        let run = |encoding| joint::solve(&p, JointOptions { encoding, warps, timeout: 60.0, seed: 0, threads: 1, objective: Default::default(), budget: 0, stage_bound: None, refine_groups: true });
        let expected = common::joint_brute_force(&p, groups, 255, 12);
        let int = run(Encoding::Int);
        // The parallel search over I gives the sequential search's answer.
        let parallel = joint::solve(&p, JointOptions { encoding: Encoding::Default, warps, timeout: 60.0, seed: 0, threads: 3, objective: Default::default(), budget: 0, stage_bound: None, refine_groups: true });
        match (run(Encoding::Default), run(Encoding::Paper)) {
            (Ok(a), Ok(b)) => {
                let c = int.expect("the int encoding agrees that a schedule exists");
                prop_assert_eq!((c.schedule.schedule.ii, c.schedule.schedule.length), (a.schedule.schedule.ii, a.schedule.schedule.length), "default vs int encoding");
                for r in [&a, &b, &c] {
                    prop_assert!(r.ii_proven && r.length_proven);
                    prop_assert!(checker::check_joint(&p, &r.schedule, &warps).is_empty());
                    let s = &r.schedule;
                    prop_assert!(common::valid_joint(&p, s.schedule.ii, &s.schedule.start, s.schedule.length, &s.group, groups, 255));
                }
                // Each encoding admits the schedules the others found (at the
                // same I and length bound): the encodings and the checker agree.
                for r in [&b, &c] {
                    let mut enc = SatEncoding::new(&p, warps, 0);
                    prop_assert!(enc.admits(&r.schedule, a.schedule.schedule.length), "default encoding rejects {:?}", r.schedule);
                }
                let ia = (a.schedule.schedule.ii, a.schedule.schedule.length);
                let par = parallel.expect("the parallel search finds a schedule too");
                prop_assert_eq!((par.schedule.schedule.ii, par.schedule.schedule.length), ia, "parallel vs sequential");
                prop_assert_eq!(&par.certificate, &a.certificate, "parallel vs sequential certificate");
                let ib = (b.schedule.schedule.ii, b.schedule.schedule.length);
                prop_assert_eq!(ia, ib, "default vs paper encoding");
                prop_assert_eq!(Some(ia), expected, "solver vs exhaustive Algorithm 1");
            }
            (Err(ea), Err(eb)) => {
                prop_assert!(int.is_err());
                prop_assert!(parallel.is_err());
                // Only unschedulable within the search cap; the brute force must agree up to 12.
                prop_assert!(expected.is_none() || expected.unwrap().0 > 12, "{} / {}", ea, eb);
            }
            (a, b) => prop_assert!(false, "encodings disagree: {:?} vs {:?}", a.map(|r| r.schedule), b.map(|r| r.schedule)),
        }
    }
}

/// Three ops on a machine with an asynchronous tensor core: op0 and op2 on
/// it, op1 on the tensor core, the SFU or neither; a path op0 -> op1 -> op2
/// or op0 -> op2 and up to three more random edges: graphs with latency
/// slack pairs.
fn slack_graph_strategy() -> impl Strategy<Value = Graph> {
    (
        prop::collection::vec((1u64..=2, prop::sample::select(vec![0u32, 0, 100])), 3),
        0u8..=2,
        prop::bool::ANY,
        prop::collection::vec(
            (0usize..3, 0usize..3, prop::option::of(0u64..=2), 0u32..=1),
            0..=3,
        ),
    )
        .prop_map(|(raw, middle, through, extra)| {
            let ops = raw
                .iter()
                .enumerate()
                .map(|(i, &(cycles, regs))| {
                    let unit = match (i, middle) {
                        (1, 1) => Some("SFU"),
                        (1, 2) => None,
                        _ => Some("TC"),
                    };
                    generated_op(i, cycles, regs, unit)
                })
                .collect();
            let edge = generated_edge;
            let mut edges = if through {
                vec![edge(0, 1, None, 0), edge(1, 2, None, 0)]
            } else {
                vec![edge(0, 2, None, 0)]
            };
            edges.extend(extra.into_iter().map(|(f, t, d, k)| edge(f, t, d, k)));
            Graph {
                name: "slack".into(),
                description: String::new(),
                ops,
                edges,
                same_group: Vec::new(),
            }
        })
}

/// An extra edge of a generated graph: (from, to, delay, distance).
type ExtraEdge = (usize, usize, Option<u64>, u32);

/// A generated op `op{i}`: `cycles` on `unit` (none: on no unit), `regs`
/// registers, fixed latency, nothing else.
fn generated_op(i: usize, cycles: u64, regs: u32, unit: Option<&str>) -> Op {
    Op {
        name: format!("op{i}"),
        timing: Timing::Table(vec![Segment {
            len: cycles,
            uses: unit.map(|u| (u.to_string(), 1)).into_iter().collect(),
        }]),
        regs,
        memory: BTreeMap::new(),
        variable_latency: false,
        streaming: false,
        warp_group: false,
        last_stage: false,
        spill_cost: 0,
        traffic: BTreeMap::new(),
        cross_bytes: 0,
        conditional: false,
        origin: format!("generated:{i}"),
    }
}

/// A generated data edge; one that goes back (from >= to) is carried at
/// least one iteration.
fn generated_edge(from: usize, to: usize, delay: Option<u64>, distance: u32) -> Edge {
    Edge {
        from,
        to,
        delay,
        distance: if from >= to {
            distance.max(1)
        } else {
            distance
        },
        blocking: false,
        order: false,
        origin: "generated".into(),
    }
}

/// The graph of [`two_group_graph_strategy`]: (cycles, registers) of the
/// four ops (the middle ops' cycles from `middle`), and extra edges.
fn two_group_graph(raw: Vec<(u64, u32)>, middle: (u64, u64), extra: Vec<ExtraEdge>) -> Graph {
    let ops = raw
        .iter()
        .enumerate()
        .map(|(i, &(cycles, regs))| {
            let (unit, cycles) = match i {
                1 => ("SFU", middle.0),
                2 => ("SFU", middle.1),
                _ => ("TC", cycles),
            };
            generated_op(i, cycles, regs, Some(unit))
        })
        .collect();
    let edge = generated_edge;
    let mut edges = vec![
        edge(0, 1, None, 0),
        edge(0, 2, None, 0),
        edge(1, 3, None, 0),
        edge(2, 3, None, 0),
    ];
    edges.extend(extra.into_iter().map(|(f, t, d, k)| edge(f, t, d, k)));
    Graph {
        name: "slack2".into(),
        description: String::new(),
        ops,
        edges,
        same_group: Vec::new(),
    }
}

/// Four ops: an asynchronous op (TC) feeding two synchronous ones (SFU)
/// that both feed a second asynchronous op, plus up to two more random
/// edges. On a machine with two SFUs, and since a compute group issues one
/// op at a time, splitting the middle ops over two groups can shorten L:
/// graphs on which the paper's objective uses two groups, and the slack
/// refinement must keep within them.
fn two_group_graph_strategy() -> impl Strategy<Value = Graph> {
    (
        // Cycles (the middle ops' apart), registers: two values of 150
        // live at once exceed one group's 255.
        prop::collection::vec((1u64..=2, prop::sample::select(vec![0u32, 100, 150])), 4),
        (1u64..=3, 1u64..=3),
        prop::collection::vec(
            (0usize..4, 0usize..4, prop::option::of(0u64..=2), 0u32..=1),
            0..=2,
        ),
    )
        .prop_map(|(raw, middle, extra)| two_group_graph(raw, middle, extra))
}

/// A slack test graph on a machine with an asynchronous tensor core and
/// `sfus` SFUs.
fn slack_problem(g: &Graph, sfus: u32) -> Problem {
    let m = Machine::parse("test.toml", &common::machine_toml_async(1, sfus, true))
        .expect("test machine");
    Problem::build(g, &m, BuildOptions::default())
        .expect("valid")
        .0
}

/// `groups` compute groups of 255 registers, values may cross.
fn slack_warps(groups: u32) -> WarpConfig {
    WarpConfig {
        groups,
        reg_limit: 255,
        cross_warp: true,
    }
}

/// The default encoding's joint search on one thread under `objective`.
fn solve_slack_problem(
    p: &Problem,
    groups: u32,
    objective: Objective,
) -> Result<joint::JointResult, joint::JointError> {
    joint::solve(
        p,
        JointOptions {
            encoding: Encoding::Default,
            warps: slack_warps(groups),
            timeout: 60.0,
            seed: 0,
            threads: 1,
            objective,
            stage_bound: None,
            budget: 0,
            refine_groups: true,
        },
    )
}

/// The slack objective against exhaustive enumeration with `groups`
/// compute groups: it keeps I and the number of stages of the paper's
/// objective, and its proven latency slack is the largest of any valid
/// schedule of as many stages that uses no more groups and no more
/// crossings than the paper's objective found (the refinement's guards), at
/// the shortest length that has it; the checker's measure agrees with a
/// third computation over simple paths.
fn slack_matches_brute_force(g: &Graph, groups: u32, sfus: u32) -> Result<(), TestCaseError> {
    let p = slack_problem(g, sfus);
    let warps = slack_warps(groups);
    let run = |objective| solve_slack_problem(&p, groups, objective);
    let (Ok(short), Ok(slack)) = (run(Objective::Length), run(Objective::Slack)) else {
        return Ok(());
    };
    let (a, b) = (&short.schedule.schedule, &slack.schedule.schedule);
    prop_assert_eq!(a.ii, b.ii);
    let ii = a.ii;
    let top = a.length.div_ceil(ii) * ii;
    prop_assert!(
        a.length <= b.length && b.length <= top,
        "{} {} {}",
        a.length,
        b.length,
        top
    );
    prop_assert!(checker::check_joint(&p, &slack.schedule, &warps).is_empty());
    for r in [&short, &slack] {
        let s = &r.schedule.schedule;
        let expected = common::slack_by_paths(&p, ii, &s.start);
        prop_assert_eq!(checker::latency_slack(&p, s), expected);
        prop_assert_eq!(r.latency_slack.map(|x| x.cycles), expected);
    }
    let Some(found) = slack.latency_slack else {
        return Ok(());
    };
    prop_assert_eq!(found.shortest_length, a.length);
    prop_assert!(found.cycles >= short.latency_slack.unwrap().cycles);
    prop_assert!(found.proven, "not proven on a tiny graph");
    // The refinement's guards: the groups and crossings of the paper's
    // objective's answer (its group and crossing refinements included).
    let pairs = joint::cross_pairs(&p);
    let crossings = |group: &[u32]| pairs.iter().filter(|&&(u, v)| group[u] != group[v]).count();
    let used = short.schedule.group.iter().copied().max().unwrap_or(0);
    let cross = crossings(&short.schedule.group);
    prop_assert!(slack.schedule.group.iter().copied().max().unwrap_or(0) <= used);
    prop_assert!(crossings(&slack.schedule.group) <= cross);
    let mut best: Option<(i64, u32)> = None; // (most slack, shortest length with it)
    common::each_joint(&p, ii, top, groups, 255, &mut |start, group, len| {
        if group.iter().copied().max().unwrap_or(0) > used || crossings(group) > cross {
            return false;
        }
        if let Some(x) = common::slack_by_paths(&p, ii, start) {
            best = Some(match best {
                Some((y, l)) if y > x || (y == x && l <= len) => (y, l),
                _ => (x, len),
            });
        }
        false
    });
    prop_assert_eq!(best, Some((found.cycles, b.length)));
    Ok(())
}

/// A graph on which the paper's objective must use two groups (the two
/// middle values of 150 registers are live together until op3 reads them),
/// so that the two-group property below cannot quietly become the
/// one-group one.
#[test]
fn slack_objective_keeps_two_groups_that_registers_force() {
    let g = two_group_graph(vec![(1, 0), (1, 150), (1, 150), (1, 0)], (2, 3), Vec::new());
    let p = slack_problem(&g, 2);
    let short = solve_slack_problem(&p, 2, Objective::Length).expect("a schedule");
    assert_eq!(short.schedule.group.iter().copied().max(), Some(2));
    assert!(
        short.latency_slack.is_some(),
        "two asynchronous ops joined through the middle ones"
    );
    slack_matches_brute_force(&g, 2, 2).expect("the slack search is maximal within two groups");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 2, ..ProptestConfig::default() })]

    /// One compute group: no group or crossing refinement.
    #[test]
    fn slack_objective_matches_brute_force(g in slack_graph_strategy()) {
        slack_matches_brute_force(&g, 1, 1)?;
    }

    /// Two compute groups: the slack search keeps the groups and crossings
    /// of the paper's objective, and is maximal among schedules within them.
    #[test]
    fn slack_objective_matches_brute_force_with_two_groups(g in two_group_graph_strategy()) {
        slack_matches_brute_force(&g, 2, 2)?;
    }
}
