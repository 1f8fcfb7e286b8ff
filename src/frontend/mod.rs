//! Front ends: from a loop of a Triton kernel to a dependence graph.
//!
//! [`LoopIr`] is the neutral, MLIR-free description of one candidate loop
//! (`scf.for`) that an IR reader fills in: its top-level body ops with their
//! operand sources, result types as text, nested-op names and locations, and
//! the `scf.yield` operands. [`lower::lower`] turns it into a [`crate::Graph`]
//! using only the machine description's op rules (op name -> cost class and
//! flags) and the tile shapes parsed out of the type text. The MLIR reader is
//! [`mlir`] (melior); nothing else here depends on MLIR.

pub mod lower;
#[cfg(feature = "mlir")]
pub mod mlir;

/// Where a value used in the loop body comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueSrc {
    /// Result `result` of top-level body op `op`.
    Op { op: usize, result: usize },
    /// The loop's iteration argument `k` (after the induction variable).
    IterArg(usize),
    /// The loop's induction variable.
    InductionVar,
    /// A value defined outside the loop; equal ids are the same value.
    Outside(usize),
    /// A value defined inside the same nested region that uses it.
    Local,
}

/// A use of a value: where it comes from and its type as MLIR prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrValue {
    pub src: ValueSrc,
    pub ty: String,
}

/// A top-level op of the loop body (the terminator excluded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrOp {
    pub name: String,
    /// The op's location as MLIR prints it.
    pub location: String,
    pub operands: Vec<IrValue>,
    /// Result types as text.
    pub results: Vec<String>,
    /// Values from outside the op used by ops nested in its regions.
    pub region_uses: Vec<IrValue>,
    /// Names of the ops nested in its regions (e.g. a `tt.reduce` combiner).
    pub nested: Vec<String>,
    /// The stage Triton's own scheduler gave the op (`loop.stage`), when
    /// the loop carries Triton's schedule.
    pub triton_stage: Option<u32>,
    /// For an `scf.if`: the ops of each of its regions (then, else), every
    /// op nested at any depth in pre-order with the terminators and the
    /// nested `scf.if`s themselves left out (a nested `if`'s regions are
    /// both counted in the branch that holds it); their operands name
    /// [`ValueSrc::Local`] for values defined inside the `if`. Empty for
    /// every other op.
    pub branches: Vec<Vec<IrOp>>,
}

/// One candidate loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopIr {
    /// A readable name: the kernel and the loop's position.
    pub name: String,
    pub location: String,
    /// The loop carries `tt.warp_specialize`.
    pub warp_specialize: bool,
    /// Warps of the CTA (`ttg.num-warps` of the module), for register counts.
    pub num_warps: u32,
    pub ops: Vec<IrOp>,
    /// Operands of the `scf.yield` terminator, one per iteration argument.
    pub yields: Vec<IrValue>,
    /// Triton's own schedule of the loop is on it (`tt.scheduled_max_stage`,
    /// written by Triton's `schedule_loops`): its last stage.
    pub triton_max_stage: Option<u32>,
}

/// A function's code outside its loops, for the time one CTA spends
/// before, between and after them (prologue and epilogue: the first tile
/// loads, the output's normalization and store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Straight {
    /// A run of ops between loops, as a [`LoopIr`] without a loop (no
    /// iteration arguments, no yields).
    Code(LoopIr),
    /// The regions of a `ttg.warp_specialize` (its default region and each
    /// partition), which run at the same time; each region's own code.
    Concurrent(Vec<Vec<Straight>>),
}

impl Straight {
    /// Cycles of `code` in sequence, concurrent regions taking their
    /// slowest, with `cycles` pricing one run of ops.
    pub fn total<E>(
        code: &[Straight],
        cycles: &impl Fn(&LoopIr) -> Result<u64, E>,
    ) -> Result<u64, E> {
        let mut sum = 0;
        for s in code {
            sum += match s {
                Straight::Code(ir) => cycles(ir)?,
                Straight::Concurrent(regions) => {
                    let mut slowest = 0;
                    for r in regions {
                        slowest = slowest.max(Straight::total(r, cycles)?);
                    }
                    slowest
                }
            };
        }
        Ok(sum)
    }
}

/// A tile type parsed out of its text: `tensor<128x64xf16, #enc>` or
/// `!ttg.memdesc<128x64xf16, #shared, #smem, mutable>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tile {
    pub shape: Vec<u64>,
    pub dtype: String,
    /// A buffer descriptor (shared or tensor memory), not a register tensor.
    pub memdesc: bool,
    /// The memdesc lives in tensor memory (`#ttng.tensor_memory`).
    pub tensor_memory: bool,
}

impl Tile {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// Element size in bytes as Triton spells element types (`i1` counts one).
pub fn element_bytes(dtype: &str) -> u64 {
    if dtype == "i1" {
        return 1;
    }
    if dtype.starts_with("!tt.ptr") {
        return 8;
    }
    crate::machine::dtype_bytes(dtype).unwrap_or(4)
}

/// Parses a ranked tile type; `None` for scalars, pointers, descriptors and
/// anything without a static shape.
pub fn parse_tile(ty: &str) -> Option<Tile> {
    let ty = ty.trim();
    let (body, memdesc) = if let Some(b) = ty.strip_prefix("tensor<") {
        (b, false)
    } else if let Some(b) = ty.strip_prefix("!ttg.memdesc<") {
        (b, true)
    } else {
        return None;
    };
    // The shape-and-element part ends at the first top-level ',' or '>'.
    let mut depth = 0i32;
    let mut end = body.len();
    for (i, c) in body.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if depth == 0 => {
                end = i;
                break;
            }
            '>' => depth -= 1,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let dims = &body[..end];
    let mut shape = Vec::new();
    let mut rest = dims;
    while let Some((d, tail)) = rest.split_once('x') {
        match d.parse::<u64>() {
            Ok(n) => {
                shape.push(n);
                rest = tail;
            }
            Err(_) => break,
        }
    }
    if shape.is_empty() || rest.is_empty() {
        return None;
    }
    Some(Tile {
        shape,
        dtype: rest.to_string(),
        memdesc,
        tensor_memory: memdesc && body[end..].contains("tensor_memory"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tensors_and_memdescs() {
        let t = parse_tile("tensor<128x64xf16, #ttg.blocked<{sizePerThread = [1, 8]}>>").unwrap();
        assert_eq!(
            (t.shape.clone(), t.dtype.as_str(), t.memdesc),
            (vec![128, 64], "f16", false)
        );
        let m = parse_tile("!ttg.memdesc<64x128xbf16, #ttg.nvmma_shared<{swizzlingByteWidth = 128}>, #ttg.shared_memory, mutable>").unwrap();
        assert_eq!(
            (m.shape.clone(), m.dtype.as_str(), m.memdesc),
            (vec![64, 128], "bf16", true)
        );
        let t = parse_tile("!ttg.memdesc<128x128xf32, #ttng.tensor_memory_encoding<blockM = 128, blockN = 128, colStride = 1>, #ttng.tensor_memory, mutable>").unwrap();
        assert!(t.tensor_memory);
        let r = parse_tile("tensor<128xf32, #ttg.slice<{dim = 1, parent = #blocked}>>").unwrap();
        assert_eq!(r.shape, vec![128]);
        let p = parse_tile("tensor<128x64x!tt.ptr<f16>, #blocked>").unwrap();
        assert_eq!(p.dtype, "!tt.ptr<f16>");
        assert!(parse_tile("i32").is_none());
        assert!(parse_tile("!tt.tensordesc<tensor<128x64xf16>>").is_none());
        assert!(parse_tile("tensor<?x4xf32>").is_none());
    }
}
