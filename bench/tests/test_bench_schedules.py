"""twill's schedules of the GPU benchmark's kernels are the expected ones
(bench/gpu/expected/<triton>.json): every kind's own configuration and
every configuration the model chose, compiled with twill for cuda:90 on the
CPU, gives the expected loop summaries (decision, I, L, stages, graph size,
partitions, prefetch). `bench.gpu.run --plans` compares the rest (every
candidate, the choice, the Gluon plans); the GPU run compares what it
compiles. TWILL_BLESS=1 rewrites the expected entries of this test's
compiles instead (a deliberate change of twill's behaviour)."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
triton = pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon")

from bench.gpu import expected, run  # noqa: E402

EXPECT = expected.load()
pytestmark = pytest.mark.skipif(EXPECT is None, reason=f"no expected schedules for Triton {triton.__version__}")
TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")


def _compiles():
    """(expected key, kind, constexprs, options, extra pass options) of each
    compile: twill's configuration of every kind, then every chosen one."""
    out = []
    for kind, _ in run.kinds():
        for label, extra, cx, opts in run.twill_variants(kind):
            out.append((run.variant_key(kind, label), kind, cx, opts, extra))
    for kind, by_size in sorted(((EXPECT or {}).get("choice") or {}).items()):
        cands = {c["label"]: c for c in run.choice_candidates(kind)}
        for label in sorted(set(by_size.values())):
            c = cands[label]
            out.append((run.choice_key(kind, label), kind, c["cx"], c["opts"], c["extra"]))
    return out


@pytest.mark.parametrize("key,kind,cx,opts,extra", _compiles(), ids=lambda v: v if isinstance(v, str) else "")
def test_schedule_is_expected(key, kind, cx, opts, extra, monkeypatch):
    if not os.path.exists(TWILL_OPT):
        pytest.skip("twill-opt not built")
    monkeypatch.setenv("TWILL_OPT", TWILL_OPT)
    _, d = run.twill_fresh(kind, cx, opts, extra)
    got = expected.summaries(d)
    if os.environ.get("TWILL_BLESS") == "1":
        data = expected.load()
        if got not in data["schedules"].get(key, []):
            data["schedules"][key] = [got]
            expected.save(data)
        return
    assert expected.compare(EXPECT, key, got) is None


def test_expected_file_covers_the_bench():
    """Every compile the GPU run makes has an expected entry: each kind's
    configuration, and a choice at every size of every kind."""
    for kind, _ in run.kinds():
        assert f"twill/{kind}" in EXPECT["schedules"], kind
        assert set(EXPECT["choice"][kind]) == {str(s) for s in run.kind_sizes(kind)}, kind
    assert set(EXPECT["gluon"]) == {"", "hd64", "causal", "gemm", "bwd_hd128", "bwd_hd64"}
