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


def check_disk(cfg: dict, results_dir: str | os.PathLike = "results", free: int | None = None) -> dict[str, int]:
    """The preflight of a resolved config (rules/common.smk calls it at DAG parse time): `check_plan_disk` of its
    estimated plan (no corpus generated or read: it must answer before the first job)."""
    return check_plan_disk(plan_workflow(cfg, exact=False), results_dir, free)


def check_plan_disk(plan: dict, results_dir: str | os.PathLike = "results", free: int | None = None) -> dict[str, int]:
    """Raise DiskSpaceError if the plan's disk peak exceeds the free space plus what results/ already holds (it
    is counted in the peak: not asked for twice); return the numbers (`need`: the peak less what is held).

    The message names the peak itself, the figure `python -m pixelpipe.plan` shows in its header.
    """
    peak = plan["disk_peak_bytes"]
    held = 0
    if Path(results_dir).exists():
        from ..core.measure import path_bytes

        held = min(peak, path_bytes([results_dir]))
    have = free if free is not None else free_bytes(results_dir)
    if peak - held > have:
        room = f"{fmt_bytes(have + held)} ({have + held} bytes)"
        where = (f"the {room} results can use ({fmt_bytes(have)} free on the filesystem of '{results_dir}' + "
                 f"{fmt_bytes(held)} already in it)" if held else
                 f"the {room} free on the filesystem of '{results_dir}'")
        raise DiskSpaceError(
            f"predicted disk peak {fmt_bytes(peak)} ({peak} bytes) exceeds {where}; free space, shrink "
            f"corpus.num_samples / render size, or point results elsewhere ({FREE_BYTES_ENV} overrides the "
            "free-space figure)")
    return {"need": peak - held, "free": have, "peak": peak, "held": held}
