"""The lab's tests (`python -m pytest bench/tests` from the repository
root): bench summaries, the Gluon kernels and their plans, the bench's expected schedules."""
