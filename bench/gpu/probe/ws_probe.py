"""Probe on the H100: Triton's own Hopper warp specialization of the FA
forward (bench/gpu/probe/fa_dev.py, device-side descriptors) against the
same kernel without it, at N = 1k, 4k, 16k (Z=4, H=32, head dim 128, fp16).

    python3 bench/gpu/probe/ws_probe.py           # with the machine's Triton
    PYTHONPATH=/tmp/t39 python3 bench/gpu/probe/ws_probe.py   # a carried one (pack_triton.sh)

Every output is poisoned with NaN before the run and checked against float32
on two heads; times are do_bench medians. Results of 2026-11-23 in
bench/gpu/results/2026-11-23-h100-probe-hopper-ws/ (BENCHMARKS.md).
"""
import sys, math, os, time
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton, fa_dev
from triton.testing import do_bench

def alloc(size, align, stream):
    # Scratch for the device-side tensor descriptors.
    return torch.empty(size, dtype=torch.int8, device="cuda")
triton.set_allocator(alloc)
print("triton", triton.__version__, torch.cuda.get_device_name(), flush=True)
Z, H, D = 4, 32, 128
cfgs = [(4,128,2,True),(4,64,2,True),(4,64,3,True),(4,128,1,True),(4,64,4,True),(4,64,2,False),(8,128,3,False)]
kerns = {}
for nw, bn, ns, ws in cfgs:
    try:
        kerns[(nw,bn,ns,ws)] = triton.compile(fa_dev.src(BLOCK_N=bn, WS=ws), options=dict(num_warps=nw, num_stages=ns))
    except Exception as e:
        print("compile failed", nw, bn, ns, ws, str(e).splitlines()[-1][:150], flush=True)
for N in (1024, 4096, 16384):
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    sm = 1 / math.sqrt(D)
    ref = torch.softmax((q[0, 0].float() @ k[0, 0].float().T) * sm, -1) @ v[0, 0].float()
    ref2 = torch.softmax((q[-1, -1].float() @ k[-1, -1].float().T) * sm, -1) @ v[-1, -1].float()
    flops = 4.0 * Z * H * N * N * D
    for (nw, bn, ns, ws), kern in kerns.items():
        o = torch.full_like(q, float("nan"))
        lse = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
        fn = lambda: kern[(N // 128, Z * H, 1)](sm, lse, Z, H, q, k, v, o, N, D, 128, bn, ws)
        try:
            fn(); torch.cuda.synchronize()
            err = max((o[0, 0].float() - ref).abs().max().item(), (o[-1, -1].float() - ref2).abs().max().item())
            ok = bool(torch.isfinite(o).all()) and err < 2e-2
            ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
            print(f"N={N:6d} w{nw} BN{bn} s{ns} {'ws' if ws else '  '} {ms:8.3f} ms {flops/ms/1e9:7.1f} TFLOPS ok={ok} err={err:.2e}", flush=True)
        except Exception as e:
            print(f"N={N} w{nw} BN{bn} s{ns} ws={ws} failed: {str(e)[:150]}", flush=True)
    del q, k, v
