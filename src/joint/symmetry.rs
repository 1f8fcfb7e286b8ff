//! Symmetry of a problem: an involution of its ops that maps the problem
//! onto itself (every op attribute kept, every edge mapped to an equal edge).
//!
//! Sub-tiled kernels are full of them: the chains of sub-tile a and sub-tile
//! b are interchangeable. If pi is such an involution and S a joint schedule,
//! then pi(S) (op pi(x) takes x's issue cycle and group) is one too, so an
//! encoding may require M(v) <= M(pi(v)) for the first op v that pi moves:
//! from any solution, either it or its image satisfies this. Group renaming
//! (the encodings' other symmetry breaking) leaves issue cycles unchanged,
//! so the two restrictions together still keep a solution whenever one exists.
//! With colocation (`same_group`) sets, pi must also map the colocation
//! relation onto itself, or pi(S) could break a set.

use petgraph::unionfind::UnionFind;

use crate::problem::{Problem, ProblemOp};

fn same_op(a: &ProblemOp, b: &ProblemOp) -> bool {
    a.cycles == b.cycles
        && a.rrt == b.rrt
        && a.regs == b.regs
        && a.memory == b.memory
        && a.variable_latency == b.variable_latency
        && a.streaming == b.streaming
        && a.warp_group == b.warp_group
        && a.last_stage == b.last_stage
        && a.spill_cost == b.spill_cost
        && a.asynchronous == b.asynchronous
}

/// An edge as (from, to, delay, distance, blocking, order).
type EdgeKey = (usize, usize, u32, u32, bool, bool);
/// An edge seen from one end: (colour of the other end, delay, distance,
/// blocking, order, outgoing).
type Incidence = (usize, u32, u32, bool, bool, bool);

/// Edges as a sorted multiset.
fn edge_key(p: &Problem, map: &[usize]) -> Vec<EdgeKey> {
    let mut k: Vec<_> = p
        .edges
        .iter()
        .map(|e| {
            (
                map[e.from],
                map[e.to],
                e.delay,
                e.distance,
                e.blocking,
                e.order,
            )
        })
        .collect();
    k.sort_unstable();
    k
}

/// Finds a non-trivial involutive automorphism, as (v, pi(v)) with v the
/// smallest op it moves, together with the whole permutation.
pub fn find_involution(p: &Problem) -> Option<(usize, Vec<usize>)> {
    let n = p.ops.len();
    if n > 512 {
        return None;
    }
    // Colour refinement: op attributes, then neighbourhoods.
    let mut color: Vec<usize> = (0..n)
        .map(|v| (0..n).find(|&u| same_op(&p.ops[u], &p.ops[v])).unwrap_or(v))
        .collect();
    for _ in 0..n {
        let sig: Vec<(usize, Vec<Incidence>)> = (0..n)
            .map(|v| {
                let mut s: Vec<Incidence> = p
                    .edges
                    .iter()
                    .filter(|e| e.from == v || e.to == v)
                    .map(|e| {
                        let out = e.from == v;
                        let other = if out { e.to } else { e.from };
                        (color[other], e.delay, e.distance, e.blocking, e.order, out)
                    })
                    .collect();
                s.sort_unstable();
                (color[v], s)
            })
            .collect();
        let next: Vec<usize> = (0..n)
            .map(|v| (0..n).find(|&u| sig[u] == sig[v]).unwrap_or(v))
            .collect();
        if next == color {
            break;
        }
        color = next;
    }
    let target = edge_key(p, &(0..n).collect::<Vec<_>>());
    let classes = colocation_classes(p);
    for v0 in 0..n {
        for u0 in (v0 + 1)..n {
            if color[u0] != color[v0] {
                continue;
            }
            // Try the involution swapping v0 and u0, extended over the rest.
            let mut map: Vec<Option<usize>> = vec![None; n];
            map[v0] = Some(u0);
            map[u0] = Some(v0);
            if extend(p, &color, &classes, &mut map, &target) {
                let perm: Vec<usize> = map.iter().map(|m| m.unwrap_or(0)).collect();
                return Some((v0, perm));
            }
        }
    }
    None
}

fn extend(
    p: &Problem,
    color: &[usize],
    class: &[usize],
    map: &mut Vec<Option<usize>>,
    target: &[EdgeKey],
) -> bool {
    let n = p.ops.len();
    let Some(v) = (0..n).find(|&v| map[v].is_none()) else {
        let perm: Vec<usize> = map.iter().map(|m| m.unwrap_or(0)).collect();
        return edge_key(p, &perm) == target && keeps_same_group(p, class, &perm);
    };
    // Candidates: v itself, or a same-coloured unmapped op (swapped with v).
    let mut candidates = vec![v];
    candidates.extend((v + 1..n).filter(|&u| map[u].is_none() && color[u] == color[v]));
    for u in candidates {
        map[v] = Some(u);
        map[u] = Some(v);
        if consistent(p, map)
            && partial_same_group(p, class, map)
            && extend(p, color, class, map, target)
        {
            return true;
        }
        map[v] = None;
        map[u] = None;
    }
    false
}

/// The permutation maps the colocation relation (the equivalence that the
/// `same_group` sets generate) onto itself: the image of every set lies in
/// one class. A bijection that maps the generating pairs into the relation
/// maps the whole relation onto it.
fn keeps_same_group(p: &Problem, class: &[usize], perm: &[usize]) -> bool {
    p.same_group.iter().all(|set| {
        let first = class[perm[set[0]]];
        set.iter().all(|&v| class[perm[v]] == first)
    })
}

/// Within every `same_group` set, the already mapped members have images in
/// one class of the colocation relation (a necessary condition of
/// [`keeps_same_group`], checked on partial maps to prune the search).
fn partial_same_group(p: &Problem, class: &[usize], map: &[Option<usize>]) -> bool {
    p.same_group.iter().all(|set| {
        let mut images = set.iter().filter_map(|&v| map[v]).map(|w| class[w]);
        match images.next() {
            Some(first) => images.all(|c| c == first),
            None => true,
        }
    })
}

/// Class (a representative op) of every op under the colocation relation.
fn colocation_classes(p: &Problem) -> Vec<usize> {
    let mut classes = UnionFind::new(p.ops.len());
    for set in &p.same_group {
        for pair in set.windows(2) {
            classes.union(pair[0], pair[1]);
        }
    }
    classes.into_labeling()
}

/// Every edge between mapped ops maps onto an existing edge.
fn consistent(p: &Problem, map: &[Option<usize>]) -> bool {
    p.edges.iter().all(|e| match (map[e.from], map[e.to]) {
        (Some(a), Some(b)) => p.edges.iter().any(|f| {
            f.from == a
                && f.to == b
                && f.delay == e.delay
                && f.distance == e.distance
                && f.blocking == e.blocking
                && f.order == e.order
        }),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::load;
    use crate::problem::BuildOptions;
    use crate::Machine;

    fn problem(path: &str, machine: &str) -> Problem {
        let g = load::load_file(std::path::Path::new(path)).unwrap();
        Problem::build(
            &g,
            &Machine::select(machine).unwrap(),
            BuildOptions::default(),
        )
        .unwrap()
        .0
    }

    #[test]
    fn subtiles_are_swapped() {
        let p = problem("examples/graphs/fa_fwd_hopper.toml", "h100");
        let (v, perm) = find_involution(&p).expect("sub-tiles a and b are symmetric");
        let name = |i: usize| p.ops[i].name.as_str();
        assert_eq!((name(v), name(perm[v])), ("qk_a", "qk_b"));
        assert_eq!(
            name(perm[p.ops.iter().position(|o| o.name == "pv_b").unwrap()]),
            "pv_a"
        );
        assert!((0..perm.len()).all(|i| perm[perm[i]] == i));
    }

    #[test]
    fn colocation_must_be_kept_by_the_involution() {
        let mut p = problem("examples/graphs/fa_fwd_hopper.toml", "h100");
        let (v, perm) = find_involution(&p).unwrap();
        // Both sub-tiles' first ops together: still symmetric.
        p.same_group = vec![vec![v, perm[v]]];
        let (_, kept) = find_involution(&p).expect("a symmetric pair keeps the symmetry");
        assert_eq!(kept[v], perm[v]);
        // Two ops of one sub-tile together: the swap maps the pair onto the
        // other sub-tile's, outside the relation, so it is no symmetry any
        // more (and the solvers may not break it).
        let u = (0..p.ops.len())
            .find(|&u| u != v && u != perm[v] && perm[u] != u && !p.ops[u].variable_latency)
            .expect("another op of the sub-tiles");
        p.same_group = vec![vec![v, u]];
        if let Some((_, other)) = find_involution(&p) {
            assert!(
                other[v] == v || other[v] == u,
                "an involution moving `{}` must keep its pair",
                p.ops[v].name
            );
        }
    }

    #[test]
    fn chains_without_symmetry_have_none() {
        let p = problem("examples/graphs/fa_simplified.toml", "h100");
        assert!(find_involution(&p).is_none());
    }
}
