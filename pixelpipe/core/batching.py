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
                   ascending: bool = False, max_cells: int | None = None,
                   min_rows: int = 1) -> Iterator[np.ndarray]:
    """Row positions of each batch of `batch_size` rows, longest texts first (`order.longest_first`).

    `rank`/`world`: this process's share (every `world`-th row of the order, from `rank`), batched alone.
    `ascending`: each batch's positions sorted ascending (sequential reads of a memory map) instead of by length;
    the batch holds the same rows either way.
    `max_cells`: at most this many rows x the batch's longest text (at least one row), so a batch of long texts
    holds fewer rows and one of short texts up to `batch_size`: predict's peak memory follows the cells, not the
    rows (its n-gram rows are [rows, n-grams, width] floats). `min_rows`: yet at least this many rows (up to
    `batch_size`), so the longest texts' batches do not pay a model call's fixed cost for a handful of rows.
    """
    order = longest_first(lengths)[rank::world]
    longest = np.maximum(np.asarray(lengths)[order], 1)
    start = 0
    while start < len(order):
        rows = batch_size if max_cells is None else min(batch_size, max(1, min_rows, max_cells // int(longest[start])))
        idx = order[start : start + rows]
        yield np.sort(idx) if ascending else idx
        start += rows


def trimmed_width(longest: int, line_chars: int, lines: int, cells: int) -> int:
    """Glyph columns a batch whose longest text has `longest` characters needs: that many, in whole lines when the
    layout has several (the model's input contract), at least 1 and at most the row's `cells`."""
    width = max(1, longest)
    if lines > 1:
        width = -(-width // line_chars) * line_chars
    return min(width, cells)
