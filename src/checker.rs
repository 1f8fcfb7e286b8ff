//! Independent checker for modulo schedules.
//!
//! # Invariant
//!
//! A schedule (I, M, L) of a [`Problem`] is valid iff
//!
//! 1. **shape**: I >= 1 and M gives one issue cycle to every op;
//! 2. **completion**: every op finishes within the schedule,
//!    M(v) + cycles(v) <= L;
//! 3. **dependence**: for every edge (u, v, d, delta),
//!    M(v) + I*delta >= M(u) + d — the instance of v from iteration
//!    i + delta issues at least d cycles after u of iteration i;
//! 4. **modulo capacity**: in the steady state, where the ops of
//!    ceil(L/I) iterations overlap, every unit f at every residue
//!    r in [0, I) is occupied by at most cap(f) instances:
//!    sum over v, c with (M(v) + c) mod I = r of RRT[v][c][f] <= cap(f).
//!
//! This module shares no code with the encodings that produce schedules (the
//! ZLP in `modulo::zlp`, the brute force in the tests): it only reads the
//! problem's data, and it checks capacity by laying the steady state out
//! cycle by cycle rather than by residue arithmetic. It reports every
//! violation it finds, not just the first; an empty list means valid.

use std::fmt;

use crate::problem::{Problem, Schedule};

/// A broken rule, naming its operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Rule 1: the initiation interval must be at least 1.
    ZeroInitiationInterval,
    /// Rule 1: M must have one entry per op.
    WrongOpCount { expected: usize, got: usize },
    /// Rule 2: `op` issued at `start` with `cycles` cycles ends after `length`.
    Completion {
        op: String,
        start: u32,
        cycles: u32,
        length: u32,
    },
    /// Rule 3: edge `edge` from `from` to `to` needs M(to) + I*delta >= M(from) + d.
    Dependence {
        edge: usize,
        from: String,
        to: String,
        delay: u32,
        distance: u32,
        /// M(from) + d
        earliest: i64,
        /// M(to) + I*delta
        actual: i64,
    },
    /// Rule 4: `unit` at steady-state cycle `residue` holds `used` > `capacity`.
    Capacity {
        unit: String,
        residue: u32,
        used: u32,
        capacity: u32,
        /// The ops occupying the unit there, with their own cycle of execution.
        ops: Vec<(String, u32)>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::ZeroInitiationInterval => write!(f, "shape: initiation interval is 0"),
            Violation::WrongOpCount { expected, got } => {
                write!(f, "shape: schedule has {got} issue cycles for {expected} ops")
            }
            Violation::Completion {
                op,
                start,
                cycles,
                length,
            } => write!(
                f,
                "completion: `{op}` issues at {start} and runs {cycles} cycles, past L = {length}"
            ),
            Violation::Dependence {
                edge,
                from,
                to,
                delay,
                distance,
                earliest,
                actual,
            } => write!(
                f,
                "dependence: edge {edge} `{from}` -> `{to}` (d = {delay}, delta = {distance}) needs M({to}) + I*delta >= {earliest}, got {actual}"
            ),
            Violation::Capacity {
                unit,
                residue,
                used,
                capacity,
                ops,
            } => {
                let who: Vec<String> = ops.iter().map(|(o, c)| format!("{o}@{c}")).collect();
                write!(
                    f,
                    "capacity: {unit} at steady-state cycle {residue} holds {used} > {capacity} ({})",
                    who.join(", ")
                )
            }
        }
    }
}

/// Validates `s` against `p`; returns every violation (empty when valid).
pub fn check(p: &Problem, s: &Schedule) -> Vec<Violation> {
    let mut out = Vec::new();
    if s.ii == 0 {
        out.push(Violation::ZeroInitiationInterval);
    }
    if s.start.len() != p.ops.len() {
        out.push(Violation::WrongOpCount {
            expected: p.ops.len(),
            got: s.start.len(),
        });
    }
    if !out.is_empty() {
        return out;
    }

    for (op, &m) in p.ops.iter().zip(&s.start) {
        if m as u64 + op.cycles as u64 > s.length as u64 {
            out.push(Violation::Completion {
                op: op.name.clone(),
                start: m,
                cycles: op.cycles,
                length: s.length,
            });
        }
    }

    for (k, e) in p.edges.iter().enumerate() {
        let earliest = s.start[e.from] as i64 + e.delay as i64;
        let actual = s.start[e.to] as i64 + s.ii as i64 * e.distance as i64;
        if actual < earliest {
            out.push(Violation::Dependence {
                edge: k,
                from: p.ops[e.from].name.clone(),
                to: p.ops[e.to].name.clone(),
                delay: e.delay,
                distance: e.distance,
                earliest,
                actual,
            });
        }
    }

    // Lay out the steady state: iteration j's copy of op v occupies absolute
    // cycles j*I + M(v) + c. Observe one window of I cycles starting at
    // W = (copies - 1) * I + ... far enough that every copy that can reach it
    // is present; count occupancy per absolute cycle inside the window.
    let ii = s.ii as u64;
    let end = p
        .ops
        .iter()
        .zip(&s.start)
        .map(|(o, &m)| m as u64 + o.cycles as u64)
        .max()
        .unwrap_or(0);
    // An op instance lasting until `end` started at most `end` cycles before,
    // so with iterations issued every I cycles, a window starting at
    // W = ceil(end / I) * I sees every overlapping instance from
    // iterations 0 ..= W / I (all issued before the window ends).
    let window = end.div_ceil(ii) * ii;
    let iterations = window / ii + 1;
    for (f, unit) in p.units.iter().enumerate() {
        for cycle in window..window + ii {
            let mut used = 0u32;
            let mut who = Vec::new();
            for j in 0..iterations {
                for (op, &m) in p.ops.iter().zip(&s.start) {
                    let issue = j * ii + m as u64;
                    if cycle < issue || cycle >= issue + op.cycles as u64 {
                        continue;
                    }
                    let row = (cycle - issue) as usize;
                    let n = op.rrt[row][f];
                    if n > 0 {
                        used += n;
                        who.push((op.name.clone(), row as u32));
                    }
                }
            }
            if used > p.capacity[f] {
                out.push(Violation::Capacity {
                    unit: unit.clone(),
                    residue: (cycle - window) as u32,
                    used,
                    capacity: p.capacity[f],
                    ops: who,
                });
            }
        }
    }
    out
}

/// Whether `s` is a valid schedule of `p`.
pub fn is_valid(p: &Problem, s: &Schedule) -> bool {
    check(p, s).is_empty()
}
