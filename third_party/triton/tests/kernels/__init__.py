"""Triton kernels the product's tests compile (on the CPU, for an explicit
GPUTarget): fixtures of twill_triton's test suite, not part of the package.

* `matmul`: the GEMM mainloop with TMA tensor descriptors.
* `fa_fwd`, `fa_bwd`: FlashAttention forward and backward with TMA
  descriptors, in the configurations twill schedules.
* `pointer_matmul`, `pointer_attention_bwd`: pointer-load (cp.async) kernels.

The tests import them as `kernels.<name>`: pytest puts this package's parent
directory (the test directory, which is not a package) on the import path.
The GPU bench under bench/ imports the same files as
`third_party.triton.tests.kernels.<name>`; nothing here imports the bench.
"""

import importlib.util


def load(name, path):
    """The Python file at `path` executed as a new module called `name`: a
    kernel file outside this package, or a module instance of a test's own."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
