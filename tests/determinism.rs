//! The same kernel gives the same TTGIR on an idle machine and under full
//! load: the solver's budget is work, not time (docs/decisions.md D21).
//! Each input is compiled once alone, then twice at once with a CPU burner
//! on every core; the outputs (schedules and remarks, less the seconds)
//! must be identical. The budgets are chosen so that the searches are cut
//! short by them: a wall-clock limit would cut them elsewhere under load.

#![cfg(feature = "mlir")]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

fn compile(input: &str, options: &str) -> Output {
    let input = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/Inputs/triton36")
        .join(input);
    Command::new(env!("CARGO_BIN_EXE_twill-opt"))
        .arg(&input)
        .arg(format!("--twill-schedule={options}"))
        .output()
        .expect("run twill-opt")
}

/// The output with the remarks' solve seconds (`, 0.42s (`) removed.
fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let mut remarks = String::new();
    for line in err.lines() {
        let mut words: Vec<&str> = line.split(' ').collect();
        words.retain(|w| !(w.ends_with('s') && w[..w.len() - 1].parse::<f64>().is_ok()));
        remarks.push_str(&words.join(" "));
        remarks.push('\n');
    }
    format!("{}\n{remarks}", String::from_utf8_lossy(&out.stdout))
}

/// Runs `f` while every core spins.
fn under_load<T>(f: impl FnOnce() -> T) -> T {
    let stop = Arc::new(AtomicBool::new(false));
    let cores = thread::available_parallelism().map_or(2, |n| n.get());
    let burners: Vec<_> = (0..cores)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let out = f();
    stop.store(true, Ordering::Relaxed);
    for b in burners {
        b.join().unwrap();
    }
    out
}

fn same_under_load(input: &'static str, options: &'static str, expect: &str) {
    let alone = text(&compile(input, options));
    assert!(alone.contains(expect), "{alone}");
    let (a, b) = under_load(|| {
        let other = thread::spawn(move || compile(input, options));
        let one = compile(input, options);
        (one, other.join().unwrap())
    });
    assert_eq!(text(&a), alone, "{input} under load");
    assert_eq!(text(&b), alone, "{input} under load, the parallel compile");
}

/// The slack objective refines the schedule after L (at 8 warps twill
/// writes no partitions, so without it the search stops at L, proven
/// within this budget): the first loop's refinement is cut short.
#[test]
fn hopper_attention_cut_short_by_the_budget_is_the_same_under_load() {
    same_under_load(
        "fa_fwd_causal_subtile_sm90.before.mlir",
        "arch=sm90 scope=all budget=3 objective=slack",
        "work budget of",
    );
}

#[test]
fn blackwell_attention_under_partition_rules_is_the_same_under_load() {
    same_under_load(
        "fa_fwd_sm100.before.mlir",
        "arch=sm100 scope=all budget=8",
        "work budget of",
    );
}
