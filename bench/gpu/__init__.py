"""The GPU benchmark harness (`python -m bench.gpu.run`) and pointer-load
check (`python -m bench.gpu.pointer_check`)."""
