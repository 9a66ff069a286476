"""The held-out sets: real text no training row comes from, cut into sets and perturbed.

A model that learned its corpus has not yet shown it reads what people
write. The evaluation texts come from the shipped held-out sources
(pixelpipe/data/text, role "heldout": the Universal Declaration of Human
Rights, and software catalogs of another family than any training source),
never from a training source. Three sets: `prose` (whole sentences),
`phrases` (a 15-40-character piece cut from each sentence at word
boundaries) and `ui` (interface strings). Each set is read clean and under
every perturbation of pixelpipe.data.perturb (look-alike letters of another
script, dropped diacritics, typos, case changes, typographic punctuation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..config.settings import Section
from ..data import sources
from ..data.atlas import undrawable
from ..data.perturb import PERTURBATIONS

CLEAN = "clean"  # the perturbation that leaves a text as it is
PHRASE_CHARS = (15, 40)


@dataclass(frozen=True)
class EvaluateSettings(Section):
    """The `evaluate` section (defaults and meaning: the schema)."""

    SECTION = "evaluate"

    sources: list[str]
    perturbations: list[str]
    per_language: int
    batch_size: int


def phrases(text: str, rng: np.random.Generator, lo: int = PHRASE_CHARS[0], hi: int = PHRASE_CHARS[1]) -> list[str]:
    """Consecutive pieces of `text` of lo..hi characters, cut at word boundaries (each piece's target drawn)."""
    words, out, piece = text.split(), [], ""
    target = int(rng.integers(lo, hi + 1))
    for word in words:
        candidate = f"{piece} {word}".strip()
        if len(candidate) > hi and len(piece) >= lo:
            out.append(piece)
            candidate, target = word, int(rng.integers(lo, hi + 1))
        piece = candidate
        if len(piece) >= target:
            out.append(piece)
            piece, target = "", int(rng.integers(lo, hi + 1))
    return [p for p in out if lo <= len(p) <= hi]


def heldout_sets(settings: EvaluateSettings, languages: Sequence[str], fonts: Sequence[str],
                 seed: int) -> dict[str, pd.DataFrame]:
    """{set name: rows (text, label, source)} of the held-out sources, at most per_language rows per source and
    language, texts the fonts cannot draw left out (they could not be rendered for any model)."""
    rng = np.random.default_rng([seed, 11])
    sets: dict[str, list[pd.DataFrame]] = {}
    for source in settings.sources:
        entry = sources.catalog()[source]
        if entry["role"] != "heldout":
            raise ValueError(f"evaluate.sources: {source!r} is a training source; only held-out sources judge a model")
        df = sources.load_source(source)
        df = df[df["label"].isin(list(languages))]
        keep = [np.sort(rng.permutation(idx)[: settings.per_language]) for _, idx in df.groupby("label").indices.items()]
        df = df.iloc[np.sort(np.concatenate(keep))] if keep else df.iloc[:0]
        df = df[[not undrawable(t, fonts) for t in df["text"]]]
        name = "prose" if entry["style"] == "prose" else "ui"
        sets.setdefault(name, []).append(df[["text", "label", "source"]])
        if name == "prose":
            pieces = [(phrases(r.text, rng), r.label, r.source) for r in df.itertuples()]
            cut = [(p[int(rng.integers(len(p)))], lab, src) for p, lab, src in pieces if p]  # one per sentence
            sets.setdefault("phrases", []).append(pd.DataFrame(cut, columns=["text", "label", "source"]))
    return {k: pd.concat(v, ignore_index=True) for k, v in sets.items()}


def perturbed(texts: Sequence[str], labels: Sequence[str], kind: str, seed: int) -> list[str]:
    """`texts` under one perturbation (clean: unchanged); each text's draws depend on (seed, kind, row) only."""
    if kind == CLEAN:
        return list(texts)
    fn = PERTURBATIONS[kind]
    k = sorted(PERTURBATIONS).index(kind)
    return [fn(t, np.random.default_rng([seed, 13, k, i]), lang) for i, (t, lang) in enumerate(zip(texts, labels))]
