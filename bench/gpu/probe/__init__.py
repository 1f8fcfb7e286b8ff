"""One-off GPU probes behind measurements in BENCHMARKS.md; each runs as
`python -m bench.gpu.probe.<name>` from the repository root."""
