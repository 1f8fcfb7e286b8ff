//! `twill solve` and `twill-opt --twill-schedule` give the same schedule for
//! the same graph and options: real Triton 3.6 loops (test/Inputs/triton36)
//! exported with `--twill-export-graph`, scheduled by the pass (its typed
//! report) and solved by the CLI (its JSON), through the binaries.
//!
//! Compared: I, L, the warp groups the solver was given, each streaming
//! load's prefetch depth, and the proof status (I, L, and whether the
//! answer holds under Triton's partition rules: the export writes them as
//! the graph's `same_group` sets, which `--same-group-first` tries first as
//! the pass does). Not compared: the stages, as the pass writes them after
//! placing the loads in the body (the CLI reports ceil(L / I)), and the
//! latency slack's cycles (raw in the pass, normalized in the CLI).
//!
//! The export writes the graph of the pass's defaults for `ws`,
//! `partitions`, `triton` and `ctas`, so the loops here keep those; the
//! options given to both sides are U, the timeout, the encoding, the
//! objective and the warp groups (the pass's `groups` for a loop marked
//! `tt.warp_specialize`, one for any other loop). Where and how deep the
//! loads go (`loads`, `prefetch`, `rotate`, `order`) shapes what the pass
//! writes, not what it solves: given to the pass alone. `ctas` > 1 is left
//! out: the pass then solves within one CTA's share of the SM, which `twill
//! solve` does not model.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A real Triton module and the options its loops are scheduled with.
struct Case {
    /// A module of test/Inputs/triton36.
    input: &'static str,
    /// `--twill-schedule` options besides `report`, `u` and `timeout`.
    options: &'static str,
    /// `twill solve --groups`: the pass's groups on a loop marked
    /// `tt.warp_specialize`, 1 on any other.
    groups: u32,
}

/// U and the timeout, on both sides (their defaults differ).
const COMMON: &[(&str, &str)] = &[("u", "30"), ("timeout", "120")];

fn inputs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test/Inputs/triton36")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "twill-solve-and-pass-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a binary; its stdout, or a panic with its stderr.
fn run(exe: &str, args: &[String]) -> String {
    let out = Command::new(exe).args(args).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{exe} {args:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pairs(options: &str) -> Vec<(&str, &str)> {
    let given = options
        .split_whitespace()
        .map(|kv| kv.split_once('=').unwrap());
    COMMON.iter().copied().chain(given).collect()
}

/// The machine the pass picks: `machine=`, else the arch's bundled one.
fn machine<'a>(options: &[(&str, &'a str)]) -> &'a str {
    let get = |key| options.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    get("machine").unwrap_or(match get("arch") {
        Some("sm100") => "b200",
        _ => "h100",
    })
}

/// The graphs the export writes, one per candidate loop.
fn export(case: &Case, dir: &Path) -> Vec<PathBuf> {
    let graphs = dir.join("graphs");
    let keep = ["arch", "machine", "scope"];
    let mut options = format!("dir={}", graphs.display());
    for (k, v) in pairs(case.options)
        .into_iter()
        .filter(|(k, _)| keep.contains(k))
    {
        options += &format!(" {k}={v}");
    }
    twill_opt(case, format!("--twill-export-graph={options}"));
    std::fs::read_dir(&graphs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

/// The pass's record of each loop (`twill.schedule-report/1`), every one
/// scheduled.
fn schedule(case: &Case, dir: &Path) -> Vec<Value> {
    let report = dir.join("report.json");
    let mut options = format!("report={}", report.display());
    for (k, v) in pairs(case.options) {
        options += &format!(" {k}={v}");
    }
    twill_opt(case, format!("--twill-schedule={options}"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    assert_eq!(doc["schema"], "twill.schedule-report/1");
    let loops = doc["loops"].as_array().unwrap().clone();
    for record in &loops {
        assert_eq!(record["decision"], "scheduled", "{}: {record}", case.input);
    }
    loops
}

/// `twill-opt` with one pass on the case's module.
fn twill_opt(case: &Case, pass: String) {
    let input = inputs().join(case.input);
    let args = [
        input.display().to_string(),
        pass,
        "-o".into(),
        "/dev/null".into(),
    ];
    run(env!("CARGO_BIN_EXE_twill-opt"), &args);
}

/// `twill solve --json` on an exported graph with the pass's options.
fn solve(case: &Case, graph: &Path) -> Value {
    let options = pairs(case.options);
    let mut args = vec![
        "solve".to_string(),
        graph.display().to_string(),
        "--json".into(),
        "--same-group-first".into(),
        "--machine".into(),
        machine(&options).into(),
        "--groups".into(),
        case.groups.to_string(),
    ];
    for (k, v) in options {
        if matches!(k, "u" | "timeout" | "encoding" | "objective") {
            args.extend([format!("--{k}"), v.to_string()]);
        }
    }
    serde_json::from_str(&run(env!("CARGO_BIN_EXE_twill"), &args)).unwrap()
}

/// Each streaming load with its prefetch depth.
fn depths(list: &Value, depth: &str) -> Vec<(String, u64)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| (p["op"].as_str().unwrap().into(), p[depth].as_u64().unwrap()))
        .collect()
}

/// Asserts that both give the same schedule for every loop of the case;
/// returns the pass's records.
fn same_schedules(name: &str, case: Case) -> Vec<Value> {
    let dir = scratch(name);
    let graphs = export(&case, &dir);
    let records = schedule(&case, &dir);
    assert!(!records.is_empty(), "{}: no loop", case.input);
    assert_eq!(graphs.len(), records.len(), "{}: {graphs:?}", case.input);
    for record in &records {
        let file = format!("{}.toml", record["name"].as_str().unwrap());
        let graph = graphs.iter().find(|g| g.ends_with(&file));
        let graph = graph.unwrap_or_else(|| panic!("{}: no graph {file}", case.input));
        same_schedule(&case, record, graph);
    }
    let _ = std::fs::remove_dir_all(&dir);
    records
}

/// Asserts that `twill solve` on the loop's graph gives the pass's schedule.
fn same_schedule(case: &Case, record: &Value, graph: &Path) {
    let cli = solve(case, graph);
    let pass = &record["schedule"];
    let ws = &cli["warp_specialization"];
    let what = format!(
        "{} {}: pass {pass}\ntwill solve {cli}",
        case.input, record["name"]
    );
    let (ii, length) = (&pass["ii"], &pass["length"]);
    assert_eq!((ii, length), (&cli["ii"], &cli["length"]), "{what}");
    assert_eq!(pass["warp_groups"], case.groups, "{what}");
    assert_eq!(ws["compute_groups"], case.groups, "{what}");
    let prefetch = depths(&pass["prefetch"], "depth");
    assert!(!prefetch.is_empty(), "{what}");
    assert_eq!(prefetch, depths(&ws["streaming"], "prefetch"), "{what}");
    let proof = &pass["proof"];
    assert_eq!(proof["ii_proven"], cli["ii_proven"], "{what}");
    assert_eq!(proof["length_proven"], cli["length_proven"], "{what}");
    let sets = std::fs::read_to_string(graph)
        .unwrap()
        .contains("[[same_group]]");
    let held = sets && ws.get("same_group_dropped").is_none();
    assert_eq!(proof["under_partition_rules"], held, "{what}");
    let slack = (
        pass["latency_slack"].as_object(),
        ws["latency_slack"].as_object(),
    );
    if let (Some(a), Some(b)) = slack {
        assert_eq!(a["proven"], b["proven"], "{what}");
    }
}

#[test]
fn gemm_sm90_not_warp_specialized() {
    same_schedules(
        "gemm_sm90",
        Case {
            input: "gemm_sm90.before.mlir",
            options: "arch=sm90 scope=all",
            groups: 1,
        },
    );
}

#[test]
fn gemm_sm90_extra_prefetch_placed_last() {
    let records = same_schedules(
        "gemm_sm90_last1",
        Case {
            input: "gemm_sm90.before.mlir",
            options: "arch=sm90 scope=all loads=last prefetch=1",
            groups: 1,
        },
    );
    for p in records[0]["schedule"]["prefetch"].as_array().unwrap() {
        assert_eq!((&p["extra"], &p["last"]), (&1.into(), &true.into()), "{p}");
    }
}

#[test]
fn gemm_sm90_warp_specialized() {
    same_schedules(
        "gemm_sm90_w4",
        Case {
            input: "gemm_sm90_w4.before.mlir",
            options: "arch=sm90",
            groups: 2,
        },
    );
}

#[test]
fn fa_fwd_sm90_at_eight_warps() {
    same_schedules(
        "fa_fwd_sm90",
        Case {
            input: "fa_fwd_sm90.before.mlir",
            options: "arch=sm90",
            groups: 2,
        },
    );
}

#[test]
fn fa_fwd_sm90_w4_objective_slack() {
    same_schedules(
        "fa_fwd_sm90_w4_slack",
        Case {
            input: "fa_fwd_sm90_w4.before.mlir",
            options: "arch=sm90 objective=slack",
            groups: 2,
        },
    );
}

#[test]
fn fa_fwd_sm90_w4_three_groups_int_encoding() {
    same_schedules(
        "fa_fwd_sm90_w4_int",
        Case {
            input: "fa_fwd_sm90_w4.before.mlir",
            options: "arch=sm90 groups=3 encoding=int",
            groups: 3,
        },
    );
}

#[test]
fn fa_bwd_sm90_two_loops_rotated() {
    let records = same_schedules(
        "fa_bwd_hd64_sm90",
        Case {
            input: "fa_bwd_hd64_sm90.before.mlir",
            options: "arch=sm90 scope=all",
            groups: 1,
        },
    );
    assert_eq!(records.len(), 2);
    for r in &records {
        assert!(r["schedule"]["loads"]["rotated_by"].is_string(), "{r}");
    }
}

#[test]
fn gemm_sm100_not_warp_specialized() {
    same_schedules(
        "gemm_sm100",
        Case {
            input: "gemm_sm100.before.mlir",
            options: "arch=sm100 scope=all",
            groups: 1,
        },
    );
}

#[test]
fn fa_fwd_sm100_under_partition_rules() {
    let records = same_schedules(
        "fa_fwd_sm100",
        Case {
            input: "fa_fwd_sm100.before.mlir",
            options: "arch=sm100",
            groups: 4,
        },
    );
    let schedule = &records[0]["schedule"];
    assert_eq!(
        schedule["proof"]["under_partition_rules"], true,
        "{schedule}"
    );
    assert_eq!(schedule["partitions"]["code"], "written", "{schedule}");
}
