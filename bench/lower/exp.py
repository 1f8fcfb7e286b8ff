"""Feed a final Gluon TTGIR through the make_ttgir passes that follow twill's hook point, then make_llir."""
import sys, os, re, traceback
from triton._C.libtriton import ir, passes, nvidia
from triton.backends.nvidia.compiler import CUDABackend
from triton.backends.compiler import GPUTarget
import triton
ver = triton.__version__
src, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
cap = 90
backend = CUDABackend(GPUTarget("cuda", cap, 32))
ctx = ir.context(); ir.load_dialects(ctx); backend.load_dialects(ctx)
mod = ir.parse_mlir_module(src, ctx); mod.context = ctx
opts = backend.parse_options(dict(num_warps=4, num_stages=3))
P, N = passes, nvidia.passes
def tail36(pm):
    P.ttgpuir.add_pipeline(pm, 3, False)
    P.common.add_canonicalizer(pm); P.ttir.add_loop_aware_cse(pm); P.ttgpuir.add_prefetch(pm)
    P.ttgpuir.add_optimize_dot_operands(pm, True); P.ttgpuir.add_coalesce_async_copy(pm)
    N.ttnvgpuir.add_optimize_tmem_layouts(pm); N.ttnvgpuir.add_tma_lowering(pm)
    P.ttgpuir.add_remove_layout_conversions(pm); N.ttnvgpuir.add_interleave_tmem(pm)
    P.ttgpuir.add_reduce_data_duplication(pm); P.ttgpuir.add_reorder_instructions(pm)
    P.ttir.add_loop_aware_cse(pm); P.common.add_symbol_dce(pm); N.ttnvgpuir.add_fence_insertion(pm, cap)
    N.ttnvgpuir.add_lower_mma(pm); P.common.add_sccp(pm); P.common.add_cse(pm); P.common.add_canonicalizer(pm)
def tail39(pm):
    P.ttgpuir.add_pipeline(pm, 3, False)
    P.common.add_canonicalizer(pm); P.ttir.add_loop_aware_cse(pm)
    P.ttgpuir.add_optimize_dot_operands(pm, True); P.ttgpuir.add_coalesce_async_copy(pm)
    N.ttnvgpuir.add_optimize_tmem_layouts(pm); N.ttnvgpuir.add_tmem_load_reduce(pm); N.ttnvgpuir.add_tma_lowering(pm)
    P.ttgpuir.add_remove_layout_conversions(pm); N.ttnvgpuir.add_interleave_tmem(pm)
    P.ttgpuir.add_reduce_data_duplication(pm); P.ttgpuir.add_reorder_instructions(pm)
    P.ttir.add_loop_aware_cse(pm); P.common.add_symbol_dce(pm); N.ttnvgpuir.add_fence_insertion(pm, cap)
    N.ttnvgpuir.add_lower_mma(pm); N.ttnvgpuir.add_hoist_mbarrier_lifecycle(pm, cap)
    P.common.add_sccp(pm); P.common.add_cse(pm); P.common.add_canonicalizer(pm)
tail = tail36 if ver.startswith("3.6") else tail39
def run(name, fn):
    pm = ir.pass_manager(ctx); pm.enable_debug(); fn(pm)
    try:
        pm.run(mod, name); print(name, "OK"); return True
    except Exception as e:
        print(name, "FAILED", str(e)[:2000]); return False
open(out + ".in.mlir", "w").write(mod.str())
ok = True
if "ws" in mode:
    ok = run("hopper_warpspec", lambda pm: N.hopper.add_hopper_warpspec(pm, 3, False))
if ok and "sched" in mode:
    ok = run("assign+schedule", lambda pm: (P.ttgpuir.add_assign_latencies(pm, 3), P.ttgpuir.add_schedule_loops(pm)))
if ok and "tail" in mode:
    ok = run("tail", tail)
open(out + ".tail.mlir", "w").write(mod.str())
if ok and "llir" in mode:
    md = {}
    try:
        ll = backend.make_llir(mod, md, opts, cap)
        open(out + ".ll", "w").write(ll)
        print("make_llir OK", {k: md[k] for k in md if k in ("num_warps", "shared", "global_scratch_size")})
        if "ptx" in mode:
            ptx = backend.make_ptx(ll, md, opts, backend.target.arch)
            open(out + ".ptx", "w").write(ptx)
            cub = backend.make_cubin(ptx, md, opts, backend.target.arch)
            print("cubin OK", len(cub))
    except Exception as e:
        print("make_llir/ptx FAILED", str(e)[:3000])
