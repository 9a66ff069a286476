"""Judge the models on real text no training row comes from: held-out sources, by length and perturbation.

A model that learned its corpus has not yet shown it reads what people
write. The evaluation texts come from the shipped held-out sources
(pixelpipe/data/text, role "heldout": the Universal Declaration of Human
Rights, and software catalogs of another family than any training source),
never from a training source. Three sets: `prose` (whole sentences),
`phrases` (a 15-40-character piece cut from each sentence at word
boundaries) and `ui` (interface strings). Each set is scored clean and under
every perturbation of pixelpipe.data.perturb (look-alike letters of another
script, dropped diacritics, typos, case changes, typographic punctuation),
per length bucket, for every model the run built (teacher, student, ONNX
fp32 and int8, the n-gram baseline) and py3langid when it is installed (an
optional benchmark dependency, restricted to the model's labels).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..config.settings import Section
from ..data import sources
from ..data.atlas import undrawable
from ..data.perturb import PERTURBATIONS

BUCKETS = (("<20", 1, 19), ("20-40", 20, 40), ("40-100", 41, 100), (">100", 101, 1 << 30))
GOAL_LENGTHS = (("15-40", 15, 40), (">40", 41, 1 << 30))
CLEAN = "clean"
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
                predicted = list(predict(texts))
                key = getattr(predict, "label_key", None)  # a reference answering in its own codes
                expected = [key(y) for y in truth] if key else truth
                right = np.asarray(predicted, dtype=object) == np.asarray(expected, dtype=object)
                for scope, sel in scopes.items():
                    rows += _bucket_rows(name, set_name, kind, lengths[sel], right[sel], scope)
                if kind == CLEAN:
                    examples[name] += [{"set": set_name, "text": t, "label": y} for t, y, ok in
                                       zip(texts, truth, right) if not ok][: 10]
                    _tally(languages[name], truth, predicted, expected)
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


CALIBRATION_BUCKETS = (("<20", 1, 19), ("20-40", 20, 40), (">40", 41, 1 << 30), ("all", 1, 1 << 30))


def heldout_calibration(proba: Callable[[list[str]], np.ndarray], labels: Sequence[str],
                        sets: dict[str, pd.DataFrame]) -> dict:
    """How well the probabilities of a model (`proba`: texts -> [N, classes], NaN rows for texts it cannot
    classify) match its accuracy on the clean held-out texts of every set, pooled and per length bucket (ECE and
    the reliability bins), and what the can't-tell threshold trades: share answered against accuracy of the
    answers given, per bucket. Short texts are where a pooled ECE hides over-confidence."""
    from ..core.reliability import ece_of_bins, reliability
    from .decide import DEFAULT_THRESHOLD, Decider, selective_accuracy

    texts = [t for df in sets.values() for t in df["text"]]
    index = {lab: i for i, lab in enumerate(labels)}
    truth = np.array([index[y] for df in sets.values() for y in df["label"]])
    lengths = np.array([len(re.sub(r"\s+", " ", t).strip()) for t in texts])
    probs = np.asarray(proba(texts), np.float64)
    ok = np.isfinite(probs).all(1)
    decider = Decider(labels)
    out: dict = {"threshold": DEFAULT_THRESHOLD, "groups": decider.groups, "buckets": {}}
    for name, lo, hi in CALIBRATION_BUCKETS:
        sel = ok & (lengths >= lo) & (lengths <= hi)
        if not sel.any():
            continue
        points = reliability(probs[sel], truth[sel])
        entry = {"texts": int(sel.sum()), "ece": ece_of_bins(points), "bins": points,
                 "selective": selective_accuracy(decider, probs[sel], truth[sel])}
        if name == "all":
            out.update(texts=entry["texts"], ece=entry["ece"], bins=points)
        out["buckets"][name] = entry
    return out


def py3langid_installed() -> bool:
    """Whether the optional benchmark dependency is there (the evaluation scores it, the planner sizes it)."""
    import importlib.util

    return importlib.util.find_spec("py3langid") is not None
