//! The persistent schedule cache of `--twill-schedule` (`cache=DIR`, or
//! `TWILL_CACHE_DIR`): one typed JSON record per solved loop (schema
//! [`SCHEMA`], docs/report-schema.md) in `DIR/loops/<key>.json`, holding
//! what skips the solver: the joint schedule, its proof status and
//! certificate, and whether it met the colocation sets.
//!
//! The key ([`key`]) is the SHA-256 of the loop's planned graph (its TOML,
//! whose op names are the op kinds and their order in the body: no SSA
//! names; the origins, i.e. source locations, and the loop's and kernel's
//! names left out), the
//! machine description's content, the warp configuration, every pass
//! option but `report` and `cache`, and twill's version (crate version,
//! cache format and the running executable's size and modification time).
//!
//! An entry is never trusted: the driver hands it to the independent
//! checker and then to the same decide and validate steps as a fresh
//! schedule; an entry that does not parse, is of another schema or key, or
//! that the checker rejects is ignored with a warning and the loop is
//! solved again (and the entry replaced). Writes go to a temporary file in
//! the same directory, then `rename` (atomic on POSIX): readers never see
//! a partial entry, and two processes writing one key leave one whole
//! entry.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::checker::WarpConfig;
use crate::graph::load::to_toml;
use crate::graph::Graph;
use crate::joint::JointResult;
use crate::machine::Machine;

mod sha256;

pub use sha256::sha256_hex;

/// The schema of a loop's entry.
pub const SCHEMA: &str = "twill.loop-cache/1";
/// The sub-folder of the cache directory with the loops' entries (the
/// Python hook keeps its per-kernel entries beside it).
pub const FOLDER: &str = "loops";
/// The environment variable naming the cache directory.
pub const ENV: &str = "TWILL_CACHE_DIR";

/// Pass options that change nothing the cache stores.
const UNKEYED_OPTIONS: [&str; 2] = ["report", "cache"];

/// A loop's cached solve.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoopEntry {
    pub schema: String,
    /// The key it was stored under (a renamed or copied file is refused).
    pub key: String,
    /// The solver's answer, before `ctas` re-depths the prefetches.
    pub result: JointResult,
    /// The schedule meets the target's colocation sets (they were asked for
    /// and held).
    pub colocated: bool,
    /// Why no schedule met them, where they were asked for and none did.
    pub without_colocation: Option<String>,
    /// The work the solve spent (both attempts), z3 resource units: a hit
    /// accounts it against the kernel's budget as the solve did.
    #[serde(default)]
    pub work: u64,
}

/// The cache a pass run reads and writes, and the option text its keys
/// include.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopCache {
    pub dir: PathBuf,
    /// The pass options, normalized ([`normalized_options`]).
    pub options: String,
}

impl LoopCache {
    /// The cache for the `cache=` option's value (empty: not given) and the
    /// value of [`ENV`]: the option, else the variable; none where the one
    /// that applies is empty or `off`.
    pub fn select(option: &str, env: Option<&str>, options_text: &str) -> Option<LoopCache> {
        let chosen = if option.is_empty() {
            env.unwrap_or("").trim()
        } else {
            option
        };
        (!chosen.is_empty() && chosen != "off").then(|| LoopCache {
            dir: PathBuf::from(chosen),
            options: normalized_options(options_text),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(FOLDER).join(format!("{key}.json"))
    }

    /// The entry stored under `key`, or None (a miss, or an entry that does
    /// not parse or names another key or schema: warned about).
    pub fn load(&self, key: &str) -> Option<LoopEntry> {
        let path = self.path(key);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(target: "twill", "ignoring the cache entry {}: {e}", path.display());
                return None;
            }
        };
        match serde_json::from_str::<LoopEntry>(&text) {
            Ok(entry) if entry.schema == SCHEMA && entry.key == key => Some(entry),
            Ok(entry) => {
                tracing::warn!(target: "twill", "ignoring the cache entry {}: schema {} and key {}, not {SCHEMA} and {key}", path.display(), entry.schema, entry.key);
                None
            }
            Err(e) => {
                tracing::warn!(target: "twill", "ignoring the cache entry {}: {e}", path.display());
                None
            }
        }
    }

    /// Stores `entry` atomically; a cache that cannot be written is a
    /// warning, never a failure of the pass.
    pub fn store(&self, entry: &LoopEntry) {
        let path = self.path(&entry.key);
        if let Err(e) = write_atomically(&path, &serde_json::to_string(entry).unwrap_or_default()) {
            tracing::warn!(target: "twill", "cannot write the cache entry {}: {e}", path.display());
        }
    }
}

/// Writes `text` to a temporary file beside `path`, then renames it onto
/// `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The pass's `key=value` option lines, trimmed and sorted, less those
/// that change nothing the cache stores (`report`, `cache`): every other
/// option, those added later included, is part of the key.
pub fn normalized_options(text: &str) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, _)| !UNKEYED_OPTIONS.contains(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.sort();
    lines.join("\n")
}

/// twill's identity in keys: the crate version, the cache format and the
/// running executable's size and modification time (a new build or
/// install of its solver and bundled machines; reading the file's whole
/// content would cost a large static binary a tenth of a second per
/// compile). Read once per process.
fn build_identity() -> &'static str {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let exe = std::env::current_exe()
            .and_then(std::fs::metadata)
            .map(|m| {
                let modified = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("{} bytes, modified {modified}", m.len())
            })
            .unwrap_or_else(|_| "unknown".to_string());
        format!("{} {SCHEMA} {exe}", env!("CARGO_PKG_VERSION"))
    })
}

/// The key of a loop's solve: see the module documentation. `graph` is the
/// graph as solved with the colocation sets it tries first as its
/// `same_group`; `machine` the one it is priced on.
pub fn key(options: &str, machine: &Machine, graph: &Graph, warps: &WarpConfig) -> String {
    let mut graph = graph.clone();
    graph.name.clear();
    graph.description.clear();
    // Where each op, edge and set came from: source locations.
    graph.ops.iter_mut().for_each(|o| o.origin.clear());
    graph.edges.iter_mut().for_each(|e| e.origin.clear());
    graph.same_group.iter_mut().for_each(|g| g.origin.clear());
    let mut text = String::new();
    let _ = write!(
        text,
        "{}\noptions:\n{options}\nmachine:\n{machine:?}\nwarps:\n{warps:?}\ngraph:\n{}",
        build_identity(),
        to_toml(&graph)
    );
    sha256_hex(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::tests::{options, solve_request};
    use crate::driver::{extract, planned_graph, price, solve, LoopJob};
    use crate::frontend::lower::{lower, tests::gemm};
    use crate::frontend::LoopIr;

    const OPTIONS: &str = "arch=sm90\nscope=all\nu=30\nreport=/tmp/a.json\ncache=/tmp/c";

    /// The key of `ir`'s planned graph under the pass's defaults on sm90.
    fn key_of(ir: &LoopIr, machine: &str, pass_options: &str) -> String {
        let machine = Machine::select(machine).unwrap();
        let o = options();
        let job = LoopJob::new(ir, &machine, &o);
        let lowered = lower(ir, &machine, o.target.last_stage_ops()).unwrap();
        let warps = WarpConfig {
            groups: 2,
            reg_limit: 255,
            cross_warp: true,
        };
        key(
            &normalized_options(pass_options),
            &machine,
            &planned_graph(&job, &lowered),
            &warps,
        )
    }

    /// The GEMM's joint schedule, solved as the pass solves it.
    fn gemm_result() -> JointResult {
        let machine = Machine::select("h100").unwrap();
        let (ir, o) = (gemm(), options());
        let job = LoopJob::new(&ir, &machine, &o);
        let (_, lowered) = extract(&job).unwrap();
        let problem = price(&lowered.graph, &machine, o.u, o.timeout).unwrap().0;
        let request = solve_request(&o, &machine, 1);
        solve(&problem, &[], &request, std::time::Instant::now())
            .unwrap()
            .result
    }

    #[test]
    fn the_key_ignores_names_and_locations_but_not_what_changes_the_schedule() {
        let ir = gemm();
        let base = key_of(&ir, "h100", OPTIONS);
        assert_eq!(base.len(), 64);
        // The same loop elsewhere: other locations, another kernel name.
        let mut moved = ir.clone();
        moved.name = "other_kernel_loop3".into();
        moved.location = "loc(\"/elsewhere/k.py\":9:1)".into();
        for op in &mut moved.ops {
            op.location = "loc(\"/elsewhere/k.py\":10:2)".into();
        }
        assert_eq!(key_of(&moved, "h100", OPTIONS), base);
        // The report's path, the cache's, and the options' order are no part of it.
        let reordered = "cache=/elsewhere\nu=30\nscope=all\narch=sm90\nreport=";
        assert_eq!(key_of(&ir, "h100", reordered), base);
        // Any other option, a new one included, another machine, another
        // body: another key.
        for other in [
            OPTIONS.replace("u=30", "u=20"),
            format!("{OPTIONS}\nbudget=5"),
        ] {
            assert_ne!(key_of(&ir, "h100", &other), base, "{other}");
        }
        assert_ne!(key_of(&ir, "h200", OPTIONS), base);
        let mut body = ir.clone();
        // A's tile load twice as wide.
        body.ops[1].results[0] = "tensor<128x128xf16, #blocked>".into();
        assert_ne!(key_of(&body, "h100", OPTIONS), base);
    }

    #[test]
    fn the_cache_is_the_option_else_the_variable_and_off_is_none() {
        let select = |option, env| LoopCache::select(option, env, "u=30").map(|c| c.dir);
        assert_eq!(select("/a", Some("/b")), Some(PathBuf::from("/a")));
        assert_eq!(select("", Some("/b")), Some(PathBuf::from("/b")));
        assert_eq!(select("", None), None);
        assert_eq!(select("", Some(" ")), None);
        assert_eq!(select("off", Some("/b")), None);
        assert_eq!(select("", Some("off")), None);
    }

    #[test]
    fn entries_are_written_whole_and_bad_ones_are_misses() {
        let dir = std::env::temp_dir().join(format!("twill-cache-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = LoopCache {
            dir: dir.clone(),
            options: String::new(),
        };
        let result = gemm_result();
        let entry = |key: &str| LoopEntry {
            schema: SCHEMA.into(),
            key: key.into(),
            result: result.clone(),
            colocated: false,
            without_colocation: None,
            work: result.work,
        };
        assert!(store.load("k1").is_none());
        store.store(&entry("k1"));
        let back = store.load("k1").unwrap();
        assert_eq!(back.result.schedule, result.schedule);
        assert_eq!(back.result.certificate, result.certificate);
        // Only the entry: the temporary file was renamed onto it.
        let names: Vec<String> = std::fs::read_dir(dir.join(FOLDER))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["k1.json".to_string()]);
        // Truncated, of another key (a copied file), of another schema.
        let path = dir.join(FOLDER).join("k1.json");
        let whole = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
        assert!(store.load("k1").is_none());
        std::fs::copy(&path, dir.join(FOLDER).join("k2.json")).unwrap();
        store.store(&entry("k1"));
        std::fs::copy(&path, dir.join(FOLDER).join("k2.json")).unwrap();
        assert!(store.load("k2").is_none());
        std::fs::write(&path, whole.replace(SCHEMA, "twill.loop-cache/0")).unwrap();
        assert!(store.load("k1").is_none());
        // Writers of one key at once leave one whole entry.
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| store.store(&entry("k3")));
            }
        });
        assert!(store.load("k3").is_some());
        let left = std::fs::read_dir(dir.join(FOLDER)).unwrap().count();
        assert_eq!(left, 3, "k1, k2 and k3 only");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
