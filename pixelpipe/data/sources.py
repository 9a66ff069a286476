"""The built-in corpus sources and the language registry: real human-written text shipped with the package, and Faker.

Real text lives in pixelpipe/data/text/ (prepared once by tools/prepare_text/
from Debian and npm packages; provenance and licenses in SOURCES.md, LICENSES/
and sources.json): one parquet per source with columns text, label, source,
origin, one row group per language. Sources whose role is "train" may feed
the corpus; "heldout" sources never do (they are the evaluation's). The
languages are those of languages.json (the registry the prep tool writes:
code, English name, scripts, confusable groups, how much text each source
family has): every language with enough training text from at least two
independent source families. `faker` is synthetic (Faker's lorem providers,
shuffled word lists), for the 19 languages Faker has one of (FAKER_LOCALES): an
option for tests and for filling a corpus larger than the real text, never the
judge of a model.

A built-in corpus of N rows covers `corpus.languages` (default: every registry
language the listed sources have text in) and is balanced over them: each
language gets an equal share, a language with fewer rows than its share gives
all it has and the rows it lacks are shared equally by the others (so the corpus
holds N rows while the sources have them). Within a language the listed
sources share its quota equally, a source short of rows leaves its remainder to
the others, and `faker`, when listed, fills whatever the real sources lack in
the languages it has. Rows are read one language at a time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .languages import registry as languages_registry

TEXT_DIR = Path(__file__).parent / "text"
FAKER = "faker"
FAKER_LOCALES = {
    "ar": "ar_AA", "az": "az_AZ", "cs": "cs_CZ", "da": "da_DK", "de": "de_DE", "el": "el_GR", "en": "en_US",
    "es": "es_ES", "fa": "fa_IR", "fr": "fr_FR", "he": "he_IL", "hy": "hy_AM", "it": "it_IT", "mk": "mk_MK",
    "nl": "nl_NL", "pl": "pl_PL", "ru": "ru_RU", "uk": "uk_UA", "vi": "vi_VN",
}  # fmt: skip
DEFAULT_LOCALES = tuple(FAKER_LOCALES.values())  # the Faker locales (tests and benchmarks generate with them)
COLUMNS = ("text", "label", "source", "origin")


@functools.cache
def catalog() -> dict[str, dict]:
    """Source id -> its sources.json entry (role, style, family, package, version, license, counts)."""
    path = TEXT_DIR / "sources.json"
    entries = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    return {e["id"]: e for e in entries}


def registry() -> dict[str, dict]:
    """Language code -> its languages.json entry (name, scripts, groups, strings, families, udhr): the one reader
    predict shares (pixelpipe.data.languages, no pandas)."""
    return languages_registry()


def languages() -> list[str]:
    """Every shipped language, sorted by code."""
    return sorted(registry())


def training_sources() -> list[str]:
    return [i for i, e in catalog().items() if e["role"] == "train"]


def load_source(source: str, languages: Sequence[str] | None = None) -> pd.DataFrame:
    """One shipped source's rows (text, label, source, origin), all or those of the given languages."""
    if source not in catalog():
        raise ValueError(f"unknown text source {source!r}; shipped: {sorted(catalog())}")
    filters = [("label", "in", list(languages))] if languages is not None else None
    return pd.read_parquet(TEXT_DIR / f"{source}.parquet", columns=list(COLUMNS), filters=filters)


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


def available_rows(sources: Sequence[str]) -> dict[str, int | None]:
    """Rows per language the listed sources hold (None: unlimited, Faker fills it), for every language any of
    them has, in code order."""
    rows: dict[str, int | None] = {}
    for s in sources:
        counts = dict.fromkeys(FAKER_LOCALES, None) if s == FAKER else catalog()[s]["counts"]
        for lang, n in counts.items():
            if n is None or rows.get(lang, 0) is None:
                rows[lang] = None
            elif n:
                rows[lang] = rows.get(lang, 0) + n
    return dict(sorted(rows.items()))


def check_languages(requested: Sequence[str]) -> None:
    """ValueError naming corpus.languages when it lists a code the registry (or Faker) lacks, or one twice."""
    known = set(registry()) | set(FAKER_LOCALES)
    unknown = [lang for lang in requested if lang not in known]
    if unknown:
        raise ValueError(f"corpus.languages: unknown language(s) {unknown}; the built-in corpus has "
                         f"{', '.join(sorted(known))} (pixelpipe/data/text/SOURCES.md)")
    if len(set(requested)) != len(requested):
        raise ValueError(f"corpus.languages lists a language twice: {list(requested)}")


def corpus_languages(requested: Sequence[str] | None, sources: Sequence[str]) -> list[str]:
    """The languages of a built-in corpus: `corpus.languages` checked against the registry and the sources, or
    (None) every language the listed sources have text in. ValueError naming the key."""
    check_sources(sources)
    available = available_rows(sources)
    if requested is None:
        return list(available)
    check_languages(requested)
    missing = [lang for lang in requested if lang not in available]
    if missing:
        raise ValueError(f"corpus.languages: {missing} have no text in corpus.sources {list(sources)}")
    if len(requested) < 2:
        raise ValueError(f"corpus.languages: a classifier needs at least 2 languages, got {list(requested)}")
    return sorted(requested)


def language_quotas(num_samples: int, available: dict[str, int | None]) -> dict[str, int]:
    """Rows per language (in the order given): an equal share; a language with fewer rows (None: unlimited) takes
    all it has and the others share what it leaves, until every language has its share or is exhausted. With
    every language unlimited: num_samples // languages each, the remainder one each to the first languages."""
    quotas, open_, left = {}, list(available), num_samples
    while open_:
        share = left // len(open_)
        short = [lang for lang in open_ if available[lang] is not None and available[lang] < share]
        if not short:
            break
        for lang in short:
            quotas[lang] = available[lang]
            left -= available[lang]
        open_ = [lang for lang in open_ if lang not in short]
    if open_:
        share, extra = divmod(left, len(open_))
        for lang in open_:
            room = available[lang] is None or available[lang] > share
            quotas[lang] = share + (1 if extra and room else 0)
            extra -= 1 if extra and room else 0
    return {lang: quotas[lang] for lang in available}


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


def plan_quotas(requested: Sequence[str] | None, sources: Sequence[str], num_samples: int) -> dict[str, int]:
    """Rows per language of a built-in corpus (what `sample_real` draws plus what Faker fills), from the
    catalog's counts alone: cheap enough for parsing the DAG."""
    langs = corpus_languages(requested, sources)
    available = available_rows(sources)
    return language_quotas(num_samples, {lang: available[lang] for lang in langs})


def label_locales(langs: Sequence[str]) -> dict[str, str]:
    """labels.json's `locales`: each language's Faker locale where Faker has one, else its code."""
    return {lang: FAKER_LOCALES.get(lang, lang) for lang in langs}


@functools.cache
def _row_groups(source: str) -> tuple[object, dict[str, int]]:
    """(the source's open parquet file, language -> its row group): the prep tool writes one row group per
    language, so a language is read without decoding the others."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(TEXT_DIR / f"{source}.parquet")
    label = handle.schema_arrow.get_field_index("label")
    groups = {}
    for i in range(handle.metadata.num_row_groups):
        stats = handle.metadata.row_group(i).column(label).statistics
        if stats is None or stats.min != stats.max:
            raise ValueError(f"{source}.parquet: row group {i} is not one language; rerun `python -m tools.prepare_text`")
        groups[stats.min] = i
    return handle, groups


def _rows_of(source: str, lang: str) -> pd.DataFrame:
    """One language's rows of one source (its parquet row group)."""
    handle, groups = _row_groups(source)
    if lang not in groups:
        return pd.DataFrame(columns=list(COLUMNS))
    return handle.read_row_group(groups[lang], columns=list(COLUMNS)).to_pandas()


def sample_real(sources: Sequence[str], quotas: dict[str, int], seed: int, faker: bool) -> tuple[pd.DataFrame, dict]:
    """(real rows drawn per language, {language: rows Faker must add}), reading one language at a time."""
    real_sources = [s for s in sources if s != FAKER]
    rng = np.random.default_rng([seed, 7])
    picked, fill = [], {}
    for lang, quota in quotas.items():
        groups = {s: _rows_of(s, lang) for s in real_sources if catalog()[s]["counts"].get(lang)}
        can_fill = faker and lang in FAKER_LOCALES
        shares = source_shares(quota, {s: len(g) for s, g in groups.items()}, can_fill)
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

    Each locale's Faker is seeded on its own (seed * 19 + its index in FAKER_LOCALES), so the texts depend only
    on the arguments; generated lazily, so a corpus of millions of rows never sits in memory at once.
    """
    if not 0 < min_chars <= max_chars:
        raise ValueError(f"corpus.min_chars ({min_chars}) must be > 0 and <= corpus.max_chars ({max_chars})")
    from faker import Faker

    fakers = {}
    for i, (lang, locale) in enumerate(FAKER_LOCALES.items()):
        if counts.get(lang):
            fakers[lang] = Faker(locale)
            fakers[lang].seed_instance(seed * len(FAKER_LOCALES) + i)
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
                                "source": FAKER, "origin": [f"faker:{FAKER_LOCALES[lang]}" for _, lang in buf]})
            buf = []
