"""Every stage measures itself: wall time, throughput, peak memory, disk written.

Peak host RSS is sampled over the process *and* its children (render pools,
DataLoader workers) by a background thread, since the OS's ru_maxrss sees one
process at a time. GPU peaks come from the caching allocator's own counters.

Two host figures are kept. `peak_rss_bytes` sums psutil's RSS over the tree;
forked workers share their parent's pages copy-on-write, so it counts those
pages once per worker. `peak_host_bytes` is the main process's anonymous RSS
plus each child's USS (pages only that child holds): shared pages once,
unaffected by unrelated processes mapping the same libraries (as PSS would be),
and free of file-backed library pages, whose residency depends on the page
cache rather than on the job. The planner predicts `peak_host_bytes`;
docs/reports.md explains the choice.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import psutil

from .io import write_json


def anon_rss(proc: psutil.Process) -> int:
    """Anonymous resident memory (heap, stacks, tensors), without file-backed library pages.

    File-backed pages (the mapped .so files of torch, numpy, ...) count towards RSS only as far
    as the page cache happens to hold them when they are faulted in: a freshly installed venv
    measured 54 MB more RSS than an older one for identical imports and identical anonymous
    memory. Anonymous memory is what the job allocates, and it is reproducible.
    """
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return proc.memory_info().rss  # no /proc (not Linux): plain RSS


def release_freed_heap() -> None:
    """Hand freed heap pages back to the OS (glibc's malloc_trim): many small allocations (Python text work
    between large buffers) leave freed pages the allocator keeps, counted in the resident set until the process
    ends; a no-op where there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def tree_memory(proc: psutil.Process) -> tuple[int, int]:
    """(summed RSS of the tree, host bytes) in one walk of the process tree.

    Host bytes = the main process's anonymous RSS + each child's USS: what the job tree
    allocates, shared pages counted once.
    """
    try:
        rss, host = proc.memory_info().rss, anon_rss(proc)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0, 0
    for child in proc.children(recursive=True):
        try:
            full = child.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += full.rss
        host += full.uss
    return rss, host


def path_bytes(paths: Iterable[str | os.PathLike]) -> int:
    total = 0
    for p in map(Path, paths):
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


class RSSSampler(threading.Thread):
    """Samples the tree's memory every `interval` seconds, every `fast_interval` during the first `fast_for`
    seconds: a job of a fraction of a second (consolidating a split, writing a small shard) lives between two
    samples at 50 ms, and the same job measured 29 and 39 MiB from run to run."""

    def __init__(self, interval: float = 0.05, fast_interval: float = 0.005, fast_for: float = 2.0):
        super().__init__(daemon=True)
        self.proc = psutil.Process()
        self.interval, self.fast_interval = interval, fast_interval
        self.fast_until = time.monotonic() + fast_for
        self.peak, self.peak_host = tree_memory(self.proc)
        self.baseline, self.baseline_host = self.peak, self.peak_host
        self._stop_event = threading.Event()

    def sample(self) -> None:
        rss, host = tree_memory(self.proc)
        self.peak, self.peak_host = max(self.peak, rss), max(self.peak_host, host)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.fast_interval if time.monotonic() < self.fast_until else self.interval)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        self.sample()
        return self.peak


def _cuda():
    """torch.cuda when the stage imported torch and a GPU is there; None otherwise.

    Stages that never touch torch (corpus, render, consolidate) must not pay its import.
    """
    torch = sys.modules.get("torch")
    return torch.cuda if torch is not None and torch.cuda.is_available() else None


class StageMeter:
    """Context manager writing `results/metrics/{rule}/{name}.json` when the stage ends."""

    def __init__(self, rule: str, metrics_path: str | os.PathLike | None, outputs: Iterable[str] = ()):
        """Measures only: the planner's predictions live in results/plan.json, which the report joins."""
        self.rule = rule
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.outputs = [str(o) for o in outputs]
        self.data: dict[str, Any] = {"rule": rule}

    def __enter__(self) -> "StageMeter":
        self.sampler = RSSSampler()
        self.sampler.start()
        cuda = _cuda()
        if cuda is not None:
            cuda.reset_peak_memory_stats()
        self.t0 = time.perf_counter()
        self.data["started_at"] = time.time()
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
        m["baseline_host_bytes"] = self.sampler.baseline_host
        m["peak_host_bytes"] = self.sampler.peak_host
        m["finished_at"] = time.time()
        if "samples" in m and wall > 0:
            m.setdefault("samples_per_s", m["samples"] / wall)
        cuda = _cuda()
        if cuda is not None:  # setdefault: a stage whose GPU work ran in other processes (DDP ranks) recorded it
            m.setdefault("peak_gpu_allocated_bytes", cuda.max_memory_allocated())
            m.setdefault("peak_gpu_reserved_bytes", cuda.max_memory_reserved())
            m.setdefault("gpu", cuda.get_device_name(0))
        m["disk_written_bytes"] = path_bytes(self.outputs)
        m["status"] = "ok" if exc_type is None else f"failed: {exc_type.__name__}"
        if self.metrics_path and exc_type is None:
            write_json(self.metrics_path, m)
