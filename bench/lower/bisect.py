import sys
from triton._C.libtriton import ir, passes, nvidia
from triton.backends.nvidia.compiler import CUDABackend
from triton.backends.compiler import GPUTarget
src = sys.argv[1]; which = sys.argv[2]
backend = CUDABackend(GPUTarget("cuda", 90, 32))
ctx = ir.context(); ir.load_dialects(ctx); backend.load_dialects(ctx)
mod = ir.parse_mlir_module(src, ctx); mod.context = ctx
pm = ir.pass_manager(ctx); pm.enable_debug()
P, N = passes, nvidia.passes
for w in which.split(","):
    if w == "pipeline": P.ttgpuir.add_pipeline(pm, 3, False)
    elif w == "fence": N.ttnvgpuir.add_fence_insertion(pm, 90)
    elif w == "reorder": P.ttgpuir.add_reorder_instructions(pm)
    elif w == "prefetch": P.ttgpuir.add_prefetch(pm)
    elif w == "odo": P.ttgpuir.add_optimize_dot_operands(pm, True)
    elif w == "canon": P.common.add_canonicalizer(pm)
    elif w == "ws": N.hopper.add_hopper_warpspec(pm, 3, False)
    elif w == "sched": P.ttgpuir.add_assign_latencies(pm, 3); P.ttgpuir.add_schedule_loops(pm)
pm.run(mod, "x")
print(mod.str())
