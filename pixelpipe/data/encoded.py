"""The arrays the frozen teacher writes for each row, named once: encode writes them, consolidate keeps them,
the workflow lists their files and the planner sizes them from this spec.

numpy only: the Snakefile imports it while parsing.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

ENCODED_FIELDS = ("sketches", "children", "checksums", "logits", "labels")
VIEW_FIELDS = ("view_logits", "view_windows")  # with encode.views > 1: the teacher's reading of fixed windows


class EncoderShape(Protocol):
    """What the spec reads of a model.encoder.EncoderConfig (data/ sits below model/ in the layers)."""

    num_capsules: int
    dim: int
    num_children: int
    checksum_bits: int
    num_classes: int


def dataset_fields(views: int) -> list[str]:
    """The fields encode writes and consolidate keeps for `encode.views`, in order."""
    return [*ENCODED_FIELDS, *(VIEW_FIELDS if views > 1 else ())]


def encoded_fields(cfg: EncoderShape, n: int, views: int = 1) -> dict[str, tuple[tuple[int, ...], type]]:
    """Shape and dtype of every array encode writes for `n` samples (and `views` - 1 windows of each)."""
    shapes: dict[str, tuple[tuple[int, ...], type]] = {
        "sketches": ((n, cfg.num_capsules, cfg.dim), np.float16),
        "children": ((n, cfg.num_capsules, cfg.num_children, cfg.dim), np.float16),
        "checksums": ((n, cfg.num_capsules, cfg.checksum_bits // 8), np.uint8),
        "logits": ((n, cfg.num_classes), np.float32),
        "labels": ((n,), np.int64),
        "view_logits": ((n, views - 1, cfg.num_classes), np.float16),
        "view_windows": ((n, views - 1, 2), np.int16),
    }
    return {name: shapes[name] for name in dataset_fields(views)}
