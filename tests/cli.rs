//! End-to-end tests of the `twill` command line.

use std::process::Command;

fn twill(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_twill"))
        .args(args)
        .output()
        .expect("run twill");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("twill-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn fa_simplified_json_is_optimal() {
    let (code, out, err) = twill(&[
        "solve",
        "examples/graphs/fa_simplified.toml",
        "--machine",
        "h100",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ii"], 2);
    assert_eq!(v["length"], 4);
    assert_eq!(v["proven"], true);
    assert!(v["seconds"].as_f64().unwrap() >= 0.0);
    let ops = v["ops"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["S", "P", "O"]);
    for o in ops {
        assert_eq!(
            o["stage"].as_u64().unwrap(),
            o["cycle"].as_u64().unwrap() / 2
        );
    }
    assert_eq!(v["certificate"][0]["from"], 1);
    assert_eq!(v["certificate"][0]["reason"], "res_mii");
    assert_eq!(v["straight_line"]["copies"], 2);
}

#[test]
fn text_output_shows_everything() {
    let (code, out, _) = twill(&["solve", "examples/graphs/fa_simplified.toml"]);
    assert_eq!(code, 0);
    for needle in [
        "normalized costs",
        "I = 2  L = 4",
        "optimal: proven",
        "modular reservation table",
        "// prologue",
        "// steady state",
        "// epilogue",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn gemm_mainloop_solves() {
    let (code, out, err) = twill(&[
        "solve",
        "examples/graphs/gemm_mainloop.toml",
        "--machine",
        "h100",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["proven"], true);
    // The tensor core is the bottleneck: I equals the normalized MMA cycles.
    let mma = v["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "mma")
        .unwrap();
    assert_eq!(v["ii"], mma["cycles"]);
    assert_eq!(v["ii"], v["res_mii"]);
}

#[test]
fn malformed_graph_exits_2_with_location() {
    let p = write(
        "bad.toml",
        "[[op]]\nname = \"S\"\ncycles = 1\nuses = { TC = 1 }\n\n[[edge]]\nfrom = \"S\"\nto = \"nowhere\"\n",
    );
    let (code, out, err) = twill(&["solve", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("bad.toml:8:"), "{err}");
    assert!(err.contains("edge[0].to"), "{err}");
    assert!(err.contains("nowhere"), "{err}");
}

#[test]
fn unknown_unit_names_the_op_line() {
    let p = write(
        "unit.toml",
        "\n[[op]]\nname = \"S\"\ncycles = 1\nuses = { XPU = 1 }\n",
    );
    let (code, _, err) = twill(&["solve", p.to_str().unwrap(), "--machine", "h100"]);
    assert_eq!(code, 2);
    assert!(err.contains("unit.toml:2:"), "{err}");
    assert!(err.contains("op[0].uses.XPU"), "{err}");
    assert!(err.contains("unknown unit"), "{err}");
}

#[test]
fn syntax_error_and_missing_file_exit_2() {
    let p = write("syntax.toml", "[[op]]\nname = \"S\"\ncycles = = 1\n");
    let (code, _, err) = twill(&["solve", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("syntax.toml:3:"), "{err}");
    let (code, _, err) = twill(&["solve", "/nonexistent/graph.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read"), "{err}");
    let (code, _, err) = twill(&[
        "solve",
        "examples/graphs/fa_simplified.toml",
        "--machine",
        "nope",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("bundled"), "{err}");
}

#[test]
fn machines_lists_bundled() {
    let (code, out, _) = twill(&["machines"]);
    assert_eq!(code, 0);
    assert!(out.contains("h100"));
}

#[test]
fn fa_fwd_hopper_json_has_warp_groups_and_certificate() {
    let (code, out, err) = twill(&[
        "solve",
        "examples/graphs/fa_fwd_hopper.toml",
        "--machine",
        "h100",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["ii"].as_u64().unwrap() > 0);
    assert!(v["length"].as_u64().unwrap() >= v["ii"].as_u64().unwrap());
    assert_eq!(v["proven"], true);
    assert!(v["certificate"].is_array());
    let ops = v["ops"].as_array().unwrap();
    assert!(ops.iter().all(|o| o["warp_group"].is_u64()));
    let load_k = ops.iter().find(|o| o["name"] == "load_k").unwrap();
    assert_eq!(load_k["warp_group"], 0);
    let ws = &v["warp_specialization"];
    assert_eq!(ws["encoding"], "default");
    assert!(ws["streaming"].as_array().unwrap().len() == 2);
}

#[test]
fn bad_encoding_and_groups_exit_2() {
    let (code, _, err) = twill(&[
        "solve",
        "examples/graphs/fa_simplified.toml",
        "--encoding",
        "fancy",
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = twill(&[
        "solve",
        "examples/graphs/fa_simplified.toml",
        "--groups",
        "0",
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn every_encoding_is_selectable() {
    for enc in ["default", "int", "paper"] {
        let (code, out, err) = twill(&[
            "solve",
            "examples/graphs/fa_simplified.toml",
            "--encoding",
            enc,
            "--json",
        ]);
        assert_eq!(code, 0, "{enc}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (v["ii"].as_u64(), v["length"].as_u64()),
            (Some(2), Some(4)),
            "{enc}"
        );
        assert_eq!(v["warp_specialization"]["encoding"], enc);
    }
}

#[test]
fn a_value_larger_than_the_register_file_is_reported() {
    let p = write(
        "regs.toml",
        "[[op]]\nname = \"acc\"\ncycles = 3\nuses = { TC = 1 }\nregs = 300\n[[edge]]\nfrom = \"acc\"\nto = \"acc\"\ndistance = 1\n",
    );
    let (code, _, err) = twill(&["solve", p.to_str().unwrap(), "--machine", "h100"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("`acc` needs 300 registers per thread"),
        "{err}"
    );
    assert!(err.contains("limit is 255"), "{err}");
}

#[test]
fn slack_objective_reports_its_latency_slack() {
    let (code, out, err) = twill(&[
        "solve",
        "examples/graphs/fa_fwd_hopper.toml",
        "--objective",
        "slack",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ls = &v["warp_specialization"]["latency_slack"];
    assert_eq!(ls["objective"], "slack");
    assert_eq!(ls["proven"], true);
    assert!(ls["cycles"].as_i64().unwrap() > ls["at_shortest_length"].as_i64().unwrap());
    assert!(v["length"].as_u64().unwrap() > ls["shortest_length"].as_u64().unwrap());
    let (code, out, err) = twill(&["solve", "examples/graphs/fa_fwd_hopper.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("latency slack: asynchronous ops may complete"),
        "{out}"
    );
    assert!(
        out.contains("not optimized: --objective slack optimizes it"),
        "{out}"
    );
    let (code, _, err) = twill(&[
        "solve",
        "examples/graphs/fa_simplified.toml",
        "--objective",
        "fastest",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("length or slack"), "{err}");
    // Only the default encoding implements the refinement.
    let (code, _, err) = twill(&[
        "solve",
        "examples/graphs/fa_simplified.toml",
        "--objective",
        "slack",
        "--encoding",
        "paper",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs --encoding default"), "{err}");
    // L under the slack objective is the shortest with the most slack.
    let (code, out, err) = twill(&[
        "solve",
        "examples/graphs/fa_fwd_hopper.toml",
        "--objective",
        "slack",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("L proven the shortest with the most latency slack at this I"),
        "{out}"
    );
}

#[test]
fn same_group_sets_tried_first_are_dropped_when_none_meets_them() {
    // Two accumulators of 200 registers each fit only in groups of their own.
    let p = write(
        "same_group.toml",
        "[[op]]\nname = \"a\"\ncycles = 3\nuses = { TC = 1 }\nregs = 200\n\
         [[op]]\nname = \"b\"\ncycles = 3\nuses = { TC = 1 }\nregs = 200\n\
         [[edge]]\nfrom = \"a\"\nto = \"a\"\ndistance = 1\n\
         [[edge]]\nfrom = \"b\"\nto = \"b\"\ndistance = 1\n\
         [[same_group]]\nops = [\"a\", \"b\"]\n",
    );
    let graph = p.to_str().unwrap();
    let (code, _, err) = twill(&["solve", graph, "--timeout", "20"]);
    assert_eq!(code, 1, "{err}");
    let args = ["solve", graph, "--timeout", "20", "--same-group-first"];
    let (code, out, err) = twill(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ws = &v["warp_specialization"];
    assert_eq!(ws["compute_groups"], 2);
    assert!(ws["same_group_dropped"].is_string(), "{ws}");
    let (code, out, _) = twill(&args);
    assert_eq!(code, 0);
    assert!(out.contains("same_group sets dropped: "), "{out}");
    let (code, out, _) = twill(&["solve", "examples/graphs/fa_simplified.toml", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["warp_specialization"].get("same_group_dropped").is_none());
}
