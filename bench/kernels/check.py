"""Correctness check of the TMA kernels (the product's test fixtures in
third_party/triton/tests/kernels) on a real GPU.

Needs torch + triton and an sm90/sm100 GPU:

    python3 -m bench.kernels.check

Launches `matmul.matmul_tma_kernel` and `fa_fwd.attn_fwd_kernel` with the
default configurations (through the JIT), then every configuration of
fa_fwd.CONFIGS and fa_bwd.CONFIGS (compiled from their ASTSource for the
device's target, then launched), and compares against torch references.

With twill, schedules are computed where twill-opt runs and replayed on the
GPU machine (twill_triton's TWILL_REPLAY_DIR):

    python3 -m bench.kernels.check --record DIR --cap 90   # no GPU needed
    python3 -m bench.kernels.check --replay DIR            # on the GPU

--record only compiles (with twill, TWILL_DUMP_DIR=DIR); --replay compiles
the configurations with the recorded schedules, says per kernel whether
twill's schedule was applied, and runs the same checks.
"""

import argparse
import math
import os
import sys

import triton
from triton.backends.compiler import GPUTarget

from third_party.triton.tests.kernels import fa_bwd, fa_fwd, matmul

try:  # torch only where kernels run (not needed for --record)
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:
    torch = None


def check_matmul(M=1024, N=768, K=512):
    cfg = dict(matmul.DEFAULT_CONFIG)
    BM, BN, BK = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)  # B is N x K
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK])
    b_desc = TensorDescriptor.from_tensor(b, [BN, BK])
    c_desc = TensorDescriptor.from_tensor(c, [BM, BN])
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), )
    matmul.matmul_tma_kernel[grid](a_desc, b_desc, c_desc, M, N, K, **cfg)
    ref = (a.float() @ b.float().T).half()
    err = (c.float() - ref.float()).abs().max().item()
    print(f"matmul {M}x{N}x{K}: max abs err {err:.4f}")
    assert torch.allclose(c, ref, atol=0.5, rtol=1e-2), err


def check_fa(Z=2, H=3, N_CTX=1024):
    cap = torch.cuda.get_device_capability()[0] * 10
    cfg = dict(fa_fwd.DEFAULT_CONFIGS[cap])
    D, BM, BN = cfg["HEAD_DIM"], cfg["BLOCK_M"], cfg["BLOCK_N"]
    q, k, v = (torch.randn(Z, H, N_CTX, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(Z * H * N_CTX, device="cuda", dtype=torch.float32)
    sm_scale = 1.0 / math.sqrt(D)

    def desc(t, rows):
        return TensorDescriptor.from_tensor(t.view(Z * H * N_CTX, D), [rows, D])

    grid = (triton.cdiv(N_CTX, BM), Z * H)
    fa_fwd.attn_fwd_kernel[grid](sm_scale, lse, Z, H, desc(q, BM), desc(k, BN), desc(v, BN), desc(o, BM), N_CTX,
                                 **cfg)
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    ref = torch.softmax(s, dim=-1) @ v.float()
    ref_lse = torch.logsumexp(s, dim=-1) / math.log(2)  # the kernel stores log2-sum-exp
    err = (o.float() - ref).abs().max().item()
    lse_err = (lse.view(Z, H, N_CTX) - ref_lse).abs().max().item()
    print(f"fa_fwd Z={Z} H={H} N_CTX={N_CTX} D={D} sm{cap}: max abs err {err:.4f}, lse err {lse_err:.4f}")
    assert torch.allclose(o.float(), ref, atol=2e-2, rtol=0), err
    assert lse_err < 1e-2, lse_err


# --------------------------------------------------------------------------
# Every configuration of fa_fwd.CONFIGS / fa_bwd.CONFIGS, compiled from its
# ASTSource (optionally with twill) and launched as a CompiledKernel.
# --------------------------------------------------------------------------
TWILL = {"on": False, "log": []}


def compile_config(src, options, cap, label):
    """triton.compile for cuda:`cap`; with twill on, note its decision."""
    if not TWILL["on"]:
        return triton.compile(src, target=GPUTarget("cuda", cap, 32), options=options)
    import twill_triton

    before = len(twill_triton.decisions())
    k = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=options)
    new = twill_triton.decisions()[before:]
    if new:
        d = new[-1]
        state = "twill applied" if d.scheduled else f"twill NOT applied: {d.reason[:200]}"
    else:
        state = "no twill decision (cached?)"
    TWILL["log"].append((label, cap, state))
    print(f"  [{label} sm{cap}] {state}", flush=True)
    return k


def _launch(kernel, grid, signature, constexprs, values):
    """Launch a CompiledKernel with its arguments in signature order."""
    args = [constexprs[n] if t == "constexpr" else values[n] for n, t in signature.items()]
    kernel[grid](*args)


def bwd_values(kwargs, sm_scale, lse, delta, q, k, v, do, dq, dk, dv):
    """Runtime arguments of fa_bwd's main kernel (configuration `kwargs`) by
    name, for `_launch`: tensor descriptors over [Z, H, N, D] tensors."""
    Z, H, N, D = q.shape

    def desc(t, block_rows):
        return TensorDescriptor.from_tensor(t.view(Z * H * N, D), [block_rows, D])

    M1, N1, M2, N2 = kwargs["BLOCK_M1"], kwargs["BLOCK_N1"], kwargs["BLOCK_M2"], kwargs["BLOCK_N2"]
    return dict(sm_scale=sm_scale, M=lse, Delta=delta, desc_q1=desc(q, M1), desc_do1=desc(do, M1),
                desc_k1=desc(k, N1), desc_v1=desc(v, N1), desc_dk=desc(dk, N1), desc_dv=desc(dv, N1),
                desc_q2=desc(q, M2), desc_do2=desc(do, M2), desc_k2=desc(k, N2), desc_v2=desc(v, N2),
                desc_dq=desc(dq, M2), N_CTX=N)


def _fwd(cap, config, q, k, v, sm_scale, compile_only=False):
    """Run fa_fwd for `config` on q, k, v [Z, H, N, D]; returns (o, lse)."""
    kwargs, opts = fa_fwd.split_config(config)
    signature, constexprs, _ = fa_fwd.ast_source_args(**kwargs)
    label = "fa_fwd " + ",".join(f"{n}={v}" for n, v in sorted(kwargs.items()) if n in ("CAUSAL", "SUBTILE",
                                                                                          "HEAD_DIM"))
    kern = compile_config(fa_fwd.make_ast_source(**kwargs), opts, cap, label)
    if compile_only:
        return None
    Z, H, N, D = q.shape
    BM, BN = kwargs["BLOCK_M"], kwargs["BLOCK_N"]
    q_rows = BM // 2 if kwargs.get("SUBTILE") else BM
    o = torch.full_like(q, float("nan"))
    lse = torch.full((Z * H * N, ), float("nan"), device=q.device, dtype=torch.float32)

    def desc(t, rows):
        return TensorDescriptor.from_tensor(t.view(Z * H * N, D), [rows, D])

    values = dict(sm_scale=sm_scale, M=lse, Z=Z, H=H, desc_q=desc(q, q_rows), desc_k=desc(k, BN), desc_v=desc(v, BN),
                  desc_o=desc(o, q_rows), N_CTX=N)
    _launch(kern, (triton.cdiv(N, BM), Z * H, 1), signature, constexprs, values)
    return o, lse


def _reference(q, k, v, sm_scale, causal):
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, device=q.device, dtype=torch.bool).triu(1), float("-inf"))
    return s


def check_fa_configs(cap, Z=2, H=3, N_CTX=1024, compile_only=False):
    for name, per_cap in fa_fwd.CONFIGS.items():
        cfg = per_cap[cap]
        if compile_only:
            _fwd(cap, cfg, None, None, None, None, compile_only=True)
            continue
        D = cfg["HEAD_DIM"]
        q, k, v = (torch.randn(Z, H, N_CTX, D, device="cuda", dtype=torch.float16) for _ in range(3))
        sm_scale = 1.0 / math.sqrt(D)
        o, lse = _fwd(cap, cfg, q, k, v, sm_scale)
        s = _reference(q, k, v, sm_scale, cfg.get("CAUSAL", False))
        ref = torch.softmax(s, dim=-1) @ v.float()
        ref_lse = torch.logsumexp(s, dim=-1) / math.log(2)
        err = (o.float() - ref).abs().max().item()
        lse_err = (lse.view(Z, H, N_CTX) - ref_lse).abs().max().item()
        ok = err < 2e-2 and lse_err < 1e-2  # NaN compares False
        print(f"fa_fwd[{name}] sm{cap} D={D}: max abs err {err:.4f}, lse err {lse_err:.4f} {'OK' if ok else 'FAIL'}",
              flush=True)
        assert ok, (name, err, lse_err)


def check_fa_bwd_configs(cap, Z=2, H=3, N_CTX=1024, compile_only=False):
    """fa_fwd (the configuration of the same head dim) for O and M, then
    fa_bwd's preprocess and main kernels, against torch autograd in fp32."""
    fwd_of = {128: "default", 64: "hd64"}
    for name, per_cap in fa_bwd.CONFIGS.items():
        cfg = per_cap[cap]
        kwargs, opts = fa_bwd.split_config(cfg)
        pre_kwargs, pre_opts = fa_bwd.split_config(fa_bwd.PREPROCESS_CONFIGS[name])
        D = kwargs["HEAD_DIM"]
        pre = compile_config(fa_bwd.make_preprocess_ast_source(**pre_kwargs), pre_opts, cap, f"fa_bwd_pre {name}")
        main = compile_config(fa_bwd.make_ast_source(**kwargs), opts, cap, f"fa_bwd {name}")
        fwd_cfg = fa_fwd.CONFIGS[fwd_of[D]][cap]
        if compile_only:
            _fwd(cap, fwd_cfg, None, None, None, None, compile_only=True)
            continue
        q, k, v, do = (torch.empty(Z, H, N_CTX, D, device="cuda", dtype=torch.float16).normal_(0, 0.5)
                       for _ in range(4))
        sm_scale = 1.0 / math.sqrt(D)
        o, lse = _fwd(cap, fwd_cfg, q, k, v, sm_scale)

        rows = Z * H * N_CTX
        delta = torch.full((rows, ), float("nan"), device="cuda", dtype=torch.float32)
        signature, constexprs, _ = fa_bwd.preprocess_ast_source_args(**pre_kwargs)
        _launch(pre, (N_CTX // pre_kwargs["BLOCK_M"], Z * H, 1), signature, constexprs,
                dict(O=o, DO=do, Delta=delta, N_CTX=N_CTX))

        dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))

        signature, constexprs, _ = fa_bwd.ast_source_args(**kwargs)
        _launch(main, (N_CTX // kwargs["BLOCK_N1"], Z * H, 1), signature, constexprs,
                bwd_values(kwargs, sm_scale, lse, delta, q, k, v, do, dq, dk, dv))

        qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
        ref = torch.softmax((qr @ kr.transpose(-1, -2)) * sm_scale, dim=-1) @ vr
        ref.backward(do.float())
        # Max abs error relative to the largest reference gradient.
        errs = {n: (got.float() - want.grad).abs().max().item() / want.grad.abs().max().item()
                for n, got, want in (("dq", dq, qr), ("dk", dk, kr), ("dv", dv, vr))}
        ok = all(e < 1e-2 for e in errs.values())  # NaN compares False
        scale = ", ".join(f"{n} {t.grad.abs().max().item():.3g}" for n, t in (("dq", qr), ("dk", kr), ("dv", vr)))
        print(f"fa_bwd[{name}] sm{cap} D={D}: max abs err / max |ref| " +
              ", ".join(f"{n} {e:.2e}" for n, e in errs.items()) + f" (max |ref|: {scale}) {'OK' if ok else 'FAIL'}",
              flush=True)
        assert ok, (name, errs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="correctness of the TMA kernels on a GPU")
    ap.add_argument("--record", metavar="DIR", help="compile with twill-opt, recording schedules into DIR (no GPU)")
    ap.add_argument("--replay", metavar="DIR", help="compile with the twill schedules recorded in DIR")
    ap.add_argument("--cap", type=int, help="target for --record (default: the GPU's)")
    ap.add_argument("--timeout", type=float, default=30, help="twill's seconds per loop, for --record")
    args = ap.parse_args()
    if args.record or args.replay:
        import twill_triton

        if args.replay:
            os.environ["TWILL_REPLAY_DIR"] = os.path.abspath(args.replay)
            twill_triton.enable(scope="all")
        else:
            twill_triton.enable(scope="all", dump_dir=os.path.abspath(args.record), timeout=args.timeout)
        TWILL["on"] = True
    if args.record:
        cap = args.cap or 90
        check_fa_configs(cap, compile_only=True)
        check_fa_bwd_configs(cap, compile_only=True)
        print("recorded under", args.record)
        sys.exit(0)
    cap = torch.cuda.get_device_capability()[0] * 10
    if not TWILL["on"]:
        check_matmul()
        check_fa()
    check_fa_configs(cap)
    check_fa_bwd_configs(cap)
    if TWILL["on"]:
        print("twill decisions:")
        for label, c, state in TWILL["log"]:
            print(f"  {label} sm{c}: {state}")
    print("OK")
