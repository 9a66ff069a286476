"""The one way rows are scored in batches: sorted by length, each batch trimmed to its longest text.

Evaluation, calibration, the teacher's encoding, the ONNX accuracy, predict and the held-out scorers all
batch through here (numpy only: predict runs without torch), so a given row lands in the same batch, trimmed
to the same width, wherever it is scored. Callers keep only their forward pass.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .order import longest_first


def length_batches(lengths: np.ndarray, batch_size: int, rank: int = 0, world: int = 1,
                   ascending: bool = False) -> Iterator[np.ndarray]:
    """Row positions of each batch of `batch_size` rows, longest texts first (`order.longest_first`).

    `rank`/`world`: this process's share (every `world`-th row of the order, from `rank`), batched alone.
    `ascending`: each batch's positions sorted ascending (sequential reads of a memory map) instead of by length;
    the batch holds the same rows either way.
    """
    order = longest_first(lengths)[rank::world]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        yield np.sort(idx) if ascending else idx


def trimmed_width(longest: int, line_chars: int, lines: int, cells: int) -> int:
    """Glyph columns a batch whose longest text has `longest` characters needs: that many, in whole lines when the
    layout has several (the model's input contract), at least 1 and at most the row's `cells`."""
    width = max(1, longest)
    if lines > 1:
        width = -(-width // line_chars) * line_chars
    return min(width, cells)
