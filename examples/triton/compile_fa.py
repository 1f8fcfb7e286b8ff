"""Compile our FlashAttention forward kernel (the Python package's test
fixture third_party/triton/tests/kernels/fa_fwd.py) to cubin for a GPU target
on any machine (no GPU needed) and show what twill did.

    TRITON_TWILL=1 python examples/triton/compile_fa.py --cap 90
    python examples/triton/compile_fa.py --cap 100          # stock Triton

With TRITON_TWILL=1 (and `pip install ./third_party/triton`), twill schedules
the loop; without it this is stock Triton. Prints twill's decision and the
shared-memory buffers of the final TTGIR.
"""

import argparse
import importlib.util
import re
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

FA_FWD = Path(__file__).resolve().parents[2] / "third_party" / "triton" / "tests" / "kernels" / "fa_fwd.py"
spec = importlib.util.spec_from_file_location("fa_fwd", FA_FWD)
fa_fwd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fa_fwd)

ap = argparse.ArgumentParser()
ap.add_argument("--cap", type=int, default=90, choices=[90, 100])
args = ap.parse_args()

cfg = dict(fa_fwd.DEFAULT_CONFIGS[args.cap])
opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
kernel = triton.compile(fa_fwd.make_ast_source(**cfg), target=GPUTarget("cuda", args.cap, 32), options=opts)

print(f"triton {triton.__version__}, cuda:{args.cap}: cubin {len(kernel.asm['cubin'])} bytes")
try:
    import twill_triton

    if twill_triton.is_enabled():
        for d in twill_triton.decisions():
            print("twill:", "scheduled" if d.scheduled else f"fell back ({d.reason})")
            for r in d.remarks:
                print("  ", r.split("remark: ", 1)[-1])
    else:
        print("twill: not enabled (set TRITON_TWILL=1)")
except ImportError:
    print("twill: twill_triton not installed")
ttgir = kernel.asm["ttgir"]
bufs = re.findall(r"ttg\.local_alloc.*-> !ttg\.memdesc<(\d+)x128x128xf16", ttgir)
print("K/V shared-memory buffers:", ", ".join(bufs) or "none",
      "| warp-specialized:", "ttg.warp_specialize" in ttgir)
