//! Cost normalization (paper section 5.2) as an integer linear program.
//!
//! Given the distinct positive durations C of a problem (op cycles, reservation
//! table runs, explicit delays, spill costs), find small integers C' whose
//! ratios approximate those of C:
//!
//! ```text
//! minimize F  subject to  -F <= C[i]*C'[j] - C[j]*C'[i] <= F   for all i < j
//!                         1 <= sum C' <= U,  C'[i] >= 1 integer
//! ```
//!
//! Two refinements, both documented in NOTES.md: every C'[i] is at least 1 (a
//! positive duration must not vanish, or an op would stop occupying its unit),
//! and among the F-optimal solutions the one with the smallest sum is taken
//! (objective F*(U+1) + sum C', exact because F is an integer and sum C' <= U),
//! which makes the result unique in F and sum and keeps exact small inputs as
//! they are. C is first divided by its gcd, which changes no ratio.

use good_lp::{
    constraint, solvers::highs::highs, variable, Expression, ProblemVariables, Solution,
    SolverModel,
};

/// Result of normalizing a list of distinct positive durations.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalization {
    /// The input durations, sorted ascending, distinct.
    pub original: Vec<u64>,
    /// The normalized duration of each input.
    pub normalized: Vec<u64>,
    /// The optimal objective F of the ZLP (on the gcd-reduced input).
    pub f: u64,
    /// Largest relative ratio error, max |(C'i/C'j) / (Ci/Cj) - 1|.
    pub max_distortion: f64,
    /// The bound U used.
    pub u: u64,
    /// Whether the ZLP was solved to proven optimality.
    pub proven: bool,
}

impl Normalization {
    /// Normalized value of an original duration (0 stays 0).
    pub fn map(&self, c: u64) -> u64 {
        if c == 0 {
            return 0;
        }
        match self.original.binary_search(&c) {
            Ok(i) => self.normalized[i],
            Err(_) => panic!("duration {c} was not part of the normalization"),
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Largest relative ratio error between `c` and `n`.
pub fn distortion(c: &[u64], n: &[u64]) -> f64 {
    let mut worst: f64 = 0.0;
    for i in 0..c.len() {
        for j in 0..c.len() {
            let want = c[i] as f64 / c[j] as f64;
            let got = n[i] as f64 / n[j] as f64;
            worst = worst.max((got / want - 1.0).abs());
        }
    }
    worst
}

/// Normalizes the positive values of `values` (zeros and duplicates ignored).
pub fn normalize(values: &[u64], u: u64, time_limit: f64) -> Result<Normalization, String> {
    let mut original: Vec<u64> = values.iter().copied().filter(|&v| v > 0).collect();
    original.sort_unstable();
    original.dedup();
    let n = original.len();
    if n == 0 {
        return Ok(Normalization {
            original,
            normalized: vec![],
            f: 0,
            max_distortion: 0.0,
            u,
            proven: true,
        });
    }
    if (n as u64) > u {
        return Err(format!(
            "{n} distinct durations cannot be normalized with U = {u}: every one needs at least 1 (raise --u)"
        ));
    }
    let g = original.iter().fold(0, |a, &b| gcd(a, b));
    let c: Vec<f64> = original.iter().map(|&v| (v / g) as f64).collect();

    let mut vars = ProblemVariables::new();
    let cp: Vec<_> = (0..n)
        .map(|_| vars.add(variable().integer().min(1).max(u as f64)))
        .collect();
    let f = vars.add(variable().integer().min(0));
    let sum: Expression = cp.iter().copied().sum();
    let objective = (u as f64 + 1.0) * f + sum.clone();
    let mut model = highs(vars.minimise(objective));
    model.set_verbose(false);
    let mut model = model
        .set_time_limit(time_limit)
        .set_threads(1)
        .set_mip_rel_gap(0.0)
        .map_err(|e| e.to_string())?
        .set_mip_abs_gap(0.0)
        .map_err(|e| e.to_string())?;
    model.add_constraint(constraint!(sum <= u as f64));
    for i in 0..n {
        for j in i + 1..n {
            let diff = c[i] * cp[j] - c[j] * cp[i];
            model.add_constraint(constraint!(diff.clone() <= f));
            model.add_constraint(constraint!(diff >= -1.0 * f));
        }
    }
    let sol = model
        .solve()
        .map_err(|e| format!("cost normalization ZLP failed: {e}"))?;
    let proven = matches!(sol.status(), good_lp::SolutionStatus::Optimal);
    let normalized: Vec<u64> = cp.iter().map(|v| sol.value(*v).round() as u64).collect();
    let fval = sol.value(f).round() as u64;
    let max_distortion = distortion(&original, &normalized);
    Ok(Normalization {
        original,
        normalized,
        f: fval,
        max_distortion,
        u,
        proven,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_ratios_are_kept_small() {
        let n = normalize(&[1024, 1024, 512, 128, 0], 300, 10.0).unwrap();
        assert_eq!(n.original, vec![128, 512, 1024]);
        assert_eq!(n.normalized, vec![1, 4, 8]);
        assert_eq!(n.f, 0);
        assert_eq!(n.max_distortion, 0.0);
        assert!(n.proven);
        assert_eq!(n.map(512), 4);
        assert_eq!(n.map(0), 0);
    }

    #[test]
    fn small_integers_are_unchanged() {
        let n = normalize(&[1, 2, 3], 300, 10.0).unwrap();
        assert_eq!(n.normalized, vec![1, 2, 3]);
    }

    #[test]
    fn inexact_ratios_minimize_f() {
        let n = normalize(&[1000, 1024, 7], 300, 10.0).unwrap();
        // Brute force the optimum of the same objective for comparison.
        let (c, u) = ([7u64, 1000, 1024], 300u64);
        let mut best = (u64::MAX, u64::MAX);
        for a in 1..=u {
            for b in 1..=u - a {
                for d in 1..=(u - a - b) {
                    let x = [a, b, d];
                    let mut f = 0;
                    for i in 0..3 {
                        for j in 0..3 {
                            f = f.max((c[i] * x[j]).abs_diff(c[j] * x[i]));
                        }
                    }
                    best = best.min((f, a + b + d));
                }
            }
        }
        assert_eq!(n.f, best.0);
        assert_eq!(n.normalized.iter().sum::<u64>(), best.1);
    }

    #[test]
    fn too_many_values_for_u() {
        assert!(normalize(&[1, 2, 3, 4], 3, 10.0).is_err());
    }
}
