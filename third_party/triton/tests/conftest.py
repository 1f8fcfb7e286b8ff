"""Every test of twill_triton gets a schedule cache of its own (an empty
`TWILL_CACHE_DIR` under its tmp_path), so that no test reads what another
test, or an earlier run, stored in the default `~/.triton/twill`; a test
that needs a cache shared between compiles sets its own.

The tests exercise twill's schedules through Triton, so a tie in twill's
model keeps twill's (`TWILL_TIES=twill`): by default (`deeper`) the
fixtures' GEMM and FA forward on cuda:90 would keep Triton's deeper
schedules, and their pipelines would be Triton's own. The default's rule is
tested where it is unset (test_compile's test_ties_keep_tritons_schedule)."""

import pytest


@pytest.fixture(autouse=True)
def _private_schedule_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path / "twill-cache"))


@pytest.fixture(autouse=True)
def _ties_to_twill(monkeypatch):
    monkeypatch.setenv("TWILL_TIES", "twill")
