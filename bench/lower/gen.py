import sys, re
from triton._C.libtriton import ir
from triton.backends.nvidia.compiler import CUDABackend
from triton.backends.compiler import GPUTarget
src, dst = sys.argv[1], sys.argv[2]
backend = CUDABackend(GPUTarget("cuda", 90, 32))
ctx = ir.context(); ir.load_dialects(ctx); backend.load_dialects(ctx)
mod = ir.parse_mlir_module(src, ctx); mod.context = ctx
mod.set_attr("llvm.data_layout", ir.builder(ctx).get_int32_attr(0))
t = mod.str()
t = re.sub(r"llvm.data_layout = 0 : i32(, )?", "", t)
open(dst, "w").write(t)
print('"builtin.module"()' in t)
