//! `lower=force` through `twill-opt` (docs/ws-lowering.md): where each
//! Triton version takes the captures of the `ttg.warp_specialize` op, and
//! the producer partition, isolated from above, reads only its own values.

#![cfg(feature = "mlir")]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn lowered(triton: &str) -> String {
    let input = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/Inputs/triton36/gemm_sm90.before.mlir");
    let pass = format!("--twill-schedule=lower=force scope=all arch=sm90 triton={triton}");
    let out = Command::new(env!("CARGO_BIN_EXE_twill-opt"))
        .arg(&input)
        .arg(pass)
        .output()
        .expect("run twill-opt");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("twill: lowered to 1+1 partitions"), "{err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The line that starts with `prefix` (after indentation).
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix}"))
}

/// `%name` tokens of `text` (result numbers `#k` dropped).
fn names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('%') {
        let tail = &rest[i + 1..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// The partition region's text: from its op to the ws op's end.
fn partition(text: &str) -> &str {
    let start = text.find("\"ttg.warp_specialize.partitions\"").unwrap();
    let end = start + text[start..].find("\"ttg.warp_return\"").unwrap();
    &text[start..end]
}

#[test]
fn triton_3_6_captures_on_the_ws_op_and_3_9_on_its_partitions() {
    let v36 = lowered("3.6");
    let ws = v36
        .lines()
        .map(str::trim_start)
        .find(|l| l.contains("= \"ttg.warp_specialize\"("))
        .unwrap();
    let captures = names(&ws[ws.find('(').unwrap()..ws.find(')').unwrap()]);
    assert!(captures.len() >= 4, "{ws}");
    assert_eq!(
        line(&v36, "\"ttg.warp_specialize.partitions\""),
        "\"ttg.warp_specialize.partitions\"() ({"
    );

    let v39 = lowered("3.9");
    let ws39 = v39
        .lines()
        .map(str::trim_start)
        .find(|l| l.contains("= \"ttg.warp_specialize\"("))
        .unwrap();
    assert!(ws39.ends_with("\"ttg.warp_specialize\"() ({"), "{ws39}");
    let parts = line(&v39, "\"ttg.warp_specialize.partitions\"(");
    let captures39 = names(&parts[parts.find('(').unwrap()..parts.find(')').unwrap()]);
    assert_eq!(captures39.len(), captures.len(), "{parts}");
}

#[test]
fn the_producer_reads_only_its_block_arguments_and_its_own_values() {
    for triton in ["3.6", "3.9"] {
        let text = lowered(triton);
        let region = partition(&text);
        let body = &region[region.find("^bb0(").expect("block arguments")..];
        let mut defined = BTreeSet::new();
        for l in body.lines().map(str::trim_start) {
            if let Some(args) = l.strip_prefix("^bb0(") {
                defined.extend(args.split(", %").map(|a| {
                    a.trim_start_matches('%')
                        .split(':')
                        .next()
                        .unwrap()
                        .to_string()
                }));
            }
            // Results, the loop's induction variable and iteration args.
            let parts: Vec<&str> = l.split(" = ").collect();
            for part in &parts[..parts.len() - 1] {
                // `%r:2 = ...`: the results' name.
                let part = part.trim_end();
                let part = match part.rsplit_once(':') {
                    Some((head, k)) if k.chars().all(|c| c.is_ascii_digit()) => head,
                    _ => part,
                };
                if let Some(name) = names(part).last().filter(|n| part.ends_with(n.as_str())) {
                    defined.insert(name.clone());
                }
            }
        }
        let used: BTreeSet<String> = names(body).into_iter().collect();
        let outside: Vec<_> = used.difference(&defined).collect();
        assert!(
            outside.is_empty(),
            "triton={triton}: {outside:?} in\n{body}"
        );
    }
}
