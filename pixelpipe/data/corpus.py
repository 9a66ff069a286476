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
beside the splits.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import itertools
import json
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
from ..core.cli import UserError
from . import sources as builtin
from .charset import build_charset, text_clusters, write_charset
from .sources import DEFAULT_LOCALES, faker_text  # noqa: F401 (re-exported: benchmarks and tests use them)

SPLITS = ("train", "val", "test")
# Label strings that mean "no label" in exported spreadsheets and data frames: a missing label, not a class.
MISSING_LABELS = frozenset({"nan", "na", "n/a", "null", "none"})
SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
UNKNOWN_SPLIT = "?"  # the split of a line that could not be parsed (it is a bad row, never written)


class CorpusError(UserError):
    """A corpus that cannot train a classifier; the message names the file and the config key."""


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


def _split_values(values: Sequence[Any], split_column: str, broken: Sequence[bool], path: Path) -> list[str]:
    """Split names per row; unparseable rows (`broken`) get UNKNOWN_SPLIT, any other unknown value is refused."""
    out = [UNKNOWN_SPLIT if b else _split_name(v) for v, b in zip(values, broken)]
    _refuse_unknown_splits(set(out), split_column, path)
    return out


def _split_name(value: Any) -> str:
    return "" if _missing(value) else str(value).strip()


def _refuse_unknown_splits(names: set[str], split_column: str, path: Path) -> None:
    bad = sorted(names - set(SPLITS) - {UNKNOWN_SPLIT})
    if bad:
        empty = " ('' = no value)" if "" in bad else ""
        raise CorpusError(f"corpus file {path}: split column {split_column!r} (corpus.split_column) has values {bad}"
                          f"{empty}; allowed: {list(SPLITS)}")


def _split_counts(path: Path, suffix: str, split_column: str) -> dict[str, int]:
    """Rows per split named in the split column, streamed (nothing held per row); unknown names refused."""
    if suffix == ".parquet":
        counts = pq.read_table(path, columns=[split_column]).column(0).value_counts().to_pylist()
        found = collections.Counter()
        for item in counts:
            found[_split_name(item["values"])] += item["counts"]
    else:
        found = collections.Counter(_split_name(v) if ok else UNKNOWN_SPLIT
                                    for v, ok in _column_cells(path, suffix, split_column))
    _refuse_unknown_splits(set(found), split_column, path)
    return {s: found.get(s, 0) for s in SPLITS}


def planned_split_sizes(corpus_cfg: dict[str, Any]) -> dict[str, int]:
    """Rows per split before bad rows are dropped. Cheap: called when Snakemake parses the DAG, so a corpus file
    that cannot train (a column missing, no data rows, an empty split, no text, fewer than two labels) fails
    there, before any job, in one line naming the file and the config key."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    if cfg.path is None:
        return _split_sizes(builtin_rows(cfg), cfg.splits)
    if cfg.languages:
        try:
            builtin.check_languages(cfg.languages)
        except ValueError as err:
            raise CorpusError(str(err)) from None
    path, split_col = Path(cfg.path), cfg.split_column
    _reading(path, lambda: _check_columns(path, _check_file(path), _wanted_columns(cfg)))
    if split_col is not None:
        sizes = _reading(path, lambda: _split_counts(path, _check_file(path), split_col))
    else:
        sizes = _split_sizes(_count_rows(path), cfg.splits)
    if not sum(sizes.values()):
        raise CorpusError(f"corpus file {path} (corpus.path) has no data rows")
    _check_planned(path, cfg, sizes)
    return sizes


def _count_rows(path: Path) -> int:
    """Data rows in a corpus file (unparseable lines included: they become bad rows)."""
    suffix = _check_file(path)
    if suffix == ".parquet":
        return _reading(path, lambda: pq.ParquetFile(path).metadata.num_rows)
    if suffix in (".jsonl", ".json"):
        return _reading(path, lambda: _count_lines(path))
    return _reading(path, lambda: _count_records(path))


def _count_lines(path: Path) -> int:
    with open(path, encoding="utf-8-sig") as f:
        return sum(1 for line in f if line.strip())


def _count_records(path: Path) -> int:
    """CSV data rows as _read_csv counts them (blank lines skipped, a row of the wrong width counted: a bad row),
    without holding any: the header was checked already."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        next(reader, None)
        return sum(1 for record in reader if record)


# --- checks before a run: what a corpus file shows without training -------------------------


def _wanted_columns(cfg: "CorpusSettings") -> dict[str, str]:
    """Config key -> the column of the corpus file it names (the split column only when set)."""
    keys = {"corpus.text_column": cfg.text_column, "corpus.label_column": cfg.label_column}
    return {**keys, "corpus.split_column": cfg.split_column} if cfg.split_column else keys


def _file_columns(path: Path, suffix: str, wanted: Sequence[str]) -> list[str] | None:
    """The columns of a corpus file from its header (CSV) or schema (parquet); for JSON lines the keys of the lines
    read until every `wanted` one is seen (the whole file only when one is missing). None: no line parses."""
    if suffix == ".parquet":
        return pq.read_schema(path).names
    with open(path, newline="", encoding="utf-8-sig") as f:
        if suffix == ".csv":
            return next(csv.reader(f), [])
        seen: dict[str, None] = {}
        parsed = False
        for line in f:
            obj = _json_object(line)
            parsed |= obj is not None
            seen.update(dict.fromkeys(obj or ()))
            if set(wanted) <= set(seen):
                break
    return list(seen) if parsed else None


def _json_object(line: str) -> dict[str, Any] | None:
    """The JSON object on a line, or None (blank, not JSON, not an object: the corpus rule's bad rows)."""
    try:
        obj = json.loads(line) if line.strip() else None
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _check_columns(path: Path, suffix: str, wanted: dict[str, str]) -> None:
    """Refuse a file without a configured column, naming the column, its config key and the columns present."""
    present = _file_columns(path, suffix, list(wanted.values()))
    if present is None:  # no line parses: every row is a bad row, which _check_parses reports
        return
    for key, column in wanted.items():
        if column not in present:
            raise CorpusError(f"corpus file {path} has no column {column!r} ({key}); columns present: {present}")


def _column_cells(path: Path, suffix: str, column: str) -> Iterator[tuple[Any, bool]]:
    """(value, parsed) per data row of a CSV or JSON-lines file, streamed: a row that does not parse (a CSV row of
    the wrong width, a line that is no JSON object) comes as (None, False), as the corpus rule counts it."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        if suffix != ".csv":
            for line in f:
                if line.strip():
                    obj = _json_object(line)
                    yield (None, False) if obj is None else (obj.get(column), True)
            return
        reader = csv.reader(f)
        header = next(reader, [])
        i = header.index(column)
        for record in reader:
            if record:
                yield (record[i], True) if len(record) == len(header) else (None, False)


def _column_values(path: Path, suffix: str, column: str) -> Iterator[Any]:
    """A column's values over the parseable rows, read lazily so a check stops at what it needs (parquet: the
    distinct values of each batch, so even a full scan of a large file stays columnar)."""
    if suffix != ".parquet":
        yield from (value for value, parsed in _column_cells(path, suffix, column) if parsed)
        return
    import pyarrow.compute as pc

    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=[column]):
        yield from pc.unique(batch.column(0)).to_pylist()


def _has_text(value: Any) -> bool:
    return not _missing(value)


def _usable_label(value: Any) -> bool:
    """A label that names a class (what _bad_reason keeps): not empty, not NaN / NA / null / None."""
    return not _missing(value) and str(value).strip().casefold() not in MISSING_LABELS


def _distinct(values: Iterable[Any], usable: Callable[[Any], bool], enough: int) -> set[str]:
    """Up to `enough` distinct usable values (as the corpus rule stringifies them), reading no further."""
    found: set[str] = set()
    for value in values:
        if usable(value):
            found.add(_as_str(value))
            if len(found) >= enough:
                break
    return found


def _check_planned(path: Path, cfg: "CorpusSettings", sizes: dict[str, int]) -> None:
    """Refuse, before any job, a file that leaves a split empty, parses nowhere, has no text or fewer than two
    labels. Each check reads only until it has what it needs: the first rows of a usable file."""
    empty = [split for split, n in sizes.items() if n == 0]
    if empty:
        raise CorpusError(f"corpus file {path}: split(s) {', '.join(empty)} would have no rows (rows per split: "
                          f"{sizes}); add rows, or change corpus.splits / corpus.split_column")
    suffix, rows = _check_file(path), sum(sizes.values())
    _reading(path, lambda: _check_parses(path, suffix, cfg.text_column, rows))
    texts = _reading(path, lambda: _distinct(_column_values(path, suffix, cfg.text_column), _has_text, 1))
    if not texts:
        raise CorpusError(f"corpus file {path}: text column {cfg.text_column!r} (corpus.text_column) is empty in "
                          f"all {rows} data rows")
    labels = _reading(path, lambda: _distinct(_column_values(path, suffix, cfg.label_column), _usable_label, 2))
    if not labels:
        raise CorpusError(f"corpus file {path}: label column {cfg.label_column!r} (corpus.label_column) has no "
                          f"label in any of the {rows} data rows (empty, NaN, NA, N/A, null or None)")
    if len(labels) < 2:
        raise CorpusError(f"corpus file {path}: label column {cfg.label_column!r} (corpus.label_column) holds one "
                          f"class, {next(iter(labels))!r}; a classifier needs at least 2")


def _check_parses(path: Path, suffix: str, column: str, rows: int) -> None:
    """Refuse a CSV or JSON-lines file none of whose rows parses (each would be a bad row)."""
    if suffix == ".parquet" or any(parsed for _, parsed in _column_cells(path, suffix, column)):
        return
    need = "the header's number of fields" if suffix == ".csv" else "one JSON object per line"
    raise CorpusError(f"corpus file {path} (corpus.path): none of its {rows} data rows can be parsed ({need})")


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


def builtin_corpus(cfg: "CorpusSettings", seed: int) -> tuple[int, Iterator[pd.DataFrame]]:
    """(rows in all, the built-in corpus in chunks of id, text, label, source, origin): the real rows drawn
    from the shipped sources, shuffled, then the Faker rows that fill what they lack, generated lazily."""
    quotas = builtin_quotas(cfg)
    real, fill = builtin.sample_real(cfg.sources, quotas, seed, faker=builtin.FAKER in cfg.sources)
    real = real.iloc[np.random.default_rng(seed).permutation(len(real))].reset_index(drop=True)

    def chunks() -> Iterator[pd.DataFrame]:
        start = 0
        generated = builtin.faker_rows(fill, cfg.min_chars, cfg.max_chars, seed) if sum(fill.values()) else iter(())
        for chunk in itertools.chain([real], generated):
            if len(chunk):
                yield chunk.assign(id=[f"row-{start + k + 1:07d}" for k in range(len(chunk))])
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
    return df.assign(id=[f"row-{k + 1:06d}" for k in range(len(df))])[["id", "text", "label"]]


def _require_columns(wanted: Sequence[str], present: Sequence[str], path: Path) -> None:
    for col in wanted:
        if col not in present:
            raise CorpusError(f"corpus file {path} has no column {col!r} (corpus.text_column / label_column / "
                              f"split_column); columns present: {list(present)}")


def _check_file(path: Path) -> str:
    """The file's suffix; a one-line CorpusError (file and key named) if it is missing, empty or unsupported."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise CorpusError(f"corpus file {path} (corpus.path) has an unsupported type: use .csv, .jsonl, .json "
                          "(JSON lines) or .parquet")
    if not path.exists():
        raise CorpusError(f"corpus file {path} (corpus.path) does not exist")
    if not path.is_file():
        raise CorpusError(f"corpus file {path} (corpus.path) is not a file")
    if path.stat().st_size == 0:
        raise CorpusError(f"corpus file {path} (corpus.path) is empty (0 bytes)")
    return suffix


def _reading(path: Path, read: Callable[[], Any]) -> Any:
    """Run `read`, turning what an unreadable file raises into a one-line CorpusError naming it."""
    try:
        return read()
    except CorpusError:
        raise
    except UnicodeDecodeError as err:
        raise CorpusError(f"corpus file {path} (corpus.path) is not UTF-8 text (byte {err.start}: {err.reason})") from None
    except (OSError, csv.Error, pa.ArrowException) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise CorpusError(f"corpus file {path} (corpus.path) cannot be read: {first}") from None


def _read_csv(path: Path, columns: list[str]) -> pd.DataFrame:
    """CSV rows as strings ('' = missing); a row whose field count differs from the header's is kept as an error."""
    rows, errors, lines = [], [], []
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        _require_columns(columns, header, path)
        idx = [header.index(c) for c in columns]
        for record in reader:
            if not record:  # blank line
                continue
            lines.append(reader.line_num)
            if len(record) != len(header):
                rows.append([None] * len(columns))
                errors.append(f"line {reader.line_num} has {len(record)} fields, the header {len(header)}")
            else:
                rows.append([record[i] if record[i] != "" else None for i in idx])
                errors.append(None)
    return pd.DataFrame(rows, columns=columns, dtype=object).assign(error=errors, line=lines)


def _read_jsonl(path: Path, columns: list[str]) -> pd.DataFrame:
    """JSON lines (one object per line); a line that is not a JSON object is kept as an error."""
    rows, errors, lines, seen = [], [], [], set()
    with open(path, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            lines.append(number)
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                obj, error = None, f"line {number} is not valid JSON ({err.msg} at column {err.colno})"
            else:
                error = None if isinstance(obj, dict) else f"line {number} is not a JSON object"
            rows.append([obj.get(c) for c in columns] if error is None else [None] * len(columns))
            errors.append(error)
            seen.update(obj if error is None else ())
    if any(e is None for e in errors):  # with no parseable line, every row is a bad row: no columns to check
        _require_columns(columns, sorted(seen), path)
    return pd.DataFrame(rows, columns=columns, dtype=object).assign(error=errors, line=lines)


def read_columns(path: Path, columns: list[str]) -> pd.DataFrame:
    """`columns` of a corpus file, values as stored (CSV: strings, empty field = missing), plus `error`
    (why a line could not be parsed, else None) and `line` (its line in the file; None for parquet)."""
    suffix = _check_file(path)
    if suffix == ".parquet":
        def read() -> pd.DataFrame:
            _require_columns(columns, pq.read_schema(path).names, path)
            return pq.read_table(path, columns=columns).to_pandas()

        df = _reading(path, read)
        return df.assign(error=None, line=None)
    return _reading(path, lambda: (_read_csv if suffix == ".csv" else _read_jsonl)(path, columns))


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and pd.isna(value)) or (isinstance(value, str) and not value.strip())


def _as_str(value: Any) -> Any:
    """Stringify a label or text; 3.0 (an int column with nulls read as float) becomes "3"."""
    if _missing(value) or isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def load_user_corpus(
    path: str | Path, text_column: str, label_column: str, split_column: str | None = None
) -> pd.DataFrame:
    """Columns id ("row-000001" = data row in the file), text, label (str), error (why the line could not be
    parsed, else None) and, with split_column, split."""
    path = Path(path)
    columns = [text_column, label_column] + ([split_column] if split_column else [])
    raw = read_columns(path, columns)
    df = pd.DataFrame(
        {
            "id": [f"row-{k + 1:06d}" for k in range(len(raw))],
            "text": [_as_str(v) for v in raw[text_column]],
            "label": [_as_str(v) for v in raw[label_column]],
            "error": [e if isinstance(e, str) else None for e in raw["error"]],
        }
    )
    if split_column:
        df["split"] = _split_values(raw[split_column].tolist(), split_column, raw["error"].notna().tolist(), path)
    return df


# --- bad rows ---------------------------------------------------------------------


def _bad_reason(text: Any, label: Any, fonts: Sequence[str], error: str | None = None) -> str | None:
    if isinstance(error, str):
        return f"unparseable line: {error}"
    if _missing(text):
        return "empty text"
    if _missing(label) or str(label).strip().casefold() in MISSING_LABELS:
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
