"""Every stage measures itself: wall time, throughput, peak memory, disk written.

Peak host RSS is sampled over the process *and* its children (render pools,
DataLoader workers) by a background thread, since the OS's ru_maxrss sees one
process at a time. GPU peaks come from the caching allocator's own counters.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import psutil
import torch

from .io import write_json


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of a process and all its descendants."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def path_bytes(paths: Iterable[str | os.PathLike]) -> int:
    total = 0
    for p in map(Path, paths):
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


class RSSSampler(threading.Thread):
    def __init__(self, interval: float = 0.05):
        super().__init__(daemon=True)
        self.proc = psutil.Process()
        self.interval = interval
        self.peak = tree_rss(self.proc)
        self.baseline = self.peak
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak = max(self.peak, tree_rss(self.proc))
            self._stop_event.wait(self.interval)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        self.peak = max(self.peak, tree_rss(self.proc))
        return self.peak


class StageMeter:
    """Context manager writing `results/metrics/{rule}/{name}.json` when the stage ends."""

    def __init__(self, rule: str, metrics_path: str | os.PathLike | None, outputs: Iterable[str] = (),
                 prediction: dict[str, Any] | None = None):
        self.rule = rule
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.outputs = [str(o) for o in outputs]
        self.data: dict[str, Any] = {"rule": rule}
        self.prediction = prediction

    def __enter__(self) -> "StageMeter":
        self.sampler = RSSSampler()
        self.sampler.start()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self.t0 = time.perf_counter()
        return self

    def record(self, **fields: Any) -> None:
        self.data.update(fields)

    def __exit__(self, exc_type, exc, tb) -> None:
        wall = time.perf_counter() - self.t0
        peak = self.sampler.stop()
        m = self.data
        m["wall_s"] = wall
        m["peak_rss_bytes"] = peak
        m["baseline_rss_bytes"] = self.sampler.baseline
        if "samples" in m and wall > 0:
            m.setdefault("samples_per_s", m["samples"] / wall)
        if torch.cuda.is_available():
            m["peak_gpu_allocated_bytes"] = torch.cuda.max_memory_allocated()
            m["peak_gpu_reserved_bytes"] = torch.cuda.max_memory_reserved()
            m["gpu"] = torch.cuda.get_device_name(0)
        m["disk_written_bytes"] = path_bytes(self.outputs)
        if self.prediction is not None:
            m["predicted"] = self.prediction
        m["status"] = "ok" if exc_type is None else f"failed: {exc_type.__name__}"
        if self.metrics_path and exc_type is None:
            write_json(self.metrics_path, m)
