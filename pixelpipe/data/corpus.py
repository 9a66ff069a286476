"""Build the labelled corpus: draw or load it, split it, drop or reject bad rows, stream it to disk.

The `corpus` section (`CorpusSettings`; defaults and descriptions: the schema) names either
the built-in corpus (`path: null`: real human-written text shipped with the package, from
the `sources` listed, balanced over `languages` (default: every language of the registry
the sources have text in), optionally filled with Faker; see pixelpipe.data.sources) or a
.csv, .jsonl, .json (JSON lines) or .parquet file with a text, a label and optionally a
split column; bad rows are skipped (counted) or fail the rule
(`on_bad_row`). Rows are written chunk by chunk, so the corpus never sits in memory whole
(the built-in real text is bounded by what ships; Faker rows are generated lazily). Every
row records its `source` and `origin`; the charset (every glyph the run knows) is written
beside the splits. Reading a corpus file: pixelpipe.data.corpusfile; the checks run when Snakemake parses the
DAG (`planned_split_sizes`): pixelpipe.data.corpuscheck.
"""

from __future__ import annotations

import collections
import contextlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..config.settings import Section
from ..core import io
from . import sources as builtin
from .charset import build_charset, text_clusters, write_charset
from .corpuscheck import check_columns, check_planned, count_rows, split_counts
from .corpusfile import (
    FILE_ID_DIGITS,
    SPLITS,
    CorpusError,
    check_file,
    is_missing,
    load_user_corpus,
    reading,
    row_ids,
    usable_label,
)  # fmt: skip


@dataclass(frozen=True)
class CorpusSettings(Section):
    """The `corpus` section (meaning and defaults: the schema and this module's docstring)."""

    SECTION = "corpus"

    path: str | None
    text_column: str
    label_column: str
    split_column: str | None
    splits: dict[str, float]
    sources: list[str]
    languages: list[str] | None
    num_samples: int
    min_chars: int
    max_chars: int
    inventory: bool
    on_bad_row: str


# --- split sizes ------------------------------------------------------------------


def _split_sizes(n: int, fractions: dict[str, float]) -> dict[str, int]:
    unknown = set(fractions) - set(SPLITS)
    if unknown or abs(sum(fractions.values()) - 1) > 1e-6 or min(fractions.values()) < 0:
        raise ValueError(f"corpus.splits must give fractions of {list(SPLITS)} summing to 1, got {fractions}")
    # The epsilon keeps float noise (0.29 * 100 = 28.999...) from losing a row.
    val = int(n * fractions.get("val", 0) + 1e-9)
    test = int(n * fractions.get("test", 0) + 1e-9)
    return {"train": n - val - test, "val": val, "test": test}


def planned_split_sizes(corpus_cfg: dict[str, Any]) -> dict[str, int]:
    """Rows per split before bad rows are dropped. Cheap: called when Snakemake parses the DAG, so a corpus file
    that cannot train (a column missing, no data rows, an empty split, no text, fewer than two labels) fails
    there, before any job, in one line naming the file and the config key (the checks: data.corpuscheck)."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    if cfg.path is None:
        return _split_sizes(builtin_rows(cfg), cfg.splits)
    if cfg.languages:
        try:
            builtin.check_languages(cfg.languages)
        except ValueError as err:
            raise CorpusError(str(err)) from None
    path, split_col = Path(cfg.path), cfg.split_column
    reading(path, lambda: check_columns(path, check_file(path), _wanted_columns(cfg)))
    if split_col is not None:
        sizes = reading(path, lambda: split_counts(path, check_file(path), split_col))
    else:
        sizes = _split_sizes(count_rows(path), cfg.splits)
    if not sum(sizes.values()):
        raise CorpusError(f"corpus file {path} (corpus.path) has no data rows")
    check_planned(path, cfg.text_column, cfg.label_column, sizes)
    return sizes


def _wanted_columns(cfg: "CorpusSettings") -> dict[str, str]:
    """Config key -> the column of the corpus file it names (the split column only when set)."""
    keys = {"corpus.text_column": cfg.text_column, "corpus.label_column": cfg.label_column}
    return {**keys, "corpus.split_column": cfg.split_column} if cfg.split_column else keys


def shard_count(n_rows: int, shard_size: int) -> int:
    """Shards a split of `n_rows` needs; at least one so every split has a file."""
    return max(1, math.ceil(n_rows / shard_size))


def assign_splits(n_rows: int, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Split name per row: a seeded permutation cut into the planned sizes."""
    return np.asarray(SPLITS)[split_codes(n_rows, fractions, seed)]


def split_codes(n_rows: int, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Index into SPLITS per row (one byte a row, so millions of rows cost megabytes)."""
    sizes = _split_sizes(n_rows, fractions)
    order = np.random.default_rng([seed, 1]).permutation(n_rows)  # own stream, not the generator's shuffle
    out = np.empty(n_rows, dtype=np.uint8)
    start = 0
    for code, split in enumerate(SPLITS):
        out[order[start : start + sizes[split]]] = code
        start += sizes[split]
    return out


# --- sources ----------------------------------------------------------------------


def builtin_quotas(cfg: "CorpusSettings") -> dict[str, int]:
    """Rows per language of the built-in corpus (real rows and Faker fill); CorpusError naming the key when
    corpus.sources or corpus.languages is wrong. Reads only the catalog: called when Snakemake parses the DAG."""
    try:
        return builtin.plan_quotas(cfg.languages, cfg.sources, cfg.num_samples)
    except ValueError as err:
        raise CorpusError(str(err)) from None


def builtin_rows(cfg: "CorpusSettings") -> int:
    """Rows the built-in corpus will hold: num_samples, unless the real sources (and Faker) run short."""
    return sum(builtin_quotas(cfg).values())


def builtin_shortfall(corpus_cfg: dict[str, Any], sizes: dict[str, int]) -> str | None:
    """One line when corpus.num_samples asks the built-in corpus for more rows than its sources hold for the
    languages asked (`sizes`: planned_split_sizes), or None: the run trains on fewer rows than the config says,
    so the user hears the number actually used before any job runs rather than from the reports."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    rows = sum(sizes.values())
    if cfg.path is not None or rows >= cfg.num_samples:
        return None
    return (f"corpus.num_samples is {cfg.num_samples:,}, but the built-in corpus holds {rows:,} rows for these "
            f"corpus.languages and corpus.sources: using {rows:,}")


def builtin_real_rows(cfg: "CorpusSettings", seed: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """(the rows drawn from the shipped sources, shuffled, with their ids: the built-in corpus's first chunk;
    the rows per language Faker adds after them). The planner reads these very rows (plan.corpusfacts)."""
    real, fill = builtin.sample_real(cfg.sources, builtin_quotas(cfg), seed, faker=builtin.FAKER in cfg.sources)
    real = real.iloc[np.random.default_rng(seed).permutation(len(real))].reset_index(drop=True)
    return real.assign(id=row_ids(len(real))), fill


def builtin_corpus(cfg: "CorpusSettings", seed: int) -> tuple[int, Iterator[pd.DataFrame]]:
    """(rows in all, the built-in corpus in chunks of id, text, label, source, origin): the real rows drawn
    from the shipped sources, shuffled, then the Faker rows that fill what they lack, generated lazily."""
    real, fill = builtin_real_rows(cfg, seed)

    def chunks() -> Iterator[pd.DataFrame]:
        if len(real):
            yield real
        start = len(real)
        generated = builtin.faker_rows(fill, cfg.min_chars, cfg.max_chars, seed) if sum(fill.values()) else iter(())
        for chunk in generated:
            if len(chunk):
                yield chunk.assign(id=row_ids(len(chunk), start))
                start += len(chunk)

    return len(real) + sum(fill.values()), chunks()


def inventory_languages(cfg: "CorpusSettings") -> bool | list[str]:
    """Whose characters start the charset (build_charset's `inventory`): none, the built-in corpus's languages,
    or, for a corpus file, `corpus.languages` (null: the 19 languages of earlier versions, Faker's)."""
    if not cfg.inventory:
        return False
    if cfg.path is None:
        return list(builtin_quotas(cfg))
    return list(cfg.languages or builtin.FAKER_LOCALES)


def generate_default_corpus(num_samples: int, min_chars: int, max_chars: int, seed: int) -> pd.DataFrame:
    """A Faker-only corpus [id, text, label] of `num_samples` rows balanced over Faker's 19 languages (tests,
    benchmarks)."""
    quotas = builtin.language_quotas(num_samples, dict.fromkeys(builtin.FAKER_LOCALES))
    df = pd.concat(list(builtin.faker_rows(quotas, min_chars, max_chars, seed)), ignore_index=True)
    df = df.iloc[np.random.default_rng(seed).permutation(len(df))].reset_index(drop=True)
    return df.assign(id=row_ids(len(df), digits=FILE_ID_DIGITS))[["id", "text", "label"]]


# --- bad rows ---------------------------------------------------------------------


def _bad_reason(text: Any, label: Any, fonts: Sequence[str], error: str | None = None) -> str | None:
    if isinstance(error, str):
        return f"unparseable line: {error}"
    if is_missing(text):
        return "empty text"
    if not usable_label(label):
        return "missing label"
    from .atlas import undrawable

    missing = undrawable(text, fonts)
    if missing:
        return f"undrawable characters: {missing}"
    return None


def find_bad_rows(df: pd.DataFrame, fonts: Sequence[str]) -> pd.DataFrame:
    """The rows of `df` that cannot be used, with a `reason` column (first problem found)."""
    errors = df["error"] if "error" in df else [None] * len(df)
    reasons = [_bad_reason(t, l, fonts, e) for t, l, e in zip(df["text"], df["label"], errors)]
    mask = np.array([r is not None for r in reasons], dtype=bool)
    return df[mask].assign(reason=[r for r in reasons if r is not None])


def _reason_kind(reason: str) -> str:
    """'undrawable characters: X' -> 'undrawable characters', 'text too long (9 > 8)' -> 'text too long'."""
    return re.split(r"[:(]", reason, maxsplit=1)[0].strip()


def _label_order(names: set[str]) -> list[str]:
    """Sorted label names; integer labels sort numerically so 0..N keep their own ids."""
    if all(re.fullmatch(r"-?\d+", n) for n in names):
        return sorted(names, key=int)
    return sorted(names)


# --- build ------------------------------------------------------------------------


def split_table(df: pd.DataFrame, ids: dict[str, int]) -> pa.Table:
    """Rows as the parquet table the corpus rule writes (id, text, label = class id, source, origin)."""
    n = len(df)
    return pa.table(
        {
            "id": pa.array(df["id"].tolist(), pa.string()),
            "text": pa.array(df["text"].tolist(), pa.string()),
            "label": pa.array([ids[l] for l in df["label"]], pa.int64()),
            "source": pa.array(df["source"].tolist() if "source" in df else [None] * n, pa.string()),
            "origin": pa.array(df["origin"].tolist() if "origin" in df else [None] * n, pa.string()),
        }
    )


class SplitWriters:
    """One streaming parquet writer per split under a temporary name; `close` publishes all three."""

    def __init__(self, out_dir: Path, stack: contextlib.ExitStack) -> None:
        self.paths = {split: stack.enter_context(io.atomic_path(out_dir / f"{split}.parquet", suffix=".parquet"))
                      for split in SPLITS}
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.sizes = dict.fromkeys(SPLITS, 0)

    def write(self, split: str, table: pa.Table) -> None:
        if split not in self.writers:
            self.writers[split] = pq.ParquetWriter(self.paths[split], table.schema)
        self.writers[split].write_table(table)
        self.sizes[split] += table.num_rows

    def close(self, schema: pa.Schema) -> None:
        for split in SPLITS:
            writer = self.writers.get(split) or pq.ParquetWriter(self.paths[split], schema)
            writer.close()


def _check_usable(sizes: dict[str, int], labels: set[str], counts: dict[str, int], source: str) -> None:
    """Refuse a corpus that leaves a split empty or fewer than two classes, naming what to change."""
    dropped = f"; bad rows dropped: {counts} (corpus.on_bad_row)" if counts else ""
    empty = [split for split, n in sizes.items() if n == 0]
    if empty:
        raise CorpusError(f"corpus {source}: split(s) {', '.join(empty)} have no rows (rows per split: {sizes}"
                          f"{dropped}); add rows, or change corpus.splits / corpus.split_column")
    if len(labels) < 2:
        raise CorpusError(f"corpus {source}: {len(labels)} class(es) {sorted(labels)} after dropping bad rows{dropped}; "
                          "a classifier needs at least 2 (check corpus.label_column)")


def corpus_chunks(cfg: CorpusSettings, seed: int) -> tuple[Iterator[pd.DataFrame], int, dict[str, str] | None, str]:
    """(chunks of rows with id, text, label and maybe split / source / origin / error; rows in all; the locale
    of each label or None; a name for messages), before bad rows are dropped."""
    if cfg.path is None:
        n, chunks = builtin_corpus(cfg, seed)
        locales = builtin.label_locales(builtin_quotas(cfg))
        return chunks, n, locales, f"(built-in: {', '.join(cfg.sources)})"
    df = load_user_corpus(cfg.path, cfg.text_column, cfg.label_column, cfg.split_column)
    if df.empty:
        raise CorpusError(f"corpus file {cfg.path} (corpus.path) has no data rows")
    return iter([df.assign(source=Path(cfg.path).name, origin=[f"row {k}" for k in range(1, len(df) + 1)])]), \
        len(df), None, str(cfg.path)


def bad_row_counts(bad: pd.DataFrame) -> dict[str, int]:
    """Bad rows per kind of reason (what labels.json reports)."""
    return dict(collections.Counter(_reason_kind(r) for r in bad["reason"]))


def labels_info(ids: dict[str, int], locales: dict[str, str] | None, bad_rows: dict[str, int],
                sizes: dict[str, int], sources: dict[str, int] | None = None) -> dict[str, Any]:
    """The content of labels.json."""
    return {"labels": list(ids), "locales": locales, "bad_rows": bad_rows, "split_sizes": sizes,
            "sources": sources or {}}


def class_ids(labels: Iterable[str]) -> dict[str, int]:
    """Label name -> class id (sorted; integer labels numerically)."""
    return {name: i for i, name in enumerate(_label_order(set(labels)))}


class _Tally:
    """What build_corpus counts while it streams: bad rows, labels, sources, clusters, the first bad rows."""

    def __init__(self) -> None:
        self.bad: collections.Counter = collections.Counter()
        self.labels: set[str] = set()
        self.sources: collections.Counter = collections.Counter()
        self.clusters: set[str] = set()
        self.examples: list[str] = []


def _drop_bad(chunk: pd.DataFrame, cfg: CorpusSettings, fonts: Sequence[str], source: str, tally: _Tally,
              log: Callable[[str], Any]) -> pd.DataFrame:
    """The chunk without its bad rows (counted, the first five logged), or CorpusError under on_bad_row: fail."""
    bad = find_bad_rows(chunk, fonts)
    if not len(bad):
        return chunk
    tally.bad.update(bad_row_counts(bad))
    where = [f"row {r.row} (split {r.split}, id {r.id}): {r.reason}" for r in bad.head(5).itertuples()]
    if cfg.on_bad_row == "fail":
        raise CorpusError(f"corpus {source}: {where[0]}; {len(bad)} bad row(s) {bad_row_counts(bad)}. "
                          "Fix the data or set corpus.on_bad_row: skip")
    tally.examples += where[: 5 - len(tally.examples)]
    return chunk.drop(index=bad.index)


def build_corpus(
    corpus_cfg: dict[str, Any],
    fonts: Sequence[str],
    out_dir: Path,
    seed: int,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Write {train,val,test}.parquet (id, text, label = class id, source, origin), labels.json and charset.json
    chunk by chunk; return labels.json's content."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    if cfg.on_bad_row not in ("skip", "fail"):
        raise ValueError(f"corpus.on_bad_row must be 'skip' or 'fail', got {cfg.on_bad_row!r}")
    chunks, n, locales, source = corpus_chunks(cfg, seed)
    ids = class_ids(locales) if locales else None
    codes, tally, start = split_codes(n, cfg.splits, seed), _Tally(), 0
    out_dir = Path(out_dir)
    with contextlib.ExitStack() as stack:
        writers = SplitWriters(out_dir, stack)
        for chunk in chunks:
            chunk = chunk.assign(row=np.arange(start + 1, start + len(chunk) + 1))
            if "split" not in chunk:
                chunk["split"] = np.asarray(SPLITS)[codes[start : start + len(chunk)]]
            start += len(chunk)
            chunk = _drop_bad(chunk, cfg, fonts, source, tally, log)
            ids = ids or class_ids(chunk["label"])  # a user file is one chunk: its labels are all here
            tally.labels.update(chunk["label"])
            tally.sources.update(chunk["source"])
            tally.clusters |= text_clusters(chunk["text"])
            for split, part in chunk.groupby("split", sort=False):
                writers.write(split, split_table(part, ids))
        _check_usable(writers.sizes, tally.labels, dict(tally.bad), source)
        writers.close(split_table(pd.DataFrame(columns=["id", "text", "label"]), {}).schema)
    if tally.bad:
        log(f"corpus: skipped {sum(tally.bad.values())} bad row(s): {dict(tally.bad)}")
        for line in tally.examples:
            log(f"  {line}")
    write_charset(out_dir / "charset.json", build_charset(tally.clusters, fonts, inventory_languages(cfg)))
    info = labels_info(ids, locales, dict(tally.bad), writers.sizes, dict(tally.sources))
    io.write_json(out_dir / "labels.json", info)
    log(f"corpus: {sum(writers.sizes.values())} rows, {len(ids)} labels, splits {writers.sizes}, "
        f"sources {dict(tally.sources)}")
    return info
