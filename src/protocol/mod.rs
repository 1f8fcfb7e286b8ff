//! The pipeline-protocol verifier: an independent check of the pipelined
//! loops Triton built (its pipeliner's expansion of a schedule, twill's or
//! its own), read from the TTGIR `make_ttgir` hands to `make_llir`.
//!
//! It proves, for every slot of every shared-memory ring (a mutable
//! `ttg.local_alloc` indexed by `ttg.memdesc_index`) and every mbarrier,
//! over every trip count of the loop, that the protocol the code follows is
//! safe against the hazards of asynchronous pipelines: a copy issued into a
//! slot a reader is not done reading, lapping a ring, hanging on tails,
//! phase drift.
//!
//! # The machine it runs
//!
//! One thread of control (the CTA's warps in lockstep) executes the
//! function; a function holding a `ttg.warp_specialize` runs one thread per
//! region instead (`ws`). Asynchronous operations are issued and complete later:
//!
//! * `ttg.async_copy_global_to_local` writes a slot (always: a masked-off
//!   copy writes zeros); `ttg.async_commit_group` closes a group of the
//!   copies issued since the last one; `ttg.async_wait {num = n}` completes
//!   every group but the newest n (copies not yet committed stay in flight);
//! * `ttng.barrier_expect` arrives on an mbarrier's open phase;
//!   `ttng.async_tma_copy_global_to_local` writes a slot and completes with
//!   that phase (a false predicate: no copy, no arrival); `ttng.wait_barrier
//!   %b, %parity` returns at once when the phase of that parity has
//!   completed, else completes the open phase if it has all its arrivals
//!   (its copies land), else never returns;
//! * `ttng.warp_group_dot {isAsync}` reads its shared-memory operands until
//!   it retires: `ttng.warp_group_dot_wait {pendings = p}` retires every
//!   asynchronous dot but the newest p; a synchronous dot, `ttg.local_load`
//!   and `ttg.local_store` complete at once;
//! * `ttng.async_tma_copy_local_to_global` reads a slot until
//!   `ttng.async_tma_store_wait {pendings = p}` leaves at most p in flight.
//!
//! Scalar integer code (slot indices, phases, predicates, the induction
//! variable) is evaluated exactly; the loop's trip count N is bound for each
//! run, so every run is concrete. A loop is run for every N from 0 to a bound
//! past which its state repeats (twice the least common multiple of its ring
//! and barrier depths, times two for barrier phases, plus its deepest ring):
//! the loop-carried integers are checked to repeat with that period, so the
//! runs cover every trip count.
//!
//! # Rules
//!
//! 1. **write after read** ([`Rule::WriteWhileRead`]): no write to a slot
//!    while an asynchronous reader of it may still read it;
//! 2. **write after write** ([`Rule::WriteWhileWriting`]): no write to a slot
//!    while an earlier write to it is still in flight;
//! 3. **read after write** ([`Rule::ReadBeforeWrite`]): a read of a slot
//!    only after the write it reads has completed (its commit group waited
//!    for, its barrier phase waited on);
//! 4. **ring order** ([`Rule::WrongSlot`]): the k-th execution of a reader
//!    reads the k-th value written to its ring, from the slot it was written
//!    to, not overwritten since, and not a copy that was predicated off;
//! 5. **arrivals** ([`Rule::WaitWithoutArrival`]): a barrier wait that must
//!    block has every arrival of the phase it waits for (else it hangs);
//! 6. **phases** ([`Rule::PhaseOverrun`]): no arrival on a phase that already
//!    has all its arrivals (the phases of the ring would drift);
//! 7. **drained** ([`Rule::NotDrained`]): nothing is in flight on a buffer
//!    when it is deallocated or the function returns.
//!
//! Warp-specialized code (`ws`) adds three rules between its threads, and
//! one within each:
//!
//! 8. **phase race** ([`Rule::PhaseRace`]): a wait that observed phase k of
//!    a barrier has the completion of phase k − 1 happening before it, and
//!    phase k + 1 completes only after it (one of that phase's arrivals
//!    happens after the wait), so it observes phase k in every interleaving;
//! 9. **exit imbalance** ([`Rule::ExitImbalance`]): at the join, every
//!    thread that waits on a barrier the copies land on has waited for as
//!    many of its phases as were started (loop trips and peeled trips alike);
//! 10. **store race** ([`Rule::StoreRace`]): a place of shared memory that a
//!     thread writes with `ttg.local_store` (a result buffer delivered from
//!     one partition to another) is read only after the store it reads
//!     happens before the read, and stored into only after every earlier read
//!     and write of it happens before the store (no read-after-write,
//!     write-after-read or write-after-write race between threads);
//! 11. **result in flight** ([`Rule::ResultInFlight`]): a thread uses the
//!     result of an asynchronous wgmma (in registers) only after a
//!     `warp_group_dot_wait` retired it; passing it to the wait itself, as
//!     the accumulator of a later wgmma, or around the loop is no use.
//!
//! A loop whose pipeline touches what the machine does not model (an op it
//! does not know on a ring, a slot index it cannot evaluate, warp
//! specialization, a predicate it cannot decide) is [`Verdict::Unsupported`]:
//! not proven, never passed. The verifier shares no code with twill's
//! scheduler or back end; it reads only the IR.

#[cfg(feature = "mlir")]
pub mod read;
mod run;
mod ws;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

pub use run::verify_function;

/// Schema name of the JSON report (`docs/pipeline-verifier.md`).
pub const SCHEMA: &str = "twill.pipeline-verify/1";

/// An operation of the program, as read from the IR.
#[derive(Debug, Clone, Default)]
pub struct Op {
    /// Number of the op in the function, in pre-order (unique).
    pub id: usize,
    pub name: String,
    pub operands: Vec<usize>,
    pub results: Vec<usize>,
    /// Integer and Boolean attributes (`value`, `num`, `pendings`,
    /// `predicate`, `isAsync`, `size`, `count`), Booleans as 0/1.
    pub attrs: BTreeMap<String, i64>,
    /// Per operand: its type is a shared-memory descriptor (`!ttg.memdesc`).
    pub memdesc: Vec<bool>,
    /// `operandSegmentSizes`, where the op has it (operands per group).
    pub segments: Vec<i64>,
    /// For an allocation: the shape of its result's memory descriptor and
    /// whether it is mutable.
    pub alloc: Option<(Vec<i64>, bool)>,
    /// For a `ttg.warp_specialize`: the warps of each partition.
    pub warps: Vec<i64>,
    pub regions: Vec<Block>,
    /// Source location, as the IR prints it.
    pub loc: String,
}

impl Op {
    /// Whether operand `i` is a shared-memory descriptor.
    pub fn is_memdesc(&self, i: usize) -> bool {
        self.memdesc.get(i).copied().unwrap_or(false)
    }

    /// The positions of the shared-memory operands, in order.
    pub fn memdesc_operands(&self) -> Vec<usize> {
        (0..self.operands.len())
            .filter(|&i| self.is_memdesc(i))
            .collect()
    }
}

/// A block: its arguments and operations.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub args: Vec<usize>,
    pub ops: Vec<Op>,
}

/// A function to verify.
#[derive(Debug, Clone, Default)]
pub struct Function {
    pub name: String,
    pub body: Block,
    /// Warps of the CTA (`ttg.num-warps` of the module), where known.
    pub num_warps: Option<u32>,
}

/// The safety rules (module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    WriteWhileRead,
    WriteWhileWriting,
    ReadBeforeWrite,
    WrongSlot,
    WaitWithoutArrival,
    PhaseOverrun,
    NotDrained,
    PhaseRace,
    ExitImbalance,
    StoreRace,
    ResultInFlight,
}

impl Rule {
    pub fn number(self) -> u32 {
        self as u32 + 1
    }
}

/// A broken rule, naming its operations (by location and name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: Rule,
    /// The ring (its allocation's location) and slot, or the barrier.
    pub buffer: String,
    pub slot: Option<i64>,
    /// The op that broke the rule, and the other op involved (the reader
    /// still in flight, the write not completed...), as `name @ loc`.
    pub op: String,
    pub other: Option<String>,
    /// The first trip count of the loop(s) where it happens, and the
    /// iteration (None: outside the loop).
    pub trip_counts: Vec<u64>,
    pub iteration: Option<u64>,
    pub text: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule {} ({:?}): {}",
            self.rule.number(),
            self.rule,
            self.text
        )
    }
}

/// Why a loop is not covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unsupported {
    pub op: String,
    pub why: String,
}

/// What the verifier concludes about one loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every rule holds for every trip count.
    Proved,
    /// Some rule is broken (the violations say which and where).
    Rejected,
    /// Not covered: not proven.
    Unsupported,
}

/// The report on one `scf.for` whose body issues asynchronous operations.
#[derive(Debug, Clone, Serialize)]
pub struct LoopReport {
    pub function: String,
    pub loc: String,
    pub verdict: Verdict,
    /// Rings the loop uses: allocation location and depth.
    pub rings: Vec<(String, i64)>,
    /// The largest trip count run (every smaller one was run too).
    pub max_trip_count: u64,
    pub violations: Vec<Violation>,
    pub unsupported: Option<Unsupported>,
}

/// The whole report (JSON, schema [`SCHEMA`]).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub loops: Vec<LoopReport>,
}

impl LoopReport {
    /// One line: the verdict and its reason.
    pub fn summary(&self) -> String {
        match self.verdict {
            Verdict::Proved => format!(
                "twill: pipeline proved safe: {} rings ({}), trip counts 0..={}",
                self.rings.len(),
                self.rings
                    .iter()
                    .map(|(_, d)| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.max_trip_count
            ),
            Verdict::Rejected => format!(
                "twill: pipeline rejected: {}",
                self.violations
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Verdict::Unsupported => {
                let u = self.unsupported.as_ref();
                format!(
                    "twill: pipeline not verified: {} ({})",
                    u.map_or("", |u| u.why.as_str()),
                    u.map_or("", |u| u.op.as_str())
                )
            }
        }
    }
}
