//! Fuzzes the graph loader and the resolution on a machine: no input may
//! panic; every accepted graph must survive a TOML round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use twill::graph::load;
use twill::problem::{BuildOptions, Problem};
use twill::Machine;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(graph) = load::parse("fuzz.toml", text) else {
        return;
    };
    let again = load::parse("fuzz.toml", &load::to_toml(&graph)).expect("written graph parses");
    assert_eq!(again, graph);
    // Resolution must report problems as errors, never panic. Keep the
    // normalization small so the fuzzer spends its time on the loader.
    if graph.ops.len() <= 8 {
        let machine = Machine::select("h100").expect("bundled machine");
        let _ = Problem::build(&graph, &machine, BuildOptions { u: 50, time_limit: 1.0 });
    }
});
