import sys
from triton._C.libtriton import ir, passes, nvidia
from triton.backends.nvidia.compiler import CUDABackend
from triton.backends.compiler import GPUTarget
src = sys.argv[1]
backend = CUDABackend(GPUTarget("cuda", 90, 32))
ctx = ir.context(); ir.load_dialects(ctx); backend.load_dialects(ctx)
mod = ir.parse_mlir_module(src, ctx); mod.context = ctx
pm = ir.pass_manager(ctx); pm.enable_debug()
passes.ttgpuir.add_combine_tensor_select_and_if(pm)
try:
    passes.ttgpuir.add_allocate_warp_groups(pm)
except TypeError:
    passes.ttgpuir.add_allocate_warp_groups(pm, False)
pm.run(mod, "x")
for l in mod.str().split("\n"):
    if "module attributes" in l or "warp_specialize(" in l or "partition0" in l or "partition1" in l or "tt.func" in l:
        print(l[:300])
