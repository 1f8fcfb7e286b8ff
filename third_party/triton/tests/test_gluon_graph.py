"""The Gluon route's graph changes (`--twill-export-graph="target=gluon-sm90
gluon=..."`, src/backend/gluon.rs) give the graphs the Gluon plans were
solved on.

`data/gluon_graphs.json` records, for each loop of the captured TTGIR the
Gluon plans use (test/Inputs/triton36) and each change, what the route
changes relative to the pass's plain export (`target=triton`): per op, the
fields that change (null: the field is dropped), the edges appended, and
the edges the route marks blocking that the plain export does not
(`blocking_edges`: the pass's graph of a loop not marked
tt.warp_specialize has none, `driver::planned_graph`, while the Gluon
route's kernels are warp-specialized).
It was recorded from the regular-expression edits of the exported TOML
that the route replaced (`gluon_graph`, `fp16_crossings`,
`accumulators_complete` of the Gluon plan scripts), so the pass's route
must give exactly those graphs: everything not recorded as changed is
unchanged. `blocking_edges` was recorded from the plain export before it
dropped them (twill-opt at e6df4c6), where the route gave the same graphs.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

REPO = Path(__file__).resolve().parents[3]
INPUTS = REPO / "test" / "Inputs" / "triton36"
TWILL_OPT = os.environ.get("TWILL_OPT") or str(REPO / "target" / "release" / "twill-opt")
CASES = json.loads((Path(__file__).parent / "data" / "gluon_graphs.json").read_text())

pytestmark = [
    pytest.mark.skipif(not os.path.exists(TWILL_OPT), reason="twill-opt not built"),
    pytest.mark.skipif(tomllib is None, reason="needs Python >= 3.11 (tomllib)"),
]


def export(ttgir: Path, out: Path, scope: str, options: str = "") -> list:
    """The loop graphs the pass writes for `ttgir`, parsed, in loop order."""
    subprocess.run([TWILL_OPT, str(ttgir), f"--twill-export-graph=dir={out} arch=sm90 scope={scope} {options}",
                    "-o", "/dev/null"], check=True, capture_output=True, text=True)
    paths = sorted(out.glob("*.toml"), key=lambda p: (len(p.name), p.name))
    return [tomllib.loads(p.read_text()) for p in paths]


def changed(plain: dict, case: dict) -> dict:
    """`plain` with the recorded changes of `case` applied."""
    ops = []
    for op in plain["op"]:
        op = dict(op)
        for field, value in case["ops"].get(op["name"], {}).items():
            if value is None:
                op.pop(field)
            else:
                op[field] = value
        ops.append(op)
    blocking = [tuple(e) for e in case.get("blocking_edges", [])]
    edges = [dict(e, blocking=True) if (e["from"], e["to"]) in blocking else e for e in plain.get("edge", [])]
    return dict(plain, op=ops, edge=edges + case["added_edges"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['ttgir'].split('.')[0]}-loop{c['loop']}-{c['gluon'] or 'gluon'}")
def test_the_gluon_route_changes_what_was_recorded(case, tmp_path):
    ttgir = INPUTS / case["ttgir"]
    plain = export(ttgir, tmp_path / "plain", case["scope"])[case["loop"]]
    gluon = f"gluon={case['gluon']}" if case["gluon"] else ""
    routed = export(ttgir, tmp_path / "gluon", case["scope"], f"target=gluon-sm90 {gluon}")[case["loop"]]
    assert routed == changed(plain, case)


def test_the_recorded_changes_cover_every_change_of_the_route():
    fields = {f for case in CASES for op in case["ops"].values() for f in op}
    assert fields == {"regs", "last_stage", "cross_bytes"}
    assert any(case["added_edges"] for case in CASES)
    assert all(case["gluon"] != "complete-accumulators" or case["added_edges"] for case in CASES)


def test_the_route_refuses_a_cta_that_does_not_split_into_warp_groups(tmp_path):
    text = (INPUTS / "fa_fwd_sm90.before.mlir").read_text().replace('"ttg.num-warps" = 8', '"ttg.num-warps" = 6')
    src = tmp_path / "w6.mlir"
    src.write_text(text)
    r = subprocess.run([TWILL_OPT, str(src), f"--twill-export-graph=dir={tmp_path / 'g'} target=gluon-sm90",
                        "-o", "/dev/null"], capture_output=True, text=True)
    assert r.returncode != 0
    assert "6 warps do not split into groups of 4" in r.stderr
