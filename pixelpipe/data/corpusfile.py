"""What every corpus module shares: the splits, the row ids, CorpusError, and reading a user's corpus file.

A corpus file (`corpus.path`) is a .csv, .jsonl, .json (JSON lines) or .parquet file with a text, a label and
optionally a split column. `load_user_corpus` reads it whole into a frame (the corpus rule,
pixelpipe.data.corpus); the checks run when Snakemake parses the DAG stream it instead
(pixelpipe.data.corpuscheck). Both import this module, which imports neither.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.cli import UserError

SPLITS = ("train", "val", "test")
# Label strings that mean "no label" in exported spreadsheets and data frames: a missing label, not a class.
MISSING_LABELS = frozenset({"nan", "na", "n/a", "null", "none"})
SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
UNKNOWN_SPLIT = "?"  # the split of a line that could not be parsed (it is a bad row, never written)
# Digits of a row id's number: the built-in corpus's rows reach millions; a corpus file's ids ("row-000001", the
# file's first data row) and the Faker test corpus's keep the six digits they always had.
BUILTIN_ID_DIGITS = 7
FILE_ID_DIGITS = 6


class CorpusError(UserError):
    """A corpus that cannot train a classifier; the message names the file and the config key."""


def row_ids(count: int, start: int = 0, digits: int = BUILTIN_ID_DIGITS) -> list[str]:
    """The ids of rows start + 1 .. start + count: "row-" and the row's number from 1, zero-padded to `digits`."""
    return [f"row-{k:0{digits}d}" for k in range(start + 1, start + count + 1)]


# --- values -----------------------------------------------------------------------


def is_missing(value: Any) -> bool:
    """No value: None, NaN / NA, or a string of whitespace."""
    return value is None or (not isinstance(value, str) and pd.isna(value)) or (isinstance(value, str) and not value.strip())


def usable_label(value: Any) -> bool:
    """A label that names a class: not empty, not NaN / NA / null / None (anything else is a bad row's)."""
    return not is_missing(value) and str(value).strip().casefold() not in MISSING_LABELS


def as_str(value: Any) -> Any:
    """Stringify a label or text; 3.0 (an int column with nulls read as float) becomes "3"."""
    if is_missing(value) or isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def split_name(value: Any) -> str:
    return "" if is_missing(value) else str(value).strip()


def refuse_unknown_splits(names: set[str], split_column: str, path: Path) -> None:
    bad = sorted(names - set(SPLITS) - {UNKNOWN_SPLIT})
    if bad:
        empty = " ('' = no value)" if "" in bad else ""
        raise CorpusError(f"corpus file {path}: split column {split_column!r} (corpus.split_column) has values {bad}"
                          f"{empty}; allowed: {list(SPLITS)}")


def _split_values(values: Sequence[Any], split_column: str, broken: Sequence[bool], path: Path) -> list[str]:
    """Split names per row; unparseable rows (`broken`) get UNKNOWN_SPLIT, any other unknown value is refused."""
    out = [UNKNOWN_SPLIT if b else split_name(v) for v, b in zip(values, broken)]
    refuse_unknown_splits(set(out), split_column, path)
    return out


# --- reading a corpus file ----------------------------------------------------------


def check_file(path: Path) -> str:
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


def reading(path: Path, read: Callable[[], Any]) -> Any:
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


def _require_columns(wanted: Sequence[str], present: Sequence[str], path: Path) -> None:
    for col in wanted:
        if col not in present:
            raise CorpusError(f"corpus file {path} has no column {col!r} (corpus.text_column / label_column / "
                              f"split_column); columns present: {list(present)}")


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
    suffix = check_file(path)
    if suffix == ".parquet":
        def read() -> pd.DataFrame:
            _require_columns(columns, pq.read_schema(path).names, path)
            return pq.read_table(path, columns=columns).to_pandas()

        df = reading(path, read)
        return df.assign(error=None, line=None)
    return reading(path, lambda: (_read_csv if suffix == ".csv" else _read_jsonl)(path, columns))


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
            "id": row_ids(len(raw), digits=FILE_ID_DIGITS),
            "text": [as_str(v) for v in raw[text_column]],
            "label": [as_str(v) for v in raw[label_column]],
            "error": [e if isinstance(e, str) else None for e in raw["error"]],
        }
    )
    if split_column:
        df["split"] = _split_values(raw[split_column].tolist(), split_column, raw["error"].notna().tolist(), path)
    return df
