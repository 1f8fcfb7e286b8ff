//! Test-only reference implementations, sharing no code with the solvers or
//! the checker: a literal validity test of a modulo schedule and an
//! exhaustive search over I and M for tiny problems.
#![allow(dead_code, clippy::needless_range_loop, clippy::too_many_arguments)]

use twill::problem::Problem;

/// Validity of (I, M, L) written from the definitions, independently of
/// `twill::checker`: every op completes by L, every edge holds across
/// iterations, and the modular reservation table respects capacities.
pub fn valid(p: &Problem, ii: u32, start: &[u32], length: u32) -> bool {
    if ii == 0 || start.len() != p.ops.len() {
        return false;
    }
    if p.ops.iter().zip(start).any(|(o, &s)| s + o.cycles > length) {
        return false;
    }
    for e in &p.edges {
        if (start[e.to] + ii * e.distance) < start[e.from] + e.delay {
            return false;
        }
    }
    let mut table = vec![vec![0u32; p.units.len()]; ii as usize];
    for (o, &s) in p.ops.iter().zip(start) {
        for (c, row) in o.rrt.iter().enumerate() {
            for (f, &n) in row.iter().enumerate() {
                table[((s as usize) + c) % ii as usize][f] += n;
            }
        }
    }
    table
        .iter()
        .all(|row| row.iter().zip(&p.capacity).all(|(n, cap)| n <= cap))
        && pins_hold(p, ii, start)
        && (0..p.units.len()).all(|f| bandwidth_used(p, f, None) <= bandwidth_offered(p, f, ii))
}

/// Raw cycles bandwidth unit `f` moves in `ii` normalized cycles
/// (0 for a functional unit, which holds slots instead).
pub fn bandwidth_offered(p: &Problem, f: usize, ii: u32) -> u64 {
    if !p.bandwidth[f] {
        return u64::MAX;
    }
    // raw cycles = normalized cycles * scale.0 / scale.1, rounded down
    (ii as u64 * p.capacity[f] as u64 * p.scale.0) / p.scale.1
}

/// Raw cycles of traffic on unit `f` in one iteration: every op's own, and
/// with a group assignment, the source's crossing charge for each distinct
/// data edge between fixed-latency ops on different groups.
pub fn bandwidth_used(p: &Problem, f: usize, group: Option<&[u32]>) -> u64 {
    let mut used: u64 = p.ops.iter().map(|o| o.traffic[f]).sum();
    if let (Some(g), Some(cu)) = (group, p.crossing_unit) {
        if cu == f {
            let mut pairs: Vec<(usize, usize)> = Vec::new();
            for e in &p.edges {
                let fixed = !p.ops[e.from].variable_latency && !p.ops[e.to].variable_latency;
                if e.from != e.to
                    && !e.order
                    && fixed
                    && g[e.from] != g[e.to]
                    && !pairs.contains(&(e.from, e.to))
                {
                    pairs.push((e.from, e.to));
                    used += p.ops[e.from].cross_traffic;
                }
            }
        }
    }
    used
}

/// Last-stage pins: no op issues in a later stage than a pinned op.
pub fn pins_hold(p: &Problem, ii: u32, start: &[u32]) -> bool {
    let last = start.iter().map(|&s| s / ii).max().unwrap_or(0);
    p.ops
        .iter()
        .zip(start)
        .all(|(o, &s)| !o.last_stage || s / ii == last)
}

/// Exhaustive search: the smallest I that admits a modulo schedule, and the
/// smallest L at that I. Start times range over [0, horizon) with a naive
/// horizon (every op after every other, each delayed by every edge); the
/// depth-first enumeration prunes partial assignments that already break a
/// dependence or a capacity, or that cannot beat the best length found.
pub fn min_ii_and_length(p: &Problem, max_ii: u32) -> Option<(u32, u32)> {
    for ii in 1..=max_ii {
        if let Some(l) = min_length(p, ii) {
            return Some((ii, l));
        }
    }
    None
}

/// Naive bound on start times: any op can be delayed by all cycles, all
/// delays and one I per op without needing more.
pub fn naive_horizon(p: &Problem, ii: u32) -> u32 {
    let cycles: u32 = p.ops.iter().map(|o| o.cycles).sum();
    let delays: u32 = p.edges.iter().map(|e| e.delay).sum();
    // A pinned op may have to wait for the last stage: up to one more I each.
    let pinned = p.ops.iter().filter(|o| o.last_stage).count() as u32;
    cycles + delays + ii * (p.ops.len() as u32 + 1 + pinned)
}

/// Smallest schedule length at `ii`, by exhaustive enumeration.
pub fn min_length(p: &Problem, ii: u32) -> Option<u32> {
    let n = p.ops.len();
    // The ops' own traffic does not depend on M: it fits or no M does.
    if (0..p.units.len()).any(|f| bandwidth_used(p, f, None) > bandwidth_offered(p, f, ii)) {
        return None;
    }
    if n == 0 {
        return Some(0);
    }
    let horizon = naive_horizon(p, ii);
    let mut start = vec![0u32; n];
    let mut table = vec![vec![0u32; p.units.len()]; ii as usize];
    let mut best: Option<u32> = None;
    dfs(p, ii, horizon, 0, &mut start, &mut table, 0, &mut best);
    best
}

#[allow(clippy::too_many_arguments)]
fn dfs(
    p: &Problem,
    ii: u32,
    horizon: u32,
    v: usize,
    start: &mut Vec<u32>,
    table: &mut Vec<Vec<u32>>,
    end: u32,
    best: &mut Option<u32>,
) {
    if v == p.ops.len() {
        if best.is_none_or(|b| end < b) && pins_hold(p, ii, start) {
            *best = Some(end);
        }
        return;
    }
    let op = &p.ops[v];
    for t in 0..horizon {
        let new_end = end.max(t + op.cycles);
        if best.is_some_and(|b| new_end >= b) {
            break;
        }
        start[v] = t;
        let deps_ok = p.edges.iter().all(|e| {
            if e.from > v || e.to > v || (e.from != v && e.to != v) {
                return true;
            }
            start[e.to] + ii * e.distance >= start[e.from] + e.delay
        });
        if !deps_ok {
            continue;
        }
        let mut fits = true;
        for (c, row) in op.rrt.iter().enumerate() {
            for (f, &k) in row.iter().enumerate() {
                let r = ((t as usize) + c) % ii as usize;
                table[r][f] += k;
                if table[r][f] > p.capacity[f] {
                    fits = false;
                }
            }
        }
        if fits {
            dfs(p, ii, horizon, v + 1, start, table, new_end, best);
        }
        for (c, row) in op.rrt.iter().enumerate() {
            for (f, &k) in row.iter().enumerate() {
                table[((t as usize) + c) % ii as usize][f] -= k;
            }
        }
    }
}

/// A two-unit machine description for generated problems.
pub fn machine_toml(tc: u32, sfu: u32) -> String {
    machine_toml_async(tc, sfu, false)
}

/// `machine_toml` with the tensor-core unit asynchronous or not (an op on
/// it then does not count for blocking concurrency).
pub fn machine_toml_async(tc: u32, sfu: u32, tc_async: bool) -> String {
    format!(
        "name = 'test'\nvendor = 'test'\narch = 'test'\ndescription = 'generated'\n\
         clock_mhz = 1000\nsms = 1\n\
         [units.TC]\ncapacity = {tc}\nasynchronous = {tc_async}\n[units.SFU]\ncapacity = {sfu}\n\
         [units.BW]\ncapacity = 1\nbytes_per_cycle = 1\ncrossings = true\n\
         [memory.smem]\ncapacity = 1000\nunit = 'bytes'\n\
         [warps]\nthreads_per_warp = 32\nwarp_group_size = 4\nmax_warps_per_cta = 32\n\
         max_regs_per_thread = 255\nregister_file = 65536\n"
    )
}

/// Joint validity (the checker's rules 1-8) written independently of
/// `twill::checker`: unroll many iterations into explicit instances with
/// absolute times and test every rule on a middle stretch of I cycles.
pub fn valid_joint(
    p: &Problem,
    ii: u32,
    start: &[u32],
    length: u32,
    group: &[u32],
    groups: u32,
    reg_limit: u32,
) -> bool {
    if !valid(p, ii, start, length) || group.len() != p.ops.len() {
        return false;
    }
    let n = p.ops.len();
    // Pinned ops are in the last stage.
    let last = (0..n).map(|v| start[v] / ii).max().unwrap_or(0);
    if (0..n).any(|v| p.ops[v].last_stage && start[v] / ii != last) {
        return false;
    }
    for v in 0..n {
        let ok = if p.ops[v].variable_latency {
            group[v] == 0
        } else {
            group[v] >= 1 && group[v] <= groups
        };
        if !ok {
            return false;
        }
    }
    if (0..p.units.len()).any(|f| bandwidth_used(p, f, Some(group)) > bandwidth_offered(p, f, ii)) {
        return false;
    }
    // Colocation: each same_group set on one group.
    if p.same_group
        .iter()
        .any(|set| set.iter().any(|&v| group[v] != group[set[0]]))
    {
        return false;
    }
    for e in &p.edges {
        if group[e.from] != group[e.to]
            && start[e.to] + ii * e.distance < start[e.from] + e.delay + p.ops[e.from].spill_cost
        {
            return false;
        }
    }
    let ii = ii as i64;
    let dmax = p.edges.iter().map(|e| e.distance as i64).max().unwrap_or(0);
    let hmax = p.edges.iter().map(|e| e.hold as i64).max().unwrap_or(0);
    let iters = ((length as i64 + hmax) / ii + dmax + 2) * 3;
    // Instances: (op, iteration, issue time).
    let issue = |v: usize, k: i64| start[v] as i64 + k * ii;
    let end_of_life = |v: usize, k: i64| -> Option<i64> {
        p.edges
            .iter()
            .filter(|e| e.from == v && !e.order)
            .map(|e| issue(e.to, k + e.distance as i64) + e.hold as i64)
            .max()
    };
    // An op needs its warp (rule 8) unless it occupies some unit and only
    // asynchronous ones.
    let needs_warp = |o: usize| -> bool {
        let rows = &p.ops[o].rrt;
        let mut any = false;
        for row in rows {
            for (f, &n) in row.iter().enumerate() {
                if n > 0 {
                    any = true;
                    if !p.asynchronous[f] {
                        return true;
                    }
                }
            }
        }
        !any
    };
    let mid = (iters / 2) * ii;
    for t in mid..mid + ii {
        let mut regs = std::collections::HashMap::<u32, u64>::new();
        let mut mem = vec![0u64; p.memories.len()];
        for v in 0..n {
            for k in 0..iters {
                if let Some(end) = end_of_life(v, k) {
                    if issue(v, k) <= t && t < end {
                        *regs.entry(group[v]).or_default() += p.ops[v].regs as u64;
                        for (m, slot) in mem.iter_mut().enumerate() {
                            *slot += p.ops[v].memory[m];
                        }
                    }
                }
            }
        }
        if regs.values().any(|&r| r > reg_limit as u64) {
            return false;
        }
        if mem.iter().zip(&p.memories).any(|(u, (_, cap))| u > cap) {
            return false;
        }
        for v in 0..n {
            let blocks = p
                .edges
                .iter()
                .any(|e| e.to == v && (e.blocking || group[e.from] != group[v]));
            if !blocks || (t - start[v] as i64).rem_euclid(ii) != 0 {
                continue;
            }
            for o in (0..n).filter(|&o| o != v && group[o] == group[v] && needs_warp(o)) {
                for k in 0..iters {
                    let s = issue(o, k);
                    if s <= t && t < s + p.ops[o].cycles as i64 {
                        return false;
                    }
                }
            }
        }
    }
    true
}

/// Algorithm 1's answer by exhaustive search: the smallest I with a modulo
/// schedule whose minimum length L0 admits a joint schedule of some length
/// L in [L0, ceil(L0/I)*I], and the smallest such L.
pub fn joint_brute_force(
    p: &Problem,
    groups: u32,
    reg_limit: u32,
    max_ii: u32,
) -> Option<(u32, u32)> {
    for ii in 1..=max_ii {
        let Some(l0) = min_length(p, ii) else {
            continue;
        };
        let top = l0.div_ceil(ii).max(1) * ii;
        for l in l0..=top {
            if exists_joint(p, ii, l, groups, reg_limit) {
                return Some((ii, l));
            }
        }
    }
    None
}

fn exists_joint(p: &Problem, ii: u32, l: u32, groups: u32, reg_limit: u32) -> bool {
    let mut found = false;
    each_joint(p, ii, l, groups, reg_limit, &mut |_, _, _| {
        found = true;
        true
    });
    found
}

/// A visitor of joint schedules (start times, groups, length); returning
/// true stops the enumeration.
pub type Visit<'a> = &'a mut dyn FnMut(&[u32], &[u32], u32) -> bool;

/// Every valid joint schedule of `p` at `ii` of length at most `l` with
/// `groups` compute groups, passed to `visit` until it returns true.
/// Partial assignments that already break a dependence are pruned.
pub fn each_joint(p: &Problem, ii: u32, l: u32, groups: u32, reg_limit: u32, visit: Visit) {
    let n = p.ops.len();
    let mut start = vec![0u32; n];
    let mut group = vec![0u32; n];
    // Returns true when the visitor stopped the enumeration.
    fn rec(
        p: &Problem,
        ii: u32,
        l: u32,
        groups: u32,
        reg_limit: u32,
        v: usize,
        start: &mut Vec<u32>,
        group: &mut Vec<u32>,
        visit: Visit,
    ) -> bool {
        if v == p.ops.len() {
            let len = p
                .ops
                .iter()
                .zip(start.iter())
                .map(|(o, &s)| s + o.cycles)
                .max()
                .unwrap_or(0);
            return len <= l
                && valid_joint(p, ii, start, l, group, groups, reg_limit)
                && visit(start, group, len);
        }
        let choices: Vec<u32> = if p.ops[v].variable_latency {
            vec![0]
        } else {
            (1..=groups).collect()
        };
        for t in 0..=l.saturating_sub(p.ops[v].cycles) {
            if t + p.ops[v].cycles > l {
                break;
            }
            start[v] = t;
            // Prune on dependences among assigned ops.
            let ok = p.edges.iter().all(|e| {
                e.from > v
                    || e.to > v
                    || (e.from != v && e.to != v)
                    || start[e.to] + ii * e.distance >= start[e.from] + e.delay
            });
            if !ok {
                continue;
            }
            for &g in &choices {
                group[v] = g;
                if rec(p, ii, l, groups, reg_limit, v + 1, start, group, visit) {
                    return true;
                }
            }
        }
        false
    }
    rec(
        p, ii, l, groups, reg_limit, 0, &mut start, &mut group, visit,
    );
}

/// Latency slack (`twill::checker::latency_slack`'s definition) by
/// enumerating simple paths: for asynchronous, non-streaming ops u != w
/// (every occupied unit asynchronous) joined by a path whose inner ops are
/// not such ops, M(w) - M(u) - the largest sum of (delay - I * distance)
/// over those paths; the least over pairs.
pub fn slack_by_paths(p: &Problem, ii: u32, start: &[u32]) -> Option<i64> {
    let n = p.ops.len();
    let end: Vec<bool> = (0..n)
        .map(|v| {
            let used: Vec<usize> = (0..p.units.len())
                .filter(|&f| p.ops[v].rrt.iter().any(|row| row[f] > 0))
                .collect();
            !used.is_empty() && used.iter().all(|&f| p.asynchronous[f]) && !p.ops[v].streaming
        })
        .collect();
    fn walk(
        p: &Problem,
        ii: i64,
        end: &[bool],
        at: usize,
        sum: i64,
        seen: &mut Vec<bool>,
        best: &mut Vec<Option<i64>>,
    ) {
        for e in p.edges.iter().filter(|e| e.from == at) {
            let w = sum + e.delay as i64 - ii * e.distance as i64;
            if end[e.to] {
                if best[e.to].is_none_or(|b| w > b) {
                    best[e.to] = Some(w);
                }
            } else if !seen[e.to] {
                seen[e.to] = true;
                walk(p, ii, end, e.to, w, seen, best);
                seen[e.to] = false;
            }
        }
    }
    let mut least: Option<i64> = None;
    for u in (0..n).filter(|&u| end[u]) {
        let mut best = vec![None; n];
        let mut seen = vec![false; n];
        walk(p, ii as i64, &end, u, 0, &mut seen, &mut best);
        for w in (0..n).filter(|&w| w != u) {
            if let Some(lag) = best[w] {
                let s = start[w] as i64 - start[u] as i64 - lag;
                least = Some(least.map_or(s, |x: i64| x.min(s)));
            }
        }
    }
    least
}
