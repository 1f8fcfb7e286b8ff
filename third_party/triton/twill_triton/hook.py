"""The stages hook that puts twill into Triton's `make_ttgir`.

Triton's pass list is never copied: the installed backend's own `make_ttgir`
runs with the globals `ir`, `passes` and `nvidia` replaced by recorders, so
every `passes.*.add_*(pm, ...)` call is recorded instead of applied. The
backend's module is not touched: each compilation calls a function of its
own, made from `make_ttgir`'s code and a copy of the module's globals, so
threads compiling at once never see each other's recorders. Only where the
ttgir stage is not the backend's own (another stages hook wrapped it) does
the module get, for the time of the stage, stand-ins for those globals that
give the compiling thread its recorders and every other thread the real
objects.

When `make_ttgir` runs its pass manager, the recorded list is split at
`add_assign_latencies` / `add_schedule_loops`: the first part runs on the
real module, twill schedules the loops, and the rest (from `add_pipeline` on)
runs on the module twill wrote. Where twill leaves some loop of the kernel to
Triton (it skipped it) and schedules another, Triton's two scheduling passes
run first and twill's attributes replace theirs on the loops it schedules. Whatever Triton version is installed, the
passes, their order and arguments are exactly its own.
"""

import contextlib
import functools
import hashlib
import inspect
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from . import cache
from ._binary import bundled_twill_opt

log = logging.getLogger("twill")

SPLIT_FIRST = "passes.ttgpuir.add_assign_latencies"
SPLIT_LAST = "passes.ttgpuir.add_schedule_loops"
# Triton's Hopper warp specialization (sm90), which splits a
# `warp_specialize=True` loop into partitions before the split point: where
# twill lowers such a loop (TWILL_LOWER=1), it does so before this pass.
HOPPER_WS = "nvidia.passes.hopper.add_hopper_warpspec"
# The typed report twill-opt writes (`--twill-schedule=report=PATH`,
# docs/report-schema.md); the hook and `configure` read its fields.
REPORT_SCHEMA = "twill.schedule-report/1"


class TwillError(RuntimeError):
    """twill could not schedule a kernel (raised only in strict mode)."""


class _Fallback(Exception):
    pass


@dataclass
class Decision:
    """What twill did to one kernel: the pass's report and remarks, and
    whether Triton compiled twill's schedule (False: Triton's own schedule
    was used)."""
    kernel: str
    capability: int
    scheduled: bool
    # The pass remarks, as printed (for people; rendered from the report).
    remarks: List[str] = field(default_factory=list)
    reason: str = ""
    dump: Optional[str] = None
    # The pipeline verifier's records (schema twill.pipeline-verify/1,
    # docs/pipeline-verifier.md), one per pipelined loop: of the pipeline
    # Triton built from twill's schedule, and (TWILL_VERIFY_TRITON) of
    # Triton's own where twill fell back.
    verification: List[dict] = field(default_factory=list)
    triton_verification: List[dict] = field(default_factory=list)
    # The pass's typed report (schema twill.schedule-report/1,
    # docs/report-schema.md): a record per loop and per kernel; None where
    # twill-opt did not run to the end.
    report: Optional[dict] = None
    # The report of the lowering call (TWILL_LOWER=1, `lower=only` before
    # Triton's Hopper warp specialization), same schema; None without it.
    lowering: Optional[dict] = None
    # Seconds twill added to the compile (wall clock; export, twill-opt and
    # parse): the attribute route's call(s), the lowering call, and the
    # final verification.
    schedule_seconds: float = 0.0
    lowering_seconds: float = 0.0
    verify_seconds: float = 0.0
    # Every twill-opt answer the kernel's schedule took (the attribute
    # route's calls and the lowering call) came from the schedule cache
    # (twill_triton.cache): twill-opt did not run for it.
    cached: bool = False
    # How the attribute route's answer was found in the schedule cache:
    # "compile" (by Triton's key of the compile and the source files, the
    # module not printed), "module" (by the module's print); None: not.
    cached_by: Optional[str] = None
    # The schedule cache's key of the attribute route's twill-opt call, the
    # digest of the module's print with its locations, and that of the
    # answer's module text (what Triton's passes turn into the pipeline).
    cache_key: Optional[str] = None
    located: Optional[str] = None
    answer_digest: Optional[str] = None
    # The pipeline verifier's records came from the cache.
    verify_cached: bool = False
    # Why the kernel twill lowered was given up for the attribute route
    # (Triton rejected it, or the verifier did not prove the pipeline
    # Triton built around it: a loop left to the attribute route beside a
    # lowered one); None: not.
    lowering_abandoned: Optional[str] = None

    def loop_records(self) -> List[dict]:
        """The loop records: the loops twill lowered (from the lowering
        call's report), then the attribute route's (none without a report),
        less the loops it found already lowered."""
        lowered = [r for r in (self.lowering or {}).get("loops") or [] if r.get("decision") == "scheduled"]
        rest = [r for r in (self.report or {}).get("loops") or [] if r.get("reason") != "lowered_by_twill"]
        return lowered + rest

    def lowered(self) -> List[str]:
        """Names of the loops twill replaced by its warp-specialized code."""
        return [r["name"] for r in (self.lowering or {}).get("loops") or [] if r.get("decision") == "scheduled"]


_lock = threading.Lock()
# The fallback interposition (_swapped): per backend module (its globals'
# __name__), [compilations in it, the module's own ir / passes / nvidia].
_swap_lock = threading.Lock()
_swaps = {}
_tls = threading.local()
_state = {"enabled": False, "prev_hook": None, "config": None, "cache": None}
_decisions: List[Decision] = []


def decisions() -> List[Decision]:
    """Decisions of this process so far, oldest first."""
    return list(_decisions)


def _add_decision(d):
    with _lock:
        _decisions.append(d)


def _env_bool(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def checkouts():
    """The twill checkouts this package can use, in order: the one it was
    installed from (recorded at build time), then the one it is imported
    from."""
    repos = [Path(__file__).resolve().parents[3]]
    try:
        from ._build_info import REPO

        repos.insert(0, Path(REPO))
    except ImportError:
        pass
    return repos


def _find_twill_opt(explicit=None):
    cand = explicit or os.environ.get("TWILL_OPT") or bundled_twill_opt() or shutil.which("twill-opt")
    if not cand:
        for repo in checkouts():
            guess = repo / "target" / "release" / "twill-opt"
            if guess.exists():
                cand = str(guess)
                break
    return cand


@dataclass
class Config:
    twill_opt: Optional[str]
    timeout: float
    scope: str
    strict: bool
    dump_dir: Optional[str]
    extra: str
    # Write twill's own warp partitions on sm100 (TWILL_PARTITIONS=0:
    # stages only there).
    partitions: bool = True
    # Also verify the pipelines of Triton's own schedules (where twill falls
    # back) and warn about those the verifier does not prove
    # (TWILL_VERIFY_TRITON=1).
    verify_triton: bool = False
    # Lower sm90 loops to twill's own warp-specialized code, verified before
    # it is emitted (TWILL_LOWER=1; docs/ws-lowering.md), before Triton's
    # Hopper warp specialization; the loops not lowered take the attribute
    # route.
    lower: bool = False
    # The solver's deterministic work budget per kernel, in millions of z3
    # resource units (TWILL_BUDGET; None: the pass's default; 0: none, the
    # timeout alone). The same kernel gets the same schedule on a busy and
    # on a quiet machine.
    budget: Optional[float] = None
    # Where twill's model gives Triton's own schedule of a loop the same I
    # as twill's, keep the deeper pipeline's ("deeper", the default:
    # Triton's where it has more stages, else twill's), twill's ("twill")
    # or Triton's ("triton"; TWILL_TIES). The pass option `ties=`
    # (docs/options.md, D25, D33).
    ties: str = "deeper"
    # A loop whose pipeline the pipeline verifier does not model (Triton's
    # sm100 warp specialization) is left to Triton before it is solved
    # ("skip", the default: the verifier would replace its schedule by
    # Triton's own) or solved anyway ("schedule"; TWILL_UNVERIFIABLE, for
    # its report). The pass option `unverifiable=`.
    unverifiable: str = "skip"


def _choice(value, env, allowed, what):
    """`value` (an `enable()` argument), else the environment variable `env`,
    else the first of `allowed`; lower case, one of `allowed`."""
    v = (value or os.environ.get(env, "") or allowed[0]).strip().lower()
    if v not in allowed:
        raise ValueError(f"twill: {what} must be {' or '.join(map(repr, sorted(allowed)))}, got {value!r}")
    return v


def _budget(budget):
    """The work budget of `enable(budget=...)`, else TWILL_BUDGET, in millions
    of z3 resource units; None for the pass's default."""
    if budget is None:
        budget = os.environ.get("TWILL_BUDGET", "").strip() or None
    if budget is None:
        return None
    value = float(budget)
    if not value >= 0:
        raise ValueError(f"twill: the work budget must be >= 0 (millions of z3 resource units), got {budget!r}")
    return value


def _config(twill_opt=None, timeout=None, scope=None, strict=None, dump_dir=None, extra="", verify_triton=None,
            lower=None, budget=None, ties=None, unverifiable=None):
    return Config(
        twill_opt=_find_twill_opt(twill_opt),
        timeout=float(timeout if timeout is not None else os.environ.get("TWILL_TIMEOUT", 30)),
        scope=scope or os.environ.get("TWILL_SCOPE", "ws"),
        strict=_env_bool("TWILL_STRICT") if strict is None else bool(strict),
        dump_dir=dump_dir if dump_dir is not None else os.environ.get("TWILL_DUMP_DIR") or None,
        # Extra pass options (`twill-opt --twill-schedule` syntax, e.g.
        # "objective=slack loads=last"): the argument, else TWILL_OPTIONS.
        extra=extra or os.environ.get("TWILL_OPTIONS", "").strip(),
        partitions=os.environ.get("TWILL_PARTITIONS", "1").strip().lower() not in ("0", "false", "no", "off"),
        verify_triton=_env_bool("TWILL_VERIFY_TRITON") if verify_triton is None else bool(verify_triton),
        lower=_env_bool("TWILL_LOWER") if lower is None else bool(lower),
        budget=_budget(budget),
        ties=_choice(ties, "TWILL_TIES", ("deeper", "twill", "triton"), "ties"),
        unverifiable=_choice(unverifiable, "TWILL_UNVERIFIABLE", ("skip", "schedule"), "unverifiable"),
    )


_hashes = {}


def _binary_hash(path):
    """The first 16 hex digits of the SHA-256 of the binary at `path`
    ("missing" hashed where there is none), read once per process and file
    version (path, size, modification time)."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        st = None
    memo = (path, st.st_size, st.st_mtime_ns, st.st_ino) if st else None
    if memo in _hashes:
        return _hashes[memo]
    h = hashlib.sha256()
    try:
        if not path:
            raise OSError("no path")
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        h.update(b"missing")
    digest = h.hexdigest()[:16]
    if memo is not None:
        _hashes[memo] = digest
    return digest


def _identity(twill_opt):
    """twill-opt's identity in cache entries: its binary's hash (its
    machine descriptions, solver and version are compiled in)."""
    return _binary_hash(twill_opt)


def _machine_file_digest(extra):
    """For a `machine=PATH` pass option naming a file: " machine-file=" and
    the hash of its content (the same path may hold another machine);
    empty otherwise."""
    for opt in extra.split():
        name, _, value = opt.partition("=")
        if name == "machine" and os.path.isfile(value):
            return f" machine-file={hashlib.sha256(Path(value).read_bytes()).hexdigest()[:16]}"
    return ""


def _cache_key(cfg):
    """What makes a twill compilation differ from Triton's: the twill binary
    (hence its machine descriptions and solver) and the pass options."""
    replay = os.environ.get("TWILL_REPLAY_DIR", "")
    return (f"twill-{_binary_hash(cfg.twill_opt)}-{cfg.scope}-{cfg.timeout}-{cfg.budget}-{cfg.ties}-{cfg.unverifiable}-{cfg.extra}"
            f"-{'p' if cfg.partitions else 'np'}-{'l' if cfg.lower else 'nl'}-{replay}")


def enable(twill_opt=None, timeout=None, scope=None, strict=None, dump_dir=None, extra_options="",
           verify_triton=None, lower=None, budget=None, ties=None, unverifiable=None):
    """Schedule the loops of every Triton kernel compiled from now on with
    twill. Arguments override the environment (see the package doc)."""
    import triton
    from triton import knobs

    cfg = _config(twill_opt, timeout, scope, strict, dump_dir, extra_options, verify_triton, lower, budget, ties,
                  unverifiable)
    if (not cfg.twill_opt or not os.path.exists(cfg.twill_opt)) and not os.environ.get("TWILL_REPLAY_DIR"):
        raise TwillError("twill-opt not found: set TWILL_OPT, put it on PATH, or build it "
                         "(cargo build --release); or set TWILL_REPLAY_DIR to replay recorded schedules")
    with _lock:
        if not _state["enabled"]:
            _state["prev_hook"] = knobs.runtime.add_stages_inspection_hook
        _state["config"] = cfg
        knobs.runtime.add_stages_inspection_hook = _hook
        # Triton 3.6's cache key ignores the stages hook: give twill's
        # compilations a cache directory of their own, keyed by twill's
        # binary and options (3.7+ also get the key through the hook).
        if _state["cache"] is None:
            _state["cache"] = (knobs.cache.__dict__.get("dir"), os.environ.get("TRITON_CACHE_DIR"))
        base = _state["cache"][0] or os.environ.get("TRITON_CACHE_DIR") or knobs.cache.dir
        key = hashlib.sha256(_cache_key(cfg).encode()).hexdigest()[:24]
        knobs.cache.dir = os.path.join(base, "twill", key)
        _state["enabled"] = True
    log.debug("twill enabled: %s (triton %s)", cfg, triton.__version__)


def disable():
    """Back to Triton's own scheduling (and cache directory)."""
    from triton import knobs

    with _lock:
        if not _state["enabled"]:
            return
        knobs.runtime.add_stages_inspection_hook = _state["prev_hook"]
        saved_dir, saved_env = _state["cache"]
        if saved_dir is None:
            knobs.cache.__dict__.pop("dir", None)
        else:
            knobs.cache.dir = saved_dir
        if saved_env is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved_env
        _state.update(enabled=False, prev_hook=None, cache=None)


def is_enabled():
    return _state["enabled"]


def _hook(*args):
    cfg = _state["config"]
    if not args:
        # Triton >= 3.7 asks the hook for a cache-key suffix and its hash.
        key = _cache_key(cfg)
        prev = _state["prev_hook"]
        if prev is not None:
            pkey, _ = prev()
            key = pkey + key
        return key, hashlib.sha256(key.encode()).hexdigest()
    backend, stages, options, language, capability = args
    prev = _state["prev_hook"]
    if prev is not None:
        prev(*args)
    if "ttgir" not in stages or type(backend).__name__ != "CUDABackend":
        return
    if getattr(language, "name", str(language)).upper().endswith("GLUON"):
        return
    stages["ttgir"] = functools.partial(_ttgir_stage, stages["ttgir"], backend, options, capability, cfg)


# --------------------------------------------------------------------------
# Recording proxies for make_ttgir's module globals.
# --------------------------------------------------------------------------
class _PassRecorder:

    def __init__(self, target, path):
        self._target = target
        self._path = path

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        path = f"{self._path}.{name}"
        if isinstance(attr, types.ModuleType):
            return _PassRecorder(attr, path)
        if callable(attr) and name.startswith("add_"):

            def record(pm, *a):
                pm.calls.append((path, attr, a))

            return record
        return attr


class _RecordingPassManager:

    def __init__(self, ir, context, on_run):
        self._ir = ir
        self.context = context
        self.calls = []
        self._on_run = on_run

    def enable_debug(self):
        return self._ir.pass_manager(self.context).enable_debug()

    def run(self, mod, tag):
        self._on_run(self, mod, tag)


class _IRProxy:

    def __init__(self, ir, on_run):
        self._ir = ir
        self._on_run = on_run

    def pass_manager(self, context):
        return _RecordingPassManager(self._ir, context, self._on_run)

    def __getattr__(self, name):
        return getattr(self._ir, name)


def leaves_loops_to_triton(report) -> bool:
    """Whether twill scheduled some loop of a kernel and left another to
    Triton's own schedule (by the report's decisions; a loop twill lowered
    earlier is not left to Triton)."""
    decisions = {r["decision"] for r in (report or {}).get("loops") or [] if r.get("reason") != "lowered_by_twill"}
    return {"scheduled", "skipped"} <= decisions


def _run(ir, mod, calls, tag):
    pm = ir.pass_manager(mod.context)
    pm.enable_debug()
    for _path, fn, a in calls:
        fn(pm, *a)
    pm.run(mod, tag)


def _ttgir_stage(orig, backend, options, capability, cfg, src, metadata):
    from triton._C.libtriton import ir

    result = {}
    compiled = _triton_compile(metadata)

    def on_run(fake_pm, mod, tag):
        calls = fake_pm.calls
        names = [c[0] for c in calls]
        if SPLIT_FIRST not in names or names[names.index(SPLIT_FIRST) + 1:][:1] != [SPLIT_LAST]:
            _record(cfg, mod, capability, None, f"{SPLIT_FIRST} + {SPLIT_LAST} not found in make_ttgir")
            _run(ir, mod, calls, tag)
            result["mod"] = mod
            return
        i = names.index(SPLIT_FIRST)
        h = names.index(HOPPER_WS) if cfg.lower and capability // 10 == 9 and HOPPER_WS in names[:i] else None
        if h is None:
            _run(ir, mod, calls[:i], tag + "_before_twill")
            base, lowered, resume, lowering_seconds = mod, None, i, 0.0
        else:
            base, lowered, resume, lowering_seconds = _lower_first(ir, mod, calls, h, i, capability, options, cfg,
                                                                   tag, compiled)
        # `rest`: where Triton's own pass list resumes on `mod` if twill falls
        # back (`mod` is untouched from Hopper WS on when twill lowered).
        rest = i + 2 if base is mod else resume
        try:
            try:
                result["mod"] = attribute_route(calls, i, tag, base, lowered, lowering_seconds)
            except _Fallback as e:
                if lowered is None:
                    raise
                # The lowered kernel did not make it (Triton rejected it, or
                # the verifier did not prove the pipeline Triton built around
                # it): the kernel again without the lowering, from Triton's
                # Hopper warp specialization on.
                log.warning("twill: %s: the lowered kernel falls back to the attribute route: %s", lowered.kernel, e)
                _run(ir, mod, calls[h:i], tag + "_before_twill")
                rest = i + 2
                result["mod"] = attribute_route(calls, i, tag, mod, None, lowering_seconds, abandoned=str(e))
        except _Fallback as e:
            d = getattr(e, "decision", None) or Decision(kernel=mod.get_entry_func_name(), capability=capability,
                                                         scheduled=False)
            _run(ir, mod, calls[rest:], tag)
            result["mod"] = mod
            if cfg.verify_triton:
                d.triton_verification = _verify(ir, mod, cfg, d, "verify-triton")
                for r in d.triton_verification:
                    if r.get("verdict") != "proved":
                        log.warning("twill: Triton's own pipeline of %s: %s", d.kernel, _verdict_text(r))
            _record(cfg, mod, capability, d, str(e))

    def attribute_route(calls, i, tag, base, lowered, lowering_seconds, abandoned=None):
        """Triton's scheduling passes and twill's schedule on `base` (after
        a lowering: the loops it left), the rest of Triton's passes and the
        verifier's proof: the module, or _Fallback."""
        # Triton schedules every loop first (its `assign_latencies` and
        # `schedule_loops`); twill-opt then runs once on the kernel, and its
        # schedule replaces Triton's on the loops it schedules. A loop twill
        # skips keeps Triton's schedule (without one it would reach the
        # pipeliner unpipelined).
        _run(ir, base, calls[i:i + 2], tag + "_triton_schedule")
        try:
            # After a lowering the module here depends on what it lowered:
            # found by its print alone.
            new, decision = _schedule(ir, base, capability, options, cfg,
                                      compile_id=compiled if lowered is None else None)
        except _Fallback as e:
            if lowered is None:
                raise
            # Every loop was lowered, or is left to Triton's schedule.
            log.info("twill: %s: no loop for the attribute route: %s", lowered.kernel, e)
            failed = getattr(e, "decision", None) or lowered
            new, decision = base, Decision(kernel=lowered.kernel, capability=capability, scheduled=True,
                                           dump=lowered.dump, report=failed.report,
                                           schedule_seconds=failed.schedule_seconds if failed is not lowered else 0,
                                           cached=failed.cached)
        if lowered is not None:
            decision.lowering = lowered.report
            decision.cached = decision.cached and lowered.cached
            decision.remarks = lowered.remarks + decision.remarks
        decision.lowering_abandoned = abandoned
        try:
            _run(ir, new, calls[i + 2:], tag + "_after_twill")
        except Exception as e:  # Triton rejected the schedule
            raise _Fallback(f"Triton rejected twill's schedule: {e}") from e
        # No pipeline built from twill's schedule reaches make_llir without
        # the verifier's proof.
        decision.lowering_seconds = lowering_seconds
        started = time.monotonic()
        decision.verification = _verify(ir, new, cfg, decision, "verify",
                                        _pipeline_key(decision, calls[i + 2:], capability))
        decision.verify_seconds = time.monotonic() - started
        unproved = [r for r in decision.verification if r.get("verdict") != "proved"]
        if unproved:
            e = _Fallback("the pipeline verifier did not prove the pipeline Triton built from twill's "
                          "schedule: " + "; ".join(_verdict_text(r) for r in unproved))
            e.decision = decision
            _remember_unproved(cfg, decision, str(e))
            raise e
        _add_decision(decision)
        return new

    def recorders(real):
        return {"ir": _IRProxy(real["ir"], on_run), "passes": _PassRecorder(real["passes"], "passes"),
                "nvidia": _PassRecorder(real["nvidia"], "nvidia")}

    private = _private_make_ttgir(orig, backend, options, capability, recorders)
    if private is not None:
        private(src, metadata, options, capability)
    else:
        # Not the backend's own stage (another hook wrapped it, or another
        # Triton): the module's globals stand in for the recorders in this
        # thread only.
        with _swapped(vars(sys.modules[type(backend).__module__]), recorders):
            orig(src, metadata)
    final = result["mod"]
    if hasattr(final, "get_tensordesc_metadata"):
        metadata["tensordesc_meta"] = final.get_tensordesc_metadata()
    return final


def _remember_unproved(cfg, decision, reason):
    """Marks the schedule cache's entry of the kernel's twill-opt call: the
    pipeline Triton built from it was not proved, so a warm compile falls
    back at once (falling back needs no proof; a proof is only ever taken
    from the verifier's own entry of the pipeline, keyed by the pipelined
    module or by the inputs it is made from: _pipeline_key)."""
    store = cache.location()
    if store is None or store.read_only or not decision.cache_key:
        return
    found = cache.load(store, cache.SCHEDULES, decision.cache_key, _identity(cfg.twill_opt))
    if found is not None:
        value = dict(found, unproved={"reason": reason, "loops": decision.verification})
        cache.store(store, cache.SCHEDULES, decision.cache_key, _identity(cfg.twill_opt), value)


def _lower_first(ir, mod, calls, h, i, capability, options, cfg, tag, compile_id=None):
    """Triton's passes up to its Hopper warp specialization (`calls[h]`),
    then twill-opt with `lower=only`: the loops twill lowers (each proved by
    the pipeline verifier before it is emitted) become its warp-specialized
    code, in a new module, and Triton's list goes on there up to the split
    point `i` (Hopper warp specialization finds those loops gone). Returns
    (the module to schedule at the split point, the lowering's Decision or
    None where nothing was lowered, where Triton's list resumes on `mod` if
    twill falls back, the lowering call's seconds)."""
    _run(ir, mod, calls[:h], tag + "_before_lowering")
    started = time.monotonic()
    try:
        low, lowered = _schedule(ir, mod, capability, options, cfg, lower="only", compile_id=compile_id)
    except _Fallback as e:
        log.info("twill: %s: nothing lowered: %s", mod.get_entry_func_name(), e)
        _run(ir, mod, calls[h:i], tag + "_before_twill")
        return mod, None, i, time.monotonic() - started
    for name in lowered.lowered():
        log.info("twill: lowered %s to warp-specialized code (verified)", name)
    _run(ir, low, calls[h:i], tag + "_after_lowering")
    return low, lowered, h, time.monotonic() - started


def _private_make_ttgir(orig, backend, options, capability, recorders):
    """The backend's `make_ttgir` as a function of its own whose globals are
    a copy of its module's with `recorders(real globals)` in place of `ir`,
    `passes` and `nvidia`, or None where `orig` is not the backend's own
    stage `lambda src, metadata: self.make_ttgir(src, metadata, options,
    capability)` (checked on its code and closure) or that function cannot
    be rebuilt so. Calling it as `(src, metadata, options, capability)` is
    what `orig(src, metadata)` does, without touching any module."""
    cls = type(backend)
    code = getattr(orig, "__code__", None)
    # A lambda of the backend class's add_stages (or a base class's).
    defined = [vars(c)["add_stages"].__code__.co_consts for c in cls.__mro__
               if hasattr(vars(c).get("add_stages"), "__code__")]
    if code is None or not any(code in consts for consts in defined):
        return None
    if code.co_names != ("make_ttgir",) or code.co_argcount != 2:
        return None
    try:
        cells = {name: cell.cell_contents for name, cell in zip(code.co_freevars, orig.__closure__ or ())}
    except ValueError:  # an empty cell
        return None
    if (set(cells) != {"self", "options", "capability"} or cells["self"] is not backend
            or cells["options"] is not options or cells["capability"] != capability):
        return None
    if "make_ttgir" in vars(backend):
        return None
    static = inspect.getattr_static(cls, "make_ttgir", None)
    fn = getattr(static, "__func__", None)
    if not isinstance(static, staticmethod) or not isinstance(fn, types.FunctionType):
        return None
    real = fn.__globals__
    names = {"ir", "passes", "nvidia"}
    if not names <= set(real):
        return None
    for name in fn.__code__.co_names:
        # A function of the same module that make_ttgir calls would see the
        # real globals, not the recorders.
        other = real.get(name)
        if (isinstance(other, types.FunctionType) and other.__globals__ is real
                and names & set(other.__code__.co_names)):
            return None
    with _swap_lock:
        glb = dict(real)
        swapped = _swaps.get(real.get("__name__"))
        if swapped is not None:  # the module's own objects, not the stand-ins
            glb.update(swapped[1])
    glb.update(recorders(glb))
    private = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, fn.__closure__)
    private.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    private.__qualname__ = fn.__qualname__
    return private


class _ThreadStandIn:
    """Stands for a backend module global (`ir`, `passes` or `nvidia`)
    while some thread compiles through `_swapped`: that thread's recorder,
    the module's own object for every other thread."""

    def __init__(self, name, real):
        self._name = name
        self._real = real

    def __getattr__(self, attr):
        recorders = getattr(_tls, "recorders", None)
        return getattr(recorders[self._name] if recorders else self._real, attr)


@contextlib.contextmanager
def _swapped(g, recorders):
    """Within the block, the calling thread reads module globals `g`'s `ir`,
    `passes` and `nvidia` as `recorders(the module's own)`; other threads
    read the module's own, and the module gets them back when the last such
    block ends."""
    key = g.get("__name__")
    with _swap_lock:
        entry = _swaps.get(key)
        if entry is None:
            own = {k: g[k] for k in ("ir", "passes", "nvidia")}
            entry = _swaps[key] = [0, own]
            g.update({k: _ThreadStandIn(k, v) for k, v in own.items()})
        entry[0] += 1
    outer = getattr(_tls, "recorders", None)
    _tls.recorders = recorders(entry[1])
    try:
        yield
    finally:
        _tls.recorders = outer
        with _swap_lock:
            entry[0] -= 1
            if entry[0] == 0:
                g.update(entry[1])
                del _swaps[key]


def _record(cfg, mod, capability, decision, reason):
    try:
        kernel = mod.get_entry_func_name()
    except Exception:
        kernel = "?"
    d = decision or Decision(kernel=kernel, capability=capability, scheduled=False)
    d.scheduled = False
    d.reason = reason
    _add_decision(d)
    msg = f"twill: kernel {kernel} (cuda:{capability}) uses Triton's own schedule: {reason}"
    if cfg.strict:
        raise TwillError(msg)
    log.warning(msg)


# --------------------------------------------------------------------------
# Export, twill-opt, import.
# --------------------------------------------------------------------------
_BOGUS_ATTR = "llvm.data_layout"
_ALIAS_DEF = re.compile(r"^([#!][\w.$-]+) = ", re.M)


def _generic_text(ir, mod, workdir, printed=None):
    """The module in MLIR generic form, printed by Triton's own printer
    (`printed`: its custom form with locations, where the caller has it).

    Triton's bindings print only the custom form, but MLIR's printer falls
    back to the generic form for an op that fails verification. A copy of the
    module (parsed back from its custom form) gets an invalid
    `llvm.data_layout = 0 : i32`, is printed, and that attribute is removed
    from the text. The live module is never touched.
    """
    path = Path(workdir) / "export.pretty.mlir"
    path.write_text(mod.str() if printed is None else printed)
    copy = ir.parse_mlir_module(str(path), mod.context)
    copy.context = mod.context
    copy.set_attr(_BOGUS_ATTR, ir.builder(mod.context).get_int32_attr(0))
    text = copy.str()
    if '"builtin.module"()' not in text:
        raise _Fallback("Triton's printer did not produce the generic form")
    text, n = re.subn(r"\b" + re.escape(_BOGUS_ATTR) + r" = 0 : i32(, )?", "", text)
    if n != 1:
        raise _Fallback("could not strip the export marker attribute")
    return text.replace("}) {} : () -> ()", "}) : () -> ()")


def _restore_aliases(exported, scheduled):
    """Upstream MLIR keeps Triton's types opaque, so alias names used inside
    them (`!ttg.memdesc<128x64xf16, #shared, #smem>`) lose their definitions
    when twill-opt prints the module; put back the exported ones it lacks
    (location aliases excepted: twill-opt prints its own)."""
    have = set(_ALIAS_DEF.findall(scheduled))
    lines = []
    for line in exported.splitlines():
        m = _ALIAS_DEF.match(line)
        if m and m.group(1) not in have and not m.group(1).startswith("#loc"):
            lines.append(line)
    return "\n".join(lines) + ("\n" if lines else "") + scheduled


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
# A string literal (kept whole: a user's string may hold `loc(`), or a
# location (not a name ending in `loc`, such as `@alloc(`).
_LOC_OR_STRING = re.compile(_STRING.pattern + r'|(?<![\w.$@"])loc\(')


def _strip_locations(text):
    """`text` without location information: `#loc` definitions and every
    `loc(...)` outside string literals (balanced parentheses, those in
    its own strings, such as a file name, not counted)."""
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#loc"))
    out, i = [], 0
    while True:
        m = _LOC_OR_STRING.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        if m.group(0).startswith('"'):
            out.append(text[i:m.end()])
            i = m.end()
            continue
        out.append(text[i:m.start()])
        i = _after_parens(text, m.end() - 1)


def _after_parens(text, k):
    """The index after the parenthesis that closes the one at `k`, string
    literals skipped (the end of `text` where none closes it)."""
    depth = 0
    while k < len(text):
        c = text[k]
        if c == '"':
            m = _STRING.match(text, k)
            k = m.end() if m else len(text)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    return k


def replay_key(exported, options=""):
    """A key of an exported module that ignores what differs between machines
    compiling the same kernel with the same Triton: locations (absolute source
    paths) and SSA value names; `options`, the pass options that change the
    schedule, are part of it."""
    text = options + "\n" + _strip_locations(exported)
    names = {}
    text = re.sub(r"%[A-Za-z_$.][\w$.-]*|%\d+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)
    text = re.sub(r"[ \t]+", " ", text)
    return hashlib.sha256(text.encode()).hexdigest()


def module_key(mod, options="", printed=None):
    """The cache key of a module as Triton prints it without locations (its
    custom form: the same for the same kernel and Triton on any machine),
    with `options`, the pass options that change the answer. `printed`:
    the module's print with its locations where the caller has it (a print
    of a kernel costs milliseconds; its locations are stripped here).
    Cheaper than an export: a warm compile never exports."""
    text = options + "\n" + _strip_locations(mod.str() if printed is None else printed)
    return hashlib.sha256(text.encode()).hexdigest()


def _replayed(key):
    """The answer a TWILL_DUMP_DIR made by an older hook, copied to
    TWILL_REPLAY_DIR, recorded for the replay key `key` (its `key.txt`
    files), in the cache's form; None where there is none."""
    root = os.environ.get("TWILL_REPLAY_DIR")
    if not root:
        return None
    for k in sorted(Path(root).rglob("key.txt")):
        if k.read_text().strip() != key:
            continue
        scheduled, remarks = k.parent / "scheduled.mlir", k.parent / "remarks.txt"
        report = _read_json(k.parent / "report.json")
        # A recorded answer that scheduled no loop has its report alone; a
        # report of scheduled loops without their module is a dump cut short.
        if not scheduled.exists() and (report is None or any(
                lp.get("decision") == "scheduled" for lp in report.get("loops") or [])):
            continue
        return {"module": scheduled.read_text() if scheduled.exists() else None,
                "stderr": remarks.read_text() if remarks.exists() else "",
                "report": report}
    return None


def _read_json(path):
    """The JSON object in `path`, or None where it is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _remark_lines(stderr):
    """twill's diagnostics in twill-opt's stderr, as printed."""
    return [ln for ln in stderr.splitlines() if "twill" in ln and ("remark:" in ln or "error:" in ln)]


def _read_report(path, decision):
    """The report twill-opt wrote to `path`; _Fallback where it is missing
    or of another schema."""
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError) as ex:
        e = _Fallback(f"twill-opt wrote no readable report ({ex})")
        e.decision = decision
        raise e
    return _checked_report(report, decision)


def _checked_report(report, decision):
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        got = report.get("schema") if isinstance(report, dict) else type(report).__name__
        e = _Fallback(f"twill-opt's report has schema {got!r}; this package reads {REPORT_SCHEMA}")
        e.decision = decision
        raise e
    return report


def _skip_reasons(report):
    """Why no loop was scheduled: each loop's reason text (`text`)."""
    return "; ".join(r.get("text") or r.get("reason") or "?" for r in report.get("loops") or [])


def _num_stages(options):
    """Triton's `num_stages` of the compile (0 when the options have none:
    no bound)."""
    n = getattr(options, "num_stages", 0)
    return n if isinstance(n, int) and n >= 0 else 0


def _arch(capability):
    if capability // 10 == 9:
        return "sm90"
    if capability // 10 >= 10:
        return "sm100"
    raise _Fallback(f"twill has no machine model for cuda:{capability}")


def _triton_version():
    import triton

    m = re.match(r"(\d+)\.(\d+)", triton.__version__)
    return f"{m.group(1)}.{m.group(2)}" if m else "3.6"


def _schedule(ir, mod, capability, options, cfg, lower=None, compile_id=None):
    """Runs twill-opt on `mod` (with `lower=...` when given); returns (new
    module, Decision) or raises _Fallback. The Decision's schedule_seconds
    is the call's wall time. `compile_id`: Triton's key of the compile and
    the kernel's file (_triton_compile), by which a warm compile finds its
    answer without printing the module (_indexed)."""
    started = time.monotonic()
    try:
        new, decision = _schedule_once(ir, mod, capability, options, cfg, lower, compile_id)
    except _Fallback as e:
        if getattr(e, "decision", None) is not None:
            e.decision.schedule_seconds += time.monotonic() - started
        raise
    decision.schedule_seconds += time.monotonic() - started
    return new, decision


def _schedule_once(ir, mod, capability, options, cfg, lower, compile_id):
    kernel = mod.get_entry_func_name()
    arch = _arch(capability)
    # The options that change the schedule are part of the key: a
    # schedule recorded with other options is never replayed.
    lowering = f" lower={lower}" if lower else ""
    # Triton's num_stages bounds the schedule's stages (a loop's own
    # tt.num_stages, in the exported module, wins for that loop).
    stages = f" num-stages={_num_stages(options)}"
    budget = f" budget={cfg.budget:g}" if cfg.budget is not None else ""
    opts = (f"{arch} scope={cfg.scope} partitions={cfg.partitions}{lowering}{stages}{budget} ties={cfg.ties} "
            f"unverifiable={cfg.unverifiable} {cfg.extra}").strip()
    key_options = f"{opts} triton={_triton_version()} timeout={cfg.timeout:g}{_machine_file_digest(cfg.extra)}"
    with tempfile.TemporaryDirectory(prefix="twill-") as tmp:
        work = Path(tmp)
        store = cache.location()
        identity = _identity(cfg.twill_opt)
        compiled = _compile_key(store, cfg, compile_id, key_options)
        hit = _indexed(store, compiled, identity)
        if hit is not None:
            ckey, located, found = hit
            decision = Decision(kernel=kernel, capability=capability, scheduled=False, located=located,
                                cache_key=ckey, cached=True, cached_by="compile")
            log.info("twill: %s: schedule from the cache %s (key %s, by Triton's key of the compile)", kernel,
                     store.root, ckey[:16])
            return _answer(ir, mod, work, found, decision, cfg)
        # One print of the module, with its locations: its digest names the
        # source the answer, its remarks and the kernel's line info were made
        # from (the cache's entries and the dump's name); the cache key is
        # that print without its locations.
        printed = mod.str()
        located = hashlib.sha256(printed.encode()).hexdigest()
        if cfg.dump_dir:
            work = Path(cfg.dump_dir) / f"{kernel}-cuda{capability}-{located[:12]}"
            work.mkdir(parents=True, exist_ok=True)
        decision = Decision(kernel=kernel, capability=capability, scheduled=False,
                            dump=str(work) if cfg.dump_dir else None, located=located)
        # Keyed by Triton's own print of the module: a hit costs no export.
        ckey = module_key(mod, key_options, printed)
        found = _located(cache.load(store, cache.SCHEDULES, ckey, identity), located, store, kernel)
        decision.cache_key = ckey
        exported = None
        if found is None or cfg.dump_dir:
            exported = _generic_text(ir, mod, work, printed)
            key = replay_key(exported, opts)
            (work / "input.mlir").write_text(exported)
            (work / "key.txt").write_text(key + "\n")
            if found is None and store is not None and store.read_only:
                found = _replayed(key)
        if found is not None:
            decision.cached, decision.cached_by = True, "module"
            _index(store, compiled, ckey, located, printed, identity)
            log.info("twill: %s: schedule from the cache %s (key %s)", kernel, store.root, ckey[:16])
            return _answer(ir, mod, work, found, decision, cfg)
        if not cfg.twill_opt or not os.path.exists(cfg.twill_opt):
            e = _Fallback(f"no twill-opt and no cache entry for key {ckey[:16]}")
            e.decision = decision
            raise e
        found = _run_twill_opt(exported, work, arch, lowering + stages, cfg, decision, store)
        try:
            new, decision = _answer(ir, mod, work, found, decision, cfg)
        except _Fallback:
            cache.store(store, cache.SCHEDULES, ckey, identity, dict(found, located=located))
            _index(store, compiled, ckey, located, printed, identity)
            raise
        # Stored as Triton prints the parsed module (its custom form, which
        # a warm compile parses faster than twill-opt's generic form); the
        # answer's digest is that text's, as a warm compile computes it.
        answer = new.str()
        decision.answer_digest = hashlib.sha256(answer.encode()).hexdigest()
        cache.store(store, cache.SCHEDULES, ckey, identity, dict(found, module=answer, located=located))
        _index(store, compiled, ckey, located, printed, identity)
        return new, decision


def _triton_compile(metadata):
    """Triton's key of this compile (its metadata's `hash`: the kernel's
    source and starting line, its specialization, the options, the target
    and Triton's version) with the file of the kernel's source, which that
    key leaves out; None where either is unknown."""
    triton_hash = metadata.get("hash") if isinstance(metadata, dict) else None
    kernel_file = _kernel_file()
    return f"{triton_hash}:{kernel_file}" if triton_hash and kernel_file else None


def _kernel_file():
    """The source file of the kernel Triton's `compile` is compiling (its
    `src.fn`, the JIT function), found on the stack; None where there is
    none (a module compiled from IR)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "compile" and code.co_filename.endswith(os.path.join("compiler", "compiler.py")):
            fn = getattr(frame.f_locals.get("src"), "fn", None)
            for _ in range(8):
                if hasattr(fn, "__code__"):
                    return fn.__code__.co_filename
                fn = getattr(fn, "fn", None)
            return None
        frame = frame.f_back
    return None


# A file location in a module's print: `"FILE":LINE:COL`.
_FILE_LOCATION = re.compile(r'"([^"\\]*)":\d+:\d+')


def _compile_key(store, cfg, compile_id, key_options):
    """The key of this twill-opt call by `compile_id` (Triton's key of the
    compile and the kernel's file: the module at this point but for the
    locations of other files, which _indexed checks), every setting
    of twill's (_cache_key) and the call's own options; None where there is
    no writable cache, no Triton key, or a dump directory to fill."""
    if store is None or store.read_only or not compile_id or cfg.dump_dir:
        return None
    return hashlib.sha256(f"{compile_id}\n{_cache_key(cfg)}\n{key_options}".encode()).hexdigest()


def _source_files(printed):
    """The files the module's locations name, each with the SHA-256 of its
    contents; None where one cannot be read."""
    files = {}
    for path in set(_FILE_LOCATION.findall(printed)):
        try:
            files[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            return None
    return files


def _index(store, compiled, ckey, located, printed, identity):
    """Records under Triton's key of the compile (`compiled`) the schedule
    entry `ckey` of the module printed as `printed` (digest `located`), with
    the source files its locations name: a warm compile of the same kernel
    from the same files takes that entry without printing the module."""
    if compiled is None:
        return
    files = _source_files(printed)
    if files is not None:
        cache.store(store, cache.COMPILES, compiled, identity,
                    {"schedule_key": ckey, "located": located, "files": files})


def _indexed(store, compiled, identity):
    """(schedule key, located digest, entry) recorded under Triton's key of
    the compile where every source file the module's locations named still
    has the same contents (so the module would print the same, locations
    included) and the entry was made from that print; None otherwise (the
    compile then prints the module and looks it up by its own key)."""
    if compiled is None:
        return None
    hit = cache.load(store, cache.COMPILES, compiled, identity)
    if hit is None or not isinstance(hit.get("files"), dict):
        return None
    for path, digest in hit["files"].items():
        try:
            if hashlib.sha256(Path(path).read_bytes()).hexdigest() != digest:
                return None
        except OSError:
            return None
    ckey, located = hit.get("schedule_key"), hit.get("located")
    found = cache.load(store, cache.SCHEDULES, ckey, identity) if isinstance(ckey, str) else None
    if found is None or found.get("located") != located:
        return None
    return ckey, located, found


def _located(found, located, store, kernel):
    """The cache entry `found` where it was made from this module with its
    locations (`located`, the digest of its print with them); None (a miss)
    where it was made from the same code at other locations (the kernel's
    file moved, lines shifted): its module, remarks and line info would
    name that source. A replay directory's entries come from another
    machine and are taken whatever their locations."""
    if found is None or store is None or store.read_only or found.get("located") == located:
        return found
    log.info("twill: %s: the cache entry was made from this code at other source locations; "
             "scheduling again", kernel)
    return None


def _run_twill_opt(exported, work, arch, more, cfg, decision, store):
    """Runs twill-opt on the exported module, with its per-loop cache in
    `store` (none where that is off or a replay directory): the cache value
    of its answer (`module`: the scheduled module's text, None where no loop
    was scheduled; `stderr`; `report`). `more`: pass options of this call
    (` lower=...`, ` num-stages=...`). Raises _Fallback where twill-opt
    fails."""
    inp = work / "input.mlir"
    out = work / "output.mlir"
    pass_opts = f"arch={arch} triton={_triton_version()} scope={cfg.scope} timeout={cfg.timeout:g}"
    if cfg.budget is not None:
        pass_opts += f" budget={cfg.budget:g}"
    pass_opts += f" ties={cfg.ties} unverifiable={cfg.unverifiable}"
    if arch == "sm100" and not cfg.partitions:
        # Stages only: Triton's partition scheduler partitions around
        # them. By default twill writes its own partitions (sm100), solved
        # under the colocation rules Triton's warp specialization needs,
        # or stages only where no such assignment exists (the remark says
        # why).
        pass_opts += " partitions=false"
    pass_opts += more
    if cfg.extra:
        pass_opts += " " + cfg.extra
    report_path = work / "report.json"
    # Quoted: a dump directory's path may hold spaces.
    pass_opts += f' report="{report_path}"'
    pass_opts += f' cache="{store.root}"' if store is not None and not store.read_only else " cache=off"
    cmd = [
        cfg.twill_opt,
        str(inp),
        f"--twill-schedule={pass_opts}",
        "--mlir-print-op-generic",
        "--mlir-print-debuginfo",
        "-o",
        str(out),
    ]
    if cfg.dump_dir:
        (work / "command.txt").write_text(" ".join(f"'{c}'" if " " in c else c for c in cmd) + "\n")
    try:
        # A loop gets `timeout` seconds; allow for several loops and startup.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=4 * cfg.timeout + 60)
    except subprocess.TimeoutExpired:
        e = _Fallback(f"twill-opt did not finish within {4 * cfg.timeout + 60:g} s")
        e.decision = decision
        raise e
    decision.remarks = _remark_lines(r.stderr)
    if r.returncode != 0:
        if cfg.dump_dir:
            (work / "remarks.txt").write_text(r.stderr)
        e = _Fallback(f"twill-opt failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
        e.decision = decision
        raise e
    report = _read_report(report_path, decision)
    scheduled = any(lp.get("decision") == "scheduled" and lp.get("reason") != "lowered_by_twill"
                    for lp in report.get("loops") or [])
    text = _restore_aliases(exported, out.read_text()) if scheduled else None
    return {"module": text, "stderr": r.stderr, "report": report}


def _answer(ir, mod, work, found, decision, cfg):
    """The kernel's module from twill-opt's answer `found` (fresh or from
    the cache): parsed back where some loop was scheduled; _Fallback with
    the loops' reasons otherwise."""
    decision.remarks = _remark_lines(found.get("stderr") or "")
    report = found.get("report")
    if report is None:
        e = _Fallback("the replay entry has no report.json (recorded before the typed report, "
                      f"{REPORT_SCHEMA}); record it again")
        e.decision = decision
        raise e
    decision.report = _checked_report(report, decision)
    if cfg.dump_dir:
        (work / "remarks.txt").write_text(found.get("stderr") or "")
        (work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    unproved = found.get("unproved")
    if isinstance(unproved, dict):
        decision.verification = unproved.get("loops") or []
        e = _Fallback(unproved.get("reason") or "the pipeline verifier did not prove the pipeline")
        e.decision = decision
        raise e
    scheduled = [lp for lp in decision.loop_records() if lp["decision"] == "scheduled"]
    text = found.get("module")
    if not scheduled or text is None:
        e = _Fallback(_skip_reasons(decision.report) or "no candidate loop")
        e.decision = decision
        raise e
    decision.answer_digest = hashlib.sha256(text.encode()).hexdigest()
    for lp in scheduled:
        s = lp["schedule"]
        log.info("twill: scheduled %s: I=%d (~%d cycles) L=%d stages=%d, partitions: %s", lp["name"], s["ii"],
                 s["ii_cycles"], s["length"], s["stages"], s["partitions"]["text"])
    return _parse_back(ir, mod, work, text, decision)


def _verdict_text(record):
    """One line of a verifier record: its verdict and why."""
    loop = f"loop {record.get('loc', '?')}"
    if record.get("verdict") == "rejected":
        return f"{loop}: rejected: " + "; ".join(
            f"rule {v['rule']}: {v['text']}" for v in record.get("violations", [])[:3])
    if record.get("verdict") == "unsupported":
        u = record.get("unsupported") or {}
        return f"{loop}: not verified: {u.get('why', '?')} ({u.get('op', '?')})"
    return f"{loop}: {record.get('verdict')}"


def _pipeline_key(decision, calls, capability):
    """The key of the pipeline Triton builds from twill's answer: the
    answer itself (Decision.answer_digest, the module text parsed back)
    with the key and locations it was made for (.cache_key, .located), the
    passes Triton runs on it (`calls`, with their arguments), the target,
    Triton's own build key and the environment variables Triton's cache is
    keyed by. Triton's passes are deterministic functions of these
    (Triton's own cache relies on that), so a pipeline verified for this
    key is that pipeline: a warm compile takes its verification without
    printing the pipelined module. None where the answer has no key
    (nothing to take from the cache)."""
    if not decision.cache_key or not decision.located or not decision.answer_digest:
        return None
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars
        from triton.runtime.cache import triton_key

        built, env = triton_key(), sorted(get_cache_invalidating_env_vars().items())
    except (ImportError, AttributeError):
        return None
    passes = [(path, repr(a)) for path, _fn, a in calls]
    text = json.dumps([decision.cache_key, decision.located, decision.answer_digest, capability, passes, built,
                       env])
    return hashlib.sha256(text.encode()).hexdigest()


def _verify(ir, mod, cfg, decision, name, pipeline_key=None):
    """The pipeline verifier's records for the pipelined loops of `mod`
    (the TTGIR make_ttgir hands to make_llir): from the schedule cache
    (twill_triton.cache) where it holds them for the same module (its
    print's key, or `pipeline_key`, _pipeline_key of the inputs that made
    it), else `twill-opt --twill-verify-pipeline` on its generic form (its
    records are then stored in the cache under both keys). No record for a
    module that has pipelined loops is a failure (nothing proved). With a
    dump directory, the module and the report are kept in its subdirectory
    `name`."""
    store = cache.location()
    identity = _identity(cfg.twill_opt)
    if pipeline_key is not None and not decision.dump:
        stored = _verification_entry(cache.load(store, cache.VERIFY, pipeline_key, identity))
        if stored is not None:
            if name == "verify":
                decision.verify_cached = True
            return stored["loops"]
    with tempfile.TemporaryDirectory(prefix="twill-verify-") as tmp:
        work = Path(decision.dump) / name if decision.dump else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        printed = mod.str()
        ckey = module_key(mod, "verify-pipeline", printed)
        stored = _verification_entry(cache.load(store, cache.VERIFY, ckey, identity))
        if stored is None or decision.dump:
            text = _generic_text(ir, mod, work, printed)
            key = replay_key(text, "verify-pipeline")
            (work / "pipelined.mlir").write_text(text)
            (work / "verify.key").write_text(key + "\n")
            if stored is None and store is not None and store.read_only:
                stored = _replayed_verification(key)
        if stored is not None:
            if name == "verify":
                decision.verify_cached = True
            if pipeline_key is not None:
                cache.store(store, cache.VERIFY, pipeline_key, identity, stored)
            if decision.dump:
                # The dump is whole (a replay reads it) wherever its records came from.
                (work / "verify.json").write_text(json.dumps({"loops": stored["loops"]}, indent=2) + "\n")
            return stored["loops"]
        if not cfg.twill_opt or not os.path.exists(cfg.twill_opt):
            return [{"verdict": "unsupported", "loc": "?",
                     "unsupported": {"why": f"no twill-opt and no recorded verification for key {key[:16]}",
                                     "op": ""}}]
        report = work / "verify.json"
        cmd = [cfg.twill_opt, str(work / "pipelined.mlir"), f"--twill-verify-pipeline=report={report}",
               "-o", os.devnull]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return [{"verdict": "unsupported", "loc": "?",
                     "unsupported": {"why": "the verifier did not finish within 300 s", "op": ""}}]
        if r.returncode != 0 or not report.exists():
            return [{"verdict": "unsupported", "loc": "?",
                     "unsupported": {"why": f"twill-opt --twill-verify-pipeline failed: {r.stderr[-300:]}",
                                     "op": ""}}]
        loops = json.loads(report.read_text())["loops"]
        for entry_key in filter(None, (ckey, pipeline_key)):
            cache.store(store, cache.VERIFY, entry_key, identity, {"loops": loops})
        return loops


def _verification_entry(stored):
    """`stored` where it is an entry of the verifier's records, else None
    (a miss)."""
    return stored if stored is not None and isinstance(stored.get("loops"), list) else None


def _replayed_verification(key):
    """Verifier records stored under TWILL_REPLAY_DIR by an older hook's
    TWILL_DUMP_DIR for the module with `key`, in the cache's form."""
    root = os.environ.get("TWILL_REPLAY_DIR")
    if not root:
        return None
    for k in sorted(Path(root).rglob("verify.key")):
        if k.read_text().strip() == key and (k.parent / "verify.json").exists():
            return {"loops": json.loads((k.parent / "verify.json").read_text())["loops"]}
    return None


def _parse_back(ir, mod, work, text, decision):
    final = Path(work) / "scheduled.mlir"
    final.write_text(text)
    try:
        new = ir.parse_mlir_module(str(final), mod.context)
    except Exception as ex:
        e = _Fallback(f"Triton could not parse twill's output: {ex}")
        e.decision = decision
        raise e
    # Triton's Python code reads `module.context` (set on modules it makes).
    new.context = mod.context
    decision.scheduled = True
    return new, decision
