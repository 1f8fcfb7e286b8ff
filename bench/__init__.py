"""The lab: twill's GPU bench harness, probes, calibration, the hand-written
Gluon kernels and their plans, and the solver benchmark. Not part of the
product: the product (src/, third_party/triton/, its tests) never imports it;
the lab imports the product and its test fixtures.

Run its modules from the repository root as packages, e.g.
`python -m bench.gpu.run --out DIR`, and its tests with
`python -m pytest bench/tests`.
"""
