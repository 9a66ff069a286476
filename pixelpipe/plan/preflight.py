"""The disk preflight: refuse a run whose predicted disk peak does not fit the results filesystem."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..core.fmt import fmt_bytes
from .workflow import plan_workflow


class DiskSpaceError(RuntimeError):
    """The predicted disk peak does not fit the free space of the results filesystem."""


FREE_BYTES_ENV = "PIXELPIPE_FREE_BYTES"


def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes where `path` will live ($PIXELPIPE_FREE_BYTES overrides, for tests)."""
    if os.environ.get(FREE_BYTES_ENV):
        return int(float(os.environ[FREE_BYTES_ENV]))
    p = Path(path).resolve()
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def check_disk(cfg: dict, results_dir: str | os.PathLike = "results", free: int | None = None,
               plan: dict | None = None) -> dict[str, int]:
    """Raise DiskSpaceError if the plan's disk peak exceeds the free space; return both numbers.

    Uses the estimated plan (no corpus generated or read: it must answer before the first job) unless given one.
    """
    plan = plan or plan_workflow(cfg, exact=False)
    need = plan["disk_peak_bytes"]
    if Path(results_dir).exists():  # what is already there is counted in the peak: do not ask for it twice
        from ..core.measure import path_bytes

        need = max(0, need - path_bytes([results_dir]))
    have = free if free is not None else free_bytes(results_dir)
    if need > have:
        raise DiskSpaceError(
            f"predicted disk peak {fmt_bytes(need)} ({need} bytes) exceeds the {fmt_bytes(have)} ({have} bytes) free "
            f"on the filesystem of '{results_dir}'; free space, shrink corpus.num_samples / render size, or point "
            f"results elsewhere ({FREE_BYTES_ENV} overrides the free-space figure)")
    return {"need": need, "free": have}
