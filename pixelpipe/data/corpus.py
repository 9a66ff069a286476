"""Build the labelled corpus: generate or load it, split it, drop or reject bad rows.

The `corpus` section (`CorpusSettings`; defaults and descriptions: the schema) names either
the built-in multilingual Faker corpus (`path: null`, sized by num_samples, min_chars and
max_chars) or a .csv, .jsonl, .json (JSON lines) or .parquet file with a text, a label and
optionally a split column; bad rows are skipped (counted) or fail the rule (`on_bad_row`).
"""

from __future__ import annotations

import collections
import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..config.settings import Section
from ..core import io

DEFAULT_LOCALES = (
    "ar_AA", "az_AZ", "cs_CZ", "da_DK", "de_DE", "el_GR", "en_US", "es_ES", "fa_IR", "fr_FR",
    "he_IL", "hy_AM", "it_IT", "mk_MK", "nl_NL", "pl_PL", "ru_RU", "uk_UA", "vi_VN",
)  # fmt: skip
SPLITS = ("train", "val", "test")
# Label strings that mean "no label" in exported spreadsheets and data frames: a missing label, not a class.
MISSING_LABELS = frozenset({"nan", "na", "n/a", "null", "none"})
SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
UNKNOWN_SPLIT = "?"  # the split of a line that could not be parsed (it is a bad row, never written)


class CorpusError(ValueError):
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
    num_samples: int
    min_chars: int
    max_chars: int
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
    out = [UNKNOWN_SPLIT if b else str(v).strip() for v, b in zip(values, broken)]
    bad = sorted(set(out) - set(SPLITS) - {UNKNOWN_SPLIT})
    if bad:
        raise CorpusError(f"corpus file {path}: split column {split_column!r} (corpus.split_column) has values {bad}; "
                          f"allowed: {list(SPLITS)}")
    return out


def planned_split_sizes(corpus_cfg: dict[str, Any]) -> dict[str, int]:
    """Rows per split before bad rows are dropped. Cheap: called when Snakemake parses the DAG."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    if cfg.path is None:
        return _split_sizes(cfg.num_samples, cfg.splits)
    path, split_col = Path(cfg.path), cfg.split_column
    if split_col is not None:
        raw = read_columns(path, [split_col])
        counts = collections.Counter(_split_values(raw[split_col].tolist(), split_col, raw["error"].notna(), path))
        sizes = {s: counts.get(s, 0) for s in SPLITS}
    else:
        sizes = _split_sizes(_count_rows(path, cfg.label_column), cfg.splits)
    if not sum(sizes.values()):
        raise CorpusError(f"corpus file {path} (corpus.path) has no data rows")
    return sizes


def _count_rows(path: Path, label_column: str) -> int:
    """Data rows in a corpus file (unparseable lines included: they become bad rows)."""
    suffix = _check_file(path)
    if suffix == ".parquet":
        return _reading(path, lambda: pq.ParquetFile(path).metadata.num_rows)
    if suffix in (".jsonl", ".json"):
        return _reading(path, lambda: _count_lines(path))
    return len(read_columns(path, [label_column]))


def _count_lines(path: Path) -> int:
    with open(path, encoding="utf-8-sig") as f:
        return sum(1 for line in f if line.strip())


def shard_count(n_rows: int, shard_size: int) -> int:
    """Shards a split of `n_rows` needs; at least one so every split has a file."""
    return max(1, math.ceil(n_rows / shard_size))


def assign_splits(n_rows: int, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Split name per row: a seeded permutation cut into the planned sizes."""
    sizes = _split_sizes(n_rows, fractions)
    order = np.random.default_rng([seed, 1]).permutation(n_rows)  # own stream, not the generator's shuffle
    out = np.empty(n_rows, dtype="<U5")
    start = 0
    for split in SPLITS:
        out[order[start : start + sizes[split]]] = split
        start += sizes[split]
    return out


# --- sources ----------------------------------------------------------------------


def faker_text(fake: Any, min_chars: int, max_chars: int) -> str:
    """A text of whole Faker sentences, min_chars to max_chars long (cut at a word boundary)."""
    target = fake.random_int(min_chars, max_chars)
    text = fake.sentence()
    while len(text) < target:
        text += " " + fake.sentence()
    if len(text) > max_chars:
        cut = text[: max_chars + 1].rfind(" ")
        text = text[:cut] if cut >= min_chars else text[:max_chars]
    return text


def generate_default_corpus(
    num_samples: int, min_chars: int, max_chars: int, seed: int, locales: Sequence[str] = DEFAULT_LOCALES
) -> pd.DataFrame:
    """Balanced multilingual corpus [id, text, label]: row i is in locale i % len(locales).

    Labels are language codes (the locale prefix). Each locale's Faker is
    seeded on its own, so the output depends only on the arguments.
    """
    if not 0 < min_chars <= max_chars:
        raise ValueError(f"corpus.min_chars ({min_chars}) must be > 0 and <= corpus.max_chars ({max_chars})")
    from faker import Faker

    fakers = []
    for i, locale in enumerate(locales):
        fake = Faker(locale)
        fake.seed_instance(seed * len(locales) + i)
        fakers.append(fake)
    texts = [faker_text(fakers[i % len(locales)], min_chars, max_chars) for i in range(num_samples)]
    labels = [locales[i % len(locales)].split("_")[0] for i in range(num_samples)]
    order = np.random.default_rng(seed).permutation(num_samples)
    return pd.DataFrame(
        {
            "id": [f"row-{k + 1:06d}" for k in range(num_samples)],
            "text": [texts[j] for j in order],
            "label": [labels[j] for j in order],
        }
    )


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
    """One split as the parquet table the corpus rule writes (id, text, label = class id)."""
    return pa.table(
        {
            "id": pa.array(df["id"].tolist(), pa.string()),
            "text": pa.array(df["text"].tolist(), pa.string()),
            "label": pa.array([ids[l] for l in df["label"]], pa.int64()),
        }
    )


def _write_split(path: Path, df: pd.DataFrame, ids: dict[str, int]) -> None:
    with io.atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(split_table(df, ids), tmp)


def _check_usable(df: pd.DataFrame, counts: dict[str, int], source: str) -> None:
    """Refuse a corpus that leaves a split empty or fewer than two classes, naming what to change."""
    dropped = f"; bad rows dropped: {counts} (corpus.on_bad_row)" if counts else ""
    sizes = {split: int((df["split"] == split).sum()) for split in SPLITS}
    empty = [split for split, n in sizes.items() if n == 0]
    if empty:
        raise CorpusError(f"corpus {source}: split(s) {', '.join(empty)} have no rows (rows per split: {sizes}"
                          f"{dropped}); add rows, or change corpus.splits / corpus.split_column")
    labels = sorted(set(df["label"]))
    if len(labels) < 2:
        raise CorpusError(f"corpus {source}: {len(labels)} class(es) {labels} after dropping bad rows{dropped}; a "
                          f"classifier needs at least 2 (check corpus.label_column)")


def corpus_rows(corpus_cfg: dict[str, Any], seed: int) -> tuple[pd.DataFrame, dict[str, str] | None, str]:
    """(rows with id, text, label, split and 1-based file row; the locale of each label or None; a name
    for messages), before bad rows are dropped. What build_corpus writes, and what the planner sizes."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    if cfg.path is None:
        df = generate_default_corpus(cfg.num_samples, cfg.min_chars, cfg.max_chars, seed)
        locales, source = {loc.split("_")[0]: loc for loc in DEFAULT_LOCALES}, "(built-in)"
    else:
        df = load_user_corpus(cfg.path, cfg.text_column, cfg.label_column, cfg.split_column)
        locales, source = None, str(cfg.path)
        if df.empty:
            raise CorpusError(f"corpus file {source} (corpus.path) has no data rows")
    if "split" not in df:
        df["split"] = assign_splits(len(df), cfg.splits, seed)
    df["row"] = np.arange(1, len(df) + 1)  # 1-based data row in the file, for messages
    return df, locales, source


def bad_row_counts(bad: pd.DataFrame) -> dict[str, int]:
    """Bad rows per kind of reason (what labels.json reports)."""
    return dict(collections.Counter(_reason_kind(r) for r in bad["reason"]))


def labels_info(ids: dict[str, int], locales: dict[str, str] | None, bad_rows: dict[str, int],
                sizes: dict[str, int]) -> dict[str, Any]:
    """The content of labels.json."""
    return {"labels": list(ids), "locales": locales, "bad_rows": bad_rows, "split_sizes": sizes}


def class_ids(labels: Iterable[str]) -> dict[str, int]:
    """Label name -> class id (sorted; integer labels numerically)."""
    return {name: i for i, name in enumerate(_label_order(set(labels)))}


def build_corpus(
    corpus_cfg: dict[str, Any],
    fonts: Sequence[str],
    out_dir: Path,
    seed: int,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Write {train,val,test}.parquet (id, text, label = class id) and labels.json; return labels.json's content."""
    cfg = CorpusSettings.from_section(corpus_cfg)
    if cfg.on_bad_row not in ("skip", "fail"):
        raise ValueError(f"corpus.on_bad_row must be 'skip' or 'fail', got {cfg.on_bad_row!r}")
    df, locales, source = corpus_rows(corpus_cfg, seed)
    bad = find_bad_rows(df, fonts)
    counts = bad_row_counts(bad)
    if len(bad):
        where = [f"row {r.row} (split {r.split}, id {r.id}): {r.reason}" for r in bad.head(5).itertuples()]
        if cfg.on_bad_row == "fail":
            raise CorpusError(f"corpus {source}: {where[0]}; {len(bad)} bad row(s) in total {counts}. "
                              "Fix the data or set corpus.on_bad_row: skip")
        log(f"corpus: skipping {len(bad)} bad row(s): {counts}")
        for line in where:
            log(f"  {line}")
        df = df.drop(index=bad.index)
    _check_usable(df, counts, source)

    ids = class_ids(df["label"])
    out_dir = Path(out_dir)
    sizes = {}
    for split in SPLITS:
        part = df[df["split"] == split]
        _write_split(out_dir / f"{split}.parquet", part, ids)
        sizes[split] = len(part)
    info = labels_info(ids, locales, counts, sizes)
    io.write_json(out_dir / "labels.json", info)
    log(f"corpus: {sum(sizes.values())} rows, {len(ids)} labels, splits {sizes}")
    return info
