//! The pipeline-protocol verifier on warp-specialized code: the GEMM that
//! `lower=force` builds is proved, and mutants of it (each breaking the
//! protocol once) are rejected by the rule they break.

#![cfg(feature = "mlir")]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn twill_opt(input: &str, pass: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_twill-opt"))
        .arg("-")
        .arg(pass)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run twill-opt");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write module");
    let out = child.wait_with_output().expect("twill-opt output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lowered(triton: &str) -> String {
    let input = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/Inputs/triton36/gemm_sm90.before.mlir");
    let text = std::fs::read_to_string(input).expect("read input");
    let pass = format!("--twill-schedule=lower=force scope=all arch=sm90 triton={triton}");
    let (ok, out, err) = twill_opt(&text, &pass);
    assert!(ok, "{err}");
    assert!(err.contains("twill: lowered"), "{err}");
    out
}

fn verify(module: &str) -> String {
    let (ok, _, err) = twill_opt(module, "--twill-verify-pipeline");
    assert!(ok, "{err}");
    err
}

/// `module` with the `n`-th (0-based) occurrence of `from` replaced.
fn mutate(module: &str, from: &str, to: &str, n: usize) -> String {
    let (i, _) = module
        .match_indices(from)
        .nth(n)
        .unwrap_or_else(|| panic!("no occurrence {n} of {from}"));
    format!("{}{}{}", &module[..i], to, &module[i + from.len()..])
}

fn assert_rejected(module: &str, rule: &str) {
    let err = verify(module);
    assert!(
        err.contains("twill: pipeline rejected:") && err.contains(rule),
        "expected {rule}:\n{err}"
    );
}

#[test]
fn lowered_gemm_is_proved_for_3_6_and_3_9() {
    for triton in ["3.6", "3.9"] {
        let err = verify(&lowered(triton));
        assert!(
            err.contains("twill: pipeline proved safe: 4 rings (3, 3, 3, 3), trip counts 0..=12"),
            "{triton}: {err}"
        );
    }
}

/// The producer waits on `empty` without its `xori`: parity 0 of a phase
/// no one arrives on before the first copy, so both threads block.
#[test]
fn producer_phase_off_by_one_deadlocks() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.wait_barrier\"(%42, %41, %true)",
        "\"ttng.wait_barrier\"(%42, %40, %true)",
        1,
    );
    assert_rejected(&m, "rule 5 (WaitWithoutArrival)");
}

/// The consumer never releases a slot: the producer blocks once it laps
/// the ring.
#[test]
fn missing_release_deadlocks() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.arrive_barrier\"(%51, %48)",
        "\"ttng.arrive_barrier\"(%51, %false_m)",
        0,
    );
    let m = mutate(
        &m,
        "%48 = arith.cmpi",
        "%false_m = arith.constant false\n        %48 = arith.cmpi",
        0,
    );
    assert_rejected(&m, "rule 5 (WaitWithoutArrival)");
}

/// `empty[0]` wants two arrivals per phase: the producer hangs on it.
#[test]
fn init_count_off_by_one_deadlocks() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.init_barrier\"(%23) {count = 1 : i32}",
        "\"ttng.init_barrier\"(%23) {count = 2 : i32}",
        0,
    );
    assert_rejected(&m, "rule 5 (WaitWithoutArrival)");
}

/// The consumer releases the slot of the wgmma it just issued (still in
/// flight after `wait(1)`), as if the ring were one slot shallower: the
/// producer's copy overwrites a slot the wgmma may still read.
#[test]
fn release_before_the_wgmma_retires_is_a_race() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttg.memdesc_index\"(%21, %50)",
        "\"ttg.memdesc_index\"(%21, %39)",
        0,
    );
    let m = mutate(
        &m,
        "\"ttng.arrive_barrier\"(%51, %48)",
        "\"ttng.arrive_barrier\"(%51, %true)",
        0,
    );
    assert_rejected(&m, "rule 1 (WriteWhileRead)");
}

/// The consumer waits on `full` with the wrong parity: it returns at once
/// and its wgmma reads a slot whose copy has not landed.
#[test]
fn consumer_phase_off_by_one_reads_before_the_copy_lands() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.wait_barrier\"(%42, %41, %true)",
        "\"ttng.wait_barrier\"(%42, %40, %true)",
        0,
    );
    assert_rejected(&m, "rule 3 (ReadBeforeWrite)");
}

/// Two wgmmas left in flight: the release of the slot of iteration i - 1
/// comes before its wgmma retires.
#[test]
fn one_wgmma_too_many_in_flight_is_a_race() {
    let m = lowered("3.6");
    let m = mutate(&m, "{pendings = 1 : i32}", "{pendings = 2 : i32}", 0);
    assert_rejected(&m, "rule 1 (WriteWhileRead)");
}

/// The rings one slot deep (D = 1, the barriers of slots 1 and 2 gone):
/// the consumer still holds the only slot with its wgmma in flight when the
/// producer needs it for the next copy, and both block.
#[test]
fn ring_one_slot_deep_deadlocks() {
    let m = lowered("3.6")
        .replace("<3x128x64xf16", "<1x128x64xf16")
        .replace("<3x1xi64", "<1x1xi64")
        .replace("= arith.constant 3 : i32", "= arith.constant 1 : i32");
    let m: Vec<&str> = m
        .lines()
        .filter(|l| !["%24", "%25", "%26", "%27"].iter().any(|v| l.contains(v)))
        .collect();
    assert_rejected(&m.join("\n"), "rule 5 (WaitWithoutArrival)");
}

/// A slot index past the ring's depth is not modeled: not proved.
#[test]
fn slot_outside_the_ring_is_not_verified() {
    let m = lowered("3.6").replace("<3x1xi64", "<2x1xi64");
    let err = verify(&m);
    assert!(
        err.contains("twill: pipeline not verified: a slot index outside its ring"),
        "{err}"
    );
}
