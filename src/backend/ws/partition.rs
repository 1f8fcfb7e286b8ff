//! Which body ops and iteration arguments each compute partition takes
//! (docs/ws-lowering.md 3.4, step 1). MLIR-free: from the loop's IR and
//! the compute group of each graph node.
//!
//! A compute group takes its graph nodes, the ops those read (folded ops,
//! scalar address arithmetic: cloned into every group that needs them) and
//! the iteration arguments it reads or yields. A loop-carried tensor
//! belongs to exactly one group; a scalar carried through ops of no compute
//! group (an offset the loop advances) is carried by every group that reads
//! it and by the default region, which delivers the loop's results. A value
//! made by one group's node and read by another's is recomputed by the
//! reader when it is index arithmetic ([`recomputable`] ops over the
//! induction variable, scalars and loop-invariant values: the causal
//! mask's key columns that both halves of a sub-tiled tile compare
//! against); anything else would need a channel between them, which is
//! refused.

use std::collections::{BTreeMap, BTreeSet};

use super::LowerSkip;
use crate::frontend::{IrValue, LoopIr, ValueSrc};

/// One compute group's share of the loop body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOps {
    /// The schedule's group id.
    pub group: u32,
    /// Body ops, in program order.
    pub ops: Vec<usize>,
    /// Iteration arguments the partition carries, ascending.
    pub carried: Vec<usize>,
    /// Graph nodes of other groups among `ops`, recomputed here rather
    /// than read through a channel, ascending.
    pub recomputed: Vec<usize>,
}

/// Ops a partition may recompute rather than receive: pure elementwise
/// arithmetic and the ops that make or reshape index tensors. (A worker
/// partition also recomputes the loop-invariant tensors it reads from
/// these, since partitions capture no tensors.)
pub fn recomputable(name: &str) -> bool {
    name.starts_with("arith.")
        || matches!(
            name,
            "tt.splat" | "tt.make_range" | "tt.expand_dims" | "tt.broadcast" | "ttg.convert_layout"
        )
}

/// Whether body op `op` and every body op it reads, transitively, are
/// [`recomputable`] without regions, reading only the induction variable,
/// loop-invariant values and scalar iteration arguments: values every
/// partition has, so any partition can compute it again.
fn index_arithmetic(ir: &LoopIr, rings: &BTreeSet<usize>, op: usize) -> bool {
    let mut todo = vec![op];
    let mut seen = BTreeSet::new();
    while let Some(i) = todo.pop() {
        if !seen.insert(i) {
            continue;
        }
        let o = &ir.ops[i];
        if rings.contains(&i) || !recomputable(&o.name) || !o.nested.is_empty() {
            return false;
        }
        for v in o.operands.iter().chain(&o.region_uses) {
            match v.src {
                ValueSrc::Op { op, .. } => todo.push(op),
                ValueSrc::IterArg(k) if ir.yields[k].ty.starts_with("tensor<") => return false,
                _ => {}
            }
        }
    }
    true
}

/// Splits the body among the compute groups. `node_group[i]` is the compute
/// group of body op `i` when it is a graph node of one; `rings` are the
/// loads and their allocs (the producer's); `producer` the ops the loads'
/// addresses need. The first entry is the default region: the group that
/// carries the most loop-carried tensors (the loop's results it delivers
/// directly), ties to the smaller id.
pub fn split(
    ir: &LoopIr,
    node_group: &[Option<u32>],
    rings: &BTreeSet<usize>,
    producer: &BTreeSet<usize>,
) -> Result<Vec<GroupOps>, LowerSkip> {
    let groups: BTreeSet<u32> = node_group.iter().flatten().copied().collect();
    let tensor_owner = tensor_owners(ir, node_group)?;
    let default = default_group(&groups, &tensor_owner);
    let mut out = Vec::new();
    for g in std::iter::once(default).chain(groups.iter().copied().filter(|&g| g != default)) {
        out.push(closure(
            ir,
            node_group,
            rings,
            g,
            g == default,
            &tensor_owner,
        )?);
    }
    // Ops no group needs (and not the producer's alone) stay in the
    // default region, as the loop had them.
    let taken: BTreeSet<usize> = out.iter().flat_map(|o| o.ops.iter().copied()).collect();
    let dead: Vec<usize> = (0..ir.ops.len())
        .filter(|i| !taken.contains(i) && !rings.contains(i) && !producer.contains(i))
        .collect();
    if !dead.is_empty() {
        let d = &mut out[0];
        d.ops.extend(dead);
        d.ops.sort_unstable();
    }
    Ok(out)
}

/// The compute group of each loop-carried tensor (from the nodes that read
/// it and the node that yields it); refuses one that two groups touch.
fn tensor_owners(
    ir: &LoopIr,
    node_group: &[Option<u32>],
) -> Result<BTreeMap<usize, u32>, LowerSkip> {
    let mut touch: BTreeMap<usize, BTreeSet<u32>> = BTreeMap::new();
    for (k, y) in ir.yields.iter().enumerate() {
        if let ValueSrc::Op { op, .. } = y.src {
            if let Some(g) = node_group[op] {
                touch.entry(k).or_default().insert(g);
            }
        }
    }
    for (i, o) in ir.ops.iter().enumerate() {
        let Some(g) = node_group[i] else { continue };
        for v in o.operands.iter().chain(&o.region_uses) {
            if let ValueSrc::IterArg(k) = v.src {
                touch.entry(k).or_default().insert(g);
            }
        }
    }
    let mut owner = BTreeMap::new();
    for (k, gs) in touch {
        let tensor = ir.yields[k].ty.starts_with("tensor<");
        match (gs.len(), tensor) {
            (1, true) => {
                owner.insert(k, *gs.iter().next().expect("one group"));
            }
            (_, true) => {
                return Err(LowerSkip::Channel(format!(
                    "loop-carried value {k} ({}) is used by compute groups {gs:?}",
                    ir.yields[k].ty
                )))
            }
            _ => {}
        }
    }
    Ok(owner)
}

fn default_group(groups: &BTreeSet<u32>, owner: &BTreeMap<usize, u32>) -> u32 {
    let count = |g: u32| owner.values().filter(|&&o| o == g).count();
    groups
        .iter()
        .copied()
        .max_by_key(|&g| (count(g), std::cmp::Reverse(g)))
        .unwrap_or(1)
}

/// Group `g`'s ops: its nodes and the yields of what it carries, closed
/// over operands that are no other group's nodes.
fn closure(
    ir: &LoopIr,
    node_group: &[Option<u32>],
    rings: &BTreeSet<usize>,
    g: u32,
    default: bool,
    owner: &BTreeMap<usize, u32>,
) -> Result<GroupOps, LowerSkip> {
    let mut ops: BTreeSet<usize> = (0..ir.ops.len())
        .filter(|&i| node_group[i] == Some(g))
        .collect();
    let mut carried: BTreeSet<usize> = owner
        .iter()
        .filter(|&(_, &o)| o == g)
        .map(|(&k, _)| k)
        .collect();
    if default {
        // The default region delivers every loop result no other group
        // owns (the scalars, and tensors no node touches).
        carried.extend((0..ir.yields.len()).filter(|k| !owner.contains_key(k)));
    }
    let mut todo: Vec<IrValue> = ops
        .iter()
        .flat_map(|&i| ir.ops[i].operands.iter().chain(&ir.ops[i].region_uses))
        .cloned()
        .collect();
    todo.extend(carried.iter().map(|&k| ir.yields[k].clone()));
    let mut recomputed = BTreeSet::new();
    while let Some(v) = todo.pop() {
        match v.src {
            ValueSrc::Op { op, .. } if rings.contains(&op) || ops.contains(&op) => {}
            ValueSrc::Op { op, .. } => {
                if let Some(h) = node_group[op] {
                    if !index_arithmetic(ir, rings, op) {
                        return Err(crossing(ir, op, h, g));
                    }
                    recomputed.insert(op);
                }
                ops.insert(op);
                let o = &ir.ops[op];
                todo.extend(o.operands.iter().chain(&o.region_uses).cloned());
            }
            ValueSrc::IterArg(k) => match owner.get(&k) {
                Some(&h) if h != g => {
                    return Err(LowerSkip::Channel(format!(
                        "group {g} reads loop-carried value {k} of group {h}"
                    )))
                }
                _ => {
                    if carried.insert(k) {
                        todo.push(ir.yields[k].clone());
                    }
                }
            },
            _ => {}
        }
    }
    Ok(GroupOps {
        group: g,
        ops: ops.into_iter().collect(),
        carried: carried.into_iter().collect(),
        recomputed: recomputed.into_iter().collect(),
    })
}

fn crossing(ir: &LoopIr, op: usize, from: u32, to: u32) -> LowerSkip {
    LowerSkip::Channel(format!(
        "`{}` of group {from} is read by group {to}",
        ir.ops[op].name
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::frontend::IrOp;

    const ACC: &str = "tensor<64x128xf32, #mma>";
    const S: &str = "!ttg.memdesc<128x128xf16, #shared, #smem>";

    /// A use of `src` of type `ty` (also the staging tests' builder).
    pub(crate) fn v(src: ValueSrc, ty: &str) -> IrValue {
        IrValue {
            src,
            ty: ty.to_string(),
        }
    }

    fn r(op: usize) -> ValueSrc {
        ValueSrc::Op { op, result: 0 }
    }

    /// A body op with one result.
    pub(crate) fn op(name: &str, operands: Vec<IrValue>, result: &str) -> IrOp {
        IrOp {
            name: name.to_string(),
            location: String::new(),
            operands,
            results: vec![result.to_string()],
            region_uses: Vec::new(),
            nested: Vec::new(),
            triton_stage: None,
            branches: Vec::new(),
        }
    }

    /// Two halves sharing one loaded tile (viewed through a transpose, a
    /// folded op) and a scalar offset the loop advances: 0 offset + 1, 1
    /// load, 2 alloc, 3 trans, 4 half 0's wgmma, 5 its scale, 6 half 1's
    /// wgmma, 7 its scale. Iteration arguments: 0 half 0's accumulator, 1
    /// half 1's, 2 the offset.
    fn halves() -> LoopIr {
        let ops = vec![
            op(
                "arith.addi",
                vec![
                    v(ValueSrc::IterArg(2), "i32"),
                    v(ValueSrc::Outside(0), "i32"),
                ],
                "i32",
            ),
            op(
                "tt.descriptor_load",
                vec![v(r(0), "i32")],
                "tensor<128x128xf16>",
            ),
            op("ttg.local_alloc", vec![v(r(1), "tensor<128x128xf16>")], S),
            op("ttg.memdesc_trans", vec![v(r(2), S)], S),
            op(
                "ttng.warp_group_dot",
                vec![
                    v(ValueSrc::Outside(1), S),
                    v(r(3), S),
                    v(ValueSrc::IterArg(0), ACC),
                ],
                ACC,
            ),
            op(
                "arith.mulf",
                vec![v(r(4), ACC), v(ValueSrc::Outside(2), ACC)],
                ACC,
            ),
            op(
                "ttng.warp_group_dot",
                vec![
                    v(ValueSrc::Outside(3), S),
                    v(r(3), S),
                    v(ValueSrc::IterArg(1), ACC),
                ],
                ACC,
            ),
            op(
                "arith.mulf",
                vec![v(r(6), ACC), v(ValueSrc::Outside(2), ACC)],
                ACC,
            ),
        ];
        LoopIr {
            name: "halves".into(),
            location: String::new(),
            warp_specialize: true,
            num_warps: 4,
            ops,
            yields: vec![v(r(5), ACC), v(r(7), ACC), v(r(0), "i32")],
            triton_max_stage: None,
        }
    }

    fn groups(g: &[(usize, u32)]) -> Vec<Option<u32>> {
        let mut out = vec![None; 8];
        for &(i, grp) in g {
            out[i] = Some(grp);
        }
        out
    }

    #[test]
    fn each_half_takes_its_nodes_the_shared_view_and_the_offset_goes_to_the_default() {
        let ir = halves();
        let rings = BTreeSet::from([1, 2]);
        let producer = BTreeSet::from([0]);
        let split = split(
            &ir,
            &groups(&[(4, 1), (5, 1), (6, 2), (7, 2)]),
            &rings,
            &producer,
        )
        .unwrap();
        assert_eq!(split.len(), 2);
        // Ties (one tensor each) go to the smaller group id.
        assert_eq!(
            (
                split[0].group,
                split[0].ops.clone(),
                split[0].carried.clone()
            ),
            (1, vec![0, 3, 4, 5], vec![0, 2])
        );
        assert_eq!(
            (
                split[1].group,
                split[1].ops.clone(),
                split[1].carried.clone()
            ),
            (2, vec![3, 6, 7], vec![1])
        );
    }

    #[test]
    fn a_value_read_by_another_group_is_refused_and_ties_go_to_the_smaller_id() {
        let ir = halves();
        let (rings, producer) = (BTreeSet::from([1, 2]), BTreeSet::from([0]));
        // Half 0's scale on group 2 reads half 0's wgmma on group 1.
        let node = groups(&[(4, 1), (5, 2), (6, 2), (7, 2)]);
        let e = split(&ir, &node, &rings, &producer).unwrap_err();
        assert!(matches!(e, LowerSkip::Channel(_)), "{e:?}");
        let mut ir2 = halves();
        ir2.yields[0] = v(r(4), ACC);
        let e = split(&ir2, &node, &rings, &producer).unwrap_err();
        assert!(
            matches!(e, LowerSkip::Channel(ref w) if w.contains("of group 1 is read by group 2")),
            "{e:?}"
        );
        let node = groups(&[(4, 2), (5, 2), (6, 1), (7, 1)]);
        let split = split(&ir, &node, &rings, &producer).unwrap();
        assert_eq!(split[0].group, 1);
        assert_eq!(split[0].carried, vec![1, 2]);
    }

    /// `halves` with a mask on half 1's scale whose index arithmetic is
    /// on half 0's group: 8 a splat of the induction variable, 9 its
    /// comparison with a loop-invariant tensor (both group 1), 10 half 1's
    /// select on it (group 2), yielded as half 1's accumulator.
    fn masked_halves(compared: ValueSrc) -> (LoopIr, Vec<Option<u32>>) {
        const M: &str = "tensor<64x128xi1, #mma>";
        let mut ir = halves();
        ir.ops.push(op(
            "tt.splat",
            vec![v(ValueSrc::InductionVar, "i32")],
            "tensor<64x128xi32, #mma>",
        ));
        ir.ops.push(op(
            "arith.cmpi",
            vec![
                v(compared, "tensor<64x128xi32, #mma>"),
                v(r(8), "tensor<64x128xi32, #mma>"),
            ],
            M,
        ));
        ir.ops.push(op(
            "arith.select",
            vec![v(r(9), M), v(r(7), ACC), v(ValueSrc::Outside(5), ACC)],
            ACC,
        ));
        ir.yields[1] = v(r(10), ACC);
        let mut node = groups(&[(4, 1), (5, 1), (6, 2), (7, 2)]);
        node.extend([Some(1), Some(1), Some(2)]);
        (ir, node)
    }

    #[test]
    fn index_arithmetic_of_another_group_is_recomputed_by_its_reader() {
        let (ir, node) = masked_halves(ValueSrc::Outside(4));
        let (rings, producer) = (BTreeSet::from([1, 2]), BTreeSet::from([0]));
        let split = split(&ir, &node, &rings, &producer).unwrap();
        assert_eq!(split[0].group, 1);
        assert_eq!(split[0].ops, vec![0, 3, 4, 5, 8, 9]);
        assert!(split[0].recomputed.is_empty());
        assert_eq!(split[1].group, 2);
        assert_eq!(split[1].ops, vec![3, 6, 7, 8, 9, 10]);
        assert_eq!(split[1].recomputed, vec![8, 9]);
    }

    #[test]
    fn what_reads_another_groups_state_or_results_is_not_recomputed() {
        let (rings, producer) = (BTreeSet::from([1, 2]), BTreeSet::from([0]));
        // The comparison reads half 0's accumulator (a loop-carried tensor).
        let (ir, node) = masked_halves(ValueSrc::IterArg(0));
        let e = split(&ir, &node, &rings, &producer).unwrap_err();
        assert!(
            matches!(e, LowerSkip::Channel(ref w) if w.contains("`arith.cmpi` of group 1 is read by group 2")),
            "{e:?}"
        );
        // ... or half 0's scaled wgmma result (through a reduction-free
        // but wgmma-fed chain).
        let (ir, node) = masked_halves(r(5));
        let e = split(&ir, &node, &rings, &producer).unwrap_err();
        assert!(matches!(e, LowerSkip::Channel(_)), "{e:?}");
    }

    #[test]
    fn a_carried_tensor_two_groups_touch_is_refused() {
        let mut ir = halves();
        // Half 1's wgmma accumulates onto half 0's accumulator.
        ir.ops[6].operands[2] = v(ValueSrc::IterArg(0), ACC);
        let node = groups(&[(4, 1), (5, 1), (6, 2), (7, 2)]);
        let e = split(&ir, &node, &BTreeSet::from([1, 2]), &BTreeSet::from([0])).unwrap_err();
        assert!(
            matches!(e, LowerSkip::Channel(ref w) if w.contains("loop-carried value 0")),
            "{e:?}"
        );
    }
}
