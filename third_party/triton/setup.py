"""Installs twill_triton plus `twill_triton.pth`, which makes TRITON_TWILL=1
take effect in any Python process without code changes (the .pth imports
twill_triton.autoload at startup; it does nothing unless the variable is set).
The .pth is copied into the wheel's root, i.e. into site-packages. Editable
installs do not get it: use `pip install ./third_party/triton`.

With TWILL_WHEEL_BIN=DIR (set by scripts/wheel.sh, see docs/wheel.md) the
files of DIR (a statically linked twill-opt and the shared libraries it
still needs) go into the package's `bin/`, and the wheel is a platform wheel
(py3-none-<platform>): it holds native code but no Python extension. Without
it the wheel is pure and records the checkout it was built from, whose
target/release/twill-opt the hook then finds."""

import os
import shutil
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

BUNDLE = os.environ.get("TWILL_WHEEL_BIN")


class build_py_with_pth(build_py):

    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        shutil.copy(here / "twill_triton.pth", Path(self.build_lib) / "twill_triton.pth")
        package = Path(self.build_lib) / "twill_triton"
        if BUNDLE:
            _copy_bundle(Path(BUNDLE), package / "bin")
        else:
            # Remember the checkout this was installed from, so that its
            # target/release/twill-opt is found without TWILL_OPT.
            (package / "_build_info.py").write_text(f"REPO = {str(here.parents[1])!r}\n")


def _copy_bundle(src, dest):
    if not (src / "twill-opt").is_file():
        raise SystemExit(f"TWILL_WHEEL_BIN={src} has no twill-opt (build the wheel with scripts/wheel.sh)")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        # copy2 keeps the mode bits, which the wheel records for pip.
        shutil.copy2(f, dest / f.name)


cmdclass = {"build_py": build_py_with_pth}

if BUNDLE:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:  # setuptools < 70.1
        from wheel.bdist_wheel import bdist_wheel

    class BinaryDistribution(Distribution):
        """Platform-specific: the package goes to platlib, the wheel's root."""

        def has_ext_modules(self):
            return True

    class bdist_platform_wheel(bdist_wheel):
        """Tags the wheel py3-none-<platform>: any Python 3, no ABI (no
        extension module), this platform (the bundled binaries)."""

        def get_tag(self):
            return "py3", "none", super().get_tag()[2]

    cmdclass["bdist_wheel"] = bdist_platform_wheel
    setup(cmdclass=cmdclass, distclass=BinaryDistribution)
else:
    setup(cmdclass=cmdclass)
