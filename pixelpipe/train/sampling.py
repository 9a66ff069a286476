"""Which samples each optimizer step sees: a function of (seed, epoch, step) alone, so resume is exact.

No Trainer here: the planner counts steps with `schedule` without importing the engine.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler

from ..data.cache import StepBatch


def epoch_order(n: int, seed: int, epoch: int, lengths: np.ndarray | None = None, batch_size: int = 1,
                group: int = 0) -> np.ndarray:
    """The shuffled sample order of one epoch; depends only on (seed, epoch) (and the lengths when grouping).

    With `group` > 0 and `lengths`, texts of similar length share batches: the shuffled order is cut into
    chunks of `group` batches, each chunk sorted by length and cut into batches, and the batches shuffled.
    A batch is trimmed to its longest text, so this spends the step on characters, not padding; every
    sample is still seen once per epoch, in an order set by (seed, epoch).
    """
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(n, generator=g).numpy()
    if not group or lengths is None or batch_size < 2:
        return order
    chunk = group * batch_size
    sorted_chunks = [c[np.argsort(lengths[c], kind="stable")] for c in np.split(order, range(chunk, n, chunk))]
    grouped = np.concatenate(sorted_chunks)
    full = (n // batch_size) * batch_size
    batches = grouped[:full].reshape(-1, batch_size)[torch.randperm(full // batch_size, generator=g).numpy()]
    return np.concatenate([batches.reshape(-1), grouped[full:]])


class StepBatchSampler(Sampler[list[int]]):
    """Micro-batches for every remaining optimizer step, across epochs, from a settable position.

    One DataLoader iterates this sampler for the whole run, so persistent workers
    really persist across epochs (a sampler per epoch would mean a loader per
    epoch, and new workers each time). Step s of epoch e always covers the
    samples order_e[s*B : (s+1)*B] (B = effective batch), split into `accum`
    micro-batches, so a resumed run, or one whose micro-batch an out-of-memory
    fallback halved, sees exactly the samples an uninterrupted run sees.
    `set_position` (then `iter(loader)` again) moves it; with persistent
    workers the loader re-reads the sampler without restarting them.

    With `world` processes (DDP) this is DistributedSampler's contract without
    its padding: rank r takes the r-th of `world` equal slices of every global
    micro-batch, so the ranks together see exactly the samples one process
    sees, the global batch stays `batch_size`, and the order is still a
    function of (seed, epoch) only, which keeps resume exact at any world size.
    """

    def __init__(self, n: int, batch_size: int, steps_per_epoch: int, total_steps: int, seed: int,
                 rank: int = 0, world: int = 1, lengths: np.ndarray | None = None, group: int = 0):
        self.n, self.batch_size, self.steps_per_epoch = n, batch_size, steps_per_epoch
        self.total_steps, self.seed, self.rank, self.world = total_steps, seed, rank, world
        self.lengths, self.group = lengths, group
        self.start_step, self.micro = 0, batch_size

    def set_position(self, step: int, micro_batch: int) -> None:
        if self.batch_size % micro_batch:
            raise ValueError(f"micro-batch {micro_batch} does not divide the batch {self.batch_size}")
        if micro_batch % self.world:
            raise ValueError(f"micro-batch {micro_batch} does not split over {self.world} processes")
        self.start_step, self.micro = step, micro_batch

    def __iter__(self) -> Iterator[list[int]]:
        step, micro, accum = self.start_step, self.micro, self.batch_size // self.micro
        share = micro // self.world
        while step < self.total_steps:
            epoch, in_epoch = divmod(step, self.steps_per_epoch)
            order = epoch_order(self.n, self.seed, epoch, self.lengths, self.batch_size, self.group)
            for s in range(in_epoch, self.steps_per_epoch):
                if step >= self.total_steps:
                    return
                base = s * self.batch_size
                for m in range(accum):
                    start = base + m * micro + self.rank * share
                    yield StepBatch(order[start : start + share].tolist(), step)
                step += 1

    def __len__(self) -> int:
        return (self.total_steps - self.start_step) * (self.batch_size // self.micro)


def split_batch(batch_size: int, accum: int, world: int, desc: str) -> int:
    """The global micro-batch (batch / accumulation steps), checked to split evenly over the ranks."""
    if batch_size == "auto":  # TrainSettings as configured: train.run.resolve_batch_size settles it first
        raise ValueError(f"{desc}: batch_size is still 'auto': resolve it first (train.run.resolve_batch_size)")
    if batch_size % accum:
        raise ValueError(f"{desc}: batch_size {batch_size} is not divisible by grad_accum_steps {accum}")
    micro = batch_size // accum
    if micro % world:
        raise ValueError(f"{desc}: the micro-batch {micro} (batch_size / engine.grad_accum_steps) does not "
                         f"split over {world} processes (engine.ddp_processes)")
    return micro


def schedule(n: int, batch_size: int, epochs: float) -> tuple[int, int]:
    """Optimizer steps per epoch and in all: whole batches only, at least one step (the planner uses it too)."""
    steps_per_epoch = n // batch_size
    return steps_per_epoch, max(1, round(epochs * steps_per_epoch))
