"""The bench's expected schedules: what twill decides for every kernel the
GPU benchmark compiles, per Triton version (bench/gpu/expected/<version>.json,
schema `twill.bench-expected/1`).

- `schedules`: per compile (`twill/<kind>` for twill's own configuration,
  `choice/<kind>/<candidate>` for every configuration the model ranks), the
  alternatives of its loop summaries (Triton's Hopper warp specialization
  emits one of two partition modules per compilation, so a compile may have
  two), each a list with one summary per loop, in the report's order;
- `choice`: the model's configuration per kind and size;
- `gluon`: the Gluon plans (plan.json of `run.py --plans`, without times
  and commands).

The GPU run (`bench.gpu.run`) schedules live and compares every compile
with this file; `bench.gpu.run --plans` rebuilds the choice and the Gluon
plans and compares them; `bench/tests/test_bench_schedules.py` compiles
twill's configurations and chosen candidates on the CPU and compares them.
A difference is a change of twill's behaviour: accept it deliberately with
`--bless` (run.py) or `TWILL_BLESS=1` (the test).
"""

import json
from pathlib import Path

import triton

SCHEMA = "twill.bench-expected/1"
ROOT = Path(__file__).resolve().parent / "expected"


def path(version=None):
    return ROOT / f"{version or triton.__version__}.json"


def load(version=None):
    """This Triton's expected file, or None where there is none."""
    p = path(version)
    if not p.exists():
        return None
    data = json.loads(p.read_text())
    if data.get("schema") != SCHEMA:
        raise SystemExit(f"{p}: schema {data.get('schema')!r}, expected {SCHEMA}")
    return data


def save(data, version=None):
    data = dict(data, schema=SCHEMA, triton=version or triton.__version__)
    path(version).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def loop_summary(record):
    """What the comparison keeps of one loop record of the report
    (twill.schedule-report/1): the decision, for a skip its reason code
    (the words of a `no_schedule` depend on how far the solver got in its
    time), for a schedule its I, L, stages, graph size, partitions and
    prefetch; times and cycle estimates are left out."""
    s = record.get("schedule")
    if record.get("decision") != "scheduled" or not s:
        return dict(decision="skipped", reason=record.get("reason"))
    prefetch = sorted(f"{p['op']} {p['depth']}" + (f"+{p['extra']}" if p.get("extra") else "")
                      for p in s.get("prefetch") or [])
    return dict(decision="scheduled", name=record["name"], ii=s["ii"], length=s["length"], stages=s["stages"],
                ops=s["ops"], partitions=s["partitions"]["text"], prefetch=prefetch)


def summaries(decision):
    """Loop summaries of one compile (a twill_triton Decision)."""
    return [loop_summary(r) for r in decision.loop_records()]


VOLATILE = ("seconds", "commands", "remarks")


def strip_plan(plan):
    """A Gluon plan without what changes from one solve to the next (times,
    the commands' paths, the remarks' paths and times)."""
    if isinstance(plan, dict):
        return {k: strip_plan(v) for k, v in plan.items() if k not in VOLATILE}
    if isinstance(plan, list):
        return [strip_plan(v) for v in plan]
    return plan


def compare(expected, key, got):
    """None when `got` (loop summaries) is one of the alternatives expected
    for `key`, else a one-line difference."""
    alts = ((expected or {}).get("schedules") or {}).get(key)
    if alts is None:
        return f"{key}: not in {path().name}"
    if got in alts:
        return None
    return f"{key}: expected {_brief(alts[0])}, got {_brief(got)}"


def _brief(loops):
    return "; ".join(f"{x['name']} I={x['ii']} L={x['length']} stages={x['stages']} {x['prefetch']}"
                     if x["decision"] == "scheduled" else f"skipped ({x['reason']})" for x in loops)
