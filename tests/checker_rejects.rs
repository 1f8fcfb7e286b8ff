//! The checker rejects deliberately broken schedules, naming the broken rule
//! and its operands, and accepts the solver's schedule of the same problem.

use twill::checker::{check, Violation};
use twill::graph::load;
use twill::modulo::{self, SearchOptions};
use twill::problem::{BuildOptions, Problem, Schedule};
use twill::Machine;

fn fa() -> Problem {
    let g = load::load_file(std::path::Path::new("examples/graphs/fa_simplified.toml")).unwrap();
    let m = Machine::select("h100").unwrap();
    Problem::build(&g, &m, BuildOptions::default()).unwrap().0
}

fn sched(ii: u32, start: [u32; 3], length: u32) -> Schedule {
    Schedule {
        ii,
        start: start.to_vec(),
        length,
    }
}

#[test]
fn solver_schedule_is_accepted() {
    let p = fa();
    let r = modulo::schedule(&p, SearchOptions::default()).unwrap();
    assert_eq!((r.schedule.ii, r.schedule.length), (2, 4));
    assert!(check(&p, &r.schedule).is_empty());
    // The paper's own Figure 1(d) schedule: S at 0, P at 2, O at 3.
    assert!(check(&p, &sched(2, [0, 2, 3], 4)).is_empty());
}

#[test]
fn modulo_resource_conflict_is_rejected() {
    // Figure 1 text: M(P) = 1, M(O) = 2 satisfies the dependences but O
    // conflicts with S on the TC since 0 = 2 (mod 2).
    let p = fa();
    let v = check(&p, &sched(2, [0, 1, 2], 3));
    assert_eq!(v.len(), 1, "{v:?}");
    match &v[0] {
        Violation::Capacity {
            unit,
            residue,
            used,
            capacity,
            ops,
        } => {
            assert_eq!((unit.as_str(), *residue, *used, *capacity), ("TC", 0, 2, 1));
            let names: Vec<&str> = ops.iter().map(|(o, _)| o.as_str()).collect();
            assert!(names.contains(&"S") && names.contains(&"O"), "{names:?}");
        }
        other => panic!("expected a capacity violation, got {other}"),
    }
}

#[test]
fn broken_dependence_is_rejected() {
    let p = fa();
    // P issues in the same cycle as S although it needs S's result one cycle later.
    let v = check(&p, &sched(2, [0, 0, 3], 4));
    assert!(
        v.iter().any(|x| matches!(x, Violation::Dependence { from, to, earliest: 1, actual: 0, .. } if from == "S" && to == "P")),
        "{v:?}"
    );
    // The loop-carried O -> O edge needs I >= 1 only; with I = 1 the TC is oversubscribed instead.
    let v = check(&p, &sched(1, [0, 1, 2], 3));
    assert!(
        v.iter()
            .any(|x| matches!(x, Violation::Capacity { unit, .. } if unit == "TC")),
        "{v:?}"
    );
}

#[test]
fn completion_and_shape_are_rejected() {
    let p = fa();
    let v = check(&p, &sched(2, [0, 2, 3], 3));
    assert_eq!(
        v,
        vec![Violation::Completion {
            op: "O".into(),
            start: 3,
            cycles: 1,
            length: 3
        }]
    );
    assert_eq!(
        check(&p, &sched(0, [0, 2, 3], 4)),
        vec![Violation::ZeroInitiationInterval]
    );
    let short = Schedule {
        ii: 2,
        start: vec![0, 2],
        length: 4,
    };
    assert_eq!(
        check(&p, &short),
        vec![Violation::WrongOpCount {
            expected: 3,
            got: 2
        }]
    );
}

#[test]
fn every_violation_is_reported_not_just_the_first() {
    let p = fa();
    // Everything at cycle 0 with I = 1 and L = 0: three completions, two
    // dependences and the TC oversubscribed.
    let v = check(&p, &sched(1, [0, 0, 0], 0));
    let completions = v
        .iter()
        .filter(|x| matches!(x, Violation::Completion { .. }))
        .count();
    let deps = v
        .iter()
        .filter(|x| matches!(x, Violation::Dependence { .. }))
        .count();
    let caps = v
        .iter()
        .filter(|x| matches!(x, Violation::Capacity { .. }))
        .count();
    assert_eq!((completions, deps, caps), (3, 2, 1), "{v:?}");
    for x in &v {
        assert!(!x.to_string().is_empty());
    }
}

/// A conditional op (an `scf.if`): one node whose table is its branch's
/// ops in sequence, here a wgmma's TC cycle then a store's TMA cycles.
/// The checker holds it to every row of that table: a load issued when
/// the `if`'s store is on the TMA is rejected, one after it is not; and
/// the `if` is synchronous although its first unit is asynchronous.
#[test]
fn a_conditional_ops_every_row_is_checked() {
    let g = load::parse(
        "if.toml",
        r#"
name = "epilogue"

[[op]]
name = "if"
conditional = true
rrt = [{ TC = 1 }, { SFU = 1 }, { SFU = 1 }]

[[op]]
name = "other"
rrt = [{ SFU = 1 }]
"#,
    )
    .unwrap();
    let m = Machine::parse("test.toml", &common_machine()).unwrap();
    let p = Problem::build(&g, &m, BuildOptions::default()).unwrap().0;
    assert!(!p.ops[0].asynchronous, "an if is never asynchronous");
    // I = 3, the other op at cycle 1: the SFU is the if's at 1 and 2.
    let at = |other: u32| Schedule {
        ii: 3,
        start: vec![0, other],
        length: 3,
    };
    let v = check(&p, &at(1));
    assert!(
        v.iter()
            .any(|x| matches!(x, Violation::Capacity { unit, residue: 1, .. } if unit == "SFU")),
        "{v:?}"
    );
    assert!(check(&p, &at(0)).is_empty());
    // A conditional op of variable latency does not load.
    let bad = load::parse(
        "if.toml",
        "name = \"x\"\n[[op]]\nname = \"if\"\nconditional = true\nvariable_latency = true\ncycles = 1\n",
    );
    assert!(bad.unwrap_err().to_string().contains("conditional"));
}

/// One TC (asynchronous) and one SFU.
fn common_machine() -> String {
    "name = 'test'\nvendor = 'test'\narch = 'test'\ndescription = 'generated'\n\
     clock_mhz = 1000\nsms = 1\n\
     [units.TC]\ncapacity = 1\nasynchronous = true\n[units.SFU]\ncapacity = 1\n\
     [memory.smem]\ncapacity = 1000\nunit = 'bytes'\n\
     [warps]\nthreads_per_warp = 32\nwarp_group_size = 4\nmax_warps_per_cta = 32\n\
     max_regs_per_thread = 255\nregister_file = 65536\n"
        .to_string()
}
