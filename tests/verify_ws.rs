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

/// The text of `input`, a path under the crate's `test/Inputs`.
fn read_input(input: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/Inputs")
        .join(input);
    std::fs::read_to_string(path).expect("read input")
}

/// `input` (under `test/Inputs`) through the pass with `options`: the
/// module it writes, which must hold at least one lowered loop.
fn lower(input: &str, options: &str) -> String {
    let (ok, out, err) = twill_opt(&read_input(input), &format!("--twill-schedule={options}"));
    assert!(ok, "{err}");
    assert!(err.contains("twill: lowered"), "{err}");
    out
}

fn lowered(triton: &str) -> String {
    lower(
        "triton36/gemm_sm90.before.mlir",
        &format!("lower=force scope=all arch=sm90 triton={triton}"),
    )
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

/// The consumer waits on `full` with the other parity (its phase off by
/// one): it returns at once and its wgmma reads a slot whose copy has not
/// landed; the phases its waits observe are not fixed by happens-before
/// (rule 8).
#[test]
fn consumer_phase_off_by_one_reads_before_the_copy_lands() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.wait_barrier\"(%42, %41, %true)",
        "%flip = arith.xori %41, %c1_i32_8 : i32\n        \"ttng.wait_barrier\"(%42, %flip, %true)",
        0,
    );
    assert_rejected(&m, "rule 3 (ReadBeforeWrite)");
    assert_rejected(&m, "rule 8 (PhaseRace)");
}

/// The consumer's phase without its `& 1`: from iteration 6 on it waits
/// with parity 2, which `mbarrier.try_wait.parity` does not define.
#[test]
fn parity_outside_0_1_is_not_verified() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.wait_barrier\"(%42, %41, %true)",
        "\"ttng.wait_barrier\"(%42, %40, %true)",
        0,
    );
    let err = verify(&m);
    assert!(
        err.contains("twill: pipeline not verified: a wait parity other than 0 or 1"),
        "{err}"
    );
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

/// `full[0]` wants two arrivals per phase (the consumer count of the
/// producer side wrong by one): the consumer hangs on it.
#[test]
fn full_init_count_off_by_one_deadlocks() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.init_barrier\"(%22) {count = 1 : i32}",
        "\"ttng.init_barrier\"(%22) {count = 2 : i32}",
        0,
    );
    assert_rejected(&m, "rule 5 (WaitWithoutArrival)");
}

/// The release arrives twice on an `empty` phase that wants one arrival
/// (the arrival count wrong by one): the phase overruns.
#[test]
fn release_count_off_by_one_overruns() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.arrive_barrier\"(%51, %48) {count = 1 : i32}",
        "\"ttng.arrive_barrier\"(%51, %48) {count = 2 : i32}",
        0,
    );
    assert_rejected(&m, "rule 6 (PhaseOverrun)");
}

/// The producer never waits on `empty`: it runs ahead of the consumer by
/// more than the ring, overwriting slots in flight and overrunning `full`.
#[test]
fn producer_running_ahead_of_the_ring_is_rejected() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttng.wait_barrier\"(%42, %41, %true)",
        "\"ttng.wait_barrier\"(%42, %41, %false_w)",
        1,
    );
    let m = mutate(
        &m,
        "%41 = arith.xori",
        "%false_w = arith.constant false\n          %41 = arith.xori",
        0,
    );
    assert_rejected(&m, "rule 2 (WriteWhileWriting)");
    assert_rejected(&m, "rule 6 (PhaseOverrun)");
}

/// The ws op's captured upper bound of the producer's loop, before it.
const WS_OP: &str = "%28 = \"ttg.warp_specialize\"(%c64_i32, %arg0, %14, %arg5, %15, %c0_i32, %17,";

/// The producer runs one iteration more than the consumer (its bound plus
/// its step): its last copy never lands, and the trip counts differ at the
/// join (rule 9).
#[test]
fn producer_one_iteration_more_is_an_exit_imbalance() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        WS_OP,
        &format!(
            "%ubp = arith.addi %17, %c1_i32 : i32\n    {}",
            WS_OP.replace("%17,", "%ubp,")
        ),
        0,
    );
    assert_rejected(&m, "rule 9 (ExitImbalance)");
    assert_rejected(&m, "rule 7 (NotDrained)");
}

/// The consumer runs one iteration fewer than the producer.
#[test]
fn consumer_one_iteration_fewer_is_an_exit_imbalance() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "scf.for %arg18 = %c0_i32 to %17 step",
        "scf.for %arg18 = %c0_i32 to %ubm step",
        0,
    );
    let m = mutate(
        &m,
        WS_OP,
        &format!("%ubm = arith.subi %17, %c1_i32 : i32\n    {WS_OP}"),
        0,
    );
    assert_rejected(&m, "rule 9 (ExitImbalance)");
}

/// The consumer's wgmma reads `a` from the slot after the one it waited
/// for: the k-th read is not of the k-th value of the ring (rule 4).
#[test]
fn reading_the_next_slot_is_the_wrong_slot() {
    let m = lowered("3.6");
    let m = mutate(
        &m,
        "\"ttg.memdesc_index\"(%18, %39)",
        "\"ttg.memdesc_index\"(%18, %rs)",
        0,
    );
    let m = mutate(
        &m,
        "%43 = \"ttg.memdesc_index\"(%18",
        "%rot = arith.addi %arg20, %c1_i32_8 : i32\n        %rs = arith.remsi %rot, %c3_i32 : i32\n        %43 = \"ttg.memdesc_index\"(%18",
        0,
    );
    assert_rejected(&m, "rule 4 (WrongSlot)");
}

/// A second `full` wait, predicated on the first five iterations only: it
/// changes nothing in the protocol, but the consumer's events stop
/// repeating, so the runs do not cover every trip count: not verified.
#[test]
fn events_that_stop_repeating_are_not_verified() {
    let m = lowered("3.6");
    let wait = "\"ttng.wait_barrier\"(%42, %41, %true) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (!ttg.memdesc<1xi64, #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>, #smem, mutable>, i32, i1) -> ()";
    let m = mutate(
        &m,
        wait,
        &format!(
            "{wait}\n        %early = arith.cmpi slt, %arg18, %c5_e : i32\n        {}",
            wait.replace("%true", "%early")
        ),
        0,
    );
    let m = mutate(
        &m,
        "%c3_i32 = arith.constant 3 : i32",
        "%c3_i32 = arith.constant 3 : i32\n        %c5_e = arith.constant 5 : i32",
        0,
    );
    let err = verify(&m);
    assert!(
        err.contains(
            "twill: pipeline not verified: the events of a loop do not repeat every 6 iterations"
        ),
        "{err}"
    );
}

/// `full[0]` never initialized: a barrier the machine cannot model.
#[test]
fn barrier_without_init_is_not_verified() {
    let m = lowered("3.6");
    let m: Vec<&str> = m
        .lines()
        .filter(|l| !l.contains("\"ttng.init_barrier\"(%22)"))
        .collect();
    let err = verify(&m.join("\n"));
    assert!(
        err.contains("twill: pipeline not verified: an mbarrier used without a ttng.init_barrier"),
        "{err}"
    );
}

/// The FA forward lowered at 8 warps (two wgmmas, Q read from a buffer
/// allocated with its contents before the loop).
fn lowered_fa(triton: &str) -> String {
    lower(
        "triton36/fa_fwd_sm90.before.mlir",
        &format!("lower=force arch=sm90 triton={triton}"),
    )
}

#[test]
fn lowered_fa_forward_is_proved_for_3_6_and_3_9() {
    for triton in ["3.6", "3.9"] {
        let err = verify(&lowered_fa(triton));
        assert!(
            err.contains(
                "twill: pipeline proved safe: 6 rings (2, 2, 2, 2, 2, 2), trip counts 0..=8"
            ),
            "{triton}: {err}"
        );
    }
}

/// Eight warps are two warp groups, each waiting for its own wgmmas; one
/// thread arrives for the region. Without the barrier of the region's
/// warps before the release, the producer may refill a slot the other
/// warp group's wgmma still reads.
#[test]
fn a_release_without_the_region_barrier_at_two_warp_groups_is_rejected() {
    let m = lowered_fa("3.6");
    // One before each release: K's in the prologue and in the loop, V's in
    // the loop (the epilogue releases nothing). Without the prologue's or
    // V's, the producer may refill a slot a wgmma of the other warp group
    // still reads. The loop's K release needs none: the producer copies
    // K(t + 2) into that slot only after V(t + 1), whose slot this trip's
    // V release frees, after its own barrier.
    let barrier = "\"gpu.barrier\"() : () -> ()";
    let at: Vec<usize> = m.match_indices(barrier).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 3);
    for (n, i) in at.into_iter().enumerate() {
        let without = format!("{}{}", &m[..i], &m[i + barrier.len()..]);
        match n {
            1 => assert!(verify(&without).contains("pipeline proved"), "{without}"),
            _ => assert_rejected(&without, "WriteWhileRead"),
        }
    }
    let m = lowered_fa("3.9");
    assert_rejected(
        &m.replace("\"ttg.barrier\"() {addrSpace = 31 : i32} : () -> ()", ""),
        "WriteWhileRead",
    );
}

/// At 4 warps (one warp group) the GEMM needs no such barrier; the same
/// module read as 8 warps does.
#[test]
fn the_region_barrier_depends_on_the_modules_warps() {
    let m = lowered("3.6");
    assert!(!m.contains("gpu.barrier"));
    assert_rejected(
        &m.replace("\"ttg.num-warps\" = 4 : i32", "\"ttg.num-warps\" = 8 : i32"),
        "WriteWhileRead",
    );
}

/// Two compute partitions (hand-made, Triton 3.6 spelling): the default
/// region and a 4-warp worker both consume the producer's rings (`empty`
/// counts 2); the worker hands its loop result to the default region
/// through a result buffer (`local_store`, a barrier of its warps, an
/// arrival on `done`; the default region waits on `done`, `local_load`s).
/// The lit test's comments (its RUN lines) are left out.
fn result_buffer() -> String {
    let input = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/twill-verify-pipeline/ws-result-buffer.mlir");
    let text = std::fs::read_to_string(input).expect("read fixture");
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("//")).collect();
    lines.join("\n")
}

const RESULT_PROVED: &str =
    "twill: pipeline proved safe: 6 rings (2, 2, 2, 2, 1, 1), trip counts 0..=8";

/// The lines of `module` holding `needle`, exactly one.
fn line_with<'a>(module: &'a str, needle: &str) -> &'a str {
    let lines: Vec<&str> = module.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "{needle}: {lines:?}");
    lines[0]
}

#[test]
fn result_buffer_between_two_compute_partitions_is_proved() {
    let m = result_buffer();
    let err = verify(&m);
    assert!(err.contains(RESULT_PROVED), "{err}");
    // The barrier of the worker's warps in the 3.9 spelling.
    let m = m.replace(
        "\"gpu.barrier\"() : () -> ()",
        "\"ttg.barrier\"() {addrSpace = 31 : i32} : () -> ()",
    );
    assert!(verify(&m).contains(RESULT_PROVED));
}

/// The default region loads the result without waiting on `done`.
#[test]
fn result_load_without_the_done_wait_races_the_store() {
    let m = result_buffer();
    let m = m.replace(line_with(&m, "loc(\"default_wait_done\")"), "");
    assert_rejected(
        &m,
        "rule 10 (StoreRace): ttg.local_load @ loc(\"default_load_result\") reads slot 0 before the store it reads happens before it",
    );
}

/// The worker arrives on `done` before it stores the result.
#[test]
fn done_arrival_before_the_store_races_the_load() {
    let m = result_buffer();
    let store = line_with(&m, "loc(\"worker_store_result\")");
    let arrive = line_with(&m, "loc(\"worker_arrive_done\")");
    let m = m
        .replace(store, "")
        .replace(arrive, &format!("{arrive}\n{store}"));
    assert_rejected(
        &m,
        "rule 10 (StoreRace): ttg.local_load @ loc(\"default_load_result\")",
    );
}

/// `done` counts two arrivals; only the worker arrives.
#[test]
fn done_count_two_deadlocks() {
    let m = result_buffer();
    let m = mutate(
        &m,
        "\"ttng.init_barrier\"(%dn) {count = 1 : i32}",
        "\"ttng.init_barrier\"(%dn) {count = 2 : i32}",
        0,
    );
    assert_rejected(
        &m,
        "rule 5 (WaitWithoutArrival): ttng.wait_barrier @ loc(\"default_wait_done\")",
    );
}

/// `empty` counts one arrival while both consumers release each slot: the
/// second release falls into the next phase.
#[test]
fn empty_count_one_with_two_consumers_overruns() {
    let m = result_buffer()
        .replace(
            "\"ttng.init_barrier\"(%e0) {count = 2 : i32}",
            "\"ttng.init_barrier\"(%e0) {count = 1 : i32}",
        )
        .replace(
            "\"ttng.init_barrier\"(%e1) {count = 2 : i32}",
            "\"ttng.init_barrier\"(%e1) {count = 1 : i32}",
        );
    assert_rejected(
        &m,
        "rule 6 (PhaseOverrun): ttng.arrive_barrier @ loc(\"default_release\")",
    );
}

/// `empty` counts three arrivals: the producer hangs on it.
#[test]
fn empty_count_three_deadlocks() {
    let m = result_buffer().replace(
        "\"ttng.init_barrier\"(%e0) {count = 2 : i32}",
        "\"ttng.init_barrier\"(%e0) {count = 3 : i32}",
    );
    assert_rejected(
        &m,
        "rule 5 (WaitWithoutArrival): ttng.wait_barrier @ loc(\"producer_wait_empty\")",
    );
}

/// The default region stores into the result buffer too, before its wait
/// on `done`: the two stores are not ordered (write after write). After
/// its load (ordered by the wait) the same store is proved.
#[test]
fn a_second_unordered_store_into_the_result_buffer_races() {
    let m = result_buffer();
    let store =
        "\"ttg.local_store\"(%d_fin, %res) : (!acc, !res) -> () loc(\"default_store_result\")";
    let early = mutate(
        &m,
        "%d_true = arith.constant true",
        &format!("%d_true = arith.constant true\n      {store}"),
        0,
    );
    assert_rejected(&early, "rule 10 (StoreRace)");
    assert_rejected(
        &early,
        "writes slot 0 while the write of ttg.local_store @ loc(\"worker_store_result\") may be in flight",
    );
    let load = line_with(&m, "loc(\"default_load_result\")");
    let late = m.replace(load, &format!("{load}\n      {store}"));
    assert!(verify(&late).contains(RESULT_PROVED));
}

/// A worker of 8 warps (two warp groups, each waiting for its own wgmmas
/// and storing its part of the result): its release and its arrival on
/// `done` each need a barrier of its warps first. Without the one after
/// the store, the default region may load a half-written result.
#[test]
fn a_worker_of_two_warp_groups_needs_the_barrier_after_its_store() {
    let m = result_buffer().replace(
        "partitionNumWarps = array<i32: 1, 4>",
        "partitionNumWarps = array<i32: 1, 8>",
    );
    let release = line_with(&m, "loc(\"worker_release\")");
    let m = m.replace(
        release,
        &format!("          \"gpu.barrier\"() : () -> ()\n{release}"),
    );
    assert!(verify(&m).contains(RESULT_PROVED));
    let store = line_with(&m, "loc(\"worker_store_result\")");
    let without = m.replace(
        &format!("{store}\n        \"gpu.barrier\"() : () -> ()"),
        store,
    );
    assert_ne!(without, m);
    assert_rejected(
        &without,
        "rule 10 (StoreRace): ttg.local_load @ loc(\"default_load_result\")",
    );
}

/// `input` (a capture under test/Inputs/triton36) lowered with
/// `lower=force` for Triton 3.6.
fn lowered_from(input: &str) -> String {
    lower(
        &format!("triton36/{input}.before.mlir"),
        "lower=force arch=sm90 triton=3.6",
    )
}

/// Rule 11: the FA forward's softmax reads QK^T's registers. With the
/// prologue's wait before it keeping QK^T in flight (`pendings = 1`), or the
/// loop's (QK^T, then the previous trip's PV in flight: `pendings = 2`), the
/// softmax reads registers the tensor core is still writing. The same in
/// the sub-tiled forward's default region and in its worker partition.
#[test]
fn a_wgmma_result_used_before_a_wait_retires_it_is_rejected() {
    for (input, parts) in [("fa_fwd_sm90", 1), ("fa_fwd_subtile_sm90_w4", 2)] {
        let module = lowered_from(input);
        assert!(verify(&module).contains("pipeline proved"), "{input}");
        let line_of = |i: usize| module[..i].rsplit('\n').next().unwrap().to_string();
        // The prologue's QK^T wait: one value (the others also pass P's
        // registers or PV's result through).
        let prologue: Vec<usize> = module
            .match_indices("{pendings = 0 : i32}")
            .map(|(i, _)| i)
            .filter(|&i| {
                let line = line_of(i);
                line.contains("warp_group_dot_wait\"(%") && line.matches('%').count() == 2
            })
            .collect();
        let steady: Vec<usize> = module
            .match_indices("{pendings = 1 : i32}")
            .map(|(i, _)| i)
            .filter(|&i| line_of(i).contains("warp_group_dot_wait\"(%"))
            .collect();
        assert_eq!((prologue.len(), steady.len()), (parts, parts), "{input}");
        for (&i, more) in prologue
            .iter()
            .map(|i| (i, 1))
            .chain(steady.iter().map(|i| (i, 2)))
        {
            let m = format!(
                "{}{{pendings = {more} : i32}}{}",
                &module[..i],
                &module[i + 20..]
            );
            assert_rejected(&m, "rule 11");
        }
    }
}

/// The FA forward's PV is issued one trip later (a staged partition): it
/// waits for V's `full` phase of the previous trip before it reads V, and
/// releases the previous trip's V slot. Without that wait PV may read a
/// slot before its copy lands; releasing the current trip's V slot instead
/// lets the producer overwrite V before the next trip's PV reads it.
#[test]
fn a_staged_wgmma_reads_and_releases_the_previous_trips_slot() {
    let m = lowered_fa("3.6");
    let lines: Vec<&str> = m.lines().collect();
    let pv = (lines.iter())
        .position(|l| l.contains("\"ttng.warp_group_dot\"(%arg"))
        .expect("the loop's PV");
    assert!(
        lines[pv - 1].contains("ttng.wait_barrier"),
        "{}",
        lines[pv - 1]
    );
    let mut without = lines.clone();
    without.remove(pv - 1);
    assert_rejected(&(without.join("\n") + "\n"), "ReadBeforeWrite");

    // The slot operand of the memdesc_index each release arrives on: the
    // prologue's K, the loop's K (this trip), the loop's V (the previous).
    let arrives: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("\"ttng.arrive_barrier\"("))
        .collect();
    let index_of = |i: usize| {
        (0..i)
            .rev()
            .find(|&j| lines[j].contains("\"ttg.memdesc_index\"("))
            .unwrap()
    };
    let slot = |j: usize| {
        let args = lines[j].split("\"ttg.memdesc_index\"(").nth(1).unwrap();
        args.split(')')
            .next()
            .unwrap()
            .split(", ")
            .nth(1)
            .unwrap()
            .to_string()
    };
    let (k, v) = (index_of(arrives[1]), index_of(arrives[2]));
    let (current, previous) = (slot(k), slot(v));
    assert_ne!(current, previous);
    let mut early = lines.clone();
    let line = early[v].replace(&format!(", {previous})"), &format!(", {current})"));
    early[v] = &line;
    assert_rejected(&(early.join("\n") + "\n"), "rule 8 (PhaseRace)");
}

/// Two loops of one function lowered to two ws ops (Triton joins every warp
/// of the CTA at the end of each): both are proved, each after the one
/// before it.
fn two_lowered() -> String {
    let out = lower(
        "two_loops_sm90.mlir",
        "lower=force scope=all groups=1 cache=off",
    );
    assert_eq!(out.matches("\"ttg.warp_specialize\"(").count(), 2);
    out
}

/// Where the second `ttg.warp_specialize` of `module` starts.
fn second_ws_op(module: &str) -> usize {
    module
        .match_indices("\"ttg.warp_specialize\"")
        .nth(1)
        .expect("a second ws op")
        .0
}

/// How many ws ops the verifier's report proves.
fn proved(err: &str) -> usize {
    err.matches("twill: pipeline proved safe:").count()
}

#[test]
fn two_ws_ops_in_one_function_are_each_proved() {
    let err = verify(&two_lowered());
    assert_eq!(proved(&err), 2, "{err}");
}

/// The second ws op's consumer never releases its first slot: the
/// producer of that ws op blocks once it laps the ring; the first ws op
/// stays proved.
#[test]
fn a_missing_release_in_the_second_ws_op_deadlocks() {
    let m = two_lowered();
    let (head, tail) = m.split_at(second_ws_op(&m));
    let at = tail.find("\"ttng.arrive_barrier\"(").expect("a release");
    let line_start = tail[..at].rfind('\n').expect("a line") + 1;
    let args = &tail[at + "\"ttng.arrive_barrier\"(".len()..];
    let pred = args[..args.find(')').expect("operands")]
        .split(", ")
        .nth(1)
        .expect("a predicate")
        .to_string();
    let mut tail = tail.to_string();
    let line_end = at + tail[at..].find('\n').expect("end of line");
    let line = tail[at..line_end].replacen(&format!(", {pred})"), ", %false_m)", 1);
    tail.replace_range(at..line_end, &line);
    tail.insert_str(line_start, "        %false_m = arith.constant false\n");
    let err = verify(&format!("{head}{tail}"));
    assert_eq!(proved(&err), 1, "{err}");
    assert!(
        err.contains("twill: pipeline rejected:") && err.contains("rule 5 (WaitWithoutArrival)"),
        "{err}"
    );
}

/// The causal FA forward as Triton 3.6.0 finished it from twill's two ws
/// ops (the hook's dump, `verify/pipelined.mlir`): Triton folded the
/// diagonal block's steady loop (one trip), so the second ws op's default
/// region has no loop; the verifier traces its straight code with the
/// program id pinned.
fn causal_pipelined() -> String {
    read_input("triton36/fa_fwd_causal_sm90.pipelined.mlir")
}

#[test]
fn a_folded_default_region_is_proved_after_the_first_ws_op() {
    let err = verify(&causal_pipelined());
    assert_eq!(proved(&err), 2, "{err}");
}

/// Its first wait for a K slot deleted: the QK^T wgmma reads the slot
/// before the copy lands.
#[test]
fn a_folded_default_region_without_its_full_wait_reads_before_the_copy() {
    let m = causal_pipelined();
    let second = second_ws_op(&m);
    let wait = second + m[second..].find("\"ttng.wait_barrier\"").expect("a wait");
    let start = m[..wait].rfind('\n').expect("a line") + 1;
    let end = wait + m[wait..].find('\n').expect("end of line") + 1;
    let mutant = format!("{}{}", &m[..start], &m[end..]);
    let err = verify(&mutant);
    assert_eq!(proved(&err), 1, "{err}");
    assert!(
        err.contains("twill: pipeline rejected:") && err.contains("rule 3 (ReadBeforeWrite)"),
        "{err}"
    );
}

/// The FA backward's dQ loop (hd64, 4 warps) as `lower=force` builds it:
/// one compute group whose two wgmmas `QK^T` (through a transpose) and
/// `dQ += dS K` both read each K tile of the ring.
fn lowered_dq() -> String {
    lower(
        "triton36/fa_bwd_hd64_sm90.before.mlir",
        "lower=force scope=all arch=sm90 triton=3.6",
    )
}

/// The K slot the partition reads (its ring is the one the transpose of
/// QK^T views) and the dQ wgmma's line, which reads that slot directly.
fn dq_reads(m: &str) -> (String, String) {
    let ws = m.find("\"ttg.warp_specialize\"(").expect("a ws op");
    let body = &m[ws..];
    let trans = body
        .lines()
        .find(|l| l.contains("\"ttg.memdesc_trans\"("))
        .expect("QK^T's transpose");
    let slot = trans
        .split("\"ttg.memdesc_trans\"(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("the transposed slot")
        .to_string();
    let dq = body
        .lines()
        .find(|l| l.contains("\"ttng.warp_group_dot\"(") && l.contains(&format!(", {slot}, ")))
        .expect("the wgmma reading the K slot directly")
        .to_string();
    (slot, dq)
}

#[test]
fn two_wgmmas_reading_each_value_of_one_ring_are_proved() {
    let m = lowered_dq();
    let err = verify(&m);
    assert!(
        err.contains("twill: pipeline proved safe: 4 rings (2, 2, 2, 2)"),
        "{err}"
    );
}

/// The dQ wgmma reads K from the next trip's slot while QK^T reads this
/// trip's: the k-th read of that reader is not of the k-th value (rule 4),
/// however its reads are told apart from QK^T's.
#[test]
fn the_second_reader_of_a_ring_reading_the_next_slot_is_the_wrong_slot() {
    let m = lowered_dq();
    let (slot, dq) = dq_reads(&m);
    let ws = m.find("\"ttg.warp_specialize\"(").expect("a ws op");
    let index = m[ws..]
        .lines()
        .find(|l| l.contains(&format!("{slot} = \"ttg.memdesc_index\"(")))
        .expect("the K slot's index")
        .to_string();
    let (ring, it) = {
        let args = index
            .split("\"ttg.memdesc_index\"(")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .expect("ring, slot");
        let (a, b) = args.split_once(", ").expect("two operands");
        (a.to_string(), b.to_string())
    };
    let ty = index.split(" : ").nth(1).expect("the index's type");
    let next = format!(
        "%one_k = arith.constant 1 : i32\n        %two_k = arith.constant 2 : i32\n        %nx_k = arith.addi {it}, %one_k : i32\n        %ns_k = arith.remui %nx_k, %two_k : i32\n        %next_k = \"ttg.memdesc_index\"({ring}, %ns_k) : {ty}\n"
    );
    let wrong = dq.replacen(&format!(", {slot}, "), ", %next_k, ", 1);
    let m = m.replacen(&dq, &format!("{next}{wrong}"), 1);
    assert_rejected(&m, "rule 4 (WrongSlot)");
}

/// K's slot released once QK^T retired but before the dQ wgmma read it:
/// the producer's next copy into the slot may land under that read.
#[test]
fn releasing_a_slot_before_its_second_reader_is_a_race() {
    let m = lowered_dq();
    let (_, dq) = dq_reads(&m);
    let ws = m.find("\"ttg.warp_specialize\"(").expect("a ws op");
    let arrive_at = ws
        + m[ws..]
            .find("\"ttng.arrive_barrier\"(")
            .expect("the release");
    let start = m[..arrive_at].rfind('\n').expect("line start") + 1;
    let end = arrive_at + m[arrive_at..].find('\n').expect("line end") + 1;
    let release = m[start..end].to_string();
    // The barrier the release arrives on is indexed on the line before it.
    let bar_start = m[..start - 1].rfind('\n').expect("line start") + 1;
    let index = m[bar_start..start].to_string();
    assert!(index.contains("\"ttg.memdesc_index\"("), "{index}");
    // Its predicate is defined after the dQ wgmma: a constant of its own.
    let pred = release
        .split(", ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("the release's predicate")
        .to_string();
    let release = release.replacen(&pred, "%early_k", 1);
    let without = format!("{}{}", &m[..bar_start], &m[end..]);
    let moved = format!("        %early_k = arith.constant true\n{index}{release}{dq}");
    let early = without.replacen(&dq, &moved, 1);
    assert_rejected(&early, "WriteWhileRead");
}
