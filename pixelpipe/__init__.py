"""pixelpipe: render text to pixels, distil a recursive vision encoder, ship it as ONNX."""

import os

__version__ = "0.1.0"

# OpenMP threads that spin while they wait (libgomp's default) collapse torch 5-25x as soon as another process
# holds a core: each parallel region waits for a descheduled thread (docs/engine.md, "Busy machines"). Sleeping
# waiters cost nothing measurable on an idle machine. libgomp reads this when torch loads it, so it is set on the
# package's import, before any torch; a value the user set wins. The workflow imports pixelpipe while it parses,
# so every job (and a SLURM job's own Snakemake) inherits it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
