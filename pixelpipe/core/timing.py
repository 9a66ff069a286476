"""Per-component wall time of the training step without stalling the GPU.

On CUDA each component is bracketed by events and resolved lazily (one
synchronize per `resolve`), so timing does not serialise the pipeline the
way `torch.cuda.synchronize()` after every phase would. On CPU, perf_counter.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch


class ComponentTimer:
    def __init__(self, device: torch.device, max_pending: int = 512):
        self.cuda = device.type == "cuda"
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._current: tuple[str, object] | None = None
        self._pending: list[tuple[str, object, object]] = []
        self.max_pending = max_pending
        self.micro_index = 0

    def _mark(self) -> object:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self, name: str) -> None:
        """Close the running component (if any) and open `name`."""
        now = self._mark()
        if self._current is not None:
            self._close(now)
        self._current = (name, now)

    def stop(self) -> None:
        if self._current is not None:
            self._close(self._mark())
        self._current = None

    def _close(self, end: object) -> None:
        name, begin = self._current
        if self.cuda:
            self._pending.append((name, begin, end))
            if len(self._pending) >= self.max_pending:
                self.resolve()
        else:
            self.totals[name] += end - begin
        self.counts[name] += 1

    def resolve(self) -> None:
        if self._pending:
            self._pending[-1][2].synchronize()
            for name, begin, end in self._pending:
                self.totals[name] += begin.elapsed_time(end) / 1000.0
            self._pending.clear()

    def summary(self) -> dict[str, dict[str, float]]:
        """{component: {seconds, share, calls}} over everything timed so far."""
        self.resolve()
        total = sum(self.totals.values()) or 1.0
        return {k: {"seconds": v, "share": v / total, "calls": self.counts[k]} for k, v in sorted(self.totals.items())}
