"""Every model on every held-out set, clean and perturbed, counted by length bucket; accuracy tables of the counts.

The models are callables, texts -> predicted labels (pixelpipe.evaluate.scorers: teacher, student, ONNX fp32
and int8, the n-gram baseline, and ONNX fp32 answering only among the languages py3langid knows;
pixelpipe.evaluate.reference: py3langid when it is installed, restricted to the model's labels). A scorer with a
`scope` attribute is counted over that scope alone and reads only its texts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .sets import CLEAN, perturbed

BUCKETS = (("<20", 1, 19), ("20-40", 20, 40), ("40-100", 41, 100), (">100", 101, 1 << 30))
GOAL_LENGTHS = (("15-40", 15, 40), (">40", 41, 1 << 30))


def bucket_of(n: int, buckets: Sequence[tuple[str, int, int]] = BUCKETS) -> str | None:
    return next((name for name, lo, hi in buckets if lo <= n <= hi), None)


Scorer = Callable[[list[str]], list[str]]  # texts -> predicted labels


ALL, COMMON = "all", "common"  # scopes: every text, or only those whose language the reference also knows


@dataclass
class Scores:
    """What `score` found: count rows (model, set, perturbation, length bucket, scope: n and correct), the first
    misread texts per model, and per model and language on clean text: n, correct and what it was read as."""

    rows: list[dict]
    examples: dict[str, list[dict]]
    languages: dict[str, dict[str, dict]]


def score(scorers: dict[str, Scorer], sets: dict[str, pd.DataFrame], kinds: Sequence[str], seed: int,
          log: Callable[[str], Any] = print, common: Sequence[str] | None = None) -> Scores:
    """Every model on every set, clean and perturbed, by length bucket. With `common` (the languages a reference
    such as py3langid knows, when it knows fewer than the models), each count is also taken over the texts of
    those languages alone (scope "common"), where the reference is compared with the models."""
    rows, examples = [], {name: [] for name in scorers}
    languages: dict[str, dict[str, dict]] = {name: {} for name in scorers}
    for set_name, df in sets.items():
        truth = df["label"].tolist()
        scopes = {ALL: np.ones(len(df), bool)}
        if common is not None:
            scopes[COMMON] = df["label"].isin(list(common)).to_numpy()
        for kind in [CLEAN, *kinds]:
            texts = perturbed(df["text"].tolist(), truth, kind, seed)
            lengths = np.array([len(re.sub(r"\s+", " ", t).strip()) for t in texts])
            for name, predict in scorers.items():
                only = getattr(predict, "scope", None)  # a scorer counted over one scope alone, on its texts alone
                if only is not None and only not in scopes:
                    continue
                pick = np.flatnonzero(scopes[only]) if only else np.arange(len(texts))
                texts_in, truth_in = ([texts[i] for i in pick], [truth[i] for i in pick]) if only else (texts, truth)
                predicted = list(predict(texts_in))
                key = getattr(predict, "label_key", None)  # a reference answering in its own codes
                expected = [key(y) for y in truth_in] if key else truth_in
                right = np.zeros(len(texts), bool)
                right[pick] = np.asarray(predicted, dtype=object) == np.asarray(expected, dtype=object)
                for scope, sel in scopes.items():
                    if only is None or scope == only:
                        rows += _bucket_rows(name, set_name, kind, lengths[sel], right[sel], scope)
                if kind == CLEAN:
                    examples[name] += [{"set": set_name, "text": t, "label": y} for t, y, ok in
                                       zip(texts_in, truth_in, right[pick]) if not ok][: 10]
                    _tally(languages[name], truth_in, predicted, expected)
            log(f"evaluate: {set_name} / {kind}: {len(texts)} texts scored by {len(scorers)} models")
    return Scores(rows, examples, languages)


def _tally(per_language: dict[str, dict], truth: Sequence[str], predicted: Sequence[str | None],
           expected: Sequence[str]) -> None:
    for y, p, want in zip(truth, predicted, expected):
        entry = per_language.setdefault(y, {"n": 0, "correct": 0, "read_as": {}})
        entry["n"] += 1
        if p == want:
            entry["correct"] += 1
        else:
            key = p if p else "(none)"
            entry["read_as"][key] = entry["read_as"].get(key, 0) + 1


def _bucket_rows(model: str, set_name: str, kind: str, lengths: np.ndarray, right: np.ndarray,
                 scope: str = ALL) -> list[dict]:
    out = []
    for name, lo, hi in BUCKETS + GOAL_LENGTHS + (("all", 1, 1 << 30),):
        sel = (lengths >= lo) & (lengths <= hi)
        if sel.any():
            out.append({"model": model, "set": set_name, "perturbation": kind, "bucket": name, "n": int(sel.sum()),
                        "correct": int(right[sel].sum()), "scope": scope})
    return out


def accuracy_table(rows: list[dict], **where: Any) -> pd.DataFrame:
    """Accuracy (%) pooled over the rows matching `where` (e.g. bucket="all"), models as columns; over every text
    (scope "all") unless `scope` is given."""
    df = pd.DataFrame(rows)
    if "scope" not in df:
        df["scope"] = ALL
    where.setdefault("scope", ALL)
    for key, value in where.items():
        df = df[df[key].isin(value if isinstance(value, (list, tuple)) else [value])]
    keys = [c for c in ("set", "perturbation", "bucket") if c not in where]
    if df.empty:
        return pd.DataFrame()
    if not keys:
        df, keys = df.assign(pooled="all"), ["pooled"]
    sums = df.groupby(keys + ["model"], sort=False)[["correct", "n"]].sum()
    return (100 * sums["correct"] / sums["n"]).unstack("model")


def clean_accuracy_all_sets(result: dict, scope: str = ALL) -> pd.DataFrame:
    """Clean-text accuracy (%) of an evaluation result pooled over all its sets: one row ("all"), models as columns
    (over every text, or the `scope` "common" texts whose language the reference knows)."""
    return accuracy_table(result["rows"], perturbation=CLEAN, bucket="all", set=list(result["sets"]), scope=scope)
