"""The order in which rows are scored in batches trimmed to their longest text."""

from __future__ import annotations

import numpy as np


def longest_first(lengths: np.ndarray) -> np.ndarray:
    """Row positions by length, longest first (stable among equals).

    Sorting keeps texts of similar length in a batch (little compute on padding); longest first makes the
    first batch allocate the largest buffers, which every later, shorter batch then reuses. Shortest first
    grows each allocation a little past the freed ones, and glibc's heap (onnxruntime's arena) keeps them
    all: measured on the default teacher encoding a 16,384-row shard, 502-518 MB peak shortest first,
    351-372 MB longest first (same outputs).
    """
    lengths = np.asarray(lengths)
    return np.argsort(-lengths.astype(np.int64), kind="stable")
