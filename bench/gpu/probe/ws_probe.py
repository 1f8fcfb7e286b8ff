"""Probe on the H100: Triton's own Hopper warp specialization of the FA
forward (third_party/triton/tests/kernels/fa_fwd.py with DEVICE_DESC: device-side descriptors)
against the same kernel without it, at N = 1k, 4k, 16k (Z=4, H=32, head dim
128, fp16), over a few more stage counts than bench/gpu/run.py's grid.

    python3 -m bench.gpu.probe.ws_probe           # with the machine's Triton
    PYTHONPATH=/tmp/t39 python3 -m bench.gpu.probe.ws_probe   # a carried one (pack_triton.sh)

Every output is poisoned with NaN before the run and checked against float32
on two heads; times are do_bench medians. The log of 2026-11-23 is in git
history (bench/gpu/results/2026-11-23-h100-probe-hopper-ws/ at commit
e6df4c6; BENCHMARKS.md has its numbers; that run used a copy of the kernel, bench/gpu/probe/fa_dev.py, since replaced by
fa_fwd.attn_fwd_device_desc_kernel, the same loop).
"""
import math

import torch
import triton
from triton.testing import do_bench

from third_party.triton.tests.kernels import fa_fwd  # noqa: E402

# Scratch for the device-side tensor descriptors.
triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
print("triton", triton.__version__, torch.cuda.get_device_name(), flush=True)
Z, H, D = 4, 32, 128
# (num_warps, BLOCK_N, num_stages, warp_specialize)
CONFIGS = [(4, 128, 2, True), (4, 64, 2, True), (4, 64, 3, True), (4, 128, 1, True), (4, 64, 4, True),
           (4, 64, 2, False), (8, 128, 3, False)]
kernels = {}
for nw, bn, ns, ws in CONFIGS:
    src = fa_fwd.make_ast_source(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=bn, WARP_SPECIALIZE=ws, DEVICE_DESC=True)
    try:
        kernels[(nw, bn, ns, ws)] = triton.compile(src, options=dict(num_warps=nw, num_stages=ns))
    except Exception as e:
        print("compile failed", nw, bn, ns, ws, str(e).splitlines()[-1][:150], flush=True)
for N in (1024, 4096, 16384):
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    sm = 1 / math.sqrt(D)
    refs = {(z, h): torch.softmax((q[z, h].float() @ k[z, h].float().T) * sm, -1) @ v[z, h].float()
            for z, h in ((0, 0), (Z - 1, H - 1))}
    flops = 4.0 * Z * H * N * N * D
    for (nw, bn, ns, ws), kern in kernels.items():
        o = torch.full_like(q, float("nan"))
        lse = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)

        def fn(kern=kern, o=o, lse=lse, bn=bn, ws=ws):
            kern[(N // 128, Z * H, 1)](sm, lse, Z, H, q, k, v, o, N, D, 128, bn, ws)

        try:
            fn()
            torch.cuda.synchronize()
            err = max((o[z, h].float() - ref).abs().max().item() for (z, h), ref in refs.items())
            ok = bool(torch.isfinite(o).all()) and err < 2e-2
            ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
            print(f"N={N:6d} w{nw} BN{bn} s{ns} {'ws' if ws else '  '} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOPS "
                  f"ok={ok} err={err:.2e}", flush=True)
        except Exception as e:
            print(f"N={N} w{nw} BN{bn} s{ns} ws={ws} failed: {str(e)[:150]}", flush=True)
    del q, k, v
