"""A text longer than the layout, read whole: cut into equal windows no longer than the layout, logits averaged.

Training lays every text out in `cells` characters (one 96-character line on the CPU profile), so a model
read only the start of a paragraph: on the held-out texts over 100 characters the student was 1 point behind
py3langid, which reads all of them. A text of n characters (up to `MAX_WINDOWS * cells`) is read as
k = ceil(n / cells) consecutive windows of n / k characters each (rounded down or up: never shorter than half
the layout, a length training saw, and every character read once), and its logits are their mean (the mean
of the windows' log-probabilities up to a constant: each window's evidence counts once, and the confidence
stays that of one window, which calibration fitted). A text of at most `cells` characters is its own one window.
Windows of the layout's full size spread over the text read the overlap twice: 1.24 times the characters of
the held-out prose, for no accuracy (docs/benchmarks.md). Past `MAX_WINDOWS * cells` characters a text is
truncated. numpy only: predict runs without torch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

MAX_WINDOWS = 8  # a text is read up to 8 x cells characters (768 on the CPU profile's one 96-character line)


def window_spans(lengths: np.ndarray, cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner [M], start [M], length [M]) of the windows of texts of `lengths` characters, every text's in order
    (owner ascending): k = ceil(n / cells) windows, the i-th covering [floor(i n / k), floor((i + 1) n / k))."""
    n = np.maximum(np.asarray(lengths, np.int64), 1)
    k = -(-n // cells)
    owner = np.repeat(np.arange(len(n)), k)
    index = np.arange(len(owner)) - np.repeat(np.cumsum(k) - k, k)  # the window's place among its text's
    start = index * n[owner] // k[owner]
    return owner, start, (index + 1) * n[owner] // k[owner] - start


def windowed_logits(ids: np.ndarray, lengths: np.ndarray, cells: int,
                    score: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Logits [N, C] of texts laid out whole in `ids` [N, width] with `lengths` characters (at most width):
    `score(ids [M, cells or fewer], lengths [M])` is a model's logits. The texts of at most `cells` characters
    are scored as laid out, the longer ones' windows in one more call."""
    lengths = np.asarray(lengths, np.int64)
    long = np.flatnonzero(lengths > cells)
    if len(long) == 0:
        return score(ids[:, :cells], lengths)
    short = np.flatnonzero(lengths <= cells)
    owner, start, m = window_spans(lengths[long], cells)
    cols = np.minimum(start[:, None] + np.arange(cells)[None], ids.shape[1] - 1)
    windows = np.where(np.arange(cells)[None] < m[:, None], ids[long[owner][:, None], cols], 0).astype(ids.dtype)
    window_logits = score(windows, m)
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])  # each long text's first window
    total = np.add.reduceat(window_logits.astype(np.float64), first, axis=0)
    out = np.empty((len(lengths), window_logits.shape[1]), window_logits.dtype)
    out[long] = total / np.diff(np.r_[first, len(owner)])[:, None]
    if len(short):
        out[short] = score(ids[short, :cells], lengths[short])
    return out
