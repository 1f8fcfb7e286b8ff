"""Every test of twill_triton gets a schedule cache of its own (an empty
`TWILL_CACHE_DIR` under its tmp_path), so that no test reads what another
test, or an earlier run, stored in the default `~/.triton/twill`; a test
that needs a cache shared between compiles sets its own."""

import pytest


@pytest.fixture(autouse=True)
def _private_schedule_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path / "twill-cache"))
