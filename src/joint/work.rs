//! Deterministic work: z3's resource count.
//!
//! A wall-clock limit makes the answer depend on the machine's speed and
//! load. z3 counts the work of every query in a per-context resource
//! counter ("rlimit count") and stops a query whose own limit (`rlimit`,
//! counted from the query's start) is reached; for the same formulas and
//! the same sequence of queries the counts are the same on any machine.
//! [`Meter`] keeps the work one search spends in the calling thread's
//! context against a budget, so that a search cut short by the budget is
//! cut at the same point everywhere.

use z3::{Solver, StatisticsValue};

/// The largest budget a [`Meter`] accepts: z3 reports its count as a 32-bit
/// number, read here modulo 2^32, so one search must spend less than that.
pub const MAX_BUDGET: u64 = (u32::MAX / 2) as u64;

/// The resource count of the calling thread's z3 context (modulo 2^32).
fn count() -> u32 {
    // A fresh solver's statistics report the context's count.
    match Solver::new().get_statistics().value("rlimit count") {
        Some(StatisticsValue::UInt(n)) => n,
        Some(StatisticsValue::Double(d)) => (d as u64 & u64::from(u32::MAX)) as u32,
        None => 0,
    }
}

/// The work one search spends in the calling thread's z3 context, against
/// a budget (0: none).
#[derive(Debug, Clone, Copy)]
pub struct Meter {
    budget: u64,
    base: u32,
}

impl Meter {
    /// Starts counting now, in the calling thread's context.
    pub fn start(budget: u64) -> Meter {
        Meter {
            budget: budget.min(MAX_BUDGET),
            base: count(),
        }
    }

    /// The budget (0: none).
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Resource units spent since the start.
    pub fn spent(&self) -> u64 {
        u64::from(count().wrapping_sub(self.base))
    }

    /// Whether the budget is spent (never without one).
    pub fn exhausted(&self) -> bool {
        self.budget > 0 && self.spent() >= self.budget
    }

    /// The `rlimit` of the next query: what is left of the budget, never
    /// more than `cap` where `cap` > 0; 0 (no limit) only when neither
    /// bounds it. At least 1 while a budget is set: z3 reads 0 as no limit.
    pub fn rlimit(&self, cap: u32) -> u32 {
        if self.budget == 0 {
            return cap;
        }
        let left = self.budget.saturating_sub(self.spent()).max(1);
        let left = u32::try_from(left).unwrap_or(u32::MAX);
        if cap == 0 {
            left
        } else {
            left.min(cap)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use z3::ast::Int;
    use z3::{Params, SatResult};

    /// Nine pigeons in eight holes: unsatisfiable, and costly to refute.
    fn pigeons(s: &Solver) {
        let n = 9;
        let xs: Vec<Int> = (0..n).map(|i| Int::new_const(format!("x{i}"))).collect();
        for x in &xs {
            s.assert(x.ge(Int::from_i64(0)));
            s.assert(x.lt(Int::from_i64(n - 1)));
        }
        for i in 0..xs.len() {
            for j in i + 1..xs.len() {
                s.assert(xs[i].ne(&xs[j]));
            }
        }
    }

    fn check_within(s: &Solver, meter: &Meter) -> SatResult {
        let mut p = Params::new();
        p.set_u32("rlimit", meter.rlimit(0));
        s.set_params(&p);
        s.check()
    }

    #[test]
    fn a_budget_stops_a_query_at_the_same_count() {
        let spent = || {
            let meter = Meter::start(200_000);
            let s = Solver::new();
            pigeons(&s);
            assert_eq!(check_within(&s, &meter), SatResult::Unknown);
            assert!(meter.exhausted());
            meter.spent()
        };
        let (a, b) = (spent(), spent());
        assert_eq!(a, b, "the same query spends the same work");
        assert!((200_000..200_000 + 10_000).contains(&a), "{a}");
    }

    #[test]
    fn what_is_left_bounds_the_next_query() {
        let meter = Meter::start(0);
        assert_eq!(meter.rlimit(0), 0, "no budget, no cap: no limit");
        assert_eq!(meter.rlimit(7), 7);
        let meter = Meter::start(1_000);
        // Reading the count costs z3 a unit or so of its own.
        assert!(
            (990..=1_000).contains(&meter.rlimit(0)),
            "{}",
            meter.rlimit(0)
        );
        assert_eq!(meter.rlimit(10), 10);
        assert!(!meter.exhausted());
        let meter = Meter::start(u64::MAX);
        assert_eq!(meter.budget(), MAX_BUDGET);
    }
}
