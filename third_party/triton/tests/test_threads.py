"""Compiling with twill from several threads at once (autotuners and
frameworks do) gives every kernel exactly what a sequential compile gives.

Several different kernels and launch options (pointer-load matmuls of three
configurations, the bias + ReLU matmul, the TMA matmul, FA forward
and head-dim-64 FA backward, and a loop with an `scf.if` in its body) are
compiled for cuda:90 and
cuda:100 on the CPU with twill enabled (scope=all): first one after another,
then by 8 threads at once, in several rounds, each round with a Triton cache
of its own so that every kernel is really compiled. For each (kernel,
options, target) the final TTGIR, twill's decision (scheduled or not, the
reason, the remarks) and the fallback warnings of the compile must be those
of the sequential compile. Decisions and warnings are collected per compile,
in the thread that compiles.

Twice: with the backend's own ttgir stage (twill calls a private copy of
`make_ttgir`; the backend module's globals must never change), and with the
stage wrapped by another stages hook (twill gives the module's globals
stand-ins that only the compiling thread sees as its recorders; every other
thread, whatever stage it runs, must still get the real objects).

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import ast
import concurrent.futures
import hashlib
import logging
import os
import random
import re
import sys
import threading
import time
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
from triton import knobs  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import twill_triton  # noqa: E402
from kernels import load  # noqa: E402
from twill_triton import hook  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
THREADS = 8
ROUNDS = {"private": 3, "swap": 2}

pytestmark = pytest.mark.skipif(not Path(TWILL_OPT).exists(), reason="twill-opt not built")


KERNELS = Path(__file__).parent / "kernels"
pointer_matmul = load("twill_threads_pointer_matmul", KERNELS / "pointer_matmul.py")
tma_matmul = load("twill_threads_tma_matmul", KERNELS / "matmul.py")
loop_with_if = load("twill_threads_loop_with_if", REPO / "test" / "Inputs" / "triton36" / "test_kernels.py")
fa_fwd = load("twill_threads_fa_fwd", KERNELS / "fa_fwd.py")
fa_bwd = load("twill_threads_fa_bwd", KERNELS / "fa_bwd.py")


def _pointer(kernel, config):
    return lambda: pointer_matmul.ast_source(kernel, **config)


def _tma():
    cfg = dict(tma_matmul.DEFAULT_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return tma_matmul.make_ast_source(**cfg), opts


def _fa_fwd():
    cfg = dict(fa_fwd.DEFAULT_CONFIGS[90])
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in cfg}
    return fa_fwd.make_ast_source(**cfg), opts


def _fa_bwd_hd64():
    kwargs, opts = fa_bwd.split_config(fa_bwd.CONFIGS["hd64"][90])
    return fa_bwd.make_ast_source(**kwargs), opts


def _loop_with_if():
    cfg = dict(loop_with_if.LOOP_WITH_IF_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return loop_with_if.make_ast_source(**cfg), opts


# (name, capability) -> a fresh (ASTSource, options). Three of the pointer
# matmul's configurations (4 and 8 warps, 2 to 4 stages) keep the test short.
POINTER_CONFIGS = ("128x64x64_w4_s4", "128x256x64_w8_s3", "128x128x32_w4_s2")
JOBS = {}
for _name in POINTER_CONFIGS:
    for _cap in (90, 100):
        JOBS[(f"matmul {_name}", _cap)] = _pointer("matmul", pointer_matmul.CONFIGS[_name])
for _name, _config in pointer_matmul.BIAS_CONFIGS.items():
    for _cap in (90, 100):
        JOBS[(f"bias_relu {_name}", _cap)] = _pointer("bias_relu", _config)
for _cap in (90, 100):
    JOBS[("tma matmul", _cap)] = _tma
JOBS[("fa_fwd", 90)] = _fa_fwd
JOBS[("fa_bwd hd64", 90)] = _fa_bwd_hd64
JOBS[("loop_with_if", 90)] = _loop_with_if

def _twill_schedules(job):
    """Whether twill's schedule reaches the kernel of `job` (else Triton's)."""
    kernel, cap = job
    # On cuda:100 the TMA matmul's best schedule within its num_stages is
    # Triton's own assignment (same_as_triton): Triton's schedule is used.
    return not (cap == 100 and kernel.startswith("tma matmul"))


# Per compiling thread: where the decisions and warnings of its compile go.
_sink = threading.local()
_stray = []


class _PerThreadDecisions(list):
    """hook._decisions during the test: every decision also goes to the
    compiling thread's sink."""

    def append(self, d):
        super().append(d)
        getattr(_sink, "decisions", _stray).append(d)


class _PerThreadWarnings(logging.Handler):

    def emit(self, record):
        getattr(_sink, "warnings", _stray).append(record.getMessage())


def _remark(text):
    # The solver's time in a remark ("..., 0.04s (proven optimal") varies
    # from run to run.
    return re.sub(r"\b\d+(\.\d+)?s\b", "<t>s", text)


def _compile(job, start=None):
    """One compile of `job`: its final TTGIR (a digest), decisions and
    warnings, or the error it raised."""
    if start is not None:
        start.wait()
    _sink.decisions, _sink.warnings = [], []
    try:
        src, opts = JOBS[job]()
        k = triton.compile(src, target=GPUTarget("cuda", job[1], 32), options=opts)
        ttgir = hashlib.sha256(k.asm["ttgir"].encode()).hexdigest()
        error = None
    except Exception as e:  # compared like the rest: a sequential compile raises none
        ttgir, error = None, f"{type(e).__name__}: {e}"
    decisions = [(d.kernel, d.capability, d.scheduled, d.reason, [_remark(r) for r in d.remarks])
                 for d in _sink.decisions]
    out = {"ttgir": ttgir, "error": error, "decisions": decisions, "warnings": list(_sink.warnings)}
    del _sink.decisions, _sink.warnings
    return out


def _difference(got, want):
    """What a threaded compile got that the sequential one did not."""
    out = {k: got[k] for k in ("error", "warnings") if got[k] != want[k]}
    if got["ttgir"] != want["ttgir"]:
        out["ttgir"] = "differs"
    if got["decisions"] != want["decisions"]:
        out["decisions"] = [(d[0], d[1], d[2], d[3][:80]) for d in got["decisions"]]
    return out


_AST_LOCK = threading.Lock()
_AST_PARSE = ast.parse


def _serial_ast_parse(*args, **kwargs):
    """`ast.parse` one thread at a time. CPython 3.11 keeps the AST
    constructor's recursion depth in state shared by threads, so two
    concurrent parses can fail with "SystemError: AST constructor recursion
    depth mismatch" (python/cpython#106905). Triton's front end parses each
    kernel's source; the race is CPython's, not the hook's, and would fail
    stock Triton the same way."""
    with _AST_LOCK:
        return _AST_PARSE(*args, **kwargs)


def _enable(monkeypatch, cache):
    """twill on, with Triton cache directory `cache` (twill_triton.enable
    puts its own under it), a tie in the model keeping twill's schedule
    (as conftest's, for the module-scoped fixtures), and Python's parser
    serialized."""
    monkeypatch.setattr(ast, "parse", _serial_ast_parse)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    twill_triton.enable(twill_opt=TWILL_OPT, scope="all", ties="twill")


class _Watch:
    """Polls the backend module's `ir`, `passes` and `nvidia` while
    compiles run and keeps every value that is not the real one."""

    def __init__(self, module, real):
        self.module, self.real, self.seen = module, real, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        g = vars(self.module)
        while not self._stop.is_set():
            for k, v in self.real.items():
                if g.get(k) is not v:
                    self.seen.add((k, type(g.get(k)).__name__))
            time.sleep(0.0005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _wrapping_hook(*args):
    """Another stages hook that wraps the ttgir stage (so twill cannot see
    the backend's own make_ttgir)."""
    if not args:  # Triton >= 3.7 asks for a cache-key suffix
        key = "wrapped-ttgir"
        return key, hashlib.sha256(key.encode()).hexdigest()
    stages = args[1]
    inner = stages["ttgir"]
    stages["ttgir"] = lambda src, metadata: inner(src, metadata)


@pytest.fixture(scope="module")
def per_thread():
    """twill's decisions and warnings go to the compiling thread's sink
    (and hook._decisions is a list of the module's own)."""
    handler = _PerThreadWarnings(logging.WARNING)
    logging.getLogger("twill").addHandler(handler)
    _stray.clear()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(hook, "_decisions", _PerThreadDecisions())
            yield
    finally:
        logging.getLogger("twill").removeHandler(handler)
    assert not _stray, _stray[:5]


@pytest.fixture(scope="module")
def reference(per_thread, tmp_path_factory):
    """Every job compiled one after another, in this thread."""
    with pytest.MonkeyPatch.context() as mp:
        _enable(mp, tmp_path_factory.mktemp("sequential"))
        try:
            return {job: _compile(job) for job in JOBS}
        finally:
            twill_triton.disable()


def _backend_globals():
    from triton._C.libtriton import ir, nvidia, passes

    return sys.modules["triton.backends.nvidia.compiler"], {"ir": ir, "passes": passes, "nvidia": nvidia}


def test_sequential_reference(reference):
    for job, want in reference.items():
        assert want["error"] is None and want["ttgir"], (job, want)
        assert len(want["decisions"]) == 1, (job, want)
    # Kernels twill schedules, and those it leaves to Triton with a warning:
    # the loop with control flow, and on cuda:100 the pointer-load kernels,
    # whose loads the schedule puts stages ahead of a tcgen05 MMA that holds
    # its ring slot (a decision twill refuses).
    scheduled = {job: want["decisions"][0][2] for job, want in reference.items()}
    assert scheduled == {job: _twill_schedules(job) for job in JOBS}
    assert [bool(want["warnings"]) for want in reference.values()] == [not _twill_schedules(job) for job in JOBS]
    module, real = _backend_globals()
    assert all(vars(module)[k] is v for k, v in real.items())


@pytest.mark.parametrize("stage", ["private", "swap"])
def test_threaded_compiles_match_sequential(reference, tmp_path, monkeypatch, stage):
    module, real = _backend_globals()
    assert all(vars(module)[k] is v for k, v in real.items())
    if stage == "swap":
        monkeypatch.setattr(knobs.runtime, "add_stages_inspection_hook", _wrapping_hook)
    for rnd in range(ROUNDS[stage]):
        _enable(monkeypatch, tmp_path / f"round{rnd}")
        jobs = list(JOBS)
        random.Random(rnd).shuffle(jobs)
        start = threading.Event()
        try:
            with _Watch(module, real) as watch:
                with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
                    futures = {job: pool.submit(_compile, job, start) for job in jobs}
                    start.set()
                    got = {job: f.result() for job, f in futures.items()}
        finally:
            twill_triton.disable()
        wrong = {job: _difference(got[job], reference[job]) for job in JOBS if got[job] != reference[job]}
        assert not wrong, (stage, rnd, len(wrong), wrong)
        if stage == "private":
            # No compile ever changed the backend module's globals.
            assert not watch.seen, watch.seen
        else:
            # They held the stand-ins while the wrapped stages ran.
            assert {kind for _, kind in watch.seen} == {"_ThreadStandIn"}, watch.seen
        assert all(vars(module)[k] is v for k, v in real.items())
