"""Training augmentation that mirrors real text: a share of each batch's texts rewritten as people write them.

The cache holds glyph ids, and a glyph id is a cluster of the run's charset,
so a row decodes back to its (normalized, possibly truncated) text. A drawn
share of the rows is rewritten by one of pixelpipe.data.perturb's
AUGMENTATIONS (typos, case, dropped diacritics, look-alike letters,
punctuation and spacing variants, numbers and names inside sentences) and
laid out again; a rewrite that needs a character the charset lacks is not
used (the row stays as it was), so every glyph stays one the model's atlas
holds. The draws depend only on (seed, step, row), so a resumed run, or one
with DataLoader workers, augments exactly as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .atlas import GlyphAtlas
from .charset import text_clusters
from .perturb import AUGMENTATIONS
from .render import Renderer, RenderSettings


class TextAugmenter:
    """A CacheDataset row transform: rewrites each row with probability `prob` by one of `kinds`."""

    def __init__(self, atlas: GlyphAtlas, settings: RenderSettings, kinds: Sequence[str], prob: float,
                 languages: Sequence[str], seed: int) -> None:
        unknown = sorted(set(kinds) - set(AUGMENTATIONS))
        if unknown:
            raise ValueError(f"train.augment: unknown kind(s) {unknown}; choose from {sorted(AUGMENTATIONS)}")
        self.kinds, self.prob, self.seed = list(kinds), float(prob), seed
        self.clusters = np.asarray(atlas.clusters, dtype=object)
        self.known = set(atlas.clusters)
        self.languages = list(languages)
        self.renderer = Renderer(settings, atlas)
        self.glyphs = len(atlas)
        self.rewritten = 0

    def text(self, row: np.void) -> str:
        return "".join(self.clusters[row["glyphs"][: row["length"]]])

    def __call__(self, rows: np.ndarray, step: int | None, indices: Sequence[int]) -> np.ndarray:
        if not self.kinds or self.prob <= 0:
            return rows
        picked: list[int] = []
        texts: list[str] = []
        for j, index in enumerate(indices):
            rng = np.random.default_rng([self.seed, 0 if step is None else step + 1, int(index)])
            if rng.random() >= self.prob:
                continue
            kind = self.kinds[int(rng.integers(len(self.kinds)))]
            label = int(rows[j]["label"])
            lang = self.languages[label] if label < len(self.languages) else ""
            new = AUGMENTATIONS[kind](self.text(rows[j]), rng, lang)
            if new.strip() and text_clusters([new]) <= self.known:
                picked.append(j)
                texts.append(new)
        if not picked:
            return rows
        glyphs, full = self.renderer.layout(texts)
        out = rows.copy()
        out["glyphs"][picked] = glyphs
        out["length"][picked] = np.minimum(full, glyphs.shape[1])
        self.rewritten += len(picked)
        return out
