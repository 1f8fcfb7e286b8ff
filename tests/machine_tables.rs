//! The bundled machines resolve to exactly the `Machine` they always did.
//!
//! `tests/data/machines/NAME.txt` holds the pretty-printed [`Machine`] of each
//! bundled description (units, memories, warps, cost rules, the op rules of
//! its target family, occupancy). A change to a machine file or to a target
//! family's op rules that alters any of it fails here; an intended change is
//! recorded by rerunning with `TWILL_BLESS=1`.

use std::path::PathBuf;

use twill::Machine;

fn snapshot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/machines")
        .join(format!("{name}.txt"))
}

#[test]
fn every_bundled_machine_resolves_as_recorded() {
    let bless = std::env::var_os("TWILL_BLESS").is_some();
    let names = Machine::bundled_names();
    assert!(names.len() >= 4, "{names:?}");
    for name in names {
        let m = Machine::select(name).unwrap_or_else(|e| panic!("{e}"));
        let got = format!("{m:#?}\n");
        let path = snapshot(name);
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (TWILL_BLESS=1 records it)", path.display()));
        if got != want {
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(got.lines().count().min(want.lines().count()));
            panic!(
                "machine `{name}` differs from {} from line {}: got `{}`, recorded `{}`",
                path.display(),
                line + 1,
                got.lines().nth(line).unwrap_or("<end>"),
                want.lines().nth(line).unwrap_or("<end>")
            );
        }
    }
}
