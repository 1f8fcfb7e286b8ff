//! Property tests of the scheduling core on random small graphs (some with
//! last-stage pins): the ZLP's minimum I and minimum L equal the exhaustive
//! search's, the last-stage window relaxation refutes no I that has a
//! schedule, the checker accepts every solver schedule, the checker agrees
//! with the reference validity test on arbitrary schedules, and graphs
//! survive a TOML round trip.
//!
//! The number of cases is PROPTEST_CASES (default 500 per property).

mod common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use twill::checker;
use twill::graph::{load, Edge, Graph, Op, Segment, Timing};
use twill::modulo::{self, SearchOptions};
use twill::problem::{BuildOptions, Problem, Schedule};
use twill::Machine;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// A random op: 1 or 2 RRT rows, each using TC and/or SFU or nothing, and
/// sometimes a last-stage pin.
fn op_strategy() -> impl Strategy<Value = (Vec<(u32, u32)>, u32, bool, u64)> {
    (
        prop::collection::vec((0u32..=1, 0u32..=1), 1..=2),
        0u32..=1, // extra idle cycles after the busy rows
        prop::bool::weighted(0.15),
        prop::sample::select(vec![0u64, 0, 0, 1, 3]), // bytes on the bandwidth unit BW
    )
}

/// Edges as (u, v, delay or default, distance); distance-0 edges only go
/// forward so the distance-0 subgraph is acyclic, as the loader requires.
fn edges_strategy(n: usize) -> impl Strategy<Value = Vec<(usize, usize, Option<u64>, u32)>> {
    prop::collection::vec(
        (0..n, 0..n, prop::option::of(0u64..=2), 0u32..=2),
        0..=n + 1,
    )
    .prop_map(|es| {
        es.into_iter()
            .map(|(u, v, d, dist)| {
                let dist = if u >= v { dist.max(1) } else { dist };
                (u, v, d, dist)
            })
            .collect()
    })
}

fn graph_strategy() -> impl Strategy<Value = (Graph, u32, u32)> {
    (1usize..=4)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(op_strategy(), n),
                edges_strategy(n),
                1u32..=2,
                1u32..=1,
            )
        })
        .prop_map(|(ops, edges, tc, sfu)| {
            let ops = ops
                .into_iter()
                .enumerate()
                .map(|(i, (rows, idle, pin, traffic))| {
                    let mut segs: Vec<Segment> = Vec::new();
                    for (a, b) in rows {
                        let mut uses = BTreeMap::new();
                        if a > 0 {
                            uses.insert("TC".to_string(), a);
                        }
                        if b > 0 {
                            uses.insert("SFU".to_string(), b);
                        }
                        match segs.last_mut() {
                            Some(s) if s.uses == uses => s.len += 1,
                            _ => segs.push(Segment { len: 1, uses }),
                        }
                    }
                    if idle > 0 {
                        match segs.last_mut() {
                            Some(s) if s.uses.is_empty() => s.len += idle as u64,
                            _ => segs.push(Segment {
                                len: idle as u64,
                                uses: BTreeMap::new(),
                            }),
                        }
                    }
                    Op {
                        name: format!("op{i}"),
                        timing: Timing::Table(segs),
                        regs: 0,
                        memory: BTreeMap::new(),
                        variable_latency: false,
                        streaming: false,
                        warp_group: false,
                        last_stage: pin,
                        spill_cost: 0,
                        traffic: if traffic > 0 {
                            BTreeMap::from([("BW".to_string(), traffic)])
                        } else {
                            BTreeMap::new()
                        },
                        cross_bytes: 0,
                        conditional: false,
                        origin: format!("generated:{}", i + 1),
                    }
                })
                .collect();
            let edges = edges
                .into_iter()
                .enumerate()
                .map(|(k, (from, to, delay, distance))| Edge {
                    from,
                    to,
                    delay,
                    distance,
                    blocking: false,
                    order: false,
                    origin: format!("generated:{}", 100 + k),
                })
                .collect();
            (
                Graph {
                    name: "random".into(),
                    description: String::new(),
                    ops,
                    edges,
                    same_group: Vec::new(),
                },
                tc,
                sfu,
            )
        })
}

fn build(g: &Graph, tc: u32, sfu: u32) -> Problem {
    let m = Machine::parse("test.toml", &common::machine_toml(tc, sfu)).expect("test machine");
    Problem::build(g, &m, BuildOptions::default())
        .expect("generated graphs are valid")
        .0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn zlp_matches_brute_force((g, tc, sfu) in graph_strategy()) {
        let p = build(&g, tc, sfu);
        let r = modulo::schedule(&p, SearchOptions { timeout: 60.0 }).expect("solvable");
        prop_assert!(r.ii_proven && r.length_proven);
        prop_assert!(checker::check(&p, &r.schedule).is_empty());
        prop_assert!(common::valid(&p, r.schedule.ii, &r.schedule.start, r.schedule.length));
        let (ii, len) = common::min_ii_and_length(&p, r.schedule.ii).expect("the ZLP's I admits a schedule");
        prop_assert_eq!(ii, r.schedule.ii, "minimum I");
        prop_assert_eq!(len, r.schedule.length, "minimum L at the minimum I");
        // The certificate covers every smaller I exactly once.
        let mut covered: Vec<u32> = r.certificate.iter().flat_map(|c| c.from..=c.to).collect();
        covered.sort_unstable();
        prop_assert_eq!(covered, (1..r.schedule.ii).collect::<Vec<_>>());
    }

    #[test]
    fn greedy_schedules_are_valid_upper_bounds((g, tc, sfu) in graph_strategy(), extra in 0u32..=3) {
        let p = build(&g, tc, sfu);
        let ii = modulo::mii::res_mii(&p).max(modulo::mii::rec_mii(&p).unwrap_or(1)) + extra;
        if let Some(h) = modulo::heuristic::schedule(&p, ii) {
            prop_assert_eq!(h.ii, ii);
            prop_assert!(checker::check(&p, &h).is_empty(), "{:?}", checker::check(&p, &h));
            prop_assert!(common::valid(&p, ii, &h.start, h.length));
            let best = common::min_length(&p, ii).expect("a greedy schedule exists, so an optimum does");
            prop_assert!(h.length >= best);
        }
    }

    #[test]
    fn last_stage_window_refutations_are_sound((g, tc, sfu) in graph_strategy(), extra in 0u32..=4) {
        // The window relaxation refutes an I only when the exhaustive search
        // finds no schedule there either.
        let p = build(&g, tc, sfu);
        let ii = modulo::mii::res_mii(&p).max(modulo::mii::rec_mii(&p).unwrap_or(1)).saturating_sub(1) + extra;
        if ii >= 1 && twill::joint::last_stage_window_refutes(&p, ii, 0, 60_000, twill::joint::WINDOW_RLIMIT).is_some() {
            prop_assert_eq!(common::min_length(&p, ii), None);
        }
    }

    #[test]
    fn checker_agrees_with_reference(
        (g, tc, sfu) in graph_strategy(),
        ii in 1u32..=4,
        starts in prop::collection::vec(0u32..=6, 4),
        slack in 0u32..=2,
    ) {
        let p = build(&g, tc, sfu);
        let start: Vec<u32> = starts[..p.ops.len()].to_vec();
        let natural = p.ops.iter().zip(&start).map(|(o, &s)| s + o.cycles).max().unwrap_or(0);
        // Lengths around the natural one: too short, exact, and longer.
        let length = (natural + slack).saturating_sub(1);
        let s = Schedule { ii, start: start.clone(), length };
        let violations = checker::check(&p, &s);
        prop_assert_eq!(violations.is_empty(), common::valid(&p, ii, &start, length), "{:?}", violations);
    }

    #[test]
    fn graph_toml_round_trips((g, _tc, _sfu) in graph_strategy()) {
        let text = load::to_toml(&g);
        let again = load::parse("round-trip.toml", &text).expect("written graphs parse");
        prop_assert_eq!(again, g);
    }
}

#[test]
fn zlp_proves_the_length_when_highs_reports_a_gap() {
    // Found by random exploration: HiGHS stops on this ZLP at I = 7 with the
    // minimum length but a positive MIP gap (good_lp: GapLimit, not
    // Optimal). The length is then proven by the ZLP at horizon L - 1.
    let g = load::parse(
        "gap.toml",
        r#"
[[op]]
name = "op0"
rrt = [{ SFU = 1 }, { SFU = 1 }, {}]
[[op]]
name = "op1"
rrt = [{ SFU = 1 }]
[[op]]
name = "op2"
rrt = [{ SFU = 1 }, { SFU = 1 }]
[[op]]
name = "op3"
rrt = [{ SFU = 1 }, { SFU = 1 }]
"#,
    )
    .unwrap();
    let p = build(&g, 2, 1);
    let r = modulo::schedule(&p, SearchOptions { timeout: 60.0 }).expect("solvable");
    assert_eq!((r.schedule.ii, r.schedule.length), (7, 7));
    assert!(r.ii_proven && r.length_proven, "{r:?}");
    assert!(checker::check(&p, &r.schedule).is_empty());
}
