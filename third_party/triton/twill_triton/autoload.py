"""Imported at interpreter startup by `twill_triton.pth`: enables twill when
TRITON_TWILL=1. Must never fail or slow down a process that does not ask for
twill, so it imports nothing unless the variable is set."""

import os

if os.environ.get("TRITON_TWILL", "").strip().lower() in ("1", "true", "yes", "on"):
    try:
        import twill_triton

        twill_triton.enable()
    except Exception as e:  # never break the user's interpreter
        import logging

        logging.getLogger("twill").warning("twill: TRITON_TWILL=1 but twill could not be enabled: %s", e)
