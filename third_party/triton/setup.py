"""Installs twill_triton plus `twill_triton.pth`, which makes TRITON_TWILL=1
take effect in any Python process without code changes (the .pth imports
twill_triton.autoload at startup; it does nothing unless the variable is set).
The .pth is copied into the wheel's root, i.e. into site-packages. Editable
installs do not get it: use `pip install ./third_party/triton`."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class build_py_with_pth(build_py):

    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        shutil.copy(here / "twill_triton.pth", Path(self.build_lib) / "twill_triton.pth")
        # Remember the checkout this was installed from, so that its
        # target/release/twill-opt is found without TWILL_OPT.
        info = Path(self.build_lib) / "twill_triton" / "_build_info.py"
        info.write_text(f"REPO = {str(here.parents[1])!r}\n")


setup(cmdclass={"build_py": build_py_with_pth})
