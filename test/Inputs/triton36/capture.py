#!/usr/bin/env python3
"""Capture real Triton 3.6.0 TTGIR around the loop scheduler, in generic form.

NOTE on capture points: the {gemm,fa_fwd}_{sm90,sm100} and loop_with_if_sm90
modules stop just before passes.ttgpuir.add_assign_latencies.  The two *_w4
modules (fa_fwd_sm90_w4, gemm_sm90_w4) stop earlier, just before
nvidia.passes.hopper.add_hopper_warpspec (Hopper automatic warp
specialisation, which precedes add_assign_latencies on cuda:9x): their loop
carries `tt.warp_specialize` and num_warps is 4, and in Triton 3.6.0 that pass
then fails on both kernels ("'tt.descriptor_store' op tensor descriptor block
and tensor types must match", pipeline failed in NVGPUWarpSpecialization), so
nothing at or after it can be captured.  (At num_warps=8, fa_fwd_sm90's
default, the pass leaves the loop alone instead, which is why fa_fwd_sm90
gets through.)  A *_w4 "before" file is thus the input Triton's Hopper warp
specialisation would see, not the scheduler's input; it has no
triton_latencies / triton_schedule twins.

Regenerate (CPU-only machine is fine, no torch needed):

    python3 -m venv /work/venvs/triton36
    /work/venvs/triton36/bin/pip install triton==3.6.0
    /work/venvs/triton36/bin/python test/Inputs/triton36/capture.py          # from the repo root
    # optional: --out DIR, --only gemm_sm90 (repeatable; any module NAME below),
    #           --mlir-opt /usr/bin/mlir-opt-22

For every module NAME in {gemm,fa_fwd}_{sm90,sm100} this writes into the
output directory (default: this script's directory):

    NAME.before.pretty.mlir            TTGIR just before passes.ttgpuir.add_assign_latencies
    NAME.before.mlir                   same, MLIR generic form
    NAME.triton_latencies.pretty.mlir  after Triton's add_assign_latencies only
    NAME.triton_latencies.mlir         same, generic form
    NAME.triton_schedule.pretty.mlir   after Triton's add_assign_latencies + add_schedule_loops
    NAME.triton_schedule.mlir          same, generic form
    passes_cuda90.txt / passes_cuda100.txt   the make_ttgir pass list, in order

Further modules, "before" snapshot only (NAME.before.mlir + NAME.before.pretty.mlir):

    fa_fwd_subtile_sm90  fa_fwd's "subtile" configuration on cuda:90 (two 64-row
                       halves per iteration); TTGIR just before add_assign_latencies

    fa_fwd_causal_subtile_sm90  the same, causal ("causal_subtile"): two loops, the
                       K blocks left of the diagonal block, then the diagonal's, masked

    fa_fwd_sm90_w4     fa_fwd_sm90 (same kernel and config) but num_warps=4; TTGIR
                       just before nvidia.passes.hopper.add_hopper_warpspec (see NOTE)
    fa_bwd_hd64_sm90   fa_bwd's hd64 configuration at 32-row steps (BLOCK_M1 =
                       BLOCK_N2 = 32), num_warps=4, no warp specialization; TTGIR
                       just before add_assign_latencies (two loops; the first
                       mixes descriptor and pointer loads)
    fa_bwd_hd128_sm90  fa_bwd's hd128 configuration (num_warps=8, 64-row steps,
                       warp_specialize); TTGIR just before add_assign_latencies
                       (two loops: the loops of the Gluon backward as written)
    fa_bwd_hd128_dqsub_sm90  the same with DQ_SUBTILE (the dQ loop on two
                       64-row halves) and BLOCK_N2 = 128: the loops of the
                       Gluon backward's plan
    fa_fwd_causal_sm90  fa_fwd's "causal" configuration (8 warps, both loops
                       marked warp_specialize); TTGIR just before
                       nvidia.passes.hopper.add_hopper_warpspec
    fa_fwd_subtile_sm90_w4  fa_fwd_subtile_sm90 at num_warps=4; TTGIR just before
                       nvidia.passes.hopper.add_hopper_warpspec
    fa_fwd_causal_subtile_sm90_w4  fa_fwd_causal_subtile_sm90 at num_warps=4; TTGIR
                       just before nvidia.passes.hopper.add_hopper_warpspec
    gemm_sm90_w4       matmul.matmul_tma_ws_kernel (the GEMM with its K loop as
                       `tl.range(..., warp_specialize=True)`), DEFAULT_CONFIG
                       (num_warps=4, num_stages=3); TTGIR just before
                       nvidia.passes.hopper.add_hopper_warpspec (see NOTE)
    persistent_tma_sm90  persistent_matmul.persistent_tma_kernel (the
                       fixtures' persistent TMA GEMM: fused tile and K loops,
                       the tile's set-up and epilogue under scf.ifs); cuda:90,
                       num_warps=4, num_stages=3; ".triton_schedule" only
    pointer_matmul_sm100  pointer_matmul's matmul at 64x128x32, num_warps=4,
                       num_stages=4, cuda:100: pointer loads (and their masks)
                       feeding a tcgen05 MMA; TTGIR just before
                       add_assign_latencies
    loop_with_if_sm90  test_kernels.loop_with_if_kernel (next to this script): a
                       block-sparse GEMM loop whose body keeps an `scf.if` (the
                       branch on a flag loaded from memory guards a load and a
                       dot); cuda:90, num_warps=4, num_stages=3; TTGIR just before
                       passes.ttgpuir.add_assign_latencies, like the main modules

How it works
------------
* Kernels come from third_party/triton/tests/kernels/{matmul,fa_fwd,fa_bwd}.py
  (the Python package's test fixtures) and from
  test_kernels.py next to this script, and are compiled with
  `triton.compile(ASTSource(...), target=GPUTarget("cuda", cap, 32))`.
* `triton.knobs.runtime.add_stages_inspection_hook` swaps the "ttgir" stage
  for a wrapper that runs the backend's own `make_ttgir` with its module
  globals `ir`, `passes`, `nvidia` replaced by recording proxies: every
  `passes.*.add_*(pm, ...)` call is recorded instead of applied, and the
  fake pass manager's `run()` replays the recorded calls on a real pass
  manager up to (excluding) `add_assign_latencies` (the *_w4 modules:
  `add_hopper_warpspec`) -- or up to and including `add_schedule_loops` for
  the ".triton_schedule" snapshot.  So the passes
  are exactly those of the installed make_ttgir, same order, same arguments.
  The module is printed there and compilation is aborted (one compilation
  per snapshot).
* Generic form: Triton's bindings only print the custom (pretty) form and do
  not register MLIR's `--mlir-print-op-generic` option (there is no env var
  or knob for it either).  But MLIR's printer falls back to the generic form
  for an op that fails verification.  So the live module gets an invalid
  `llvm.data_layout = 0 : i32` attribute (the LLVM dialect requires a
  string), `str()` then prints it generically, and that one attribute is
  removed from the text.  Everything else is MLIR's own generic printer
  output (properties, locations, aliases), printed from the real module, not
  from a re-parse of the pretty text (a re-parse would invent locations for
  block arguments, which the custom syntax of scf.for does not print).
* Each generic file is checked: (1) Triton's own parser reads it back and
  prints exactly the .pretty.mlir text; (2) every `#alias` it uses is
  defined in it; (3) `mlir-opt-22 --allow-unregistered-dialect` parses it,
  prints it generically, and re-parses that.

Caveats for consumers of the generic files
------------------------------------------
* Upstream MLIR (no Triton dialects registered) keeps `!tt.*`, `!ttg.*` types
  and `#ttg.*`, `#ttng.*` attributes as opaque text.  Alias references
  *inside* an opaque type body (`!ttg.memdesc<128x64xf16, #shared, #smem>`,
  `!tt.tensordesc<tensor<128x64xf16, #shared>>`) are therefore never
  resolved by mlir-opt, and `mlir-opt --mlir-print-op-generic` output drops
  the `#shared = ...` definitions (it inlines aliases it can see, e.g. in
  `tensor<..., #mma>`, but not inside opaque bodies).  Use the captured
  files themselves, not an mlir-opt re-print, and resolve `#alias` names
  from the top-of-file definitions.
* Locations are kept (`loc(#locN)` plus `#locN = loc(...)` definitions,
  most at the end of the file, some at the top); they contain absolute
  paths of this checkout and of the venv.  Both mlir-opt-22 and Triton parse
  them fine.  `mlir-opt --mlir-print-debuginfo` is needed to keep them.
* SSA names come from Triton's NameLoc prefixes (`%acc_17`, `%kv_row:4`);
  they are cosmetic.
"""

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton._C.libtriton import ir
import triton.backends.nvidia.compiler as nv_compiler

import test_kernels  # next to this script

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
# The Python package's test fixtures (third_party/triton/tests/kernels).
KERNELS = REPO / "third_party" / "triton" / "tests" / "kernels"


def _fixture(name):
    spec = importlib.util.spec_from_file_location(name, KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fa_bwd = _fixture("fa_bwd")
persistent_matmul = _fixture("persistent_matmul")
fa_fwd = _fixture("fa_fwd")
matmul = _fixture("matmul")
pointer_matmul = _fixture("pointer_matmul")

SPLIT_FIRST = "passes.ttgpuir.add_assign_latencies"
SPLIT_LAST = "passes.ttgpuir.add_schedule_loops"
SNAPSHOTS = ("before", "triton_latencies", "triton_schedule")
# Earlier capture point for the *_w4 modules (see the NOTE at the top).
HOPPER_WARPSPEC = "nvidia.passes.hopper.add_hopper_warpspec"


class StopCapture(Exception):
    pass


# --------------------------------------------------------------------------
# Recording proxies for make_ttgir's module globals.
# --------------------------------------------------------------------------
class _PassRecorder:
    """Stands in for `passes` / `nvidia` (and their submodules)."""

    def __init__(self, target, path):
        self._target = target
        self._path = path

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        path = f"{self._path}.{name}"
        if isinstance(attr, types.ModuleType):
            return _PassRecorder(attr, path)
        if callable(attr) and name.startswith("add_"):

            def record(pm, *args):
                assert isinstance(pm, _RecordingPassManager), path
                pm.calls.append((path, attr, args))

            return record
        return attr


class _RecordingPassManager:

    def __init__(self, context, on_run):
        self.context = context
        self.calls = []
        self._on_run = on_run

    def enable_debug(self):
        # Same answer as a real pass manager (true iff MLIR_ENABLE_DUMP is set).
        return ir.pass_manager(self.context).enable_debug()

    def run(self, mod, tag):
        self._on_run(self, mod, tag)


class _IRProxy:
    """`ir` with `pass_manager` replaced; everything else is the real module."""

    def __init__(self, on_run):
        self._on_run = on_run

    def pass_manager(self, context):
        return _RecordingPassManager(context, self._on_run)

    def __getattr__(self, name):
        return getattr(ir, name)


def _run_segment(mod, context, calls, tag):
    pm = ir.pass_manager(context)
    pm.enable_debug()
    for _path, fn, args in calls:
        fn(pm, *args)
    pm.run(mod, tag)


# --------------------------------------------------------------------------
# Generic printing.
# --------------------------------------------------------------------------
BOGUS_ATTR = "llvm.data_layout"


def generic_text(mod):
    """Print `mod` in MLIR generic form, then leave it unusable.

    Triton's `module.str()` only prints the custom form, but MLIR's printer
    falls back to the generic form when the printed op fails verification.
    We make the module invalid with an `llvm.data_layout = 0 : i32` attribute
    (the LLVM dialect requires a string there), print, and strip that one
    attribute from the text.  The module stays poisoned (there is no binding
    to remove an attribute), so the caller must not run passes on it again.
    """
    assert mod.verify(), "module should verify before poisoning"
    mod.set_attr(BOGUS_ATTR, ir.builder(mod.context).get_int32_attr(0))
    text = mod.str()
    assert '"builtin.module"()' in text, "printer did not fall back to generic form"
    # The poison sits in the module's attribute dictionary (printed sorted).
    pat = re.compile(r"\b" + re.escape(BOGUS_ATTR) + r" = 0 : i32(, )?")
    text, n = pat.subn("", text)
    assert n == 1, f"expected exactly one {BOGUS_ATTR}, found {n}"
    text = text.replace("}) {} : () -> ()", "}) : () -> ()")
    return text


# --------------------------------------------------------------------------
# Capture driver.
# --------------------------------------------------------------------------
def capture(ast_source, capability, options, stop, stop_before=SPLIT_FIRST):
    """Compile `ast_source` for cuda:`capability` and stop inside make_ttgir.

    stop == "before":          run make_ttgir up to (excluding) `stop_before`
                               (default add_assign_latencies)
    stop == "triton_latencies": ... and also add_assign_latencies
    stop == "triton_schedule": ... and also add_assign_latencies + add_schedule_loops
    (the last two only with the default `stop_before`).
    Returns {"passes": [...], "pretty": str, "generic": str}.
    """
    assert stop == "before" or stop_before == SPLIT_FIRST, (stop, stop_before)
    out = {}

    def on_run(fake_pm, mod, tag):
        calls = fake_pm.calls
        names = [c[0] for c in calls]
        out["passes"] = names
        i = names.index(stop_before)
        if stop_before == SPLIT_FIRST:
            assert names[i + 1] == SPLIT_LAST, names[i:i + 2]
            suffix = "_before_sched"
        else:
            suffix = "_before_" + stop_before.rsplit(".add_", 1)[-1]
        _run_segment(mod, mod.context, calls[:i], tag + suffix)
        if stop == "triton_latencies":
            _run_segment(mod, mod.context, calls[i:i + 1], tag + "_latencies")
        elif stop == "triton_schedule":
            _run_segment(mod, mod.context, calls[i:i + 2], tag + "_sched")
        out["pretty"] = mod.str()
        out["generic"] = generic_text(mod)  # poisons mod: stop here

    def hook(backend, stages, opts, language, cap):
        orig = stages["ttgir"]

        def ttgir_stage(src, metadata):
            g = vars(nv_compiler)
            saved = {k: g[k] for k in ("ir", "passes", "nvidia")}
            g["ir"] = _IRProxy(on_run)
            g["passes"] = _PassRecorder(saved["passes"], "passes")
            g["nvidia"] = _PassRecorder(saved["nvidia"], "nvidia")
            try:
                orig(src, metadata)
            finally:
                g.update(saved)
            raise StopCapture()

        stages["ttgir"] = ttgir_stage

    knobs.runtime.add_stages_inspection_hook = hook
    try:
        triton.compile(ast_source, target=GPUTarget("cuda", capability, 32), options=options)
    except StopCapture:
        pass
    finally:
        knobs.runtime.add_stages_inspection_hook = None
    assert "generic" in out, "make_ttgir did not run"
    return out


def modules():
    """(name, ast_source, capability, options, stop_before, snapshots) for
    every captured module."""
    mm = dict(matmul.DEFAULT_CONFIG)
    mm_opts = {k: mm.pop(k) for k in ("num_warps", "num_stages")}
    for cap in (90, 100):
        yield f"gemm_sm{cap}", matmul.make_ast_source(**mm), cap, mm_opts, SPLIT_FIRST, SNAPSHOTS
    for cap in (90, 100):
        cfg = dict(fa_fwd.DEFAULT_CONFIGS[cap])
        opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
        yield f"fa_fwd_sm{cap}", fa_fwd.make_ast_source(**cfg), cap, opts, SPLIT_FIRST, SNAPSHOTS

    # The sub-tiled forward (two 64-row halves per iteration) on sm90.
    cfg = dict(fa_fwd.CONFIGS["subtile"][90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    yield "fa_fwd_subtile_sm90", fa_fwd.make_ast_source(**cfg), 90, opts, SPLIT_FIRST, ("before", )
    # The same, causal: two loops, the K blocks left of the diagonal, then
    # the diagonal block, masked.
    cfg = dict(fa_fwd.CONFIGS["causal_subtile"][90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    yield "fa_fwd_causal_subtile_sm90", fa_fwd.make_ast_source(**cfg), 90, opts, SPLIT_FIRST, ("before", )

    # Hopper warp specialisation inputs (stop before add_hopper_warpspec).
    cfg = dict(fa_fwd.DEFAULT_CONFIGS[90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    assert cfg["WARP_SPECIALIZE"]
    opts["num_warps"] = 4
    yield "fa_fwd_sm90_w4", fa_fwd.make_ast_source(**cfg), 90, opts, HOPPER_WARPSPEC, ("before", )
    # The causal forward at its default 8 warps, both loops marked
    # warp_specialize: the K blocks left of the diagonal, then the
    # diagonal block, masked (twill lowers each to a ws op of its own).
    cfg = dict(fa_fwd.CONFIGS["causal"][90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    yield "fa_fwd_causal_sm90", fa_fwd.make_ast_source(**cfg), 90, opts, HOPPER_WARPSPEC, ("before", )
    # The sub-tiled forward at 4 warps: each 64-row half on one warp group's
    # layouts, the shape twill lowers to one compute partition per half.
    cfg = dict(fa_fwd.CONFIGS["subtile"][90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    opts["num_warps"] = 4
    yield "fa_fwd_subtile_sm90_w4", fa_fwd.make_ast_source(**cfg), 90, opts, HOPPER_WARPSPEC, ("before", )
    # The causal sub-tiled forward at 4 warps: two loops, each with the two
    # halves; the diagonal loop's mask columns are computed once and read
    # by both halves.
    cfg = dict(fa_fwd.CONFIGS["causal_subtile"][90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    opts["num_warps"] = 4
    yield ("fa_fwd_causal_subtile_sm90_w4", fa_fwd.make_ast_source(**cfg), 90, opts, HOPPER_WARPSPEC,
           ("before", ))
    assert mm_opts["num_warps"] == 4
    yield ("gemm_sm90_w4", matmul.make_ast_source(WARP_SPECIALIZE=True, **mm), 90, mm_opts, HOPPER_WARPSPEC,
           ("before", ))

    # The head-dim-64 backward at the Triton tutorial's 32-row steps and 4
    # warps (the configuration twill's model chooses on the H100): two loops,
    # the dK/dV loop streaming Q and dO through descriptors and M and Delta
    # through pointer loads (tt.load).
    cfg, opts = fa_bwd.split_config(dict(fa_bwd.CONFIGS["hd64"][90], BLOCK_M1=32, BLOCK_N2=32,
                                         WARP_SPECIALIZE=False, num_warps=4, num_stages=2))
    yield "fa_bwd_hd64_sm90", fa_bwd.make_ast_source(**cfg), 90, opts, SPLIT_FIRST, ("before", )
    # The head-dim-128 backward at the bench's configuration (8 warps,
    # 64-row steps, warp_specialize): the two loops of twill's Gluon
    # backward plan (bench/kernels/fa_bwd_gluon_plan.py).
    cfg, opts = fa_bwd.split_config(dict(fa_bwd.CONFIGS["hd128"][90]))
    yield "fa_bwd_hd128_sm90", fa_bwd.make_ast_source(**cfg), 90, opts, SPLIT_FIRST, ("before", )
    # The same with the dQ loop sub-tiled (DQ_SUBTILE) at 128-key steps:
    # the loops of the plan.
    cfg, opts = fa_bwd.split_config(dict(fa_bwd.CONFIGS["hd128"][90], DQ_SUBTILE=True, BLOCK_N2=128))
    yield "fa_bwd_hd128_dqsub_sm90", fa_bwd.make_ast_source(**cfg), 90, opts, SPLIT_FIRST, ("before", )

    # A loop whose body keeps an scf.if.
    cfg = dict(test_kernels.LOOP_WITH_IF_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    yield "loop_with_if_sm90", test_kernels.make_ast_source(**cfg), 90, opts, SPLIT_FIRST, ("before", )

    # The tutorial-style pointer-load matmul on sm100 (cp.async loads with
    # their masks into rings a tcgen05 MMA reads), num_warps=4,
    # num_stages=4.
    src, opts = pointer_matmul.ast_source("matmul", **pointer_matmul.CONFIGS["64x128x32_w4_s4"])
    yield "pointer_matmul_sm100", src, 100, opts, SPLIT_FIRST, ("before", )

    # The persistent TMA GEMM: after fuse_nested_loops one loop over (tile,
    # k) steps whose body keeps the tile's set-up and its epilogue under
    # scf.ifs; with Triton's own schedule on it (what twill's hook reads).
    src, opts = persistent_matmul.ast_source("tma")
    yield "persistent_tma_sm90", src, 90, opts, SPLIT_FIRST, ("triton_schedule", )


def check_with_mlir_opt(mlir_opt, path):
    base = [mlir_opt, "--allow-unregistered-dialect", str(path)]
    r = subprocess.run(base + ["-o", "/dev/null"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"parse failed:\n{r.stderr}"
    r = subprocess.run(base + ["--mlir-print-op-generic", "--mlir-print-debuginfo"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"generic print failed:\n{r.stderr}"
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(r.stdout)
        tmp = f.name
    try:
        r2 = subprocess.run([mlir_opt, "--allow-unregistered-dialect", tmp, "-o", "/dev/null"], capture_output=True,
                            text=True)
    finally:
        os.unlink(tmp)
    if r2.returncode != 0:
        return f"round trip re-parse failed:\n{r2.stderr}"
    return None


def check_with_triton(path, pretty_text, context):
    """The generic file must re-parse with Triton and print back as `pretty_text`."""
    back = ir.parse_mlir_module(str(path), context).str()
    return None if back == pretty_text else "Triton re-parse does not print back to the .pretty.mlir text"


def check_aliases(text):
    """Every `#alias` used must be defined in the file.

    Inside dialect types such as `!ttg.memdesc<..., #shared, #smem>` upstream
    MLIR keeps the body as opaque text, so an undefined alias there would not
    be diagnosed by mlir-opt.
    """
    no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    defined = set(re.findall(r"^(#[\w$.-]+) = ", no_strings, re.M))
    used = set(re.findall(r"(#[A-Za-z_][\w$.-]*)(?![\w$.<-])", no_strings))
    # Dialect attributes spelled without "<...>" (e.g. #ttng.tensor_memory)
    # are not aliases.
    used = {u for u in used if "." not in u}
    missing = sorted(used - defined)
    return f"undefined aliases: {missing}" if missing else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--mlir-opt", default="/usr/bin/mlir-opt-22")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    # Always recompile (the cache would skip make_ttgir), and keep the cache
    # out of the user's home directory.
    cache_dir = None
    if "TRITON_CACHE_DIR" not in os.environ:
        cache_dir = tempfile.TemporaryDirectory(prefix="twill-triton-cache-")
        os.environ["TRITON_CACHE_DIR"] = cache_dir.name
    knobs.compilation.always_compile = True
    assert triton.__version__ == "3.6.0", f"expected triton 3.6.0, got {triton.__version__}"

    # A context that knows Triton's dialects, for re-parsing the output.
    ctx = ir.context()
    ir.load_dialects(ctx)
    nv_compiler.CUDABackend(GPUTarget("cuda", 100, 32)).load_dialects(ctx)

    failures = []
    known = [m[0] for m in modules()]
    unknown = [n for n in args.only if n not in known]
    if unknown:
        ap.error(f"unknown --only {unknown}; modules: {', '.join(known)}")
    for name, src, cap, opts, stop_before, snapshots in modules():
        if args.only and name not in args.only:
            continue
        where = "" if stop_before == SPLIT_FIRST else f" (before {stop_before})"
        print(f"== {name}: cuda:{cap} {opts}{where}", flush=True)
        for key in snapshots:
            # One compilation per snapshot: printing generically poisons the
            # module, so nothing may run on it afterwards.
            out = capture(src, cap, opts, key, stop_before)
            (args.out / f"passes_cuda{cap}.txt").write_text("\n".join(out["passes"]) + "\n")
            (args.out / f"{name}.{key}.pretty.mlir").write_text(out["pretty"])
            gpath = args.out / f"{name}.{key}.mlir"
            gpath.write_text(out["generic"])
            errs = [check_aliases(out["generic"]), check_with_triton(gpath, out["pretty"], ctx)]
            if args.mlir_opt and Path(args.mlir_opt).exists():
                errs.append(check_with_mlir_opt(args.mlir_opt, gpath))
            errs = [e for e in errs if e]
            print(f"   {gpath.name}: {'OK' if not errs else 'FAIL'}")
            failures += [(gpath, e) for e in errs]
    if cache_dir is not None:
        cache_dir.cleanup()
    for path, err in failures:
        print(f"--- {path}\n{err}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
