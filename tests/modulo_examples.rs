//! Hand-made problems with known answers, including one where the ZLP itself
//! must prove an I >= MII infeasible.

use twill::graph::load;
use twill::modulo::{self, Infeasibility, SearchOptions};
use twill::problem::{BuildOptions, Problem};
use twill::Machine;

fn solve(text: &str) -> modulo::ModuloResult {
    let g = load::parse("t.toml", text).unwrap();
    let m = Machine::select("h100").unwrap();
    let (p, _) = Problem::build(&g, &m, BuildOptions::default()).unwrap();
    modulo::schedule(&p, SearchOptions::default()).unwrap()
}

#[test]
fn zlp_refutes_an_interval_at_the_lower_bound() {
    // ResMII = RecMII = 2, but the recurrence pins B exactly 2 cycles after A,
    // which puts both on the same tensor-core slot when I = 2.
    let r = solve(
        r#"
[[op]]
name = "A"
cycles = 1
uses = { TC = 1 }
[[op]]
name = "B"
cycles = 1
uses = { TC = 1 }
[[edge]]
from = "A"
to = "B"
delay = 2
[[edge]]
from = "B"
to = "A"
delay = 0
distance = 1
"#,
    );
    assert_eq!((r.res_mii, r.rec_mii), (2, 2));
    assert_eq!(r.schedule.ii, 3);
    assert!(r.ii_proven && r.length_proven);
    let last = r.certificate.last().unwrap();
    assert_eq!((last.from, last.to, &last.why), (2, 2, &Infeasibility::Zlp));
}

#[test]
fn recurrence_bound_dominates() {
    // A three-op recurrence of total delay 5 over distance 1: RecMII = 5.
    let r = solve(
        r#"
[[op]]
name = "a"
cycles = 2
uses = { ALU = 1 }
[[op]]
name = "b"
cycles = 2
uses = { SFU = 1 }
[[op]]
name = "c"
cycles = 1
uses = { TC = 1 }
[[edge]]
from = "a"
to = "b"
[[edge]]
from = "b"
to = "c"
[[edge]]
from = "c"
to = "a"
distance = 1
"#,
    );
    assert_eq!((r.res_mii, r.rec_mii, r.schedule.ii), (2, 5, 5));
    assert_eq!(r.schedule.length, 5);
    assert!(matches!(r.certificate[1].why, Infeasibility::RecMii));
}

#[test]
fn zlp_proves_an_interval_infeasible_where_presolve_fails() {
    // Found by the property tests: HiGHS's presolve ends in a bare error on
    // the ZLP at I = ResMII = 3; solved again without presolve, it is
    // infeasible, so I = 4 is proven minimal.
    let r = solve(
        r#"
[[op]]
name = "op0"
rrt = [{ TC = 1 }, { SFU = 1 }, {}]
[[op]]
name = "op1"
rrt = [{ SFU = 1, TC = 1 }]
[[op]]
name = "op2"
rrt = [{}, { SFU = 1, TC = 1 }]
[[edge]]
from = "op2"
to = "op2"
distance = 1
[[edge]]
from = "op2"
to = "op0"
distance = 1
[[edge]]
from = "op1"
to = "op2"
distance = 1
"#,
    );
    assert_eq!((r.schedule.ii, r.schedule.length), (4, 4));
    assert!(r.ii_proven && r.length_proven);
    assert!(r
        .certificate
        .iter()
        .any(|c| c.from == 3 && c.to == 3 && c.why == Infeasibility::Zlp));
}
