#!/usr/bin/env python3
"""GPU correctness sweep of pointer-load (cp.async) kernels, stock Triton
against twill (TWILL_SCOPE=all): the evidence harness for the unsafe
pipelines twill's stages and clusters made Triton build (a cp.async into a
ring slot an in-flight async wgmma still read). The bench's own kernels use
TMA and never saw it.

    # on the GPU machine, with the twill_triton wheel installed
    # (bash bench/gpu/pointer_check.sh does both steps): twill schedules
    # every twill variant for cuda:90 with the wheel's twill-opt and records
    # the schedules (TWILL_DUMP_DIR) into a scratch directory, then every
    # kernel is compiled from them (TWILL_REPLAY_DIR), launched and checked
    python3 -m bench.gpu.pointer_check --record DIR
    python3 -m bench.gpu.pointer_check --replay DIR --out OUT

    # no GPU: the GPU mode's argument lists and specializations, every kernel
    # compiled for cuda:90 stock and from the replay (twill-opt hidden), no launch
    python -m bench.gpu.pointer_check --replay DIR --dry-run

Kernels (third_party/triton/tests/kernels): the tutorial-03-style matmul at
every configuration of pointer_matmul.CONFIGS and its bias + ReLU variant
(BIAS_CONFIGS) at MM_SIZES (ragged ones included: K not a multiple of
BLOCK_K, M and N not of the tiles; only where K and N are multiples of 16
does Triton make the loads cp.async, see MM_SIZES and the table's cp.async
column), and the tutorial-06-style attention
backward of pointer_attention_bwd.CONFIGS at ATTN_SEQS rows (1000: ragged,
the kernel masks) for ATTN_HEADS heads. Its Delta comes from the preprocess
kernel (stock Triton in both variants: it has no loop), O and M from a
float32 torch forward.

Every kernel is compiled from an ASTSource built with the JIT's own binder
(`specialize`: the signature, constexprs and divisibility attributes a
`kernel[grid](...)` launch with the same arguments would get) and launched as
a CompiledKernel (`compiled[grid](*args)`), so that the GPU compiles exactly
the module that was recorded: the replay key is the exported TTGIR text. The
arguments on the GPU come from the same code as the recorded ones (mock
tensors there, torch tensors here); a specialization the record did not see
is reported, not guessed.

Variants, each in a fresh Triton cache directory: "triton" (stock) and
"twill" (twill_triton.enable(scope="all"), schedules replayed; TWILL_OPT is
pointed at nothing so that only the recorded schedule can apply). Outputs
are poisoned (NaN) before every launch and checked against a float32 torch
reference: max |out - ref| / max |ref| <= MATMUL_TOL (matmul) or ATTN_TOL
(each of dQ, dK, dV); NaN never passes. A row launches its kernel --repeats
times (default 5), each on freshly poisoned outputs, and reports the worst:
a race between a cp.async and a wgmma need not show every time (on an H200,
2026-11-27, twill's 64x128x32 matmul at 4096^3 was right in one run of one
launch and wrong in 1 of 3 launches of the next).

Per row: kernel, config, size, variant, verdict (correct / WRONG /
compile-fallback: twill's schedule was not applied and Triton's ran, correct
/ error: no result), max relative error, and what twill decided (from
twill_triton.decisions(), with the recorded decision next to it): the
stages of each scheduled loop, read from the decision's typed report
(`Decision.report`, schema twill.schedule-report/1, docs/report-schema.md),
never from the remarks' prose. At each kernel's largest size (TIMED) the
two variants are also timed paired (ROUNDS rounds alternating, each a
do_bench median), with the model's cycles per iteration of Triton's
schedule and twill's next to the ratio (results.json's `timings`, and a
second table in table.md).
--record writes, per distinct specialization, DIR/<kernel>-<config>-<first
size>/ as the hook leaves it with TWILL_DUMP_DIR (whatever files it writes:
key.txt, scheduled.mlir, report.json, remarks.txt, ...; the replay needs
scheduled.mlir and report.json), and DIR/manifest.json (each entry's
specialization, sizes, twill's decision with its report, and replay keys);
the GPU run replays the whole directory.

Writes OUT/results.json and OUT/table.md. Exit status: 1 if a row is WRONG
or an error, else 3 if a twill row fell back where the record had scheduled
(the replay did not match: the evidence is incomplete), else 0; 2 for a
usage problem (no GPU, no replay directory).
"""

import argparse
import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import MockTensor, create_function_from_signature

import twill_triton
from bench.gpu.scope_all import paired, prediction
from third_party.triton.tests.kernels import pointer_attention_bwd as PA
from third_party.triton.tests.kernels import pointer_matmul as PM

REPO = Path(__file__).resolve().parents[2]

TARGET = GPUTarget("cuda", 90, 32)
# (M, N, K). Where K or N is not a multiple of 16 (1000, 129, 200, 1025),
# the JIT cannot assume 16-element alignment of the rows and masks, the
# loads of A and B are not vectorized and Triton 3.6 does not make them
# cp.async (it keeps them synchronous, stock and twill alike): those rows
# check the masking, not the cp.async ring. The last two sizes are ragged
# with K and N multiples of 16 but not of any BLOCK_K / BLOCK_N (and M of no
# BLOCK_M), so that the ragged tail goes through cp.async.
MM_SIZES = [(512, 512, 512), (1000, 1000, 1000), (257, 129, 200), (4096, 4096, 4096), (777, 1025, 1000),
            (1000, 1008, 1008), (257, 144, 208)]
ATTN_SEQS = [128, 1000, 4096]
# Sizes timed paired (stock against twill, same configuration), each kernel
# at its largest size: ROUNDS rounds alternating the variants, each a
# do_bench median (L2 flushed before each launch); the ratio is of the
# medians of the rounds.
TIMED = {(4096, 4096, 4096), (4096, )}
ROUNDS = 7
ATTN_HEADS = (2, 2)  # Z, H
MATMUL_TOL = 1e-2
ATTN_TOL = 1e-2
DELTA_TOL = 1e-3
VARIANTS = ("triton", "twill")
MANIFEST = "manifest.json"
# Environment that changes what twill does (or the replay key): cleared, so
# that the record and the replay agree.
TWILL_ENV = ("TWILL_OPTIONS", "TWILL_SCOPE", "TWILL_PARTITIONS", "TWILL_STRICT", "TWILL_TIES", "TWILL_DUMP_DIR",
             "TWILL_REPLAY_DIR")


# --------------------------------------------------------------------------
# Cases and their launches (shared by the record and the GPU run).
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    kernel: str  # "matmul", "bias_relu" or "attn_bwd"
    config: str  # name in the module's configuration table
    size: tuple  # (M, N, K) or (N_CTX,)

    @property
    def cfg(self):
        table = {"matmul": PM.CONFIGS, "bias_relu": PM.BIAS_CONFIGS, "attn_bwd": PA.CONFIGS}[self.kernel]
        return table[self.config]

    @property
    def size_str(self):
        return "x".join(map(str, self.size))


def cases(only=None):
    out = [Case("matmul", c, s) for c in PM.CONFIGS for s in MM_SIZES]
    out += [Case("bias_relu", c, s) for c in PM.BIAS_CONFIGS for s in MM_SIZES]
    out += [Case("attn_bwd", c, (n, )) for c in PA.CONFIGS for n in ATTN_SEQS]
    if only:
        out = [c for c in out if any(o in f"{c.kernel} {c.config} {c.size_str}" for o in only)]
    return out


class _MockTensor(MockTensor):
    """Triton's MockTensor (data_ptr 0, so 16-byte aligned like every torch
    allocation) with torch's `stride(dim)` of a contiguous tensor."""

    def stride(self, dim=None):
        strides = super().stride()
        return strides if dim is None else strides[dim]


class Mock:
    """Tensor factory without torch or a GPU."""
    f16, f32 = tl.float16, tl.float32

    @staticmethod
    def tensor(shape, dtype):
        return _MockTensor(dtype, list(shape))


@dataclasses.dataclass
class Launch:
    """One kernel launch: the JIT function, its runtime arguments in order
    (constexprs excluded), constexprs, launch options, grid, and the names
    of the tensors it writes."""
    fn: object
    args: list
    consts: dict
    opts: dict
    grid: tuple
    name: str


def matmul_launch(case, a, b, c, bias=None):
    const, opts = PM.split(case.cfg)
    M, N, K = case.size
    strides = [a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)]
    if case.kernel == "matmul":
        grid = (triton.cdiv(M, const["BLOCK_M"]) * triton.cdiv(N, const["BLOCK_N"]), 1, 1)
        return Launch(PM.matmul_kernel, [a, b, c, M, N, K] + strides, const, opts, grid, "matmul_kernel")
    grid = (triton.cdiv(M, const["BLOCK_M"]), triton.cdiv(N, const["BLOCK_N"]), 1)
    return Launch(PM.matmul_bias_relu_kernel, [a, b, bias, c, M, N, K] + strides, const, opts, grid,
                  "matmul_bias_relu_kernel")


def matmul_buffers(case, T):
    """(a, b, c, bias) of a matmul case from tensor factory T (c and bias as
    the kernel sees them; GPU values are filled in by the caller)."""
    M, N, K = case.size
    return (T.tensor((M, K), T.f16), T.tensor((K, N), T.f16), T.tensor((M, N), T.f16),
            T.tensor((N, ), T.f16) if case.kernel == "bias_relu" else None)


def attn_sm_scale(d):
    return 1.0 / math.sqrt(d)


def attn_launches(case, q, k, v, o, do, dq, dk, dv, m, delta):
    """(preprocess, backward) launches of an attention case."""
    const, opts = PA.split(case.cfg)
    n = case.size[0]
    heads = ATTN_HEADS[0] * ATTN_HEADS[1]
    d = const["HEAD_DIM"]
    pre_const, pre_opts = PA.split(PA.PREPROCESS_CONFIG)
    pre_const = dict(pre_const, HEAD_DIM=d)
    pre = Launch(PA.attn_bwd_preprocess_kernel, [o, do, delta, n], pre_const, pre_opts,
                 PA.grid("preprocess", n, heads, **pre_const), "attn_bwd_preprocess_kernel")
    bwd = Launch(PA.attn_bwd_kernel, [q, k, v, do, dq, dk, dv, m, delta, attn_sm_scale(d), n], const, opts,
                 PA.grid("bwd", n, heads, **const), "attn_bwd_kernel")
    return pre, bwd


def attn_buffers(case, T):
    n = case.size[0]
    Z, H = ATTN_HEADS
    d = case.cfg["HEAD_DIM"]
    q, k, v, o, do, dq, dk, dv = (T.tensor((Z, H, n, d), T.f16) for _ in range(8))
    m, delta = (T.tensor((Z, H, n), T.f32) for _ in range(2))
    return q, k, v, o, do, dq, dk, dv, m, delta


def main_launch(case, T):
    """The launch of the kernel twill schedules (mock or GPU tensors)."""
    if case.kernel == "attn_bwd":
        return attn_launches(case, *attn_buffers(case, T))[1]
    return matmul_launch(case, *matmul_buffers(case, T))


# --------------------------------------------------------------------------
# Specialization (as the JIT would) and compilation.
# --------------------------------------------------------------------------
_BACKEND = {}


def specialize(launch):
    """(ASTSource, spec key, bound argument values) of `launch`: Triton's
    own JIT binder applied to its arguments, so the signature, constexprs
    (integers equal to 1 included) and divisibility attributes are what
    `fn[grid](*args, **consts, **opts)` would compile."""
    if "b" not in _BACKEND:
        _BACKEND["b"] = make_backend(TARGET)
    backend = _BACKEND["b"]
    fn = launch.fn
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(launch.consts, **launch.opts)
    bound, spec, options = binder(*launch.args, **kwargs)
    _, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, options)
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    desc = dict(kernel=launch.name, signature=signature,
                constexprs={",".join(map(str, k)): repr(v) for k, v in constexprs.items()},
                attrs={",".join(map(str, k)): v for k, v in attrs.items() if v}, options=launch.opts)
    key = hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return src, key, desc, list(bound.values())


def decision_dict(d):
    """A twill_triton Decision as JSON (every field, so that fields added
    to the hook, e.g. a verifier's verdict, come along)."""
    out = {}
    for k, v in (dataclasses.asdict(d) if dataclasses.is_dataclass(d) else vars(d)).items():
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            out[k] = repr(v)
    out["remarks"] = [r.split("remark: ", 1)[-1] for r in out.get("remarks") or []]
    return out


def compile_variant(variant, src, opts, kernel_name, cache_root):
    """(CompiledKernel, decision dict or None) of `src` for cuda:90 in the
    variant's own Triton cache directory under `cache_root`. twill variants
    need TWILL_DUMP_DIR or TWILL_REPLAY_DIR set by the caller."""
    os.environ["TRITON_CACHE_DIR"] = str(Path(cache_root) / variant)
    if variant == "triton":
        return triton.compile(src, target=TARGET, options=dict(opts)), None
    before = len(twill_triton.decisions())
    twill_triton.enable(scope="all")
    try:
        k = triton.compile(src, target=TARGET, options=dict(opts))
    finally:
        twill_triton.disable()
    new = [d for d in twill_triton.decisions()[before:] if d.kernel == kernel_name]
    if not new:
        return k, dict(scheduled=False, reason="no twill decision (a cached compile: the hook did not run)",
                       remarks=[])
    return k, decision_dict(new[-1])


def cp_async_count(kernel):
    """cp.async copies (ttg.async_copy_global_to_local) in a compiled
    kernel's final TTGIR; None without one."""
    try:
        return kernel.asm["ttgir"].count("ttg.async_copy_global_to_local")
    except Exception:
        return None


def scheduled_loops(dec):
    """The loop records (schema twill.schedule-report/1,
    docs/report-schema.md) of the loops twill scheduled, in module order,
    from a decision dict's `report` (the hook's Decision.report); ValueError
    where the decision has no report or one of another schema."""
    report = dec.get("report")
    if not isinstance(report, dict):
        raise ValueError("no schedule report")
    if report.get("schema") != twill_triton.hook.REPORT_SCHEMA:
        raise ValueError(f"report schema {report.get('schema')!r}, this reads {twill_triton.hook.REPORT_SCHEMA}")
    return [lp for lp in report.get("loops") or [] if lp.get("decision") == "scheduled"]


def twill_summary(dec):
    if dec is None:
        return "-"
    if dec.get("scheduled"):
        try:
            loops = scheduled_loops(dec)
        except ValueError as e:
            return f"scheduled ({e})"
        n = len(loops)
        stages = "/".join(str(lp["schedule"]["stages"]) for lp in loops)
        return f"scheduled ({n} loop{'s' if n != 1 else ''}, stages {stages})"
    return "fell back: " + (dec.get("reason") or "?")[:200]


def clear_twill_env():
    for k in TWILL_ENV:
        os.environ.pop(k, None)
    twill_triton.disable()  # in case TRITON_TWILL=1 enabled it at startup


# --------------------------------------------------------------------------
# --record (CPU, twill-opt).
# --------------------------------------------------------------------------
def record(root, only=None):
    root = Path(root).resolve()
    clear_twill_env()
    twill_opt = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
    if not os.path.exists(twill_opt):
        raise SystemExit(f"--record needs twill-opt ({twill_opt} not found: set TWILL_OPT)")
    os.environ["TWILL_OPT"] = twill_opt
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cache = Path(tempfile.mkdtemp(prefix="pointer-record-cache-"))
    # A schedule cache of its own: every schedule is solved live by this
    # twill-opt, whatever earlier compiles on the machine stored.
    os.environ["TWILL_CACHE_DIR"] = str(cache / "twill")
    entries = {}
    t0 = time.time()
    for case in cases(only):
        launch = main_launch(case, Mock)
        src, key, desc, _ = specialize(launch)
        if key in entries:
            entries[key]["sizes"].append(case.size_str)
            continue
        slug = f"{case.kernel}-{case.config}-{case.size_str}"
        os.environ["TWILL_DUMP_DIR"] = str(root / slug)
        t = time.time()
        try:
            _, dec = compile_variant("twill", src, launch.opts, launch.name, cache)
        except Exception as e:  # a compile failure is a result too
            dec = dict(scheduled=False, reason=f"compile failed: {type(e).__name__}: {str(e)[-400:]}", remarks=[],
                       error=True)
        finally:
            os.environ.pop("TWILL_DUMP_DIR", None)
        keys = sorted({p.read_text().strip() for p in (root / slug).rglob("key.txt")})
        entries[key] = dict(slug=slug, kernel=case.kernel, config=case.config, sizes=[case.size_str], spec=desc,
                            spec_key=key, decision=dec, replay_keys=keys, seconds=round(time.time() - t, 2))
        print(f"{slug}: {twill_summary(dec)} ({time.time() - t:.1f} s)", flush=True)
        for r in dec.get("remarks", []):
            print("    " + r[:220], flush=True)
    manifest = dict(triton=triton.__version__, target=f"cuda:{TARGET.arch}", created=time.strftime("%Y-%m-%d %H:%M:%S"),
                    twill_opt=twill_opt, twill_opt_sha256_16=twill_triton.hook._binary_hash(twill_opt),
                    command=" ".join(sys.argv), entries=list(entries.values()))
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    shutil.rmtree(cache, ignore_errors=True)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    n_sched = sum(e["decision"].get("scheduled", False) for e in entries.values())
    print(f"recorded {len(entries)} compiles ({n_sched} scheduled by twill) under {root}: "
          f"{size / 1024:.0f} KiB, {time.time() - t0:.0f} s")
    return 1 if any(e["decision"].get("error") for e in entries.values()) else 0


# --------------------------------------------------------------------------
# --replay (the GPU run, or --dry-run without one).
# --------------------------------------------------------------------------
def load_manifest(replay):
    path = Path(replay) / MANIFEST
    if not path.exists():
        raise SystemExit(f"no {path}: record it first (bench/gpu/pointer_check.sh says how)")
    man = json.loads(path.read_text())
    if man.get("triton") != triton.__version__:
        print(f"WARNING: schedules recorded with Triton {man.get('triton')}, running {triton.__version__}: the "
              "replay keys will not match (every twill row falls back)", flush=True)
    return man, {e["spec_key"]: e for e in man["entries"]}


class Compiler:
    """Compiled kernels per (variant, spec key), each compiled once."""

    def __init__(self, replay):
        self.cache = Path(tempfile.mkdtemp(prefix="pointer-check-cache-"))
        self.replay = str(Path(replay).resolve())
        self.done = {}

    def get(self, variant, launch, stock_only=False):
        """(compiled kernel, bound args, decision, spec key, error)."""
        src, key, desc, args = specialize(launch)
        if stock_only:
            variant = "triton"
        if (variant, key) not in self.done:
            if variant == "twill":
                os.environ["TWILL_REPLAY_DIR"] = self.replay
                # Only a recorded schedule may apply (hook: no twill-opt, so no
                # fresh solve on this machine).
                os.environ["TWILL_OPT"] = str(self.cache / "no-twill-opt")
            try:
                k, dec = compile_variant(variant, src, launch.opts, launch.name, self.cache)
                err = None
            except Exception as e:
                k, dec, err = None, None, f"compile failed: {type(e).__name__}: {str(e)[-400:]}"
            self.done[(variant, key)] = (k, dec, err)
        k, dec, err = self.done[(variant, key)]
        return k, args, dec, key, err


def dry_run(replay, only=None):
    """Everything the GPU run does before its first launch, with mock
    tensors: argument lists, specializations matched to the record, each
    kernel compiled for cuda:90 stock and from the replay."""
    clear_twill_env()
    man, by_key = load_manifest(replay)
    comp = Compiler(replay)
    bad = 0
    for case in cases(only):
        launches = ([main_launch(case, Mock)] if case.kernel != "attn_bwd" else
                    list(attn_launches(case, *attn_buffers(case, Mock))))
        for launch in launches:
            stock_only = launch.name == "attn_bwd_preprocess_kernel"
            for variant in (("triton", ) if stock_only else VARIANTS):
                k, args, dec, key, err = comp.get(variant, launch, stock_only)
                rec = by_key.get(key)
                note = ""
                if variant == "twill":
                    note = f"recorded: {twill_summary(rec['decision']) if rec else 'NOT RECORDED'}"
                    if rec and rec["decision"].get("scheduled") and not (dec or {}).get("scheduled"):
                        bad += 1
                        note += "  <- replay miss"
                if err:
                    bad += 1
                print(f"{case.kernel:9s} {case.config:18s} {case.size_str:>14s} {launch.name:26s} {variant:6s} "
                      f"{len(args)} args grid {launch.grid}: {err or 'compiled'} (cp.async {cp_async_count(k)}); "
                      f"{twill_summary(dec)} {note}", flush=True)
    print("dry run:", "OK" if not bad else f"{bad} problem(s)")
    return 1 if bad else 0


def gpu_run(replay, out, only=None, repeats=5):
    try:
        import torch
    except ImportError:
        print("pointer_check: the GPU mode needs torch (and a CUDA GPU); without one use --dry-run", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("pointer_check: no CUDA device visible (torch.cuda.is_available() is False); without a GPU use "
              "--dry-run", file=sys.stderr)
        return 2
    cap = torch.cuda.get_device_capability()
    if cap != (9, 0):
        print(f"pointer_check: the schedules are recorded for cuda:90; this GPU is sm{cap[0]}{cap[1]}",
              file=sys.stderr)
        return 2
    clear_twill_env()
    man, by_key = load_manifest(replay)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    comp = Compiler(replay)
    results = dict(device=torch.cuda.get_device_name(), triton=triton.__version__, torch=torch.__version__,
                   date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), replay=str(replay),
                   recorded=dict(triton=man.get("triton"), created=man.get("created"),
                                 twill_opt_sha256_16=man.get("twill_opt_sha256_16")),
                   tolerances=dict(matmul=MATMUL_TOL, attn=ATTN_TOL, delta=DELTA_TOL), launches_per_row=repeats,
                   rows=[])

    class G:
        f16, f32 = torch.float16, torch.float32

        @staticmethod
        def tensor(shape, dtype):
            return torch.empty(shape, device="cuda", dtype=dtype)

    def run_row(case, variant, launch, outputs, check, extra=None):
        """Compile (or reuse), poison `outputs`, launch, check; one row.
        Returns the row and a function launching the kernel once (None
        where it did not compile)."""
        t = time.time()
        k, args, dec, key, err = comp.get(variant, launch)
        rec = by_key.get(key)
        row = dict(kernel=case.kernel, config=case.config, size=case.size_str, variant=variant,
                   spec_key=key, twill=twill_summary(dec) if variant == "twill" else "-", decision=dec,
                   recorded=(rec or {}).get("decision") if variant == "twill" else None,
                   recorded_slug=(rec or {}).get("slug") if variant == "twill" else None)
        if variant == "twill" and rec is None:
            row["twill"] += " [specialization not recorded: rerun --record]"
        row["cp_async"] = cp_async_count(k)
        if err:
            row.update(verdict="error", max_rel_err=None, note=err)
        else:
            try:
                tol = ATTN_TOL if case.kernel == "attn_bwd" else MATMUL_TOL
                # A race shows only now and then: REPEATS launches, each on
                # freshly poisoned outputs; the worst error of each output.
                errs, nonfinite, wrong = {}, 0, 0
                for _ in range(repeats):
                    for o in outputs:
                        o.fill_(float("nan"))
                    k[launch.grid](*args)
                    torch.cuda.synchronize()
                    e_r, nf = check()
                    wrong += not all(e <= tol for e in e_r.values())  # NaN compares False
                    nonfinite = max(nonfinite, nf)
                    for n, e in e_r.items():
                        errs[n] = e if math.isnan(e) or n not in errs else max(errs[n], e)
                worst = float("nan") if any(math.isnan(e) for e in errs.values()) else max(errs.values())
                row.update(max_rel_err=None if math.isnan(worst) else worst, errors={
                    n: (None if math.isnan(e) else e) for n, e in errs.items()}, nonfinite=nonfinite,
                           launches=repeats, wrong_launches=wrong,
                           verdict="WRONG" if wrong else (
                               "compile-fallback" if variant == "twill" and not (dec or {}).get("scheduled")
                               else "correct"))
                if wrong and wrong < repeats:
                    row["note"] = f"wrong in {wrong} of {repeats} launches"
                if math.isnan(worst):
                    row["note"] = f"{nonfinite} non-finite output values" + (
                        f" (wrong in {wrong} of {repeats} launches)" if wrong < repeats else "")
            except Exception as e:
                row.update(verdict="error", max_rel_err=None, note=f"launch failed: {type(e).__name__}: "
                           f"{str(e)[-300:]}")
        if extra:
            row.update(extra)
        row["seconds"] = round(time.time() - t, 2)
        results["rows"].append(row)
        e = row.get("max_rel_err")
        print(f"{case.kernel:9s} {case.config:18s} {case.size_str:>14s} {variant:6s} {row['verdict']:16s} "
              f"{'nan' if e is None else f'{e:.2e}':>9s}  {row['twill']} {row.get('note', '')}", flush=True)
        return row, (None if err else (lambda: k[launch.grid](*args)))

    for case in cases(only):
        torch.manual_seed(0)
        if case.kernel == "attn_bwd":
            attn_case(case, torch, G, run_row, comp, results)
            continue
        a, b, c, bias = matmul_buffers(case, G)
        a.normal_()
        b.normal_()
        ref = a.float() @ b.float()
        if bias is not None:
            bias.normal_()
            ref = torch.relu(ref + bias.float())
        launch = matmul_launch(case, a, b, c, bias)

        def check(c=c, ref=ref):
            e, nf = rel_err(torch, c, ref)
            return {"c": e}, nf

        ran = {variant: run_row(case, variant, launch, [c], check) for variant in VARIANTS}
        time_pair(case, ran, results)
        del a, b, c, bias, ref
        torch.cuda.empty_cache()

    write_results(out, results)
    rows = results["rows"]
    if any(r["verdict"] in ("WRONG", "error") for r in rows):
        return 1
    miss = [r for r in rows if r["variant"] == "twill" and r["verdict"] == "compile-fallback"
            and (r.get("recorded") or {}).get("scheduled")]
    return 3 if miss else 0


def attn_case(case, torch, G, run_row, comp, results):
    q, k, v, o, do, dq, dk, dv, m, delta = attn_buffers(case, G)
    for t in (q, k, v, do):
        t.normal_(0, 0.5)
    causal = case.cfg["CAUSAL"]
    d = case.cfg["HEAD_DIM"]
    n = case.size[0]
    sm_scale = attn_sm_scale(d)
    # float32 reference: forward (O, M in base-2 units) and autograd.
    qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
    s = (qf @ kf.transpose(-1, -2)) * sm_scale
    if causal:
        s = s.masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    ref_o = torch.softmax(s, dim=-1) @ vf
    ref_o.backward(do.float())
    refs = dict(dq=qf.grad, dk=kf.grad, dv=vf.grad)
    with torch.no_grad():
        o.copy_(ref_o.detach().half())
        m.copy_(lse.detach() * PA.LOG2E)
    del s, ref_o, lse, qf, kf, vf
    pre, bwd = attn_launches(case, q, k, v, o, do, dq, dk, dv, m, delta)
    # Delta by the preprocess kernel (stock Triton: no loop for twill).
    delta.fill_(float("nan"))
    kpre, args, _, _, err = comp.get("triton", pre)
    note = None
    if err:
        note = f"preprocess: {err}"
    else:
        try:
            kpre[pre.grid](*args)
            torch.cuda.synchronize()
            want = (o.float() * do.float()).sum(-1)
            derr = ((delta - want).abs().max() / want.abs().max()).item()
            if not derr <= DELTA_TOL:
                note = f"preprocess Delta wrong: max rel err {derr:.2e}"
        except Exception as e:
            note = f"preprocess launch failed: {type(e).__name__}: {str(e)[-300:]}"

    def check():
        errs, nf = {}, 0
        for name, got in (("dq", dq), ("dk", dk), ("dv", dv)):
            e, f = rel_err(torch, got, refs[name])
            errs[name], nf = e, nf + f
        return errs, nf

    ran = {}
    for variant in VARIANTS:
        if note:
            results["rows"].append(dict(kernel=case.kernel, config=case.config, size=case.size_str, variant=variant,
                                        verdict="error", max_rel_err=None, twill="-", note=note))
            print(f"{case.kernel} {case.config} {case.size_str} {variant}: error: {note}", flush=True)
            continue
        ran[variant] = run_row(case, variant, bwd, [dq, dk, dv], check)
    time_pair(case, ran, results)
    torch.cuda.empty_cache()


def time_pair(case, ran, results):
    """Paired timing of the variants of `case` where its size is TIMED and
    both ran correctly: ROUNDS rounds of stock and twill (which goes first
    alternating), each a do_bench median (scope_all.paired); appends a
    record to results["timings"]."""
    if case.size not in TIMED or set(ran) != set(VARIANTS):
        return
    if any(row["verdict"] not in ("correct", "compile-fallback") or fn is None for row, fn in ran.values()):
        return
    from triton.testing import do_bench

    stock_ms, twill_ms = paired(ran["triton"][1], ran["twill"][1], ROUNDS,
                                lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median"))
    ms = {"triton": stock_ms, "twill": twill_ms}
    twill_row = ran["twill"][0]
    record = dict(kernel=case.kernel, config=case.config, size=case.size_str, stock_ms=ms["triton"],
                  twill_ms=ms["twill"], ratio=ms["triton"] / ms["twill"], twill=twill_row["twill"],
                  scheduled=bool((twill_row.get("decision") or {}).get("scheduled")),
                  model=model_cycles(twill_row.get("decision")))
    results.setdefault("timings", []).append(record)
    print(f"timed     {case.kernel:9s} {case.config:18s} {case.size_str:>14s} stock {ms['triton']:.4f} ms "
          f"twill {ms['twill']:.4f} ms stock/twill {record['ratio']:.3f}  model Triton / twill cycles per "
          f"iteration: {record['model']}", flush=True)


def model_cycles(dec):
    """The model's cycles per iteration, Triton's schedule / twill's, of
    each loop of the decision's report (scope_all.prediction: its
    schedule's `triton` record, or `compared` where Triton's was kept); "?"
    where one is unknown."""
    out = []
    for lp in ((dec or {}).get("report") or {}).get("loops") or []:
        _, ours, theirs = prediction(lp)
        out.append(" / ".join("?" if c is None else str(c) for c in (theirs, ours)))
    return ", ".join(out) or "-"


def rel_err(torch, got, ref):
    """(max |got - ref| / max |ref|, count of non-finite values in `got`);
    NaN where any value is not finite."""
    got = got.float()
    nonfinite = int((~torch.isfinite(got)).sum().item())
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    return (float("nan") if nonfinite else err), nonfinite


def write_results(out, results):
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    rows = results["rows"]
    counts = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines = [f"# Pointer-load kernels: stock Triton vs twill (scope=all), {results['device']}", "",
             f"Triton {results['triton']}, torch {results['torch']}, {results['date']}; schedules replayed from "
             f"`{results['replay']}` (recorded with Triton {results['recorded']['triton']} on "
             f"{results['recorded']['created']}).", "",
             f"Max relative error: max |out - ref| / max |ref| against float32 torch (attention: the worst of dQ, "
             f"dK, dV); correct at <= {results['tolerances']['matmul']:g} (matmul) / "
             f"{results['tolerances']['attn']:g} (attention). Each row: {results['launches_per_row']} launches, each on outputs poisoned with NaN; the worst "
             "error.", "",
             "Verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), "",
             "cp.async: the `ttg.async_copy_global_to_local` ops of the compiled kernel's TTGIR (0: Triton did not "
             "make its loads cp.async, so the row does not exercise the cp.async ring).", "",
             "| kernel | config | size | variant | verdict | max rel err | cp.async | twill |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        e = r.get("max_rel_err")
        errs = r.get("errors") or {}
        detail = " (" + ", ".join(f"{n} {'nan' if x is None else f'{x:.1e}'}" for n, x in errs.items()) + ")" \
            if len(errs) > 1 else ""
        verdict = f"**{r['verdict']}**" if r["verdict"] in ("WRONG", "error") else r["verdict"]
        twill = r.get("twill", "-")
        if r.get("note"):
            twill += f"; {r['note']}"
        lines.append(f"| {r['kernel']} | {r['config']} | {r['size']} | {r['variant']} | {verdict} | "
                     f"{'nan' if e is None else f'{e:.2e}'}{detail} | {r.get('cp_async', '?')} | "
                     f"{twill.replace('|', '/')} |")
    timings = results.get("timings") or []
    if timings:
        lines += ["", f"Paired timing (do_bench, {ROUNDS} rounds alternating stock and twill at the same "
                  "configuration; stock / twill > 1: twill faster), with the model's cycles per iteration of "
                  "each loop, Triton's schedule / twill's:", "",
                  "| kernel | config | size | stock ms | twill ms | stock / twill | twill | model |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {t['kernel']} | {t['config']} | {t['size']} | {t['stock_ms']:.4f} | {t['twill_ms']:.4f} | "
                  f"{t['ratio']:.3f} | {t['twill'].replace('|', '/')} | {t['model']} |" for t in timings]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'results.json'} and {out / 'table.md'}: " + ", ".join(f"{k} {v}"
                                                                               for k, v in sorted(counts.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", metavar="DIR", help="compile every twill variant for cuda:90 with twill-opt, "
                      "recording the schedules into DIR (no GPU)")
    mode.add_argument("--replay", metavar="DIR", help="replay the schedules recorded in DIR and check on the GPU")
    ap.add_argument("--out", metavar="DIR", help="where results.json and table.md go (GPU mode)")
    ap.add_argument("--dry-run", action="store_true", help="with --replay: build every launch and compile it "
                    "(stock and replayed) for cuda:90, no GPU needed, nothing launched")
    ap.add_argument("--repeats", type=int, default=5, help="launches per row (GPU mode), each on freshly "
                    "poisoned outputs; the row reports the worst (default 5)")
    ap.add_argument("--only", nargs="*", help="cases whose 'kernel config size' contains one of these strings")
    args = ap.parse_args()
    if args.record:
        return record(args.record, args.only)
    if not Path(args.replay).is_dir():
        print(f"pointer_check: no replay directory {args.replay} (record it: bench/gpu/pointer_check.sh says how)",
              file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(args.replay, args.only)
    if not args.out:
        ap.error("--replay needs --out (or --dry-run)")
    return gpu_run(args.replay, args.out, args.only, args.repeats)


if __name__ == "__main__":
    sys.exit(main())
