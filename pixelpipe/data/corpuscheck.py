"""Checks before a run: what a corpus file (`corpus.path`) shows without training.

pixelpipe.data.corpus.planned_split_sizes runs them when Snakemake parses the DAG, so a file that cannot train
(a column missing, no data rows, an empty split, no row that parses, no text, fewer than two labels) fails
before any job, in one line naming the file and the config key. Each check streams the file and reads only
until it has what it needs: the first rows of a usable file, nothing held per row.
"""

from __future__ import annotations

import collections
import csv
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow.parquet as pq

from .corpusfile import (
    SPLITS,
    UNKNOWN_SPLIT,
    CorpusError,
    as_str,
    check_file,
    is_missing,
    reading,
    refuse_unknown_splits,
    split_name,
    usable_label,
)  # fmt: skip

# --- rows and columns -------------------------------------------------------------


def count_rows(path: Path) -> int:
    """Data rows in a corpus file (unparseable lines included: they become bad rows)."""
    suffix = check_file(path)
    if suffix == ".parquet":
        return reading(path, lambda: pq.ParquetFile(path).metadata.num_rows)
    if suffix in (".jsonl", ".json"):
        return reading(path, lambda: _count_lines(path))
    return reading(path, lambda: _count_records(path))


def _count_lines(path: Path) -> int:
    with open(path, encoding="utf-8-sig") as f:
        return sum(1 for line in f if line.strip())


def _count_records(path: Path) -> int:
    """CSV data rows as the corpus rule counts them (blank lines skipped, a row of the wrong width counted: a bad
    row), without holding any: the header was checked already."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        next(reader, None)
        return sum(1 for record in reader if record)


def split_counts(path: Path, suffix: str, split_column: str) -> dict[str, int]:
    """Rows per split named in the split column, streamed (nothing held per row); unknown names refused."""
    if suffix == ".parquet":
        counts = pq.read_table(path, columns=[split_column]).column(0).value_counts().to_pylist()
        found = collections.Counter()
        for item in counts:
            found[split_name(item["values"])] += item["counts"]
    else:
        found = collections.Counter(split_name(v) if ok else UNKNOWN_SPLIT
                                    for v, ok in _column_cells(path, suffix, split_column))
    refuse_unknown_splits(set(found), split_column, path)
    return {s: found.get(s, 0) for s in SPLITS}


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


def check_columns(path: Path, suffix: str, wanted: dict[str, str]) -> None:
    """Refuse a file without a configured column (`wanted`: config key -> column), naming the column, its config
    key and the columns present."""
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


# --- what the rows hold -----------------------------------------------------------


def _has_text(value: Any) -> bool:
    return not is_missing(value)


def _distinct(values: Iterable[Any], usable: Callable[[Any], bool], enough: int) -> set[str]:
    """Up to `enough` distinct usable values (as the corpus rule stringifies them), reading no further."""
    found: set[str] = set()
    for value in values:
        if usable(value):
            found.add(as_str(value))
            if len(found) >= enough:
                break
    return found


def check_planned(path: Path, text_column: str, label_column: str, sizes: dict[str, int]) -> None:
    """Refuse, before any job, a file that leaves a split empty, parses nowhere, has no text or fewer than two
    labels. Each check reads only until it has what it needs: the first rows of a usable file."""
    empty = [split for split, n in sizes.items() if n == 0]
    if empty:
        raise CorpusError(f"corpus file {path}: split(s) {', '.join(empty)} would have no rows (rows per split: "
                          f"{sizes}); add rows, or change corpus.splits / corpus.split_column")
    suffix, rows = check_file(path), sum(sizes.values())
    reading(path, lambda: _check_parses(path, suffix, text_column, rows))
    texts = reading(path, lambda: _distinct(_column_values(path, suffix, text_column), _has_text, 1))
    if not texts:
        raise CorpusError(f"corpus file {path}: text column {text_column!r} (corpus.text_column) is empty in "
                          f"all {rows} data rows")
    labels = reading(path, lambda: _distinct(_column_values(path, suffix, label_column), usable_label, 2))
    if not labels:
        raise CorpusError(f"corpus file {path}: label column {label_column!r} (corpus.label_column) has no "
                          f"label in any of the {rows} data rows (empty, NaN, NA, N/A, null or None)")
    if len(labels) < 2:
        raise CorpusError(f"corpus file {path}: label column {label_column!r} (corpus.label_column) holds one "
                          f"class, {next(iter(labels))!r}; a classifier needs at least 2")


def _check_parses(path: Path, suffix: str, column: str, rows: int) -> None:
    """Refuse a CSV or JSON-lines file none of whose rows parses (each would be a bad row)."""
    if suffix == ".parquet" or any(parsed for _, parsed in _column_cells(path, suffix, column)):
        return
    need = "the header's number of fields" if suffix == ".csv" else "one JSON object per line"
    raise CorpusError(f"corpus file {path} (corpus.path): none of its {rows} data rows can be parsed ({need})")
