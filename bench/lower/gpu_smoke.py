"""GPU smoke test of twill's lowered GEMM, FA forward and FA backward
(TWILL_LOWER): correctness over trip counts and tile edges, and time against
stock configurations (and cuBLAS for the GEMM, the hand-written Gluon kernel
for the FA forward), in one process. On the GPU machine, with the wheel
installed (bench/gpu/install_wheel.sh):

    PYTHONPATH=. python3 bench/lower/gpu_smoke.py [--quick] [--fa-only] [--fa WORD] [--bwd]

Every lowered compile must report its loop lowered and its module proved
by the pipeline verifier, else the row says so. Outputs are poisoned with
NaN before each launch and compared with a float32 reference.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

import twill_triton
from third_party.triton.tests.kernels import matmul

TARGET = GPUTarget("cuda", 90, 32)


def compile_gemm(bn, nw, ns, ws, lower, ring="schedule"):
    """(kernel, note): the host-descriptor GEMM; with `lower`, through
    twill's lowering (strict)."""
    cfg = dict(BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, WARP_SPECIALIZE=ws)
    src = matmul.make_ast_source(**cfg)
    return _compile(src, dict(num_warps=nw, num_stages=ns), lower, ring)


def compile_bias_relu(bn, nw, lower, ring="schedule"):
    from triton.compiler import ASTSource

    src = ASTSource(fn=matmul.gemm_bias_relu, signature=matmul.BIAS_RELU_SIGNATURE,
                    constexprs={"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": 64},
                    attrs={(i, ): [["tt.divisibility", 16]] for i in range(4)})
    return _compile(src, dict(num_warps=nw, num_stages=3), lower, ring)


def _compile(src, opts, lower, ring, scope="all", strict=True):
    """Stock, or with the hook's lowering (`strict`: a loop the lowering
    refuses raises; else it takes the attribute route): (kernel, note)."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="smoke-cache-")
    if not lower:
        return triton.compile(src, target=TARGET, options=opts), "stock"
    twill_triton.enable(scope=scope, lower=True, strict=strict, extra_options=f"ring={ring}")
    try:
        k = triton.compile(src, target=TARGET, options=opts)
    finally:
        twill_triton.disable()
    d = twill_triton.decisions()[-1]
    proved = bool(d.verification) and all(r.get("verdict") == "proved" for r in d.verification)
    note = (f"lowered={d.lowered()} scheduled={d.scheduled} proved={proved} warps={k.metadata.num_warps} "
            f"smem={k.metadata.shared}")
    return k, note


def run_gemm(k, bn, ws, a, b, c):
    M, K = a.shape
    N = b.shape[0]
    ad, bd, cd = (TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [bn, 64]),
                  TensorDescriptor.from_tensor(c, [128, bn]))
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, bn), 1, 1)
    extra = (True, ) if ws else ()
    return lambda: k[grid](ad, bd, cd, M, N, K, 128, bn, 64, 8, *extra)


def check(c, ref):
    if not torch.isfinite(c).all():
        return False, float("nan")
    scale = max(ref.abs().max().item(), 1.0)
    err = (c.float() - ref).abs().max().item() / scale
    return err < 1e-2, err


def sweep(kernels):
    """Correctness over shapes whose K gives trip counts 0, 1, 2, 3, 5 and
    K not a multiple of the block; M, N not multiples of the tile. TMA needs
    16-byte strides (K a multiple of 8), and a host descriptor a nonzero
    stride: K = 0 runs only with descriptors made in the kernel; a launch
    error is reported as an unsupported size, for stock and twill alike."""
    shapes = [(256, 256, 64), (256, 256, 128), (256, 256, 192), (256, 256, 320), (200, 136, 104),
              (1024, 1024, 1000), (384, 512, 4096), (256, 256, 0)]
    fails = 0
    for (M, N, K) in shapes:
        a = torch.randn(M, max(K, 8), device="cuda", dtype=torch.float16)[:, :K].contiguous() if K else \
            torch.empty(M, 0, device="cuda", dtype=torch.float16)
        b = torch.randn(N, max(K, 8), device="cuda", dtype=torch.float16)[:, :K].contiguous() if K else \
            torch.empty(N, 0, device="cuda", dtype=torch.float16)
        bias = torch.randn(N, device="cuda", dtype=torch.float32)
        ref = a.float() @ b.float().T
        for name, (k, bn, ws, dev, note) in kernels.items():
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            try:
                if dev:
                    grid = (triton.cdiv(M, 128), triton.cdiv(N, bn), 1)
                    k[grid](a, b, c, bias, M, N, K, 128, bn, 64)
                    want = torch.relu(ref + bias[None, :])
                else:
                    run_gemm(k, bn, ws, a, b, c)()
                    want = ref
                torch.cuda.synchronize()
                ok, err = check(c, want)
            except Exception as e:
                ok, err = None, f"unsupported size: {type(e).__name__}: {str(e)[:80]}"
            fails += ok is False
            print(f"sweep M={M:5d} N={N:5d} K={K:5d} trips={-(-K // 64):3d} {name:34s} correct={ok} err={err}",
                  flush=True)
    return fails


# FA forward configurations (128-row Q tiles; hd128 unless named hd64): name -> (config, lowered by twill).
HD64 = dict(HEAD_DIM=64, BLOCK_N=64)
FA_CONFIGS = {
    "twill lowered hd64 w8": (dict(HD64, SUBTILE=False, num_warps=8, num_stages=3), True),
    "twill lowered hd64 subtile w4": (dict(HD64, SUBTILE=True, num_warps=4, num_stages=3), True),
    "stock hd64 w8 s2": (dict(HD64, SUBTILE=False, num_warps=8, num_stages=2), False),
    "stock hd64 w8 s3": (dict(HD64, SUBTILE=False, num_warps=8, num_stages=3), False),
    "twill lowered w8": (dict(SUBTILE=False, num_warps=8, num_stages=3), True),
    "twill lowered subtile w4": (dict(SUBTILE=True, num_warps=4, num_stages=3), True),
    "twill lowered subtile w8": (dict(SUBTILE=True, num_warps=8, num_stages=3), True),
    "stock w8 s2": (dict(SUBTILE=False, num_warps=8, num_stages=2), False),
    "stock w8 s3": (dict(SUBTILE=False, num_warps=8, num_stages=3), False),
    "stock subtile w8 s2": (dict(SUBTILE=True, num_warps=8, num_stages=2), False),
    "stock subtile w8 s3": (dict(SUBTILE=True, num_warps=8, num_stages=3), False),
    # Causal: two loops (left of the diagonal, then the diagonal block),
    # each lowered to a ws op of its own.
    "twill lowered causal w8": (dict(CAUSAL=True, SUBTILE=False, num_warps=8, num_stages=3), True),
    # Sub-tiled at 4 warps: a partition per half in each loop's ws op.
    "twill lowered causal subtile w4": (dict(CAUSAL=True, SUBTILE=True, num_warps=4, num_stages=3), True),
    "stock causal w8 s2": (dict(CAUSAL=True, SUBTILE=False, num_warps=8, num_stages=2), False),
    "stock causal w8 s3": (dict(CAUSAL=True, SUBTILE=False, num_warps=8, num_stages=3), False),
    "stock causal subtile w8 s2": (dict(CAUSAL=True, SUBTILE=True, num_warps=8, num_stages=2), False),
    "stock causal subtile w8 s3": (dict(CAUSAL=True, SUBTILE=True, num_warps=8, num_stages=3), False),
}


def _group(entry):
    """The FA configurations timed and checked together: (head dim, causal)."""
    return entry[1]["HEAD_DIM"], bool(entry[1].get("CAUSAL"))


def compile_fa(name):
    """(kernel, kwargs, signature, constexprs, note) of FA_CONFIGS[name]."""
    from third_party.triton.tests.kernels import fa_fwd

    extra, lower = FA_CONFIGS[name]
    config = dict(fa_fwd.CONFIGS["default"][90], **extra)
    kwargs, opts = fa_fwd.split_config(config)
    signature, constexprs, _ = fa_fwd.ast_source_args(**kwargs)
    k, note = _compile(fa_fwd.make_ast_source(**kwargs), opts, lower, "schedule", scope="ws")
    return k, kwargs, signature, constexprs, note


def fa_launcher(entry, q, k, v, o, lse, sm_scale=0.5):
    """A launch of a compiled FA forward on q, k, v [Z, H, N, 128] into o, lse."""
    from bench.kernels import check

    kern, kwargs, signature, constexprs, _ = entry
    Z, H, N, D = q.shape
    BM, BN = kwargs["BLOCK_M"], kwargs["BLOCK_N"]
    rows = BM // 2 if kwargs.get("SUBTILE") else BM

    def desc(t, r):
        return TensorDescriptor.from_tensor(t.view(Z * H * N, D), [r, D])

    values = dict(sm_scale=sm_scale, M=lse, Z=Z, H=H, desc_q=desc(q, rows), desc_k=desc(k, BN), desc_v=desc(v, BN),
                  desc_o=desc(o, rows), N_CTX=N)
    grid = (triton.cdiv(N, BM), Z * H, 1)
    return lambda: check._launch(kern, grid, signature, constexprs, values)


def fa_reference(q, k, v, sm_scale=0.5, causal=False):
    from bench.kernels import check

    return torch.softmax(check._reference(q, k, v, sm_scale, causal), dim=-1) @ v.float()


def fa_sweep(fa):
    """Every FA forward configuration at sequence lengths giving 1, 2, 3
    and 8 trips of its K/V loop: correct against a float32 reference (the
    output poisoned with NaN before each launch)."""
    fails = 0
    for D, causal in sorted({_group(e) for e in fa.values()}):
        block_n = min(e[1]["BLOCK_N"] for e in fa.values() if _group(e) == (D, causal))
        for trips in (1, 2, 3, 8):
            N = trips * max(block_n, 128)
            q, k, v = (torch.randn(1, 2, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
            ref = fa_reference(q, k, v, causal=causal)
            for name, entry in fa.items():
                if _group(entry) != (D, causal):
                    continue
                o = torch.full_like(q, float("nan"))
                lse = torch.full((2 * N, ), float("nan"), device="cuda", dtype=torch.float32)
                try:
                    fa_launcher(entry, q, k, v, o, lse)()
                    torch.cuda.synchronize()
                    err = (o.float() - ref).abs().max().item()
                    ok = bool(torch.isfinite(o).all()) and err < 2e-2
                except Exception as e:
                    ok, err = False, f"{type(e).__name__}: {str(e)[:100]}"
                fails += not ok
                print(f"fa sweep D={D} N={N:5d} trips={N // entry[1]['BLOCK_N']:2d} {name:30s} correct={ok} err={err}",
                      flush=True)
    return fails


def compile_gluon_fa(causal=False):
    """The hand-written Gluon FA forward (bench/kernels/fa_fwd_gluon.py, its
    DEFAULT_CONFIG, causal or not), the baseline twill's generated kernel is
    held to; None when it does not compile."""
    from bench.kernels import fa_fwd_gluon

    try:
        return fa_fwd_gluon.compile_for(CAUSAL=causal)
    except Exception as e:
        print(f"compile fa gluon: failed {type(e).__name__}: {str(e)[:300]}", flush=True)
        return None


def paired(fns, ours, other, rounds):
    """Time `ours` against `other`, alternating: (ratio, ms ours, ms other)."""
    t_o, t_s = [], []
    for r in range(rounds):
        for which in ((ours, other) if r % 2 else (other, ours)):
            (t_o if which == ours else t_s).append(do_bench(fns[which], warmup=10, rep=100, return_mode="median"))
    return statistics.median(t_s) / statistics.median(t_o), statistics.median(t_o), statistics.median(t_s)


def fa_bench(fa, shapes, rounds):
    """TFLOPS of every FA configuration and of the hand-written Gluon kernel,
    then the best lowered one against the best stock one and against the
    Gluon kernel, paired (alternating order, median of medians)."""
    from bench.kernels import fa_fwd_gluon

    gluon = {causal: compile_gluon_fa(causal) for causal in (False, True)}
    groups = sorted({_group(e) for e in fa.values()})
    for (Z, H, N), (D, causal) in ((shape, g) for shape in shapes for g in groups):
        q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4 * Z * H * N * N * D // (2 if causal else 1)
        fns, ms = {}, {}
        for name, entry in ((n, e) for n, e in fa.items() if _group(e) == (D, causal)):
            o = torch.full_like(q, float("nan"))
            lse = torch.empty((Z * H * N, ), device="cuda", dtype=torch.float32)
            fn = fa_launcher(entry, q, k, v, o, lse)
            fn()
            torch.cuda.synchronize()
            ok = bool(torch.isfinite(o).all())
            t = do_bench(fn, warmup=25, rep=100, return_mode="median")
            print(f"fa bench D={D} Z={Z} H={H} N={N} {name:30s} {t:.4f} ms {flops / t / 1e9:7.1f} TFLOPS finite={ok} "
                  f"{entry[4]}", flush=True)
            if ok:
                fns[name], ms[name] = fn, t
        if gluon[causal] is not None and D == 128:
            o = torch.full_like(q, float("nan"))
            lse = torch.empty((Z * H * N, ), device="cuda", dtype=torch.float32)
            fn = fa_fwd_gluon.launcher(gluon[causal], q, k, v, o, lse, 0.5, CAUSAL=causal)
            fn()
            torch.cuda.synchronize()
            t = do_bench(fn, warmup=25, rep=100, return_mode="median")
            print(f"fa bench Z={Z} H={H} N={N} {'gluon (hand-written)':26s} {t:.4f} ms {flops / t / 1e9:7.1f} TFLOPS "
                  f"finite={bool(torch.isfinite(o).all())}", flush=True)
            fns["gluon"], ms["gluon"] = fn, t
        stock = min((n for n in ms if n.startswith("stock")), key=ms.get, default=None)
        ours = min((n for n in ms if n.startswith("twill")), key=ms.get, default=None)
        for other in ([stock] if stock else []) + (["gluon"] if "gluon" in fns else []):
            if ours:
                x, a, b = paired(fns, ours, other, rounds)
                print(f"fa paired D={D}{' causal' if causal else ''} N={N}: {ours} vs {other}: {x:.3f}x "
                      f"({a:.4f} vs {b:.4f} ms)", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


def _compile_bwd(cfg_name, lower):
    """fa_bwd's main kernel at its bench configuration, stock or with the
    hook's lowering (not strict: a loop the lowering refuses takes the
    attribute route): (kernel, constexprs, note)."""
    from third_party.triton.tests.kernels import fa_bwd

    kwargs, opts = fa_bwd.split_config(fa_bwd.CONFIGS[cfg_name][90])
    k, note = _compile(fa_bwd.make_ast_source(**kwargs), opts, lower, "schedule", scope="ws", strict=False)
    return k, kwargs, note


def bwd_check(rounds):
    """fa_bwd (hd128, hd64 at the bench's configurations), stock and through
    the lowering: dQ, dK, dV against torch autograd in float32 at 2, 3, 4, 8
    and 16 K/V blocks (the outputs NaN-poisoned), then paired timing at
    Z=4 H=32 N=4096."""
    from bench.gpu.run import bwd_inputs
    from bench.kernels import check
    from third_party.triton.tests.kernels import fa_bwd

    fails = 0
    for cfg_name in ("hd128", "hd64"):
        ks = {}
        for name, lower in ((f"stock bwd {cfg_name}", False), (f"twill lowered bwd {cfg_name}", True)):
            try:
                ks[name] = _compile_bwd(cfg_name, lower)
            except Exception as e:
                print(f"compile {name}: failed {type(e).__name__}: {str(e)[:300]}", flush=True)
                fails += lower
                continue
            print(f"compile {name}: {ks[name][2]}", flush=True)

        def launcher(entry, q, k, v, do, lse, delta, sm_scale, out):
            kern, kwargs, _ = entry
            sig, cst, _ = fa_bwd.ast_source_args(**kwargs)
            N = q.shape[2]
            vals = check.bwd_values(kwargs, sm_scale, lse, delta, q, k, v, do, *out)
            return lambda: check._launch(kern, (N // kwargs["BLOCK_N1"], q.shape[0] * q.shape[1], 1), sig, cst, vals)

        for blocks in (2, 3, 4, 8, 16):
            N = 128 * blocks
            q, k, v, do, o, lse, delta, sm_scale = bwd_inputs(cfg_name, 1, 2, N)
            qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
            ref = torch.softmax((qr @ kr.transpose(-1, -2)) * sm_scale, dim=-1) @ vr
            ref.backward(do.float())
            for name, entry in ks.items():
                out = [torch.full_like(q, float("nan")) for _ in range(3)]
                launcher(entry, q, k, v, do, lse, delta, sm_scale, out)()
                torch.cuda.synchronize()
                errs = [(g.float() - w.grad).abs().max().item() / w.grad.abs().max().item()
                        for g, w in zip(out, (qr, kr, vr))]
                ok = all(e < 1e-2 for e in errs)  # NaN compares False
                fails += not ok
                print(f"bwd sweep {cfg_name} N={N:5d} {name:28s} correct={ok} err dq/dk/dv "
                      + "/".join(f"{e:.1e}" for e in errs), flush=True)
        if len(ks) < 2:
            continue
        Z, H, N = 4, 32, 4096
        q, k, v, do, o, lse, delta, sm_scale = bwd_inputs(cfg_name, Z, H, N)
        fns = {}
        for name, entry in ks.items():
            fns[name] = launcher(entry, q, k, v, do, lse, delta, sm_scale, [torch.empty_like(q) for _ in range(3)])
            t = do_bench(fns[name], warmup=25, rep=100, return_mode="median")
            flops = 2.5 * 4 * Z * H * N * N * q.shape[3]
            print(f"bwd bench {cfg_name} Z={Z} H={H} N={N} {name:28s} {t:.4f} ms {flops / t / 1e9:7.1f} TFLOPS",
                  flush=True)
        ours, other = [n for n in ks if n.startswith("twill")][0], [n for n in ks if n.startswith("stock")][0]
        x, a, b = paired(fns, ours, other, rounds)
        print(f"bwd paired {cfg_name} N={N}: {ours} vs {other}: {x:.3f}x ({a:.4f} vs {b:.4f} ms)", flush=True)
        del q, k, v, do
        torch.cuda.empty_cache()
    return fails


def bench(kernels, sizes, rounds):
    for S in sizes:
        a = torch.randn(S, S, device="cuda", dtype=torch.float16)
        b = torch.randn(S, S, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float().T
        fns, ms = {}, {}
        for name, (k, bn, ws, dev, note) in kernels.items():
            if dev:
                continue
            c = torch.full((S, S), float("nan"), device="cuda", dtype=torch.float16)
            try:
                fn = run_gemm(k, bn, ws, a, b, c)
                fn()
                torch.cuda.synchronize()
                ok, err = check(c, ref)
                t = do_bench(fn, warmup=25, rep=100, return_mode="median")
            except Exception as e:
                print(f"bench {S} {name}: failed {type(e).__name__}: {str(e)[:100]}", flush=True)
                continue
            print(f"bench {S} {name:34s} {t:.4f} ms {2 * S**3 / t / 1e9:7.1f} TFLOPS correct={ok} err={err:.1e} "
                  f"{note}", flush=True)
            if ok:
                fns[name], ms[name] = fn, t
        cub = lambda: a @ b.T  # noqa: E731
        fns["cublas"], ms["cublas"] = cub, do_bench(cub, warmup=25, rep=100, return_mode="median")
        print(f"bench {S} {'cublas':34s} {ms['cublas']:.4f} ms {2 * S**3 / ms['cublas'] / 1e9:7.1f} TFLOPS", flush=True)
        stock = min((n for n in ms if n.startswith("stock")), key=ms.get, default=None)
        ours = min((n for n in ms if n.startswith("twill")), key=ms.get, default=None)
        if stock and ours:
            for other in (stock, "cublas"):
                t_o, t_s = [], []
                for r in range(rounds):
                    for which in ((ours, other) if r % 2 else (other, ours)):
                        (t_o if which == ours else t_s).append(
                            do_bench(fns[which], warmup=10, rep=100, return_mode="median"))
                print(f"paired {S}: {ours} vs {other}: {statistics.median(t_s) / statistics.median(t_o):.3f}x "
                      f"({statistics.median(t_o):.4f} vs {statistics.median(t_s):.4f} ms)", flush=True)
        del a, b, ref
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fa-only", action="store_true", help="skip the GEMM timings")
    ap.add_argument("--fa", action="append", default=[], metavar="WORD",
                    help="only the FA configurations whose name holds WORD (repeatable: any of them)")
    ap.add_argument("--head-dim", type=int, help="only the FA configurations of this head dim")
    ap.add_argument("--bwd", action="store_true", help="also the FA backward, stock and lowered")
    ap.add_argument("--no-gemm", action="store_true", help="no GEMM at all (not even its sweep)")
    args = ap.parse_args()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    print(torch.cuda.get_device_name(), "triton", triton.__version__, time.strftime("%Y-%m-%d %H:%M:%S"), flush=True)
    kernels = {}
    gemms = [] if args.no_gemm else [
        ("twill lowered BN128 w4", lambda: compile_gemm(128, 4, 3, True, True), 128, True, False),
        ("twill lowered BN128 w4 ring=max", lambda: compile_gemm(128, 4, 3, True, True, "max"), 128, True, False),
        ("twill lowered BN256 w8", lambda: compile_gemm(256, 8, 3, True, True), 256, True, False),
        ("twill lowered BN256 w8 ring=max", lambda: compile_gemm(256, 8, 3, True, True, "max"), 256, True, False),
        ("twill lowered bias+relu BN128 w4", lambda: compile_bias_relu(128, 4, True), 128, True, True),
        ("twill lowered bias+relu BN256 w8", lambda: compile_bias_relu(256, 8, True), 256, True, True),
        ("stock bias+relu BN128 w4", lambda: compile_bias_relu(128, 4, False), 128, True, True),
    ] + [(f"stock BN{bn} w{nw} s{ns}", (lambda bn=bn, nw=nw, ns=ns: compile_gemm(bn, nw, ns, False, False)),
          bn, False, False) for bn, nw, ns in [(128, 4, 3), (128, 4, 4), (128, 8, 3), (128, 8, 4), (256, 8, 3),
                                               (256, 8, 4)]]
    for name, make, bn, ws, dev in gemms:
        try:
            k, note = make()
        except Exception as e:
            print(f"compile {name}: failed {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        print(f"compile {name}: {note}", flush=True)
        kernels[name] = (k, bn, ws, dev, note)
    fa = {}
    wanted = [n for n, (extra, _) in FA_CONFIGS.items() if (not args.fa or any(w in n for w in args.fa))
              and args.head_dim in (None, extra.get("HEAD_DIM", 128))]
    for name in wanted:
        try:
            fa[name] = compile_fa(name)
        except Exception as e:
            print(f"compile fa {name}: failed {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        print(f"compile fa {name}: {fa[name][4]}", flush=True)
    fails = sweep(kernels) + fa_sweep(fa)
    fa_bench(fa, [(4, 32, 4096)] if args.quick else [(4, 32, 4096), (1, 32, 16384)], 3 if args.quick else 5)
    if args.bwd:
        fails += bwd_check(3 if args.quick else 5)
    if not args.fa_only and not args.no_gemm:
        bench(kernels, [4096] if args.quick else [4096, 8192], 3 if args.quick else 5)
    print(f"sweep failures: {fails}", flush=True)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
