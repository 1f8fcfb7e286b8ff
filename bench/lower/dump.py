import sys, os, importlib
from triton.backends.compiler import GPUTarget
which = sys.argv[1]; out = sys.argv[2]
kw = {}
for a in sys.argv[3:]:
    k, v = a.split("="); kw[k] = eval(v)
mod = importlib.import_module(f"bench.kernels.{which}")
k = mod.compile_for(GPUTarget("cuda", 90, 32), **kw)
ks = k if isinstance(k, (list, tuple)) else [k]
for i, kk in enumerate(ks):
    for key, val in kk.asm.items():
        if key in ("ttgir", "source", "ttir", "llir", "ptx"):
            open(f"{out}.{i}.{key}", "w").write(val if isinstance(val, str) else str(val))
    print(i, list(kk.asm.keys()), kk.metadata.num_warps, getattr(kk.metadata, "shared", None))
