//! Reading the functions of an MLIR module (generic-form TTGIR, Triton's
//! dialects unregistered) into the verifier's [`Function`]s, through the
//! MLIR C API. Written for the verifier alone: it shares no code with the
//! scheduler's front end.

use std::collections::HashMap;

use mlir_sys::*;

use super::{Block, Function, Op};

fn text(s: MlirStringRef) -> String {
    if s.data.is_null() {
        return String::new();
    }
    // SAFETY: MLIR string refs point at `length` valid bytes.
    let bytes = unsafe { std::slice::from_raw_parts(s.data as *const u8, s.length) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// Collects what an MLIR printer callback prints.
unsafe extern "C" fn append(s: MlirStringRef, data: *mut std::ffi::c_void) {
    // SAFETY: `data` is the `String` handed to the printer below.
    let out = unsafe { &mut *(data as *mut String) };
    out.push_str(&text(s));
}

fn type_text(t: MlirType) -> String {
    let mut out = String::new();
    // SAFETY: `t` is a live type; `append` writes into `out`.
    unsafe {
        mlirTypePrint(
            t,
            Some(append),
            &mut out as *mut String as *mut std::ffi::c_void,
        )
    };
    out
}

fn loc_text(op: MlirOperation) -> String {
    let mut out = String::new();
    // SAFETY: `op` is live; `append` writes into `out`.
    unsafe {
        mlirLocationPrint(
            mlirOperationGetLocation(op),
            Some(append),
            &mut out as *mut String as *mut std::ffi::c_void,
        )
    };
    out
}

/// The shape of a `!ttg.memdesc<AxBx...xT, ...>` type and whether it is
/// mutable; None for other types.
pub fn memdesc_shape(t: &str) -> Option<(Vec<i64>, bool)> {
    let inner = t.strip_prefix("!ttg.memdesc<")?;
    let dims = inner.split([',', '>']).next()?;
    let shape: Vec<i64> = dims
        .split('x')
        .map_while(|d| d.trim().parse().ok())
        .collect();
    Some((shape, inner.contains("mutable")))
}

/// Integer and Boolean attributes the machine reads, inherent or not.
const ATTRS: &[&str] = &[
    "value",
    "num",
    "pendings",
    "predicate",
    "isAsync",
    "size",
    "count",
];

struct Reader {
    values: HashMap<usize, usize>,
    next_op: usize,
}

impl Reader {
    fn value(&mut self, v: MlirValue) -> usize {
        let n = self.values.len();
        *self.values.entry(v.ptr as usize).or_insert(n)
    }

    fn block(&mut self, b: MlirBlock) -> Block {
        let mut out = Block::default();
        // SAFETY (whole function): walking live blocks, ops and values.
        unsafe {
            for i in 0..mlirBlockGetNumArguments(b) {
                out.args.push(self.value(mlirBlockGetArgument(b, i)));
            }
            let mut o = mlirBlockGetFirstOperation(b);
            while !o.ptr.is_null() {
                out.ops.push(self.op(o));
                o = mlirOperationGetNextInBlock(o);
            }
        }
        out
    }

    fn op(&mut self, o: MlirOperation) -> Op {
        let id = self.next_op;
        self.next_op += 1;
        // SAFETY (whole function): `o` is a live operation of the module.
        unsafe {
            let name = text(mlirIdentifierStr(mlirOperationGetName(o)));
            let mut op = Op {
                id,
                name,
                loc: loc_text(o),
                ..Op::default()
            };
            for i in 0..mlirOperationGetNumOperands(o) {
                let v = mlirOperationGetOperand(o, i);
                op.operands.push(self.value(v));
                op.memdesc
                    .push(type_text(mlirValueGetType(v)).starts_with("!ttg.memdesc<"));
            }
            for i in 0..mlirOperationGetNumResults(o) {
                op.results.push(self.value(mlirOperationGetResult(o, i)));
            }
            for &a in ATTRS {
                let attr = mlirOperationGetAttributeByName(
                    o,
                    mlirStringRefCreateFromCString(attr_name(a).as_ptr()),
                );
                if attr.ptr.is_null() {
                    continue;
                }
                if mlirAttributeIsAInteger(attr) {
                    op.attrs
                        .insert(a.to_string(), mlirIntegerAttrGetValueInt(attr));
                } else if mlirAttributeIsABool(attr) {
                    op.attrs
                        .insert(a.to_string(), mlirBoolAttrGetValue(attr) as i64);
                }
            }
            let seg = mlirOperationGetAttributeByName(
                o,
                mlirStringRefCreateFromCString(c"operandSegmentSizes".as_ptr()),
            );
            if !seg.ptr.is_null() && mlirAttributeIsADenseI32Array(seg) {
                op.segments = (0..mlirDenseArrayGetNumElements(seg))
                    .map(|i| i64::from(mlirDenseI32ArrayGetElement(seg, i)))
                    .collect();
            }
            let warps = mlirOperationGetAttributeByName(
                o,
                mlirStringRefCreateFromCString(c"partitionNumWarps".as_ptr()),
            );
            if !warps.ptr.is_null() && mlirAttributeIsADenseI32Array(warps) {
                op.warps = (0..mlirDenseArrayGetNumElements(warps))
                    .map(|i| i64::from(mlirDenseI32ArrayGetElement(warps, i)))
                    .collect();
            }
            if op.name == "ttg.local_alloc" && op.results.len() == 1 {
                op.alloc =
                    memdesc_shape(&type_text(mlirValueGetType(mlirOperationGetResult(o, 0))));
            }
            for r in 0..mlirOperationGetNumRegions(o) {
                let region = mlirOperationGetRegion(o, r);
                let first = mlirRegionGetFirstBlock(region);
                op.regions.push(if first.ptr.is_null() {
                    Block::default()
                } else {
                    self.block(first)
                });
            }
            op
        }
    }
}

fn attr_name(a: &str) -> std::ffi::CString {
    std::ffi::CString::new(a).unwrap_or_default()
}

fn symbol(o: MlirOperation) -> String {
    // SAFETY: `o` is live.
    unsafe {
        let a = mlirOperationGetAttributeByName(
            o,
            mlirStringRefCreateFromCString(c"sym_name".as_ptr()),
        );
        if !a.ptr.is_null() && mlirAttributeIsAString(a) {
            text(mlirStringAttrGetValue(a))
        } else {
            String::new()
        }
    }
}

/// Every function (`tt.func`, `func.func`) of `module`, with its own value
/// and op numbering.
pub fn functions(module: MlirOperation) -> Vec<Function> {
    functions_with(module, None)
}

/// [`functions`] of `root` (a module, or a function not in one), where
/// `num_warps` is the CTA's warps when no module above says.
pub fn functions_with(root: MlirOperation, num_warps: Option<u32>) -> Vec<Function> {
    let mut out = Vec::new();
    let mut stack = vec![(root, num_warps)];
    while let Some((o, warps)) = stack.pop() {
        // SAFETY: walking the live module.
        unsafe {
            let name = text(mlirIdentifierStr(mlirOperationGetName(o)));
            let own = mlirOperationGetAttributeByName(
                o,
                mlirStringRefCreateFromCString(c"ttg.num-warps".as_ptr()),
            );
            let warps = if !own.ptr.is_null() && mlirAttributeIsAInteger(own) {
                Some(mlirIntegerAttrGetValueInt(own) as u32)
            } else {
                warps
            };
            if name == "tt.func" || name == "func.func" {
                let region = mlirOperationGetRegion(o, 0);
                let first = mlirRegionGetFirstBlock(region);
                if !first.ptr.is_null() {
                    let mut r = Reader {
                        values: HashMap::new(),
                        next_op: 0,
                    };
                    out.push(Function {
                        name: symbol(o),
                        body: r.block(first),
                        num_warps: warps,
                    });
                }
                continue;
            }
            for i in 0..mlirOperationGetNumRegions(o) {
                let mut b = mlirRegionGetFirstBlock(mlirOperationGetRegion(o, i));
                while !b.ptr.is_null() {
                    let mut c = mlirBlockGetFirstOperation(b);
                    while !c.ptr.is_null() {
                        stack.push((c, warps));
                        c = mlirOperationGetNextInBlock(c);
                    }
                    b = mlirBlockGetNextInRegion(b);
                }
            }
        }
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::memdesc_shape;

    #[test]
    fn memdesc_shapes_are_read() {
        assert_eq!(
            memdesc_shape("!ttg.memdesc<3x128x64xf16, #shared, #smem, mutable>"),
            Some((vec![3, 128, 64], true))
        );
        assert_eq!(
            memdesc_shape("!ttg.memdesc<1xi64, #shared1, #smem>"),
            Some((vec![1], false))
        );
        assert_eq!(memdesc_shape("tensor<128x64xf16>"), None);
    }
}
