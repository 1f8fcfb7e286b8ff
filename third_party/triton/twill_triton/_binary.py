"""Where the bundled `twill-opt` lives.

A wheel built by `scripts/wheel.sh` carries a `twill-opt` linked statically
against MLIR and LLVM in `twill_triton/bin/`, next to the shared libraries it
still needs (Z3 and the like, found through its `$ORIGIN` rpath); see
docs/wheel.md. A plain `pip install ./third_party/triton` has no `bin/`.

The hook looks for twill-opt in this order: the `twill_opt` argument of
`enable`, `TWILL_OPT`, the bundled binary, `twill-opt` on PATH, then the
`target/release/twill-opt` of the checkout the package was installed from.
"""

import os
from pathlib import Path
from typing import Optional

BIN_DIR = Path(__file__).resolve().parent / "bin"


def bundled_twill_opt() -> Optional[str]:
    """The path of the bundled twill-opt, or None when this install has none
    (or it is not executable)."""
    path = BIN_DIR / "twill-opt"
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    return None
