"""The schedule cache (twill_triton.cache): a kernel compiled in a second
process with the same TWILL_CACHE_DIR takes twill's answer from the cache
(twill-opt does not run) and gives the same TTGIR; two processes compiling
the same kernel into an empty cache at once both succeed and leave one
whole entry; entries that are corrupt, truncated or of another key are
ignored.

The compiles run on the CPU for an explicit target (cuda:90): the TMA GEMM
of kernels/matmul.py under scope=all, which twill schedules. twill-opt is
reached through a wrapper script that logs each run, so that a hit is seen
not to start it.

Needs twill-opt (TWILL_OPT, or target/release/twill-opt of this checkout).
"""

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).resolve().parent

triton = pytest.importorskip("triton")

from twill_triton import cache  # noqa: E402

TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")

# One compile in a fresh process: its decision as JSON on the last line.
DRIVER = textwrap.dedent("""
    import hashlib, json, sys, time
    sys.path.insert(0, sys.argv[1])
    import triton
    from triton.backends.compiler import GPUTarget
    import twill_triton
    from kernels import matmul

    cfg = dict(matmul.DEFAULT_CONFIG)
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    twill_triton.enable(scope="all", strict=True)
    started = time.monotonic()
    k = triton.compile(matmul.make_ast_source(**cfg), target=GPUTarget("cuda", 90, 32), options=opts)
    seconds = time.monotonic() - started
    d = twill_triton.decisions()[-1]
    print(json.dumps(dict(scheduled=d.scheduled, reason=d.reason, cached=d.cached, cached_by=d.cached_by,
                          verify_cached=d.verify_cached,
                          schedule_seconds=d.schedule_seconds, verify_seconds=d.verify_seconds,
                          compile_seconds=seconds, ttgir=k.asm["ttgir"])))
""")


@pytest.fixture
def wrapper(tmp_path):
    """A twill-opt that logs each run to `runs.log`, then runs the real one."""
    if not Path(TWILL_OPT).exists():
        pytest.skip(f"no twill-opt at {TWILL_OPT}")
    script = tmp_path / "twill-opt"
    log = tmp_path / "runs.log"
    script.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{TWILL_OPT}" "$@"\n')
    script.chmod(0o755)
    return script, log


def _runs(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


def _start(tmp_path, twill_opt, triton_cache, twill_cache, tests=TESTS):
    """A compile in a fresh process, of the kernel under `tests`/kernels."""
    env = dict(os.environ, TWILL_OPT=str(twill_opt), TRITON_CACHE_DIR=str(tmp_path / triton_cache),
               TWILL_CACHE_DIR=str(twill_cache))
    for var in ("TWILL_REPLAY_DIR", "TWILL_DUMP_DIR", "TWILL_OPTIONS", "TWILL_LOWER"):
        env.pop(var, None)
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(tests)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _result(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def _entries(root):
    return sorted(p for p in Path(root).rglob("*") if p.is_file())


def test_a_second_process_takes_the_schedule_from_the_cache(tmp_path, wrapper):
    twill_opt, log = wrapper
    shared = tmp_path / "twill-cache"
    cold = _result(_start(tmp_path, twill_opt, "triton-1", shared))
    assert cold["scheduled"] and not cold["cached"] and not cold["verify_cached"], cold["reason"]
    ran = _runs(log)
    assert ran >= 2  # the schedule and the pipeline verification
    # Another Triton cache: Triton compiles again, twill answers from its own.
    warm = _result(_start(tmp_path, twill_opt, "triton-2", shared))
    assert warm["scheduled"] and warm["cached"] and warm["verify_cached"], warm["reason"]
    # Found by Triton's key of the compile: the module was not printed.
    assert warm["cached_by"] == "compile"
    assert _runs(log) == ran, "twill-opt ran on a warm cache"
    assert warm["ttgir"] == cold["ttgir"]
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name}: twill added {1000 * (r['schedule_seconds'] + r['verify_seconds']):.1f} ms "
              f"(schedule {1000 * r['schedule_seconds']:.1f} ms, verification {1000 * r['verify_seconds']:.1f} ms) "
              f"to a compile of {r['compile_seconds']:.2f} s")


def _files(ttgir):
    """The source files the TTGIR's locations name."""
    return set(re.findall(r'loc\("([^"]+\.py)"', ttgir))


def test_the_same_kernel_at_another_path_is_not_given_the_first_ones_locations(tmp_path, wrapper):
    """The cache key leaves locations out, so the same code in another file
    finds the entry; the hook must not hand it the first file's module, whose
    locations (the kernel's line info, the remarks) name that file."""
    twill_opt, log = wrapper
    shared = tmp_path / "twill-cache"
    moved = tmp_path / "moved"
    shutil.copytree(TESTS / "kernels", moved / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    cold = _result(_start(tmp_path, twill_opt, "triton-1", shared))
    assert cold["scheduled"], cold["reason"]
    assert str(TESTS / "kernels" / "matmul.py") in _files(cold["ttgir"])
    ran = _runs(log)
    there = _result(_start(tmp_path, twill_opt, "triton-2", shared, tests=moved))
    assert there["scheduled"] and not there["cached"], there["reason"]
    assert _runs(log) > ran, "the other path's compile took the first one's module from the cache"
    # The kernel's own file only (Triton's library files are the same).
    library = str(Path(triton.__file__).parent) + os.sep
    ours = {f for f in _files(there["ttgir"]) if not f.startswith(library)}
    assert ours == {str(moved / "kernels" / "matmul.py")}, ours

    def unlocated(ttgir):
        return re.sub(r"#loc\d*\s*=.*", "", ttgir)

    assert unlocated(there["ttgir"]) == unlocated(cold["ttgir"])
    # And at the same path again, the cache answers.
    ran = _runs(log)
    again = _result(_start(tmp_path, twill_opt, "triton-3", shared, tests=moved))
    assert again["cached"] and again["ttgir"] == there["ttgir"]
    assert _runs(log) == ran


def test_a_changed_source_file_is_looked_up_by_the_modules_print(tmp_path, wrapper):
    """A warm compile takes its answer by Triton's key of the compile and
    the kernel's file without printing the module, only while every source
    file the module's locations name is unchanged: an edit that leaves
    Triton's key alone (a line added below the kernel) has the module
    printed and looked up by that print (the same locations: a hit); one
    above the kernel moves its locations (and Triton's key): scheduled
    again."""
    twill_opt, log = wrapper
    shared = tmp_path / "twill-cache"
    copy = tmp_path / "copy"
    shutil.copytree(TESTS / "kernels", copy / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    source = copy / "kernels" / "matmul.py"
    cold = _result(_start(tmp_path, twill_opt, "triton-1", shared, tests=copy))
    assert cold["scheduled"] and cold["cached_by"] is None, cold["reason"]
    warm = _result(_start(tmp_path, twill_opt, "triton-2", shared, tests=copy))
    assert warm["cached_by"] == "compile" and warm["ttgir"] == cold["ttgir"]
    source.write_text(source.read_text() + "\n# a line below every kernel\n")
    below = _result(_start(tmp_path, twill_opt, "triton-3", shared, tests=copy))
    assert below["cached_by"] == "module" and below["ttgir"] == cold["ttgir"]
    again = _result(_start(tmp_path, twill_opt, "triton-4", shared, tests=copy))
    assert again["cached_by"] == "compile" and again["ttgir"] == cold["ttgir"]
    ran = _runs(log)
    source.write_text("# a line above every kernel\n" + source.read_text())
    above = _result(_start(tmp_path, twill_opt, "triton-5", shared, tests=copy))
    assert above["scheduled"] and not above["cached"], above["reason"]
    assert _runs(log) > ran
    assert str(source) in _files(above["ttgir"])


def test_off_means_no_cache(tmp_path, wrapper, monkeypatch):
    twill_opt, log = wrapper
    monkeypatch.setenv("TWILL_CACHE_DIR", "off")
    assert cache.location() is None
    first = _result(_start(tmp_path, twill_opt, "triton-1", "off"))
    ran = _runs(log)
    second = _result(_start(tmp_path, twill_opt, "triton-2", "off"))
    assert not first["cached"] and not second["cached"]
    assert _runs(log) == 2 * ran
    assert not (tmp_path / "off").exists()


def test_two_processes_compiling_at_once_leave_one_entry(tmp_path, wrapper):
    twill_opt, _ = wrapper
    shared = tmp_path / "twill-cache"
    procs = [_start(tmp_path, twill_opt, f"triton-{i}", shared) for i in range(2)]
    results = [_result(p) for p in procs]
    assert all(r["scheduled"] for r in results), [r["reason"] for r in results]
    assert results[0]["ttgir"] == results[1]["ttgir"]
    entries = _entries(shared)
    # One whole entry each: the kernel's schedule, its index by Triton's key
    # of the compile and its verification (the hook's; the verification
    # under the pipelined module's key and under the key of the inputs it
    # is made from), and its loop's solve (twill-opt's, in the directory the
    # hook gave it); no temporary file left.
    assert sorted(p.parent.name for p in entries) == [cache.COMPILES, "loops", cache.SCHEDULES, cache.VERIFY,
                                                      cache.VERIFY], entries
    for p in entries:
        entry = json.loads(p.read_text())
        assert entry["schema"] in (cache.SCHEMA, "twill.loop-cache/1"), entry["schema"]
        assert p.name.startswith(entry["key"] + "."), p
    # A third process reads it.
    third = _result(_start(tmp_path, twill_opt, "triton-3", shared))
    assert third["cached"] and third["verify_cached"] and third["ttgir"] == results[0]["ttgir"]


def test_corrupt_truncated_and_foreign_entries_are_misses(tmp_path, caplog):
    store = cache.Cache(tmp_path)
    value = {"module": "module {}", "stderr": "", "report": {"schema": "twill.schedule-report/1"}}
    cache.store(store, cache.SCHEDULES, "k1", "id1", value)
    assert cache.load(store, cache.SCHEDULES, "k1", "id1") == value
    # Another twill-opt, another key: misses, without a warning.
    assert cache.load(store, cache.SCHEDULES, "k1", "id2") is None
    assert cache.load(store, cache.SCHEDULES, "k2", "id1") is None
    assert not caplog.records
    path = tmp_path / cache.SCHEDULES / "k1.id1.json"
    whole = path.read_text()
    with caplog.at_level(logging.WARNING, logger="twill"):
        path.write_text(whole[:len(whole) // 2])
        assert cache.load(store, cache.SCHEDULES, "k1", "id1") is None
        path.write_text(whole.replace('"key": "k1"', '"key": "k0"'))
        assert cache.load(store, cache.SCHEDULES, "k1", "id1") is None
        path.write_text(whole.replace(cache.SCHEMA, "twill.schedule-cache/0"))
        assert cache.load(store, cache.SCHEDULES, "k1", "id1") is None
    assert len(caplog.records) == 3, caplog.records
    # The next store replaces the bad entry.
    cache.store(store, cache.SCHEDULES, "k1", "id1", value)
    assert cache.load(store, cache.SCHEDULES, "k1", "id1") == value
    assert [p.name for p in _entries(tmp_path)] == ["k1.id1.json"]


def test_a_replay_directory_is_read_only_and_takes_any_twill_opt(tmp_path, monkeypatch):
    cache.store(cache.Cache(tmp_path), cache.VERIFY, "k", "elsewhere", {"loops": []})
    monkeypatch.setenv("TWILL_REPLAY_DIR", str(tmp_path))
    replay = cache.location()
    assert replay == cache.Cache(tmp_path, read_only=True)
    assert cache.load(replay, cache.VERIFY, "k", "missing") == {"loops": []}
    cache.store(replay, cache.VERIFY, "k2", "missing", {"loops": []})
    assert not (tmp_path / cache.VERIFY / "k2.missing.json").exists()


def test_the_default_directory_is_beside_tritons_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TWILL_CACHE_DIR", raising=False)
    monkeypatch.delenv("TWILL_REPLAY_DIR", raising=False)
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    assert cache.location() == cache.Cache(tmp_path / ".triton" / "twill")
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.location() == cache.Cache(tmp_path / "mine")
