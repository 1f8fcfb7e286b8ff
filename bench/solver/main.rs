//! Solver benchmark: every case study, solved by each encoding in one run on
//! this machine, printed as a Markdown table.
//!
//! Run: `cd bench/solver && cargo bench` (release build). Environment:
//! `TWILL_BENCH_TIMEOUT` (seconds per solve, default 120) and
//! `TWILL_BENCH_ENCODINGS` (comma-separated, default `default,int,paper`).

use std::time::Instant;

use twill::checker::WarpConfig;
use twill::graph::load;
use twill::joint::{self, Encoding, JointOptions, JointResult};
use twill::problem::{BuildOptions, Problem};
use twill::Machine;

struct Case {
    label: &'static str,
    graph: &'static str,
    machine: &'static str,
    groups: u32,
    reg_limit: Option<u32>,
    cross_warp: bool,
}

const fn case(
    label: &'static str,
    graph: &'static str,
    machine: &'static str,
    groups: u32,
) -> Case {
    Case {
        label,
        graph,
        machine,
        groups,
        reg_limit: None,
        cross_warp: true,
    }
}

fn cases() -> Vec<Case> {
    vec![
        case("fa_simplified (Fig. 1)", "fa_simplified", "h100", 2),
        case("gemm_mainloop", "gemm_mainloop", "h100", 2),
        case("fa_fwd_hopper", "fa_fwd_hopper", "h100", 2),
        case("fa_fwd_hopper, 1 group", "fa_fwd_hopper", "h100", 1),
        case(
            "fa_fwd_hopper_nosubtile",
            "fa_fwd_hopper_nosubtile",
            "h100",
            3,
        ),
        case("fa_fwd_blackwell", "fa_fwd_blackwell", "b200", 4),
        case("fa_fwd_blackwell, 2 groups", "fa_fwd_blackwell", "b200", 2),
        Case {
            cross_warp: false,
            ..case(
                "fa_fwd_blackwell, no cross-warp",
                "fa_fwd_blackwell",
                "b200",
                4,
            )
        },
        case(
            "fa_fwd_blackwell_nosubtile",
            "fa_fwd_blackwell_nosubtile",
            "b200",
            4,
        ),
        case("fa_bwd_hopper", "fa_bwd_hopper", "h100", 3),
        case("fa_bwd_blackwell", "fa_bwd_blackwell", "b200", 2),
        Case {
            reg_limit: Some(96),
            ..case("fa_bwd_blackwell, 96 regs", "fa_bwd_blackwell", "b200", 3)
        },
    ]
}

fn main() {
    let timeout: f64 = std::env::var("TWILL_BENCH_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120.0);
    let encodings: Vec<Encoding> = std::env::var("TWILL_BENCH_ENCODINGS")
        .unwrap_or_else(|_| "default,int,paper".into())
        .split(',')
        .map(|s| s.trim().parse().expect("encoding name"))
        .collect();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let names: Vec<&str> = encodings
        .iter()
        .map(|e| match e {
            Encoding::Default => "default",
            Encoding::Int => "int",
            Encoding::Paper => "paper",
        })
        .collect();
    print!("| case | machine | I | L | stages | groups used | proven |");
    for n in &names {
        print!(" s ({n}) |");
    }
    println!(" paper / default |");
    print!("|---|---|---|---|---|---|---|");
    for _ in &names {
        print!("---|");
    }
    println!("---|");
    let mut totals = vec![0.0f64; encodings.len()];
    for c in cases() {
        let path = format!("{root}/examples/graphs/{}.toml", c.graph);
        let g = load::load_file(std::path::Path::new(&path)).expect("case graph");
        let m = Machine::select(c.machine).expect("machine");
        let (p, _): (Problem, _) =
            Problem::build(&g, &m, BuildOptions::default()).expect("problem");
        let warps = WarpConfig {
            groups: c.groups,
            reg_limit: c.reg_limit.unwrap_or(m.warps.max_regs_per_thread),
            cross_warp: c.cross_warp,
        };
        let mut first: Option<JointResult> = None;
        let mut secs = Vec::new();
        for (k, &encoding) in encodings.iter().enumerate() {
            let t0 = Instant::now();
            let r = joint::solve(
                &p,
                JointOptions {
                    encoding,
                    warps,
                    timeout,
                    seed: 0,
                    threads: 0,
                    objective: Default::default(),
                    stage_bound: None,
                    budget: 0,
                    refine_groups: true,
                },
            );
            let s = t0.elapsed().as_secs_f64();
            totals[k] += s;
            match r {
                Ok(r) if r.ii_proven && r.length_proven => {
                    if let Some(f) = &first {
                        let a = (f.schedule.schedule.ii, f.schedule.schedule.length);
                        let b = (r.schedule.schedule.ii, r.schedule.schedule.length);
                        assert_eq!(a, b, "{}: encodings disagree on (I, L)", c.label);
                    } else {
                        first = Some(r);
                    }
                    secs.push(format!("{s:.2}"));
                }
                Ok(_) => secs.push(format!("{s:.2} (not proven)")),
                Err(_) => secs.push(format!("> {timeout:.0} (timeout)")),
            }
        }
        let (ii, len, stages, used, proven) = match &first {
            Some(r) => {
                let s = &r.schedule.schedule;
                let used = r
                    .schedule
                    .group
                    .iter()
                    .copied()
                    .filter(|&g| g > 0)
                    .max()
                    .unwrap_or(0);
                (
                    s.ii.to_string(),
                    s.length.to_string(),
                    s.copies().to_string(),
                    used.to_string(),
                    "yes",
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "no"),
        };
        let ratio = match (
            names.iter().position(|n| *n == "paper"),
            names.iter().position(|n| *n == "default"),
        ) {
            (Some(pi), Some(di)) => {
                let d: f64 = secs[di]
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(f64::NAN);
                let pv: f64 = secs[pi]
                    .trim_start_matches("> ")
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(f64::NAN);
                let bound = if secs[pi].starts_with('>') { ">= " } else { "" };
                format!("{bound}{:.1}x", pv / d)
            }
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.label,
            c.machine,
            ii,
            len,
            stages,
            used,
            proven,
            secs.join(" | "),
            ratio
        );
    }
    print!("| **total** | | | | | | |");
    for t in &totals {
        print!(" {t:.2} |");
    }
    match (
        names.iter().position(|n| *n == "paper"),
        names.iter().position(|n| *n == "default"),
    ) {
        (Some(pi), Some(di)) => println!(" {:.1}x |", totals[pi] / totals[di]),
        _ => println!(" - |"),
    }
}
