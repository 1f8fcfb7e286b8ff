"""Correctness sweep on the H100 of the Gluon FA forward (bench/kernels/
fa_fwd_gluon.py) over the choices its plans make and the shapes the bench
does not run: CAUSAL off and on, each plan flag, BLOCK_N 64 and 128, head
dim 64 and 128, and short sequences (N = 128: one K block per CTA; N =
640: an odd number of query tiles). Output O and the log2-sum-exp M are
poisoned with NaN, then compared with float32 on every head (max abs
error: O < 2e-2, M < 1e-2; NaN never passes).

    python3 -m bench.gpu.probe.gluon_fa_check [--sizes 128,256,640,2048]

Each configuration runs in a child process with a time limit, so that a
wrong barrier protocol is reported as a hang instead of stopping the
sweep. Prints one line per (configuration, causal, N) and a count."""
import argparse
import json
import math
import subprocess
import sys


CONFIGS = {
    "plan (slack: QK first, softmax under PV)": {},
    "BLOCK_N 64": dict(BLOCK_N=64),
    "objective length (PV first)": dict(QK_FIRST=False, INTRA=False),
    "QK first, softmax apart": dict(QK_FIRST=True, INTRA=False),
    "turns enforced": dict(PINGPONG=True),
    "3 stages": dict(STAGES=3),
    "BLOCK_N 64, 3 stages, turns enforced": dict(BLOCK_N=64, STAGES=3, PINGPONG=True),
    "head dim 64 plan, 2 CTAs/SM split": dict(HEAD_DIM=64, BLOCK_N=64, QK_FIRST=False, INTRA=False, MAXNREG=80,
                                               CONSUMER_REGS=104, PRODUCER_REGS=24),
}

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="128,256,640,2048")
ap.add_argument("--child", help="(internal) run one configuration, print JSON lines")
args = ap.parse_args()
SIZES = [int(s) for s in args.sizes.split(",")]

if args.child:
    import torch
    from bench.kernels import check
    from bench.kernels import fa_fwd_gluon

    cfg0 = CONFIGS[args.child]
    d = cfg0.get("HEAD_DIM", 128)
    torch.manual_seed(0)
    for causal in (False, True):
        cfg = dict(cfg0, CAUSAL=causal)
        kern = fa_fwd_gluon.compile_for(None, **cfg)
        for n in SIZES:
            z, h = 2, 3
            q, k, v = (torch.randn(z, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
            o = torch.full_like(q, float("nan"))
            lse = torch.full((z * h * n,), float("nan"), device="cuda", dtype=torch.float32)
            sm = 1 / math.sqrt(d)
            fa_fwd_gluon.launcher(kern, q, k, v, o, lse, sm, **cfg)()
            torch.cuda.synchronize()
            s_ = check._reference(q, k, v, sm, causal)  # scaled scores, masked where causal
            ref = torch.softmax(s_, -1) @ v.float()
            ref_m = torch.logsumexp(s_, -1) / math.log(2)
            finite = bool(torch.isfinite(o).all()) and bool(torch.isfinite(lse).all())
            err = (o.float() - ref).abs().max().item()
            merr = (lse.view(z, h, n) - ref_m).abs().max().item()
            ok = finite and err < 2e-2 and merr < 1e-2
            print(json.dumps(dict(config=args.child, causal=causal, n=n, ok=ok, err=err, m_err=merr)), flush=True)
    sys.exit(0)

import triton  # noqa: E402

print("triton", triton.__version__, flush=True)
passed = failed = 0
for name in CONFIGS:
    try:
        r = subprocess.run([sys.executable, __file__, "--child", name, "--sizes", args.sizes], capture_output=True,
                           text=True, timeout=240)
    except subprocess.TimeoutExpired:
        print(f"{name}: HUNG (killed after 240 s)", flush=True)
        failed += 2 * len(SIZES)
        continue
    lines = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    for x in lines:
        passed += x["ok"]
        failed += not x["ok"]
        print(f"{name:40s} causal={x['causal']!s:5s} N={x['n']:5d} ok={x['ok']} err={x['err']:.2e} "
              f"m_err={x['m_err']:.2e}", flush=True)
    missing = 2 * len(SIZES) - len(lines)
    if missing:
        failed += missing
        print(f"{name}: {missing} cases missing (exit {r.returncode}): {r.stderr.strip()[-300:]}", flush=True)
print(f"gluon FA check: {passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
