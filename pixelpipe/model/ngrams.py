"""Hashed glyph n-gram tables: what words look like, held in a table that costs one lookup per n-gram.

The pixel stem and its n-gram convolution see a few characters at a time
through a handful of filters; a language's vocabulary needs far more
capacity than that, and a table holds it without FLOPs (fastText, py3langid).
`GlyphNgrams` hashes every glyph n-gram of order 1..N of a text (keys from
the glyphs' pixels: pixelpipe.data.glyphkeys) into one of 2^bits rows of an
embedding table and returns the mean of their rows. The same integer
arithmetic runs here, in numpy (the reference, tested equal) and in the
exported ONNX graph, so the deployed model indexes exactly the rows training
learned. On CPU the table's gradient is sparse (only the rows a batch
touches), which the engine's optimizer updates lazily (train.optim).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.glyphkeys import KEY_BITS, KEY_MOD, MIX, cell_keys, key_weights, order_salts


def ngram_buckets(keys: torch.Tensor, lengths: torch.Tensor, salts: torch.Tensor,
                  bucket_bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(bucket ids [B, T + 2, N], valid [B, T + 2, N]) of every n-gram of order 1..N.

    `keys` int64 [B, T, N]: each position's glyph keys in reading order (zero, the blank's, past a text's end);
    `lengths` [B]. Entry [b, p, n - 1] is the order-n n-gram starting at position p of the text padded with
    one blank on each side; it is valid when it ends at or before the closing blank (p <= length + 2 - n)."""
    b, t, orders = keys.shape
    padded = F.pad(keys, (0, 0, 1, 1))  # [B, T + 2, N]: the blank before and after (keys 0)
    span = t + 2
    h = padded[:, :, 0]
    hashes = [h]
    for n in range(2, orders + 1):
        h = h[:, :-1] + padded[:, n - 1 :, n - 1]  # starts 0 .. span - n
        hashes.append(F.pad(h, (0, n - 1)))
    stacked = torch.stack(hashes, -1)  # [B, span, N]
    p = torch.arange(span, device=keys.device)[None, :, None]
    order = torch.arange(1, orders + 1, device=keys.device)[None, None, :]
    valid = p <= lengths.to(keys.device)[:, None, None] + 2 - order
    return bucket_ids(stacked, salts[:orders], bucket_bits), valid


def bucket_ids(h: torch.Tensor, salt: torch.Tensor, bucket_bits: int) -> torch.Tensor:
    """Bucket of summed keys `h` (torch twin of glyphkeys.bucket_of): multiplicative hashing, top bits."""
    return torch.remainder(torch.remainder(h + salt, KEY_MOD) * MIX, KEY_MOD) // (1 << (KEY_BITS - bucket_bits))


def word_buckets(keys: torch.Tensor, salt: torch.Tensor, bucket_bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(bucket ids [B, (T + 3) // 2], valid) of every word (a run of non-blank cells) of the key sequences
    [B, T, >= 2] padded with a blank on each side, in reading order: the sum of the bigram hashes that end in its
    cells (the first is (blank, first cell), so a word's start counts and "ab" and "ba" differ), plus its salt.
    A word ends at a cell followed by a blank, so no two neighbouring cells both end one: one slot a pair of
    cells, half the table rows a slot a cell would gather for every text (most of them masked).

    A running sum less its value at the word's opening blank (each blank starts a group: its value scattered to
    the group's slot, gathered back by every cell of the group): integer CumSum, ScatterElements and
    GatherElements, O(T) and exact in ONNX too (a text of T cells sums below T * 2^32 < 2^63)."""
    first = F.pad(keys[:, :, 0], (1, 1))  # [B, S = T + 2]: the blank before and after
    blank = first == 0
    ending_here = F.pad(first[:, :-1] + F.pad(keys[:, :, 1], (1, 1))[:, 1:], (1, 0))  # bigram (q - 1, q) at q
    running = torch.cumsum(torch.where(blank, torch.zeros_like(ending_here), ending_here), 1)
    group = torch.cumsum(blank.to(torch.int64), 1)  # a word's cells share its opening blank's count
    at_blank = torch.zeros(group.shape[0], group.shape[1] + 1, dtype=running.dtype, device=running.device)
    at_blank = at_blank.scatter_add(1, group, torch.where(blank, running, torch.zeros_like(running)))
    sums = F.pad(running - at_blank.gather(1, group), (0, 1))
    ends = F.pad(~blank[:, :-1] & blank[:, 1:], (0, 2))  # [B, S + 1]: a non-blank cell, then a blank
    span = first.shape[1]
    even, odd = slice(0, span, 2), slice(1, span + 1, 2)  # (S + 1) // 2 pairs, the last padded when S is odd
    word = torch.where(ends[:, even], sums[:, even], sums[:, odd])
    return bucket_ids(word, salt, bucket_bits), ends[:, even] | ends[:, odd]


def pixel_keys(cells: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """int64 keys [..., N] of uint8-valued cells [..., ch * cw] (torch twin of glyphkeys.cell_keys)."""
    flat = cells.to(torch.int64)
    return torch.stack([torch.remainder((flat * w).sum(-1), KEY_MOD) for w in weights], -1)


class GlyphNgrams(nn.Module):
    """Mean of the table rows of a text's hashed glyph n-grams, order 1..`orders` (and, with `words`, of its
    whole words: the long-text cues between close relatives, as fastText's word features)."""

    def __init__(self, orders: int, bucket_bits: int, dim: int, pixels: int, dropout: float = 0.0,
                 words: bool = False) -> None:
        super().__init__()
        self.orders, self.bucket_bits, self.dropout, self.words = orders, bucket_bits, dropout, words
        self.table = nn.Embedding(1 << bucket_bits, dim, sparse=True)
        nn.init.normal_(self.table.weight, std=0.02)
        # one salt per order, then the words'
        self.register_buffer("salts", torch.from_numpy(order_salts(orders + words)), persistent=False)
        self.register_buffer("weights", torch.from_numpy(key_weights(pixels, orders)), persistent=False)
        # keys of the atlas's glyphs [G, N], set with the atlas (they are a function of its pixels)
        self.register_buffer("keys", torch.zeros(1, orders, dtype=torch.int64), persistent=False)

    def set_atlas(self, cells: np.ndarray) -> None:
        """Keys of the uint8 atlas cells [G, ch, cw] (glyph id = index)."""
        self.keys = torch.from_numpy(cell_keys(cells, self.orders)).to(self.keys.device)

    def buckets(self, keys: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids [B, K], valid [B, K]): every n-gram's slot of the key sequences [B, T, N], then every word's."""
        ids, valid = ngram_buckets(keys, lengths, self.salts, self.bucket_bits)
        ids, valid = ids.flatten(1), valid.flatten(1)
        if self.words:
            word_ids, word_valid = word_buckets(keys, self.salts[self.orders], self.bucket_bits)
            ids, valid = torch.cat([ids, word_ids], 1), torch.cat([valid, word_valid], 1)
        return ids, valid

    def pooled(self, keys: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """[B, dim]: mean row over every valid n-gram of the key sequences [B, T, N], as one bag per text
        (fastText's EmbeddingBag: no [B, P * N, dim] intermediate, and only the rows of real n-grams get a
        gradient)."""
        ids, valid = self.buckets(keys, lengths)
        if self.training and self.dropout > 0:
            valid = valid & (torch.rand(valid.shape, device=valid.device) >= self.dropout)
        counts = valid.sum(1)
        offsets = torch.cumsum(counts, 0) - counts
        flat = ids[valid]
        if self.table.sparse and torch.is_grad_enabled() and self.table.weight.requires_grad:
            # each distinct row gathered once: the table's sparse gradient then holds every touched row once, in
            # order (the optimizer skips coalescing a gradient of one value per n-gram; bench/train_step.py)
            distinct, inverse = torch.unique(flat, return_inverse=True)
            rows = F.embedding(distinct, self.table.weight, sparse=True)
            return F.embedding_bag(inverse, rows, offsets, mode="mean")
        return F.embedding_bag(flat, self.table.weight, offsets, mode="mean", sparse=self.table.sparse)

    def pooled_gathered(self, keys: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """`pooled` as a gather and a masked mean (what the exported ONNX graph computes: it has no bag op)."""
        ids, valid = self.buckets(keys, lengths)
        rows = self.table(ids)  # [B, K, dim]
        w = valid[:, None, :].to(rows.dtype)
        w = w / w.sum(-1, keepdim=True).clamp(min=1)
        return torch.matmul(w, rows).squeeze(1)  # the masked mean as one batched product

    def from_glyphs(self, glyphs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Pooled rows of glyph ids [B, T] (blank, id 0, past each text's end)."""
        return self.pooled(self.keys[glyphs], lengths)

    def from_cells(self, cells: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Pooled rows of image cells [B, T, ch * cw] (uint8 values): keys straight from the pixels."""
        return self.pooled(pixel_keys(cells, self.weights), lengths)
