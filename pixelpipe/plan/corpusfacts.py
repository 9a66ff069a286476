"""What the corpus rule will write, without writing or holding the corpus: rows per split after bad rows, the
classes, the run's charset, per split the text lengths and glyph counts (the cache manifests, the trimmed
batches and the n-gram baseline depend on them), and the bytes of every file in results/corpus/.

The corpus is read in the order build_corpus streams it, segment by segment: the rows drawn from the shipped
sources (or the user's file: one chunk), then the Faker rows that fill what they lack. Up to FRAME_EXACT_ROWS
drawn rows are read exactly as the corpus rule reads them (its bad-row check, split tables and parquet writer,
to memory), so on the tiny and default configs every count and every byte is the rule's own. Beyond that (the
real text at 10x and 100x, a large user file) a seeded random sample of FRAME_EXACT_ROWS rows is read and the
rest extrapolated per split, while the charset is still found over every row (charset_clusters: cheap). Faker
writes ~1,600 texts/s on the 2-core machine (1.5 M rows would take 16 minutes), so only the first
FAKER_SAMPLE_ROWS Faker rows are generated, exactly the rows the corpus rule starts with. The disk preflight,
which answers before any job, samples every segment (PREFLIGHT_SAMPLE_ROWS).
"""

from __future__ import annotations

import collections
import inspect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..data import sources as builtin
from .corpusscan import CorpusScan, TextTally, charset_clusters, parquet_rate

if TYPE_CHECKING:
    from ..data.corpus import CorpusSettings
    from ..data.render import RenderSettings

FRAME_EXACT_ROWS = 40_000  # the default corpus (38,000 real rows) is read whole
FAKER_SAMPLE_ROWS = 2_000  # ~1.3 s of Faker; exact below it (the tiny config's 380 rows)
PREFLIGHT_SAMPLE_ROWS = 2_000  # per segment, for the disk preflight
# Rows per chunk of the Faker stream (sources.faker_rows' default): each chunk adds one row group per split file.
FAKER_CHUNK_ROWS = inspect.signature(builtin.faker_rows).parameters["chunk"].default


@dataclass
class CorpusFacts:
    """Per split: rows kept and their text statistics; the classes, the charset and results/corpus/'s bytes."""

    texts: dict[str, TextTally]
    num_classes: int
    charset: list[str]
    corpus_bytes: dict[str, int]
    exact: bool  # every row was read (nothing extrapolated)
    frame_rows: int = 0  # rows drawn from the shipped sources, or the user file's rows: one chunk, held whole
    faker_rows: int = 0  # rows Faker generates (streamed in chunks)
    user_file: bool = False  # the drawn rows are a user's file (corpus.path)
    labels: tuple[str, ...] = ()  # the class labels in id order

    @property
    def sizes(self) -> dict[str, int]:
        return {split: int(round(t.rows)) for split, t in self.texts.items()}


def _read_exactly(scan: CorpusScan, rows: pd.DataFrame, ids: dict[str, int] | None) -> dict[str, int]:
    """A whole segment, as the corpus rule reads it: bad rows dropped, tallied, written; the class ids."""
    from ..data.corpus import class_ids

    kept, tallies = scan.read(rows)
    ids = ids or class_ids(kept["label"])  # a user file is one chunk: its labels are all here
    scan.add(tallies)
    scan.write(kept, ids)
    scan.sources.update(kept["source"])
    return ids


def _read_sample(scan: CorpusScan, sample: pd.DataFrame, split_rows: dict[str, int], ids: dict[str, int] | None,
                 row_groups: int) -> dict[str, int]:
    """A segment read in part: the sample's statistics, pooled over its splits, spread over the segment's rows
    per split (`split_rows`, before bad rows); each split file gets `row_groups` row groups of them."""
    from ..data.corpus import class_ids

    factor = sum(split_rows.values()) / max(1, len(sample))
    before = collections.Counter(scan.bad)
    kept, tallies = scan.read(sample)
    for kind in scan.bad:
        scan.bad[kind] = before[kind] + (scan.bad[kind] - before[kind]) * factor
    ids = ids or class_ids(kept["label"])
    keep = len(kept) / max(1, len(sample))
    scan.spread(tallies, {s: n * keep for s, n in split_rows.items()})
    per_row, per_group = parquet_rate(kept, ids) if len(kept) else (0.0, 0.0)
    for split, n in split_rows.items():
        scan.extra_bytes[split] += n * keep * per_row + (row_groups * per_group if n else 0)
    for source, n in collections.Counter(kept["source"]).items():
        scan.sources[source] += n * factor
    scan.exact = False
    return ids


def _split_counts(splits: pd.Series | np.ndarray) -> dict[str, int]:
    from ..data.corpusfile import SPLITS

    counts = pd.Series(np.asarray(splits)).value_counts()  # vectorized: millions of rows at 1.9 M
    return {s: int(counts.get(s, 0)) for s in SPLITS}


def _read_frame(scan: CorpusScan, frame: pd.DataFrame, ids: dict[str, int] | None, sample: int,
                seed: int) -> dict[str, int]:
    """The drawn (or user) rows: whole up to `sample` rows, else a seeded random sample plus every row's clusters."""
    if len(frame) <= sample:
        return _read_exactly(scan, frame, ids)
    pick = np.sort(np.random.default_rng([seed, 11]).choice(len(frame), sample, replace=False))
    ids = _read_sample(scan, frame.iloc[pick], _split_counts(frame["split"]), ids, row_groups=1)
    scan.found |= charset_clusters(frame["text"].tolist(), scan.fonts)
    return ids


def _read_faker(scan: CorpusScan, ccfg: CorpusSettings, fill: dict[str, int], codes: np.ndarray, start: int,
                ids: dict[str, int], sample: int, seed: int) -> None:
    """The Faker rows: their first `sample` rows generated (the very rows the corpus rule starts with)."""
    from ..data.corpusfile import SPLITS, row_ids

    total = sum(fill.values())
    rows = next(builtin.faker_rows(fill, ccfg.min_chars, ccfg.max_chars, seed, chunk=min(sample, total)))
    rows = rows.assign(id=row_ids(len(rows), start),
                       split=np.asarray(SPLITS)[codes[: len(rows)]])
    if len(rows) == total:
        _read_exactly(scan, rows, ids)
    else:
        _read_sample(scan, rows, _split_counts(np.asarray(SPLITS)[codes]), ids,
                     row_groups=math.ceil(total / FAKER_CHUNK_ROWS))


def _rows_in_order(ccfg: CorpusSettings, seed: int) -> tuple[pd.DataFrame, dict[str, int], dict[str, str] | None,
                                                              dict[str, int] | None]:
    """(the drawn or user rows with their split, Faker rows per language, locales, class ids if known yet)."""
    from ..data.corpus import builtin_real_rows, class_ids, corpus_chunks, split_codes
    from ..data.corpusfile import SPLITS

    if ccfg.path is None:
        frame, fill = builtin_real_rows(ccfg, seed)
        locales = builtin.label_locales(fill)
        ids = class_ids(locales)
    else:
        chunks, _, locales, _ = corpus_chunks(ccfg, seed)
        frame, fill, ids = next(chunks), {}, None
    if "split" not in frame:
        codes = split_codes(len(frame) + sum(fill.values()), ccfg.splits, seed)
        frame = frame.assign(split=np.asarray(SPLITS)[codes[: len(frame)]])
    return frame, fill, locales, ids


def corpus_facts(ccfg: CorpusSettings, render: RenderSettings, seed: int, exact: bool = True) -> CorpusFacts:
    """The corpus rule's output for the `corpus` settings and `seed`, read as it streams (see the module docstring),
    with the fonts and layout of the `render` settings; `exact` False: the preflight's quick estimate (every
    segment sampled)."""
    from ..core.io import json_text
    from ..data.charset import CHARSET_FORMAT, build_charset
    from ..data.corpus import inventory_languages, labels_info, split_codes

    scan = CorpusScan(list(render.fonts), render.cells)
    frame, fill, locales, ids = _rows_in_order(ccfg, seed)
    ids = _read_frame(scan, frame, ids, FRAME_EXACT_ROWS if exact else PREFLIGHT_SAMPLE_ROWS, seed)
    if sum(fill.values()):
        codes = split_codes(len(frame) + sum(fill.values()), ccfg.splits, seed)[len(frame):]
        _read_faker(scan, ccfg, fill, codes, len(frame), ids, FAKER_SAMPLE_ROWS if exact else PREFLIGHT_SAMPLE_ROWS,
                    seed)
    charset = build_charset(scan.found, scan.fonts, inventory_languages(ccfg))
    sizes = {split: int(round(t.rows)) for split, t in scan.texts.items()}
    info = labels_info(ids, locales, {k: int(round(v)) for k, v in scan.bad.items()}, sizes,
                       {k: int(round(v)) for k, v in scan.sources.items()})
    disk = {**scan.parquet_bytes(), "labels.json": len(json_text(info)),
            "charset.json": len(json_text({"format": CHARSET_FORMAT, "clusters": charset}))}
    return CorpusFacts(scan.texts, max(1, len(ids)), charset, disk, scan.exact, len(frame), sum(fill.values()),
                       ccfg.path is not None, tuple(sorted(ids, key=ids.get)))
