"""How many tokens the models compute per text: every batch is trimmed to its longest text.

The models mask past each text's end, so training, evaluation, encode and the deployed model cut a batch's glyph
columns at its longest text (whole lines when the layout has several), and compute every row of the batch at
that length. Compute and activations therefore follow the longest text of a batch, not the layout's capacity:
in training, under engine.length_grouping, about the length quantiles of a sorted chunk of batches (without it,
the expected longest of B texts drawn from the split's length histogram); in evaluation and encode, which sort
the whole split (shard) by length, close to the mean; at the peak, the split's longest text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.encoder import EncoderConfig


def tokens_for(enc: EncoderConfig, clusters: float) -> float:
    """Tokens of a batch trimmed to `clusters` clusters: the cells kept plus the `pair` stem's lead per line."""
    clusters = min(max(1.0, clusters), enc.cells)
    if enc.lines > 1:
        return float(np.ceil(clusters / enc.line_chars) * (enc.line_chars + enc.lead))
    return clusters + enc.lead


@dataclass(frozen=True)
class LengthStats:
    """A split's text lengths in clusters, truncated to the layout (index = length, value = texts)."""

    hist: np.ndarray

    @classmethod
    def from_histogram(cls, full: np.ndarray, cells: int) -> "LengthStats":
        """From texts per cluster count before truncation (what the corpus facts count)."""
        full = np.asarray(full, float)
        hist = np.zeros(cells + 1)
        hist[: min(len(full), cells + 1)] = full[: cells + 1]
        hist[cells] += full[cells + 1 :].sum()
        return cls(hist)

    @property
    def rows(self) -> float:
        return float(self.hist.sum())

    @property
    def mean(self) -> float:
        return float((np.arange(len(self.hist)) * self.hist).sum() / self.rows) if self.rows else 0.0

    @property
    def longest(self) -> int:
        nz = np.flatnonzero(self.hist > 0)
        return int(nz[-1]) if len(nz) else 0

    def window_cdf(self, window_prob: float = 0.0, min_chars: int = 1) -> np.ndarray:
        """P(one text's length, after data.windows.random_windows, <= x) for x = 0..cells."""
        x = np.arange(len(self.hist))[:, None]
        n = np.maximum(np.arange(len(self.hist)), 1)[None, :]  # random_windows clamps lengths to >= 1
        s = np.minimum(n, min_chars)
        window = np.clip((x - s + 1) / (n - s + 1), 0.0, 1.0)  # m uniform over s..n
        whole = (x >= n).astype(float)
        w = self.hist / max(self.rows, 1e-12)
        return ((1 - window_prob) * whole + window_prob * window) @ w

    def batch_tokens(self, enc: EncoderConfig, batch: int, window_prob: float = 0.0, min_chars: int = 1) -> float:
        """Expected tokens of a batch of `batch` texts trimmed to its longest (after windows, if drawn)."""
        if not self.rows:
            return tokens_for(enc, 1)
        cdf_max = np.clip(self.window_cdf(window_prob, min_chars), 0.0, 1.0) ** max(1, batch)
        pmf = np.diff(np.concatenate([[0.0], cdf_max]))
        return float(sum(p * tokens_for(enc, x) for x, p in enumerate(pmf) if p > 0))

    def grouped_batch_tokens(self, enc: EncoderConfig, batch: int, group: int, window_prob: float = 0.0,
                             min_chars: int = 1) -> float:
        """Expected tokens of a training batch under engine.length_grouping: a chunk of `group` batches is
        sorted by length and cut, so the k-th batch's longest is about the k/group quantile, and the last
        the longest of group x batch texts. 0 = plain shuffling (see train.sampling.epoch_order)."""
        if group < 2 or batch < 2 or not self.rows:
            return self.batch_tokens(enc, batch, window_prob, min_chars)
        cdf = np.clip(self.hist.cumsum() / self.rows, 0.0, 1.0)
        quantiles = np.searchsorted(cdf, np.arange(1, group) / group - 1e-12)
        top = self.batch_tokens(enc, group * batch)
        return float((sum(tokens_for(enc, x) for x in quantiles) + top) / group)

    def sorted_batch_tokens(self, enc: EncoderConfig, batch: int) -> float:
        """Expected tokens per text when the whole split is sorted by length and cut into batches, as
        evaluation and encode do: each batch is trimmed to its own longest text."""
        n = int(round(self.rows))
        if n < 1:
            return tokens_for(enc, 1)
        cum = self.hist.cumsum() * (n / self.rows)
        ends = np.minimum(np.arange(1, -(-n // batch) + 1) * batch, n)  # 1-based rank of each batch's last text
        longest = np.searchsorted(cum, ends - 0.5)
        sizes = np.diff(np.concatenate([[0], ends]))
        texts_at = np.bincount(longest, weights=sizes)  # texts per batch-longest length (at most cells + 1 values)
        return float(sum(k * tokens_for(enc, x) for x, k in enumerate(texts_at) if k) / n)

    def peak_tokens(self, enc: EncoderConfig) -> float:
        """Tokens of the largest batch: one holding the split's longest text."""
        return tokens_for(enc, self.longest)
