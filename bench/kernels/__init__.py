"""Hand-written Gluon kernels, their plans from twill's schedules, and
launch helpers for the GPU bench. The Triton kernels they are compared
with are the product's test fixtures (third_party/triton/tests/kernels)."""
