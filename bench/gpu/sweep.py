"""Correctness sweep of the GEMMs twill lowers to warp-specialized code
(hook `lower=True`, docs/ws-lowering.md 3.7), against stock Triton on the
same kernels and a float32 torch reference.

    python -m bench.gpu.sweep --out DIR        # on the GPU machine (bench.gpu.run --sweep runs it too)
    python -m bench.gpu.sweep --compile-only   # any machine with twill-opt: compiles every case for cuda:90

Kernels (KERNELS): the host-descriptor TMA GEMM of kernels/matmul.py, with
the loop as written and as `tl.range(..., warp_specialize=True)`, and a
GEMM that makes its descriptors in the kernel with a bias + ReLU epilogue
(`gemm_bias_relu` of kernels/matmul.py).
Each runs on SHAPES: K of 0 to 5 iterations of BLOCK_K, K not a multiple
of BLOCK_K, M and N not multiples of the tile, and a square 1024. A kernel
is compiled per shape with the divisibility the JIT would specialize on
(`tt.divisibility` 16 only for arguments that are multiples of 16).

Every launch writes into a NaN-poisoned C with one poisoned guard row
below it, which must stay NaN. A launch that fails on the host (a tensor
descriptor the hardware cannot describe: a row stride that is not a
multiple of 16 bytes, 0 columns) is "unsupported size", for stock and twill
alike, never a pass; the host kernels run K = 0 over descriptors of
BLOCK_K columns (the loop runs no iteration), the bias + ReLU kernel (its
descriptors made in the kernel, unchecked) as written, where a failure is
an unsupported size too, and not where a row is not a multiple of 16
bytes. Each (kernel, route) runs in a child process; a launch that does
not finish within HANG_S is a "hang" (the child is killed and the next case
runs in a new one), and cases left when the sweep's deadline passes are
"not run". Every twill case records whether its compile lowered the loop
and whether the verifier proved it; a case not lowered fails.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

REPO = Path(__file__).resolve().parents[2]
TARGET = GPUTarget("cuda", 90, 32)
BLOCK = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
OPTIONS = dict(num_warps=4, num_stages=3)
# (M, N, K): trip counts 0, 1, 2, 3, 5 of BLOCK_K 64; K not a multiple of
# it (72: rows of 144 bytes; 100: 200 bytes, which a TMA descriptor cannot
# stride; 1000); M and N not multiples of the tile; a square 1024.
SHAPES = [(200, 136, k) for k in (0, 64, 128, 192, 320, 72, 100, 1000)] + [(1024, 1024, 1024)]
KERNELS = ("host", "host ws", "device bias+relu")
ROUTES = ("stock", "twill lowered")
# Seconds a launch may take before it counts as a hang, and a compile.
HANG_S, COMPILE_S = 20, 240


def source(kernel, M, N, K):
    """The ASTSource of `kernel` (KERNELS) specialized for (M, N, K) as the
    JIT would: `tt.divisibility` 16 on the pointers and on M, N, K where
    they are multiples of 16."""
    from triton.compiler import ASTSource

    from third_party.triton.tests.kernels import matmul

    div = [["tt.divisibility", 16]]
    if kernel == "device bias+relu":
        attrs = {(i, ): div for i in range(4)}
        attrs.update({(4 + i, ): div for i, v in enumerate((M, N, K)) if v % 16 == 0})
        return ASTSource(fn=matmul.gemm_bias_relu, signature=matmul.BIAS_RELU_SIGNATURE, constexprs=dict(BLOCK),
                         attrs=attrs)
    sig, cx, _ = matmul.ast_source_args(**BLOCK, GROUP_M=8, WARP_SPECIALIZE=kernel == "host ws")
    names = list(sig)
    attrs = {(names.index(n), ): div for n, v in zip("MNK", (M, N, K)) if v % 16 == 0}
    fn = matmul.matmul_tma_ws_kernel if kernel == "host ws" else matmul.matmul_tma_kernel
    return ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs)


_compiled = {}


def compile_case(kernel, route, M, N, K, target=TARGET):
    """(compiled kernel, what twill did: None for stock, else
    `lowering_record`), once per kernel, route and specialization in this
    process (a second compile would load Triton's cache, and the hook would
    not report)."""
    import twill_triton

    src = source(kernel, M, N, K)
    key = (kernel, route, str(target), tuple(sorted(src.attrs)))
    if key in _compiled:
        return _compiled[key]
    if route == "stock":
        _compiled[key] = triton.compile(src, target=target, options=OPTIONS), None
        return _compiled[key]
    before = len(twill_triton.decisions())
    twill_triton.enable(scope="all", lower=True)
    try:
        k = triton.compile(src, target=target, options=OPTIONS)
    finally:
        twill_triton.disable()
    ds = twill_triton.decisions()[before:]
    _compiled[key] = k, (lowering_record(ds[-1]) if ds else dict(lowered=[], ok=False, verification=[],
                                                                  reason="the hook did not run (Triton's cache)"))
    return _compiled[key]


def lowering_record(d):
    """What a lowered compile must show (Decision `d`): the loops lowered,
    each proved before emission (`lowered_verified`), and the verifier's
    verdicts on the module Triton finished; `ok` when all hold."""
    recs = [r for r in d.loop_records() if r["name"] in d.lowered()]
    proved = [bool(((r.get("schedule") or {}).get("lowering") or {}).get("verified")) for r in recs]
    verdicts = [r.get("verdict") for r in d.verification]
    refused = [r.get("reason") for r in (d.lowering or {}).get("loops") or [] if r.get("decision") != "scheduled"]
    ok = bool(d.lowered()) and all(proved) and bool(verdicts) and all(v == "proved" for v in verdicts)
    return dict(lowered=d.lowered(), lowered_verified=proved, verification=verdicts, refused=refused,
                scheduled=d.scheduled, reason=d.reason[:200], ok=ok)


def run_case(kernel, k, M, N, K):
    """Launches compiled `k` once on random inputs of (M, N, K) into a
    NaN-poisoned C (and guard row); returns (status, max relative error,
    note, whether the CUDA context may be broken). A host descriptor of 0
    columns is refused on the host, so the host kernels run K = 0 (no
    iteration) over descriptors of BLOCK_K columns; the bias + ReLU kernel
    runs it as written, and a failure at K = 0 is an unsupported size."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    BM, BN, BK = BLOCK["BLOCK_M"], BLOCK["BLOCK_N"], BLOCK["BLOCK_K"]
    cols = BK if K == 0 and kernel != "device bias+relu" else K
    a = torch.randn(M, cols, device="cuda", dtype=torch.float16)
    b = torch.randn(N, cols, device="cuda", dtype=torch.float16)
    buf = torch.full((M + 1, N), float("nan"), device="cuda", dtype=torch.float16)
    c = buf[:M]
    ref = a[:, :K].float() @ b[:, :K].float().T
    note = f"K = 0 over descriptors of {cols} columns" if cols != K else ""
    if kernel == "device bias+relu" and (K * 2 % 16 or N * 2 % 16):
        # A descriptor made in the kernel is not checked on the host: its
        # row strides must be multiples of 16 bytes, else the TMA's
        # behaviour is undefined.
        return "unsupported size", None, "a row is not a multiple of 16 bytes (TMA); not launched", False
    try:
        if kernel == "device bias+relu":
            bias = torch.randn(N, device="cuda", dtype=torch.float32)
            ref = torch.relu(ref + bias[None, :])
            k[(triton.cdiv(M, BM), triton.cdiv(N, BN), 1)](a, b, c, bias, M, N, K, BM, BN, BK)
        else:
            ad, bd = TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BN, BK])
            cd = TensorDescriptor.from_tensor(c, [BM, BN])
            ws = (True, ) if kernel == "host ws" else ()
            k[(triton.cdiv(M, BM) * triton.cdiv(N, BN), 1, 1)](ad, bd, cd, M, N, K, BM, BN, BK, 8, *ws)
    except Exception as e:  # refused on the host: no kernel ran
        return "unsupported size", None, f"{type(e).__name__}: {str(e)[:160]}", False
    if K == 0:
        try:
            torch.cuda.synchronize()
        except Exception as e:
            return "unsupported size", None, f"K = 0 failed on the device: {type(e).__name__}: {str(e)[:120]}", True
    torch.cuda.synchronize()
    if not torch.isnan(buf[M]).all():
        return "FAIL", None, "wrote below C (guard row changed)", False
    if not torch.isfinite(c).all():
        return "FAIL", None, f"{int((~torch.isfinite(c)).sum())} non-finite outputs (NaN poison left)", False
    err = (c.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1.0)
    return ("pass" if err < 1e-2 else "FAIL"), err, note, False


def child(spec):
    """A child process: runs spec["cases"] of one (kernel, route), printing
    COMPILE/LAUNCH before each step and RESULT <json> after each case.
    Exits after a case that raised in the kernel (a CUDA error is sticky)."""
    import torch

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-sweep-cache-")
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    kernel, route = spec["kernel"], spec["route"]
    for i, (M, N, K) in spec["cases"]:
        print("COMPILE", i, flush=True)
        res = dict(index=i)
        try:
            k, twill = compile_case(kernel, route, M, N, K, target=None)
        except Exception as e:
            res.update(status="does not compile", err=None, note=f"{type(e).__name__}: {str(e)[-160:]}")
            print("RESULT", json.dumps(res), flush=True)
            continue
        try:
            res["twill"] = twill
            print("LAUNCH", i, flush=True)
            res["status"], res["err"], res["note"], broken = run_case(kernel, k, M, N, K)
            if twill is not None and not twill["ok"] and res["status"] == "pass":
                res["status"], res["note"] = "FAIL", "correct but not lowered and proved by twill"
            if broken:  # the next case in a new process
                print("RESULT", json.dumps(res), flush=True)
                return
        except Exception as e:
            res.update(status="error", err=None, note=f"{type(e).__name__}: {str(e)[-200:]}")
            print("RESULT", json.dumps(res), flush=True)
            return
        print("RESULT", json.dumps(res), flush=True)


def _lines(proc, q):
    for line in proc.stdout:
        q.put(line)
    q.put(None)


def run_child(kernel, route, cases, deadline, command=None):
    """Runs `cases` [(index, shape)] of (kernel, route) in child processes
    (`command` + the spec: `child` by default) under the hang guard:
    {index: result}, hangs and cases not run included."""
    command = command or [sys.executable, "-m", "bench.gpu.sweep", "--child"]
    out, left = {}, list(cases)
    while left:
        if time.time() > deadline:
            out.update({i: dict(index=i, status="not run", note="sweep deadline") for i, _ in left})
            break
        spec = json.dumps(dict(kernel=kernel, route=route, cases=left))
        proc = subprocess.Popen(command + [spec], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        q = queue.Queue()
        threading.Thread(target=_lines, args=(proc, q), daemon=True).start()
        current, phase, log = None, "COMPILE", []
        while True:
            try:
                line = q.get(timeout=HANG_S if phase == "LAUNCH" else COMPILE_S)
            except queue.Empty:
                proc.kill()
                what = "hang" if phase == "LAUNCH" else "compile timeout"
                i = current if current is not None else left[0][0]
                out[i] = dict(index=i, status=what, note=f"no result within {HANG_S if phase == 'LAUNCH' else COMPILE_S} s")
                break
            if line is None:
                break
            word, _, rest = line.partition(" ")
            if word in ("COMPILE", "LAUNCH"):
                phase, current = word, int(rest)
            elif word == "RESULT":
                r = json.loads(rest)
                out[r["index"]] = r
                current, phase = None, "COMPILE"
            else:
                log.append(line)
        proc.wait()
        # A child that died in a case (or before its first) fails that case.
        dead = current if current is not None else left[0][0]
        if dead not in out:
            out[dead] = dict(index=dead, status="error", note="child died: " + "".join(log[-3:])[-200:])
        left = [(i, s) for i, s in left if i not in out]
    return out


def sweep(deadline_s=300):
    """Every (kernel, route, shape) under the hang guard, the whole sweep
    within `deadline_s`: the result rows, printed as a table."""
    deadline = time.time() + deadline_s
    cases = list(enumerate(SHAPES))
    rows = []
    for kernel in KERNELS:
        for route in ROUTES:
            got = run_child(kernel, route, cases, deadline)
            for i, (M, N, K) in cases:
                r = got[i]
                rows.append(dict(kernel=kernel, route=route, M=M, N=N, K=K, trips=-(-K // BLOCK["BLOCK_K"]),
                                 status=r["status"], err=r.get("err"), note=r.get("note", ""),
                                 twill=r.get("twill")))
    print_table(rows)
    return dict(rows=rows, ok=verdict(rows), shapes=SHAPES, block=BLOCK, options=OPTIONS)


def verdict(rows):
    """Whether the sweep passed: every stock case passed, is an unsupported
    size, or does not compile (Triton's Hopper warp specialization fails
    on the host-descriptor kernel at 4 warps), and every twill case passed
    or is an unsupported size where stock has no result either."""
    by = {(r["kernel"], r["M"], r["N"], r["K"], r["route"]): r["status"] for r in rows}
    refused = ("unsupported size", "does not compile")
    for (kernel, M, N, K, route), status in by.items():
        if status == "pass" or (route == "stock" and status in refused):
            continue
        if status == "unsupported size" and by.get((kernel, M, N, K, "stock")) in refused:
            continue
        return False
    return True


def print_table(rows):
    print("\nsweep: kernel | route | M x N x K (trips) | status | max rel. error | lowered / proved | note",
          flush=True)
    for r in rows:
        t = r.get("twill")
        low = "-" if t is None else f"{','.join(t['lowered']) or 'NOT lowered'} / {t['verification']}"
        err = "-" if r["err"] is None else f"{r['err']:.2e}"
        print(f"{r['kernel']:16s} | {r['route']:13s} | {r['M']}x{r['N']}x{r['K']} ({r['trips']}) | "
              f"{r['status']:16s} | {err} | {low} | {r['note']}", flush=True)
    print(f"sweep: {'PASSED' if verdict(rows) else 'FAILED'}", flush=True)


def compile_only():
    """Compiles every case for cuda:90 on this machine (no GPU): each twill
    compile must lower its loop with the verifier's proof (a stock compile
    that fails is printed, as the GPU sweep reports it). Returns the
    failures."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="twill-sweep-cache-")
    bad = []
    for kernel in KERNELS:
        for M, N, K in SHAPES:
            for route in ROUTES:
                try:
                    _, twill = compile_case(kernel, route, M, N, K)
                except Exception as e:
                    msg = f"{kernel} {route} {M}x{N}x{K}: does not compile: {type(e).__name__}: {str(e)[-120:]}"
                    (print if route == "stock" else bad.append)(msg)
                    continue
                if twill is not None and not twill["ok"]:
                    bad.append(f"{kernel} {M}x{N}x{K}: not lowered and proved: {twill}")
    return bad


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="write sweep.json here")
    ap.add_argument("--deadline", type=float, default=300, help="seconds for the whole sweep")
    ap.add_argument("--compile-only", action="store_true", help="compile every case for cuda:90, no GPU")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
    elif args.compile_only:
        failures = compile_only()
        print(*(failures or ["every sweep case compiles; every twill compile is lowered and proved"]), sep="\n")
        sys.exit(1 if failures else 0)
    else:
        res = sweep(args.deadline)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "sweep.json").write_text(json.dumps(res, indent=1))
        sys.exit(0 if res["ok"] else 1)
