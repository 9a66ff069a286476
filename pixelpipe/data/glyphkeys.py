"""Pixel hashes of glyph cells: the keys that index the models' n-gram tables.

A language is told by the character n-grams it is made of, and a table with
one row per hashed n-gram (fastText, py3langid) holds that knowledge at the
cost of one lookup. pixelpipe hashes what a reader sees rather than code
points: a glyph's key is a fixed random linear function of its cell's
pixels, modulo 2^31 (`cell_keys`), so two characters that draw identically
(Latin "a" and Cyrillic "а") share every n-gram row, and a character the
atlas lacks gets its key from the pixels it is drawn with, at training, at
prediction (numpy here, no torch) and inside the exported ONNX graph alike.

The n-gram of order n starting at position p of a text padded with one blank
cell on each side hashes to sum_{i<n} key[glyph p+i][i] (a per-position key,
so "ab" and "ba" differ), plus a salt per order, mixed by a multiplicative
hash whose top bits pick the bucket (`bucket_of`). All of it is integer
arithmetic below 2^63, exact on every backend. The blank cell's keys are all
zero, which is also what the deployed PAD row holds.
"""

from __future__ import annotations

import numpy as np

KEY_BITS = 31
KEY_MOD = 1 << KEY_BITS
MIX = 0x5BD1E995  # odd, < 2^31: (h * MIX) mod 2^31 spreads every bit of h into the top bits
MAX_ORDER = 8
_SEED = 0x9E3779B9


def key_weights(pixels: int, orders: int) -> np.ndarray:
    """int64 [orders, pixels]: the fixed random weights of each n-gram position's key (the same everywhere)."""
    rng = np.random.default_rng([_SEED, pixels])
    return rng.integers(0, KEY_MOD, size=(MAX_ORDER, pixels), dtype=np.int64)[:orders]


def order_salts(orders: int) -> np.ndarray:
    """int64 [orders]: a constant added to the hash of each order, so a bigram and a unigram rarely share a row."""
    return np.random.default_rng([_SEED, 1]).integers(0, KEY_MOD, size=MAX_ORDER, dtype=np.int64)[:orders]


def cell_keys(cells: np.ndarray, orders: int, weights: np.ndarray | None = None) -> np.ndarray:
    """int64 [G, orders] keys of uint8 cells [G, ch, cw]: (pixels . weights[i]) mod 2^31 for each position i
    (`weights`: key_weights of the cells' pixels and `orders`, as a model file carries them).

    Exact in int64 (255 * 2^31 * pixels < 2^63 for cells up to 2^23 pixels); a blank cell's keys are 0."""
    if not 1 <= orders <= MAX_ORDER:
        raise ValueError(f"n-gram orders must be 1..{MAX_ORDER}, got {orders}")
    cells = np.asarray(cells, np.uint8).reshape(len(cells), -1)
    weights = key_weights(cells.shape[1], orders) if weights is None else weights
    if weights.shape != (orders, cells.shape[1]):
        raise ValueError(f"key weights {weights.shape} do not fit {orders} orders of {cells.shape[1]}-pixel cells")
    out = np.empty((len(cells), orders), np.int64)
    for start in range(0, len(cells), 1024):  # int64 temporaries of 1,024 cells, not of a whole atlas
        flat = cells[start : start + 1024].astype(np.int64)
        for i in range(orders):  # integer dot products, one position at a time (no BLAS for int64)
            out[start : start + len(flat), i] = (flat * weights[i]).sum(1) % KEY_MOD
    return out


def bucket_of(h: np.ndarray, salt: int, bucket_bits: int) -> np.ndarray:
    """Bucket (0 .. 2^bucket_bits - 1) of summed keys `h`: multiplicative hashing, top bits."""
    return ((((h + salt) % KEY_MOD) * MIX) % KEY_MOD) >> (KEY_BITS - bucket_bits)


def text_buckets(keys: np.ndarray, orders: int, bucket_bits: int, words: bool = False) -> list[np.ndarray]:
    """The bucket of every n-gram of one text, per order, then (with `words`) of every word (the reference the
    models are tested against).

    `keys` int64 [L, >= orders]: the text's glyph keys in reading order; the text is padded with one blank
    (keys 0) on each side, so its first and last characters also start and end n-grams at a word boundary.
    A word, a run of non-blank cells, hashes to the sum of the bigrams that end in its cells."""
    padded = np.concatenate([np.zeros((1, keys.shape[1]), np.int64), keys, np.zeros((1, keys.shape[1]), np.int64)])
    salts = order_salts(orders + words)
    out = []
    for n in range(1, orders + 1):
        starts = len(padded) - n + 1
        h = sum(padded[i : i + starts, i] for i in range(n)) if starts > 0 else np.zeros(0, np.int64)
        out.append(bucket_of(np.asarray(h, np.int64), int(salts[n - 1]), bucket_bits))
    if words:
        blank = padded[:, 0] == 0
        sums, word = [], 0
        for q in range(1, len(padded)):
            if blank[q]:
                if not blank[q - 1]:
                    sums.append(word)
                word = 0
            else:
                word += int(padded[q - 1, 0] + padded[q, 1])
        out.append(bucket_of(np.asarray(sums, np.int64), int(salts[orders]), bucket_bits))
    return out
