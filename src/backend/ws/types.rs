//! Type text of the lowering: shared-memory rings, their slots and the
//! mbarrier arrays, derived from the types of the input (never invented
//! layouts, except the barriers' one-element swizzled layout Gluon uses).

/// The layout of an mbarrier array (one `i64` per slot), written inline:
/// it round-trips through `twill-opt` as opaque type text.
pub const BARRIER_LAYOUT: &str =
    "#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>";

/// A `!ttg.memdesc<...>` type split into its shape, element type and the
/// rest of its parameters (encoding, memory space, `mutable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemDesc {
    pub shape: Vec<u64>,
    pub element: String,
    /// The parameters after the shape, e.g. `["#shared", "#smem"]`.
    pub params: Vec<String>,
}

impl MemDesc {
    /// Parses `!ttg.memdesc<128x64xf16, #shared, #smem>`.
    pub fn parse(text: &str) -> Option<MemDesc> {
        let body = text.strip_prefix("!ttg.memdesc<")?.strip_suffix('>')?;
        let params = split_top(body);
        let (dims, element) = params.first()?.rsplit_once('x')?;
        let shape = dims
            .split('x')
            .map(|d| d.parse().ok())
            .collect::<Option<Vec<u64>>>()?;
        Some(MemDesc {
            shape,
            element: element.to_string(),
            params: params[1..].to_vec(),
        })
    }

    pub fn text(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        let mut parts = vec![format!("{}x{}", dims.join("x"), self.element)];
        parts.extend(self.params.iter().cloned());
        format!("!ttg.memdesc<{}>", parts.join(", "))
    }

    pub fn mutable(&self) -> MemDesc {
        let mut m = self.clone();
        if !m.params.iter().any(|p| p == "mutable") {
            m.params.push("mutable".to_string());
        }
        m
    }

    /// The same buffer with `depth` slots in front (a ring of it).
    pub fn ring(&self, depth: u32) -> MemDesc {
        let mut m = self.mutable();
        m.shape.insert(0, u64::from(depth));
        m
    }

    /// Bytes of one buffer, when the element type has a known width.
    pub fn bytes(&self) -> Option<u64> {
        let bits = element_bits(&self.element)?;
        Some(self.shape.iter().product::<u64>() * bits / 8)
    }
}

/// `a, b<c, d>, e` split at top-level commas, trimmed.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (Vec::new(), 0i32, String::new());
    for ch in s.chars() {
        match ch {
            '<' | '{' | '[' | '(' => depth += 1,
            '>' | '}' | ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur.trim().to_string());
    out
}

fn element_bits(e: &str) -> Option<u64> {
    match e {
        "f64" | "i64" => Some(64),
        "f32" | "i32" | "tf32" => Some(32),
        "f16" | "bf16" | "i16" => Some(16),
        "i8" => Some(8),
        _ if e.starts_with("f8") => Some(8),
        _ => None,
    }
}

/// Whether `ty` is a memdesc that must become `mutable` because it views a
/// ring slot, and its text if so.
pub fn mutable_view(ty: &str) -> String {
    MemDesc::parse(ty).map_or_else(|| ty.to_string(), |m| m.mutable().text())
}

/// The barrier array of a ring of `depth` slots.
pub fn barriers(depth: u32) -> String {
    format!("!ttg.memdesc<{depth}x1xi64, {BARRIER_LAYOUT}, #smem, mutable>")
}

/// One barrier of the array.
pub fn barrier() -> String {
    format!("!ttg.memdesc<1xi64, {BARRIER_LAYOUT}, #smem, mutable>")
}

/// The shared-memory buffer a worker partition delivers a loop-carried
/// tensor through: the tensor's shape and element type, unswizzled (it is
/// written and read once per CTA), mutable.
pub fn result_buffer(tensor: &str) -> Option<String> {
    let body = tensor.strip_prefix("tensor<")?.strip_suffix('>')?;
    let params = split_top(body);
    let (dims, element) = params.first()?.rsplit_once('x')?;
    let rank = dims.split('x').count();
    element_bits(element)?;
    let order: Vec<String> = (0..rank).rev().map(|d| d.to_string()).collect();
    Some(format!(
        "!ttg.memdesc<{dims}x{element}, #ttg.swizzled_shared<{{vec = 1, perPhase = 1, maxPhase = 1, order = [{}]}}>, #smem, mutable>",
        order.join(", ")
    ))
}

/// The read-only buffer that hands a worker partition the initial value of
/// a tensor it carries (`local_alloc` with the value, before the ws op):
/// the result buffer's layout, immutable.
pub fn init_buffer(tensor: &str) -> Option<String> {
    result_buffer(tensor).map(|t| t.replace(", mutable>", ">"))
}

/// Whether a value of this type may be a capture of a partition region
/// (Triton's `getSharedMemorySize` accepts scalars, pointers, descriptors
/// and memdescs; a tensor is refused).
pub fn capturable(ty: &str) -> bool {
    !ty.starts_with("tensor<")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_of_a_tile() {
        let t = MemDesc::parse("!ttg.memdesc<128x64xf16, #shared, #smem>").unwrap();
        assert_eq!(t.bytes(), Some(16384));
        assert_eq!(
            t.ring(3).text(),
            "!ttg.memdesc<3x128x64xf16, #shared, #smem, mutable>"
        );
        assert_eq!(
            mutable_view("!ttg.memdesc<64x128xf16, #shared1, #smem>"),
            "!ttg.memdesc<64x128xf16, #shared1, #smem, mutable>"
        );
        assert_eq!(
            mutable_view("!ttg.memdesc<64x128xf16, #shared1, #smem, mutable>"),
            "!ttg.memdesc<64x128xf16, #shared1, #smem, mutable>"
        );
        assert!(barriers(4).starts_with("!ttg.memdesc<4x1xi64, #ttg.swizzled_shared<"));
        assert!(!capturable("tensor<128x128xf32, #mma>"));
        assert_eq!(
            result_buffer("tensor<64x128xf32, #mma>").unwrap(),
            "!ttg.memdesc<64x128xf32, #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}>, #smem, mutable>"
        );
        assert!(
            result_buffer("tensor<64xf32, #ttg.slice<{dim = 1, parent = #mma}>>")
                .unwrap()
                .contains("order = [0]}>")
        );
    }
}
