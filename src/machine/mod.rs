//! Machine descriptions: functional units, memories, warp rules and cost rules.
//!
//! A machine is data, never code: a TOML file under `machines/` (bundled into
//! the binary at build time, see `build.rs`) or any file given by path. The
//! schema is documented in `machines/README.md`. A file holds the numbers of
//! one chip; the TTGIR op rules of its target family (`arch`) are attached
//! when it is loaded ([`crate::backend::ops`]). The solver core only sees the
//! resolved numbers; MLIR and Triton front ends use the cost rules to turn an
//! op's tile shape and element type into cycles and a reservation table.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::LoadError;

mod parse;

include!(concat!(env!("OUT_DIR"), "/bundled_machines.rs"));

/// One kind of functional unit and how many instances an SM has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub name: String,
    pub capacity: u32,
    pub description: String,
    /// Whether the unit runs an op without its warp: the warp issues one
    /// instruction (wgmma, a TMA copy, tcgen05.mma) and goes on while the
    /// unit works, until it waits for the result. Such an op is not
    /// interrupted when its warp blocks, so blocking concurrency (rule 8 of
    /// the checker) does not count it as executing.
    pub asynchronous: bool,
    /// A bandwidth, not a functional unit: bytes it moves per cycle per
    /// instance. Ops hold no slot of it; what one iteration moves through
    /// it (ops' `traffic`, and the tiles handed between warp groups when
    /// `crossings`) is bounded as a total, at most I x capacity cycles
    /// (see [`crate::problem::Problem::bandwidth_budget`]).
    pub bytes_per_cycle: Option<u64>,
    /// Register tiles handed from one warp group to another pass through
    /// this bandwidth unit (a store and a load through shared memory).
    pub crossings: bool,
}

/// What an op moves through a bandwidth unit each time it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficFrom {
    /// The bytes of the priced tile (a copy into or out of shared memory).
    Tile,
    /// The bytes of the op's memdesc operands it reads: the first (A) once,
    /// the second (B) once per `rows` rows of the result, since a
    /// warp-group MMA instruction covers `rows` rows and reads its B tile
    /// again for each (wgmma: 64).
    SharedOperands { rows: u64 },
}

/// An op rule's traffic on a bandwidth unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traffic {
    pub unit: String,
    pub from: TrafficFrom,
}

/// One kind of on-chip memory and its capacity per SM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    pub name: String,
    pub capacity: u64,
    /// What the capacity counts (bytes, 32-bit registers, TMEM columns...).
    pub unit: String,
}

/// Warp and register-file rules used by warp specialization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warps {
    pub threads_per_warp: u32,
    /// Warps that must issue a warp-group operation together (4 on Hopper).
    pub warp_group_size: u32,
    pub max_warps_per_cta: u32,
    /// Architectural per-thread register limit (255 on NVIDIA).
    pub max_regs_per_thread: u32,
    /// 32-bit registers per SM.
    pub register_file: u32,
}

/// How many CTAs of one kernel share an SM: the limits a configuration
/// choice needs besides the schedule (read by the Triton integration's
/// configuration model, and by [`Machine::sharing_sm`] for the pass option
/// `ctas`; the solver does not use them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occupancy {
    /// Shared memory per SM, bytes (all CTAs together).
    pub smem_per_sm: u64,
    /// Shared memory the runtime reserves per CTA, bytes.
    pub smem_reserved_per_cta: u64,
    /// Registers are allocated per warp in multiples of this many.
    pub reg_granularity: u32,
    pub max_warps_per_sm: u32,
    pub max_ctas_per_sm: u32,
    /// L2 cache bytes, when the description gives them: the configuration
    /// model checks that the operand panels the running CTAs share fit.
    pub l2_bytes: Option<u64>,
}

/// How a rule measures an op's work from its tile shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// 2*M*N*K floating point operations of a matrix multiply-accumulate.
    MatmulFlops,
    /// Number of tile elements.
    Elements,
    /// Number of bytes of the tile (elements times element size).
    Bytes,
}

/// A per-op cost rule: cycles from tile shape and element type.
#[derive(Debug, Clone, PartialEq)]
pub struct CostRule {
    /// The op class this rule prices (`mma`, `exp`, `tma_load`, ...).
    pub class: String,
    /// Functional unit the op occupies while it streams its work.
    pub unit: String,
    pub work: Work,
    /// Work units per cycle per SM, by element type.
    pub per_cycle: BTreeMap<String, f64>,
    /// Cycles after the unit is released until the result is usable.
    pub latency: u64,
}

/// A resolved cost: the op occupies `unit` for `occupancy` cycles, then waits
/// `latency` cycles for its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cost {
    pub unit: String,
    pub occupancy: u64,
    pub latency: u64,
}

/// Where an op rule reads the tile shape that its cost rule prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeFrom {
    /// [M, N, K]: M and N from result 0 (or the accumulator operand when the
    /// op has no result), K from the last dimension of operand 0.
    Mnk,
    /// The shape of result 0.
    Result,
    /// The shape of operand 0.
    Operand,
    /// The tile operand or result with the most elements (an async copy's
    /// destination buffer, not the barrier next to it).
    Largest,
}

/// Where an op rule reads the element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DtypeFrom {
    Result,
    Operand,
    /// Of the tile that `ShapeFrom::Largest` picks.
    Largest,
}

/// How an MLIR op of a loop body maps onto this machine: its cost class and
/// its scheduling flags. Used by the MLIR front end only; the solver core
/// never sees op names. A target family's rules ([`crate::backend::ops`])
/// are tried in order; the first whose pattern matches wins. A pattern is an op name (`ttng.warp_group_dot`), a
/// dialect wildcard (`arith.*`) or `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRule {
    pub patterns: Vec<String>,
    /// Cost class; `None` (`class = "free"`) for ops that cost nothing at tile
    /// level (views, broadcasts, constants): the front end folds them into
    /// their users.
    pub class: Option<String>,
    pub shape: ShapeFrom,
    pub dtype: DtypeFrom,
    /// Issued by a whole warp group (wgmma).
    pub warp_group: bool,
    /// Latency unknown statically (TMA loads): scheduled on the load warp.
    pub variable_latency: bool,
    /// Users wait on a barrier for the result (mbarrier / TMEM load).
    pub blocking: bool,
    /// Result 0 aliases the buffer of operand 0 (memdesc views).
    pub view: bool,
    /// Writes the buffers of its memdesc operands.
    pub writes: bool,
    /// A synchronizing side effect (mbarrier wait / arrive / expect, an
    /// asynchronous copy that signals one): keeps its program order with
    /// every other such op of the body, which share no SSA value (a copy
    /// into a slot after the wait for that slot to be free).
    pub ordered: bool,
    /// Memory kind that a memdesc result occupies while live.
    pub memory: Option<String>,
    /// Free when its tile operand comes straight from a variable-latency op:
    /// Triton lowers such a load + `local_alloc` pair to one asynchronous
    /// copy that lands in shared memory.
    pub absorbs_load: bool,
    /// What the op moves through a bandwidth unit (shared memory), if any.
    pub traffic: Option<Traffic>,
}

impl OpRule {
    /// Whether this rule applies to the op `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| {
            p == "*"
                || p == name
                || p.strip_suffix(".*")
                    .is_some_and(|d| name.split_once('.').is_some_and(|(nd, _)| nd == d))
        })
    }
}

/// A machine description.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub name: String,
    pub vendor: String,
    pub arch: String,
    pub description: String,
    pub clock_mhz: u32,
    pub sms: u32,
    pub units: Vec<Unit>,
    pub memories: Vec<Memory>,
    pub warps: Warps,
    pub costs: Vec<CostRule>,
    /// MLIR op name -> class and flags, for front ends (first match wins).
    pub ops: Vec<OpRule>,
    /// CTAs-per-SM limits, when the description gives them.
    pub occupancy: Option<Occupancy>,
}

impl Machine {
    /// Names of the machines bundled into this build.
    pub fn bundled_names() -> Vec<&'static str> {
        BUNDLED_MACHINES.iter().map(|(n, _)| *n).collect()
    }

    /// Selects a machine by bundled name (`h100`) or by path to a TOML file.
    pub fn select(name_or_path: &str) -> Result<Machine, LoadError> {
        if let Some((name, text)) = BUNDLED_MACHINES.iter().find(|(n, _)| *n == name_or_path) {
            return Machine::parse(&format!("machines/{name}.toml"), text);
        }
        let path = Path::new(name_or_path);
        if path.exists() {
            return Machine::load(path);
        }
        Err(LoadError {
            file: name_or_path.to_string(),
            line: 0,
            column: 0,
            field: String::new(),
            message: format!(
                "no bundled machine of that name and no such file (bundled: {})",
                Machine::bundled_names().join(", ")
            ),
        })
    }

    /// Loads a machine description from a file.
    pub fn load(path: &Path) -> Result<Machine, LoadError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LoadError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Machine::parse(&file, &text)
    }

    /// Parses a machine description; `file` names it in errors. The op
    /// rules are those of its `arch`'s target family
    /// ([`crate::backend::ops`]), checked against its cost classes, memories
    /// and bandwidth units.
    pub fn parse(file: &str, text: &str) -> Result<Machine, LoadError> {
        parse::machine(file, text)
    }

    /// The unit of this name.
    pub fn unit(&self, name: &str) -> Option<&Unit> {
        self.units.iter().find(|u| u.name == name)
    }

    /// The memory of this name.
    pub fn memory(&self, name: &str) -> Option<&Memory> {
        self.memories.iter().find(|m| m.name == name)
    }

    /// This machine as one CTA of `num_warps` warps sees it when `ctas`
    /// CTAs share each SM: the register file split among the `ctas *
    /// num_warps` warps, each warp's share rounded down to the `[occupancy]`
    /// granularity (which also caps the registers per thread), and 1/`ctas`
    /// of the SM's shared memory less the runtime's reservation per CTA.
    /// The units are not divided: the schedule is one CTA's; the pass
    /// stretches the iteration to `ctas` times the busiest unit's cycles
    /// when it sizes the prefetch, and the configuration model weighs the
    /// CTAs' competition for the units.
    pub fn sharing_sm(&self, ctas: u32, num_warps: u32) -> Result<Machine, String> {
        let o = self
            .occupancy
            .as_ref()
            .ok_or_else(|| format!("machine `{}` gives no [occupancy] table", self.name))?;
        if ctas == 0 || num_warps == 0 {
            return Err("ctas and num_warps must be at least 1".to_string());
        }
        let warps = u64::from(ctas) * u64::from(num_warps);
        if warps > u64::from(o.max_warps_per_sm) || ctas > o.max_ctas_per_sm {
            return Err(format!(
                "{ctas} CTAs of {num_warps} warps exceed the {} warps / {} CTAs an SM of `{}` holds",
                o.max_warps_per_sm, o.max_ctas_per_sm, self.name
            ));
        }
        let granularity = u64::from(o.reg_granularity.max(1));
        let per_warp = u64::from(self.warps.register_file) / warps / granularity * granularity;
        let per_thread = (per_warp / u64::from(self.warps.threads_per_warp.max(1)))
            .min(u64::from(self.warps.max_regs_per_thread)) as u32;
        let smem = (o.smem_per_sm / u64::from(ctas)).saturating_sub(o.smem_reserved_per_cta);
        if per_thread == 0 || smem == 0 {
            return Err(format!(
                "{ctas} CTAs of {num_warps} warps leave no registers or shared memory per CTA on `{}`",
                self.name
            ));
        }
        let mut m = self.clone();
        m.warps.max_regs_per_thread = per_thread;
        for mem in &mut m.memories {
            match mem.name.as_str() {
                "regs" => mem.capacity = mem.capacity.min(per_warp * u64::from(num_warps)),
                "smem" => mem.capacity = mem.capacity.min(smem),
                _ => {}
            }
        }
        Ok(m)
    }

    /// The first op rule that matches the MLIR op `name`.
    pub fn op_rule(&self, name: &str) -> Option<&OpRule> {
        self.ops.iter().find(|r| r.matches(name))
    }

    /// The cost rule for an op class.
    pub fn cost_rule(&self, class: &str) -> Option<&CostRule> {
        self.costs.iter().find(|c| c.class == class)
    }

    /// Prices an op of `class` on a tile of `shape` and element type `dtype`.
    pub fn cost(&self, class: &str, shape: &[u64], dtype: &str) -> Result<Cost, String> {
        let rule = self.cost_rule(class).ok_or_else(|| {
            let known: Vec<&str> = self.costs.iter().map(|c| c.class.as_str()).collect();
            format!(
                "machine `{}` has no cost rule for class `{class}` (known: {})",
                self.name,
                known.join(", ")
            )
        })?;
        let rate = rule.per_cycle.get(dtype).ok_or_else(|| {
            let known: Vec<&str> = rule.per_cycle.keys().map(String::as_str).collect();
            format!(
                "cost rule `{class}` of machine `{}` has no rate for element type `{dtype}` (known: {})",
                self.name,
                known.join(", ")
            )
        })?;
        if shape.is_empty() || shape.contains(&0) {
            return Err(format!("shape {shape:?} must have positive dimensions"));
        }
        let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let elements = elements.ok_or_else(|| format!("shape {shape:?} is too large"))?;
        let work = match rule.work {
            Work::MatmulFlops => {
                if shape.len() != 3 {
                    return Err(format!(
                        "class `{class}` measures 2*M*N*K and needs shape [M, N, K], got {shape:?}"
                    ));
                }
                2.0 * elements as f64
            }
            Work::Elements => elements as f64,
            Work::Bytes => elements as f64 * dtype_bytes(dtype).unwrap_or(4) as f64,
        };
        let occupancy = (work / rate).ceil().max(1.0) as u64;
        Ok(Cost {
            unit: rule.unit.clone(),
            occupancy,
            latency: rule.latency,
        })
    }
}

/// Size in bytes of an element type as Triton and MLIR spell it.
pub fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "f64" | "i64" => 8,
        "f32" | "i32" | "tf32" => 4,
        "f16" | "bf16" | "i16" => 2,
        "f8E4M3FN" | "f8E5M2" | "f8e4m3" | "f8e5m2" | "i8" | "fp8" => 1,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cta_sharing_the_sm_gets_its_share_of_registers_and_shared_memory() {
        let m = Machine::select("h100").unwrap();
        // Alone: the machine as described (H100's per-block limit, 227 KB,
        // is the SM's 228 KB less the 1 KB reserved).
        assert_eq!(m.sharing_sm(1, 4).unwrap(), m);
        // Three CTAs of 4 warps: 65536 / 12 warps = 5461, 5376 in multiples
        // of 256 per warp, 168 per thread (what ptxas gives Triton's
        // 3-CTA GEMMs); 233472 / 3 - 1024 bytes of shared memory.
        let m3 = m.sharing_sm(3, 4).unwrap();
        assert_eq!(m3.warps.max_regs_per_thread, 168);
        assert_eq!(m3.memory("smem").unwrap().capacity, 233472 / 3 - 1024);
        assert_eq!(m3.memory("regs").unwrap().capacity, 168 * 128);
        // Two CTAs of 4 warps keep the per-thread maximum.
        assert_eq!(m.sharing_sm(2, 4).unwrap().warps.max_regs_per_thread, 255);
        // 17 CTAs of 4 warps exceed 64 warps per SM.
        let e = m.sharing_sm(17, 4).unwrap_err();
        assert!(e.contains("64 warps"), "{e}");
        assert!(m.sharing_sm(0, 4).is_err());
    }

    #[test]
    fn every_bundled_machine_loads() {
        for name in Machine::bundled_names() {
            let m = Machine::select(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(m.name, name);
            assert!(m.warps.max_regs_per_thread <= 255 || m.vendor != "nvidia");
            if m.vendor == "nvidia" {
                let o = m
                    .occupancy
                    .as_ref()
                    .expect("NVIDIA machines give CTAs-per-SM limits");
                assert!(o.smem_per_sm >= m.memory("smem").unwrap().capacity);
            }
        }
    }

    #[test]
    fn h100_prices_a_128_cube_gemm_near_1000_cycles() {
        // The paper (section 5.2): a 128x128x128 GEMM on Hopper is roughly 1000 cycles.
        let m = Machine::select("h100").unwrap();
        let c = m.cost("mma", &[128, 128, 128], "f16").unwrap();
        assert_eq!(c.unit, "TC");
        assert!((900..=1100).contains(&c.occupancy), "{}", c.occupancy);
        // Figure 1: GEMM and EXP on a tile cost roughly the same on Hopper.
        let e = m.cost("exp", &[128, 128], "f32").unwrap();
        assert_eq!(e.unit, "SFU");
        let ratio = e.occupancy as f64 / c.occupancy as f64;
        assert!((0.5..=2.0).contains(&ratio), "{ratio}");
    }

    #[test]
    fn unknown_machine_lists_bundled() {
        let e = Machine::select("nope-9000").unwrap_err();
        assert!(e.message.contains("h100"), "{e}");
    }

    #[test]
    fn bad_machine_is_located() {
        let text = "name='x'\nvendor='v'\narch='a'\ndescription='d'\nclock_mhz=1\nsms=1\n\
                    [units.TC]\ncapacity = -1\n[warps]\nthreads_per_warp=32\nwarp_group_size=4\n\
                    max_warps_per_cta=32\nmax_regs_per_thread=255\nregister_file=65536\n";
        let e = Machine::parse("m.toml", text).unwrap_err();
        assert_eq!(e.line, 8);
        assert_eq!(e.field, "units.TC.capacity");
    }

    #[test]
    fn bandwidth_units_are_reached_through_op_rules_only() {
        let h100 = BUNDLED_MACHINES
            .iter()
            .find(|(n, _)| *n == "h100")
            .unwrap()
            .1;
        let m = Machine::parse("m.toml", h100).unwrap();
        let smem = m.unit("SMEM").unwrap();
        assert_eq!((smem.bytes_per_cycle, smem.crossings), (Some(128), true));
        assert_eq!(
            m.op_rule("ttng.warp_group_dot").unwrap().traffic,
            Some(Traffic {
                unit: "SMEM".into(),
                from: TrafficFrom::SharedOperands { rows: 64 }
            })
        );
        let err = |text: String| Machine::parse("m.toml", &text).unwrap_err();
        let e = err(h100.replace("unit = \"TC\"", "unit = \"SMEM\""));
        assert!(e.message.contains("is a bandwidth unit"), "{e}");
        // The family's op rules must find what they name on the machine.
        let e = err(h100
            .replace("bytes_per_cycle = 128", "")
            .replace("crossings = true", ""));
        assert_eq!(e.field, "arch");
        assert!(e.message.contains("not a bandwidth unit"), "{e}");
        let e = err(h100.replace("class = \"exp\"", "class = \"exp_x\""));
        assert!(e.message.contains("class `exp`"), "{e}");
        let e = err(h100.replace("[memory.smem]", "[memory.shared]"));
        assert!(e.message.contains("memory `smem`"), "{e}");
        let e = err(h100.replace(
            "crossings = true",
            "[units.X]\ncapacity = 1\ncrossings = true",
        ));
        assert!(e.message.contains("only a bandwidth unit"), "{e}");
        // A machine file holds numbers only: op rules are the family's.
        let e = err(format!("{h100}\n[[op]]\nmatch = ['*']\nclass = 'alu'\n"));
        assert!(e.message.contains("unknown field `op`"), "{e}");
        // A family without op rules loads, with none.
        let m = Machine::parse("m.toml", &h100.replace("arch = \"sm90\"", "arch = \"x\"")).unwrap();
        assert!(m.ops.is_empty());
    }

    #[test]
    fn units_are_synchronous_unless_marked_and_l2_is_optional_and_positive() {
        let m = Machine::select("h100").unwrap();
        let flag = |n: &str| m.units.iter().find(|u| u.name == n).unwrap().asynchronous;
        assert!(flag("TC") && flag("TMA") && !flag("SFU") && !flag("ALU"));
        assert_eq!(m.occupancy.as_ref().unwrap().l2_bytes, Some(52_428_800));
        let base = "name='x'\nvendor='v'\narch='a'\ndescription='d'\nclock_mhz=1\nsms=1\n\
                    [units.TC]\ncapacity = 1\n[warps]\nthreads_per_warp=32\nwarp_group_size=4\n\
                    max_warps_per_cta=32\nmax_regs_per_thread=255\nregister_file=65536\n\
                    [occupancy]\nsmem_per_sm=1024\nsmem_reserved_per_cta=0\nreg_granularity=256\n\
                    max_warps_per_sm=64\nmax_ctas_per_sm=32\n";
        let m = Machine::parse("m.toml", base).unwrap();
        assert!(!m.units[0].asynchronous);
        assert_eq!(m.occupancy.unwrap().l2_bytes, None);
        let e = Machine::parse("m.toml", &format!("{base}l2_bytes = 0\n")).unwrap_err();
        assert_eq!(e.field, "occupancy.l2_bytes");
    }
}
