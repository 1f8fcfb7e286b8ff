//! The TOML reader of machine descriptions (`machines/README.md` is the
//! schema): each table is read and checked on its own, every error located
//! at the offending field. The op rules are not in the file: they are the
//! target family's ([`crate::backend::ops`]), chosen by `arch` and checked
//! against the machine here.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{dtype_bytes, CostRule, Machine, Memory, Occupancy, OpRule, Unit, Warps, Work};
use crate::backend::{ops::op_rules, Arch};
use crate::error::{LoadError, SourceMap};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    name: Spanned<String>,
    vendor: String,
    arch: Spanned<String>,
    description: String,
    clock_mhz: Spanned<i64>,
    sms: Spanned<i64>,
    units: Spanned<BTreeMap<String, Spanned<RawUnit>>>,
    #[serde(default)]
    memory: BTreeMap<String, Spanned<RawMemory>>,
    warps: Spanned<RawWarps>,
    #[serde(default)]
    cost: Vec<Spanned<RawCost>>,
    #[serde(default)]
    occupancy: Option<RawOccupancy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOccupancy {
    smem_per_sm: Spanned<i64>,
    smem_reserved_per_cta: Spanned<i64>,
    reg_granularity: Spanned<i64>,
    max_warps_per_sm: Spanned<i64>,
    max_ctas_per_sm: Spanned<i64>,
    #[serde(default)]
    l2_bytes: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUnit {
    capacity: Spanned<i64>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    asynchronous: bool,
    #[serde(default)]
    bytes_per_cycle: Option<Spanned<i64>>,
    #[serde(default)]
    crossings: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    capacity: Spanned<i64>,
    unit: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWarps {
    threads_per_warp: Spanned<i64>,
    warp_group_size: Spanned<i64>,
    max_warps_per_cta: Spanned<i64>,
    max_regs_per_thread: Spanned<i64>,
    register_file: Spanned<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCost {
    class: Spanned<String>,
    unit: Spanned<String>,
    work: Spanned<String>,
    per_cycle: Spanned<BTreeMap<String, f64>>,
    #[serde(default)]
    latency: Option<Spanned<i64>>,
}

fn positive(
    map: &SourceMap,
    v: &Spanned<i64>,
    field: impl Into<String>,
    allow_zero: bool,
) -> Result<u64, LoadError> {
    let x = *v.get_ref();
    if x < 0 || (!allow_zero && x == 0) {
        let bound = if allow_zero { ">= 0" } else { ">= 1" };
        return Err(map.error(Some(v.span()), field, format!("must be {bound}, got {x}")));
    }
    Ok(x as u64)
}

fn small(
    map: &SourceMap,
    v: &Spanned<i64>,
    field: impl Into<String> + Clone,
) -> Result<u32, LoadError> {
    let x = positive(map, v, field.clone(), false)?;
    u32::try_from(x).map_err(|_| map.error(Some(v.span()), field, format!("{x} is too large")))
}

/// Parses a machine description; `file` names it in errors.
pub(super) fn machine(file: &str, text: &str) -> Result<Machine, LoadError> {
    let map = SourceMap::new(file, text);
    let raw: RawMachine = toml::from_str(text).map_err(|e| map.toml_error(&e))?;
    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty() {
        return Err(map.error(Some(raw.name.span()), "name", "must not be empty"));
    }
    let units = units(&map, &raw.units)?;
    let memories = memories(&map, &raw.memory)?;
    let warps = warps(&map, raw.warps.get_ref())?;
    let costs = costs(&map, &raw.cost, &units)?;
    let occupancy = match &raw.occupancy {
        None => None,
        Some(o) => Some(occupancy(&map, o)?),
    };
    let machine = Machine {
        name,
        vendor: raw.vendor,
        arch: raw.arch.get_ref().clone(),
        description: raw.description,
        clock_mhz: small(&map, &raw.clock_mhz, "clock_mhz")?,
        sms: small(&map, &raw.sms, "sms")?,
        units,
        memories,
        warps,
        costs,
        ops: Arch::parse(raw.arch.get_ref()).map_or_else(Vec::new, op_rules),
        occupancy,
    };
    for rule in &machine.ops {
        check_op_rule(&machine, rule).map_err(|message| {
            map.error(
                Some(raw.arch.span()),
                "arch",
                format!(
                    "the `{}` op rules do not fit this machine: {message}",
                    machine.arch
                ),
            )
        })?;
    }
    Ok(machine)
}

fn units(
    map: &SourceMap,
    raw: &Spanned<BTreeMap<String, Spanned<RawUnit>>>,
) -> Result<Vec<Unit>, LoadError> {
    let mut units = Vec::new();
    for (uname, unit) in raw.get_ref() {
        let u = unit.get_ref();
        let bytes_per_cycle = match &u.bytes_per_cycle {
            Some(b) => Some(positive(
                map,
                b,
                format!("units.{uname}.bytes_per_cycle"),
                false,
            )?),
            None => None,
        };
        if u.crossings && bytes_per_cycle.is_none() {
            return Err(map.error(
                Some(unit.span()),
                format!("units.{uname}.crossings"),
                "only a bandwidth unit (with bytes_per_cycle) carries crossings",
            ));
        }
        units.push(Unit {
            name: uname.clone(),
            capacity: small(map, &u.capacity, format!("units.{uname}.capacity"))?,
            description: u.description.clone(),
            asynchronous: u.asynchronous,
            bytes_per_cycle,
            crossings: u.crossings,
        });
    }
    if units.iter().filter(|u| u.crossings).count() > 1 {
        return Err(map.error(
            Some(raw.span()),
            "units",
            "at most one unit carries crossings",
        ));
    }
    if units.is_empty() {
        return Err(map.error(
            Some(raw.span()),
            "units",
            "at least one functional unit is required",
        ));
    }
    Ok(units)
}

fn memories(
    map: &SourceMap,
    raw: &BTreeMap<String, Spanned<RawMemory>>,
) -> Result<Vec<Memory>, LoadError> {
    raw.iter()
        .map(|(mname, mem)| {
            let m = mem.get_ref();
            Ok(Memory {
                name: mname.clone(),
                capacity: positive(map, &m.capacity, format!("memory.{mname}.capacity"), false)?,
                unit: m.unit.clone(),
            })
        })
        .collect()
}

fn warps(map: &SourceMap, w: &RawWarps) -> Result<Warps, LoadError> {
    Ok(Warps {
        threads_per_warp: small(map, &w.threads_per_warp, "warps.threads_per_warp")?,
        warp_group_size: small(map, &w.warp_group_size, "warps.warp_group_size")?,
        max_warps_per_cta: small(map, &w.max_warps_per_cta, "warps.max_warps_per_cta")?,
        max_regs_per_thread: small(map, &w.max_regs_per_thread, "warps.max_regs_per_thread")?,
        register_file: small(map, &w.register_file, "warps.register_file")?,
    })
}

fn costs(
    map: &SourceMap,
    raw: &[Spanned<RawCost>],
    units: &[Unit],
) -> Result<Vec<CostRule>, LoadError> {
    let mut costs: Vec<CostRule> = Vec::new();
    for (i, c) in raw.iter().enumerate() {
        let rule = cost(map, i, c.get_ref(), units)?;
        if costs.iter().any(|r| r.class == rule.class) {
            return Err(map.error(
                Some(c.get_ref().class.span()),
                format!("cost[{i}].class"),
                format!("duplicate cost rule for class `{}`", rule.class),
            ));
        }
        costs.push(rule);
    }
    Ok(costs)
}

fn cost(map: &SourceMap, i: usize, c: &RawCost, units: &[Unit]) -> Result<CostRule, LoadError> {
    let field = |f: &str| format!("cost[{i}].{f}");
    let unit = c.unit.get_ref().clone();
    match units.iter().find(|u| u.name == unit) {
        None => {
            return Err(map.error(
                Some(c.unit.span()),
                field("unit"),
                format!("unknown unit `{unit}`"),
            ))
        }
        Some(u) if u.bytes_per_cycle.is_some() => {
            return Err(map.error(
                Some(c.unit.span()),
                field("unit"),
                format!("`{unit}` is a bandwidth unit: ops reach it through an op rule's `traffic`, not a cost rule"),
            ))
        }
        Some(_) => {}
    }
    let work = match c.work.get_ref().as_str() {
        "2mnk" => Work::MatmulFlops,
        "elements" => Work::Elements,
        "bytes" => Work::Bytes,
        other => {
            return Err(map.error(
                Some(c.work.span()),
                field("work"),
                format!("unknown work measure `{other}` (expected 2mnk, elements or bytes)"),
            ))
        }
    };
    for (dtype, rate) in c.per_cycle.get_ref() {
        if !(rate.is_finite() && *rate > 0.0) {
            return Err(map.error(
                Some(c.per_cycle.span()),
                field(&format!("per_cycle.{dtype}")),
                format!("must be a positive number, got {rate}"),
            ));
        }
        if work == Work::Bytes && dtype_bytes(dtype).is_none() {
            return Err(map.error(
                Some(c.per_cycle.span()),
                field(&format!("per_cycle.{dtype}")),
                format!("unknown element type `{dtype}`"),
            ));
        }
    }
    let latency = match &c.latency {
        Some(l) => positive(map, l, field("latency"), true)?,
        None => 0,
    };
    Ok(CostRule {
        class: c.class.get_ref().clone(),
        unit,
        work,
        per_cycle: c.per_cycle.get_ref().clone(),
        latency,
    })
}

fn occupancy(map: &SourceMap, o: &RawOccupancy) -> Result<Occupancy, LoadError> {
    Ok(Occupancy {
        smem_per_sm: positive(map, &o.smem_per_sm, "occupancy.smem_per_sm", false)?,
        smem_reserved_per_cta: positive(
            map,
            &o.smem_reserved_per_cta,
            "occupancy.smem_reserved_per_cta",
            true,
        )?,
        reg_granularity: small(map, &o.reg_granularity, "occupancy.reg_granularity")?,
        max_warps_per_sm: small(map, &o.max_warps_per_sm, "occupancy.max_warps_per_sm")?,
        max_ctas_per_sm: small(map, &o.max_ctas_per_sm, "occupancy.max_ctas_per_sm")?,
        l2_bytes: match &o.l2_bytes {
            None => None,
            Some(v) => Some(positive(map, v, "occupancy.l2_bytes", false)?),
        },
    })
}

/// Whether the machine prices everything `rule` names: its cost class, the
/// memory its result occupies, and the bandwidth unit of its traffic.
pub(super) fn check_op_rule(m: &Machine, rule: &OpRule) -> Result<(), String> {
    let op = rule.patterns.first().map_or("?", String::as_str);
    if let Some(class) = &rule.class {
        if m.cost_rule(class).is_none() {
            return Err(format!(
                "`{op}` is priced as class `{class}`, which has no [[cost]] rule"
            ));
        }
    }
    if let Some(memory) = &rule.memory {
        if m.memory(memory).is_none() {
            return Err(format!(
                "`{op}` occupies memory `{memory}`, which has no [memory.{memory}] table"
            ));
        }
    }
    if let Some(t) = &rule.traffic {
        if m.unit(&t.unit).is_none_or(|u| u.bytes_per_cycle.is_none()) {
            return Err(format!(
                "`{op}` moves its tiles through `{}`, which is not a bandwidth unit of this machine",
                t.unit
            ));
        }
    }
    Ok(())
}
