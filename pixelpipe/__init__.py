"""pixelpipe: render text to pixels, distil a recursive vision encoder, ship it as ONNX."""

import os

__version__ = "0.1.0"

# OpenMP threads that spin while they wait (libgomp's default) collapse torch training as soon as another process
# holds a core: each parallel region waits for a descheduled thread. Measured on 2 cores (bench/busy_machine.py,
# docs/benchmarks.md "A busy machine"): beside one CPU-bound process the default teacher keeps 0.84x of its idle
# steps/s with sleeping waiters against 0.37x spinning (0.18x with libgomp's own default), and beside the load of a
# test suite it trained at 21 steps/s against 1; an idle machine pays 20-30 % for it. libgomp reads this when
# torch loads it, so it is set on the package's import, before any torch; a value the user set wins. The workflow
# imports pixelpipe while it parses, so every job (and a SLURM job's own Snakemake) inherits it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
