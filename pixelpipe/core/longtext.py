"""A text longer than the layout, read whole: in windows of the layout's size, their logits averaged.

Training lays every text out in `cells` characters (one 96-character line on the CPU profile), so a model
read only the start of a paragraph: on the held-out texts over 100 characters the student was 1 point behind
py3langid, which reads all of them, and no better than on 40-100 characters. Such a text is now read as
ceil(length / cells) windows of `cells` characters spread evenly from its start to its end (overlapping where
the length is not a multiple of `cells`), each as long as the texts training saw, and the text's logits are
their mean (the mean of the windows' log-probabilities up to a constant: each window's evidence counts once,
and the confidence stays that of one window, which calibration fitted). At most `MAX_WINDOWS` windows:
past `MAX_WINDOWS * cells` characters a text is truncated, as before. numpy only: predict runs without torch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

MAX_WINDOWS = 8  # a text is read up to 8 x cells characters (768 on the CPU profile's one 96-character line)


def window_starts(lengths: np.ndarray, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(owner [M], start [M]): the windows of texts of `lengths` characters (each at most MAX_WINDOWS * cells),
    every text's in order; the first of each starts at 0, a text of at most `cells` characters has only it."""
    n = np.maximum(np.asarray(lengths, np.int64), 1)
    k = -(-n // cells)
    owner = np.repeat(np.arange(len(n)), k)
    index = np.arange(len(owner)) - np.repeat(np.cumsum(k) - k, k)  # the window's place among its text's
    span, many = np.maximum(n - cells, 0)[owner], np.maximum(k - 1, 1)[owner]
    return owner, np.rint(index * span / many).astype(np.int64)


def window_ids(ids: np.ndarray, lengths: np.ndarray, owner: np.ndarray, start: np.ndarray,
               cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(glyph ids [M, cells], lengths [M]) of the windows (owner, start) of texts laid out in ids [N, capacity]."""
    m = np.minimum(np.asarray(lengths, np.int64)[owner], cells)
    cols = np.minimum(start[:, None] + np.arange(cells)[None], ids.shape[1] - 1)
    win = np.take_along_axis(ids[owner], cols, 1)
    return np.where(np.arange(cells)[None] < m[:, None], win, 0).astype(ids.dtype), m


def whole_text_logits(first: np.ndarray, ids: np.ndarray, lengths: np.ndarray, cells: int,
                      score: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Logits [N, C] of texts longer than `cells`, the mean over their windows.

    `first`: each text's logits for its first `cells` characters (the window starting at 0, already scored);
    `ids` [N, capacity]: the same texts laid out at MAX_WINDOWS * cells; `lengths`: their characters (at most
    capacity); `score(ids [M, cells], lengths [M])`: a model's logits. Only the windows after the first are scored."""
    owner, start = window_starts(lengths, cells)
    later = start > 0
    owner, start = owner[later], start[later]
    total = first.astype(np.float64)
    if len(owner):
        win, m = window_ids(ids, lengths, owner, start, cells)
        np.add.at(total, owner, score(win, m))
    counts = np.bincount(owner, minlength=len(first)) + 1
    return (total / counts[:, None]).astype(first.dtype)
