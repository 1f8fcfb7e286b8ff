//! TTGIR op rules of each Triton target family: how the MLIR front end
//! (`twill-opt --twill-schedule`) maps an op of a Triton TTGIR loop body onto
//! a machine's cost classes, and its scheduling flags.
//!
//! A machine description (`machines/*.toml`) holds only the numbers of a
//! chip; these rules are the same for every chip of a family (H100 and H200
//! share the sm90 table) and are attached to a machine by its `arch` when it
//! is loaded ([`crate::machine::Machine::parse`]), which checks that every
//! class, memory and bandwidth unit a rule names is one the machine prices.
//!
//! Rules are tried in order; the first whose pattern matches wins. `free`
//! ops (class `None`) cost nothing at tile level and are folded into their
//! users. Ops with no tensor or memdesc operand or result (scalar address
//! arithmetic) are always free, whatever the table says. Shapes: `mnk` =
//! [rows of operand A, last dim of operand B, last dim of operand A] over
//! the first two tile operands; `operand` = the first tile operand; `result`
//! = result 0. Op names as Triton 3.6 prints them.

use super::Arch;
use crate::machine::{DtypeFrom, OpRule, ShapeFrom, Traffic, TrafficFrom};

/// The op rules of the target family `arch`, in match order.
pub fn op_rules(arch: Arch) -> Vec<OpRule> {
    match arch {
        Arch::Sm90 => hopper(),
        Arch::Sm100 => blackwell(),
    }
}

/// The bandwidth unit through which Hopper's shared-memory traffic is
/// charged (wgmma operand reads, TMA writes, register tiles stored and
/// loaded).
const SMEM_UNIT: &str = "SMEM";

/// Rows one wgmma instruction covers (m64nNk16): B is read from shared
/// memory once per 64 rows of M (PTX ISA, "Asynchronous Warpgroup Level
/// Matrix Instructions").
const WGMMA_ROWS: u64 = 64;

/// sm90 (Hopper): copies and wgmma charge their shared-memory traffic.
fn hopper() -> Vec<OpRule> {
    let mut rules = common(Some(SMEM_UNIT));
    rules.push(
        rule(&["ttng.warp_group_dot", "tt.dot", "tt.dot_scaled"], "mma")
            .shape(ShapeFrom::Mnk)
            .dtype(DtypeFrom::Operand)
            // wgmma is issued by a whole warp group.
            .with(|r| r.warp_group = true)
            // wgmma reads A (when a memdesc) and B from shared memory.
            .traffic(
                Some(SMEM_UNIT),
                TrafficFrom::SharedOperands { rows: WGMMA_ROWS },
            ),
    );
    rules.push(anything_else());
    rules
}

/// sm100 (Blackwell): tcgen05 MMAs with TMEM accumulators.
fn blackwell() -> Vec<OpRule> {
    let mut rules = common(None);
    rules.extend([
        rule(
            &[
                "ttng.tc_gen5_mma",
                "ttng.tc_gen5_mma_scaled",
                "tt.dot",
                "tt.dot_scaled",
            ],
            "mma",
        )
        .shape(ShapeFrom::Mnk)
        .dtype(DtypeFrom::Operand)
        // Users of the accumulator wait on the MMA's mbarrier; it writes
        // its TMEM accumulator operand.
        .with(|r| {
            r.blocking = true;
            r.writes = true;
        }),
        // Registers -> TMEM when it has an operand.
        rule(&["ttng.tmem_alloc"], "tmem_store")
            .operand_tile()
            .with(|r| r.memory = Some("tmem".to_string())),
        rule(&["ttng.tmem_store"], "tmem_store")
            .operand_tile()
            .with(|r| r.writes = true),
        rule(&["ttng.tmem_load"], "tmem_load"),
        anything_else(),
    ]);
    rules
}

/// The rules both NVIDIA families share, up to the MMA; `smem` names the
/// bandwidth unit that the copies' tiles are charged to (Hopper), if any.
fn common(smem: Option<&str>) -> Vec<OpRule> {
    let tile = |r: OpRule| r.traffic(smem, TrafficFrom::Tile);
    vec![
        rule(
            &[
                "ttg.memdesc_trans",
                "ttg.memdesc_subview",
                "ttg.memdesc_index",
                "ttg.memdesc_reshape",
                "ttg.memdesc_reinterpret",
                "ttg.memdesc_subslice",
                "ttng.tmem_subslice",
            ],
            "free",
        )
        .with(|r| r.view = true),
        rule(
            &[
                "arith.constant",
                "tt.splat",
                "tt.broadcast",
                "tt.expand_dims",
                "tt.reshape",
                "tt.make_range",
                "tt.make_tensor_descriptor",
                "tt.addptr",
                "ub.poison",
                "ttg.local_dealloc",
            ],
            "free",
        ),
        // The consumer waits on the copy's mbarrier; the copy writes the
        // tile into shared memory.
        tile(
            rule(
                &["tt.descriptor_load", "tt.load", "tt.descriptor_gather"],
                "tma_load",
            )
            .with(|r| {
                r.variable_latency = true;
                r.blocking = true;
            }),
        ),
        // The copy reads the tile from shared memory.
        tile(
            rule(
                &["tt.descriptor_store", "tt.store", "tt.descriptor_scatter"],
                "tma_store",
            )
            .operand_tile(),
        ),
        // Copies that Triton's warp specialization and pipeliner issue
        // themselves: the destination buffer is priced (not the mbarrier
        // operand before it); the copy is asynchronous and its users wait on
        // a barrier op, not on its result.
        tile(async_copy(
            &[
                "ttng.async_tma_copy_global_to_local",
                "ttng.async_tma_gather",
            ],
            "tma_load",
        )),
        tile(async_copy(
            &[
                "ttng.async_tma_copy_local_to_global",
                "ttng.async_tma_scatter",
            ],
            "tma_store",
        )),
        // mbarrier operations and fences: synchronization that no SSA value
        // shows (the copy into a slot comes after the wait for the slot to be
        // free), so they keep their program order with each other and with
        // the copies above.
        rule(
            &[
                "ttng.wait_barrier",
                "ttng.arrive_barrier",
                "ttng.barrier_expect",
                "ttng.init_barrier",
                "ttng.inval_barrier",
            ],
            "alu",
        )
        .with(|r| r.ordered = true),
        rule(&["math.exp2", "math.exp"], "exp"),
        // Registers -> shared memory when it has an operand (a store; folded
        // otherwise); a load + local_alloc becomes one TMA copy into shared
        // memory.
        tile(
            rule(&["ttg.local_alloc"], "smem_copy")
                .operand_tile()
                .with(|r| {
                    r.memory = Some("smem".to_string());
                    r.absorbs_load = true;
                }),
        ),
        tile(
            rule(&["ttg.local_store"], "smem_copy")
                .operand_tile()
                .with(|r| r.writes = true),
        ),
        tile(rule(&["ttg.local_load"], "smem_copy")),
        // One pass over the operand tile.
        rule(&["tt.reduce", "tt.scan"], "alu").operand_tile(),
    ]
}

/// Elementwise arithmetic, layout conversions and anything else on a tile.
fn anything_else() -> OpRule {
    rule(&["*"], "alu")
}

/// An asynchronous copy priced by its largest tile (the buffer), ordered
/// with the barriers.
fn async_copy(patterns: &[&str], class: &str) -> OpRule {
    rule(patterns, class)
        .shape(ShapeFrom::Largest)
        .dtype(DtypeFrom::Largest)
        .with(|r| r.ordered = true)
}

/// A rule of `class` (`free`: no class) with every flag off, shape and
/// element type from result 0.
fn rule(patterns: &[&str], class: &str) -> OpRule {
    OpRule {
        patterns: patterns.iter().map(|p| p.to_string()).collect(),
        class: (class != "free").then(|| class.to_string()),
        shape: ShapeFrom::Result,
        dtype: DtypeFrom::Result,
        warp_group: false,
        variable_latency: false,
        blocking: false,
        view: false,
        writes: false,
        ordered: false,
        memory: None,
        absorbs_load: false,
        traffic: None,
    }
}

impl OpRule {
    fn shape(mut self, shape: ShapeFrom) -> OpRule {
        self.shape = shape;
        self
    }

    fn dtype(mut self, dtype: DtypeFrom) -> OpRule {
        self.dtype = dtype;
        self
    }

    /// Shape and element type of the first tile operand.
    fn operand_tile(self) -> OpRule {
        self.shape(ShapeFrom::Operand).dtype(DtypeFrom::Operand)
    }

    /// Traffic through the bandwidth unit `unit`, if the family charges one.
    fn traffic(mut self, unit: Option<&str>, from: TrafficFrom) -> OpRule {
        self.traffic = unit.map(|u| Traffic {
            unit: u.to_string(),
            from,
        });
        self
    }

    fn with(mut self, set: impl FnOnce(&mut OpRule)) -> OpRule {
        set(&mut self);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_differ_in_their_mma_and_in_shared_memory_traffic() {
        let h = op_rules(Arch::Sm90);
        let b = op_rules(Arch::Sm100);
        let first = |rules: &[OpRule], name: &str| rules.iter().find(|r| r.matches(name)).cloned();
        let wgmma = first(&h, "ttng.warp_group_dot").unwrap();
        assert!(wgmma.warp_group && !wgmma.blocking);
        assert_eq!(
            wgmma.traffic.unwrap().from,
            TrafficFrom::SharedOperands { rows: 64 }
        );
        // No wgmma on Blackwell: it falls through to the elementwise rule.
        assert_eq!(first(&b, "ttng.warp_group_dot").unwrap().patterns, ["*"]);
        let mma = first(&b, "ttng.tc_gen5_mma").unwrap();
        assert!(mma.blocking && mma.writes && mma.traffic.is_none());
        assert!(first(&h, "ttg.local_load").unwrap().traffic.is_some());
        assert!(first(&b, "ttg.local_load").unwrap().traffic.is_none());
        // Both end with the catch-all, and agree before their MMA rules.
        assert_eq!(h.last().unwrap().patterns, ["*"]);
        assert_eq!(b.last().unwrap().patterns, ["*"]);
        let untraffic = |r: &OpRule| OpRule {
            traffic: None,
            ..r.clone()
        };
        let shared = h.len() - 2;
        assert!(h[..shared]
            .iter()
            .zip(&b[..shared])
            .all(|(x, y)| untraffic(x) == *y));
    }
}
