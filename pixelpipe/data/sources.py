"""The built-in corpus sources: real human-written text shipped with the package, and Faker.

Real text lives in pixelpipe/data/text/ (prepared once by tools/prepare_text.py
from Debian and npm packages; provenance and licenses in SOURCES.md, LICENSES/
and sources.json): one parquet per source with columns text, label, source,
origin. Sources whose role is "train" may feed the corpus; "heldout" sources
never do (they are the evaluation's). `faker` is synthetic (Faker's lorem
providers, shuffled word lists): an option for tests and for filling a corpus
larger than the real text, never the judge of a model.

A built-in corpus of N rows is balanced over the languages (N / languages
each); within a language the listed sources share its quota equally, a
source short of rows leaves its remainder to the others, and `faker`, when
listed, fills whatever the real sources lack.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

TEXT_DIR = Path(__file__).parent / "text"
FAKER = "faker"
DEFAULT_LOCALES = (
    "ar_AA", "az_AZ", "cs_CZ", "da_DK", "de_DE", "el_GR", "en_US", "es_ES", "fa_IR", "fr_FR",
    "he_IL", "hy_AM", "it_IT", "mk_MK", "nl_NL", "pl_PL", "ru_RU", "uk_UA", "vi_VN",
)  # fmt: skip
LANGUAGES = tuple(loc.split("_")[0] for loc in DEFAULT_LOCALES)
COLUMNS = ("text", "label", "source", "origin")


@functools.cache
def catalog() -> dict[str, dict]:
    """Source id -> its sources.json entry (role, style, package, version, license, counts)."""
    path = TEXT_DIR / "sources.json"
    entries = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    return {e["id"]: e for e in entries}


def training_sources() -> list[str]:
    return [i for i, e in catalog().items() if e["role"] == "train"]


def heldout_sources() -> list[str]:
    return [i for i, e in catalog().items() if e["role"] == "heldout"]


def load_source(source: str) -> pd.DataFrame:
    """One shipped source's rows (text, label, source, origin)."""
    if source not in catalog():
        raise ValueError(f"unknown text source {source!r}; shipped: {sorted(catalog())}")
    return pd.read_parquet(TEXT_DIR / f"{source}.parquet", columns=list(COLUMNS))


def check_sources(sources: Sequence[str]) -> None:
    """Refuse held-out or unknown sources in a training corpus, naming the key."""
    for s in sources:
        if s == FAKER:
            continue
        entry = catalog().get(s)
        if entry is None:
            raise ValueError(f"corpus.sources: unknown source {s!r}; choose from {training_sources() + [FAKER]}")
        if entry["role"] != "train":
            raise ValueError(f"corpus.sources: {s!r} is a held-out evaluation source and never trains a model")


def language_quotas(num_samples: int, languages: Sequence[str]) -> dict[str, int]:
    """Rows per language: an equal share, the remainder to the first languages."""
    q, r = divmod(num_samples, len(languages))
    return {lang: q + (i < r) for i, lang in enumerate(languages)}


def source_shares(quota: int, available: dict[str, int], faker: bool) -> dict[str, int]:
    """How many rows each real source gives a language (equal shares, shortfalls passed on) and what Faker fills."""
    take = {s: 0 for s in available}
    left = quota
    while left > 0:
        open_ = [s for s in available if take[s] < available[s]]
        if not open_:
            break
        share = max(1, left // len(open_))
        for s in open_:
            give = min(share, available[s] - take[s], left)
            take[s] += give
            left -= give
    if faker:
        take[FAKER] = left
    return take


def sample_real(sources: Sequence[str], quotas: dict[str, int], seed: int, faker: bool) -> tuple[pd.DataFrame, dict]:
    """(real rows drawn per language, {language: rows Faker must add}); duplicates across sources dropped."""
    frames = [load_source(s) for s in sources if s != FAKER]
    pool = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))
    pool = pool[pool["label"].isin(list(quotas))].drop_duplicates(["label", "text"])
    rng = np.random.default_rng([seed, 7])
    picked, fill = [], {}
    for lang, quota in quotas.items():
        rows = pool[pool["label"] == lang]
        groups = {s: g for s, g in rows.groupby("source", sort=False)}
        shares = source_shares(quota, {s: len(groups.get(s, ())) for s in sources if s != FAKER}, faker)
        for s, n in shares.items():
            if s != FAKER and n:
                picked.append(groups[s].iloc[np.sort(rng.choice(len(groups[s]), n, replace=False))])
        fill[lang] = shares.get(FAKER, 0)
    real = pd.concat(picked, ignore_index=True) if picked else pd.DataFrame(columns=list(COLUMNS))
    return real, fill


def faker_text(fake, min_chars: int, max_chars: int) -> str:
    """A text of whole Faker sentences, min_chars to max_chars long (cut at a word boundary)."""
    target = fake.random_int(min_chars, max_chars)
    text = fake.sentence()
    while len(text) < target:
        text += " " + fake.sentence()
    if len(text) > max_chars:
        cut = text[: max_chars + 1].rfind(" ")
        text = text[:cut] if cut >= min_chars else text[:max_chars]
    return text


def faker_rows(counts: dict[str, int], min_chars: int, max_chars: int, seed: int,
               chunk: int = 20_000) -> Iterator[pd.DataFrame]:
    """Faker texts, `counts[lang]` per language, interleaved over the languages, in chunks of `chunk` rows.

    Each locale's Faker is seeded on its own (seed * languages + index), so the texts depend only on the
    arguments; generated lazily, so a corpus of millions of rows never sits in memory at once.
    """
    if not 0 < min_chars <= max_chars:
        raise ValueError(f"corpus.min_chars ({min_chars}) must be > 0 and <= corpus.max_chars ({max_chars})")
    from faker import Faker

    locales = {loc.split("_")[0]: loc for loc in DEFAULT_LOCALES}
    fakers = {}
    for i, lang in enumerate(LANGUAGES):
        if counts.get(lang):
            fakers[lang] = Faker(locales[lang])
            fakers[lang].seed_instance(seed * len(LANGUAGES) + i)
    left = {lang: n for lang, n in counts.items() if n}
    buf: list[tuple[str, str]] = []
    while left:
        for lang in list(left):
            buf.append((faker_text(fakers[lang], min_chars, max_chars), lang))
            left[lang] -= 1
            if not left[lang]:
                del left[lang]
        if len(buf) >= chunk or not left:
            yield pd.DataFrame({"text": [t for t, _ in buf], "label": [lang for _, lang in buf],
                                "source": FAKER, "origin": [f"faker:{locales[lang]}" for _, lang in buf]})
            buf = []
