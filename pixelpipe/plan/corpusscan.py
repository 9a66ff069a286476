"""Reading corpus rows as the corpus rule reads them, keeping only counts: bad rows, per split text lengths and
glyph uses, the clusters found (the charset), the parquet bytes. Used by corpusfacts on whole segments and on
samples of them; nothing here holds more than the rows it is given."""

from __future__ import annotations

import collections
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..data.atlas import SPACE, clusters, is_plain, normalize


@dataclass
class TextTally:
    """What some rows of one split add up to (rows kept after bad rows); floats once extrapolated."""

    rows: float = 0.0
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(1))  # texts per cluster count (before truncation)
    glyphs: collections.Counter = field(default_factory=collections.Counter)  # cluster -> uses within the layout
    codepoints: float = 0.0  # characters of the normalized texts (the n-gram baseline's input)
    per_label: collections.Counter = field(default_factory=collections.Counter)  # label -> rows

    def add(self, other: "TextTally", factor: float = 1.0) -> None:
        n = max(len(self.lengths), len(other.lengths))
        self.lengths = np.pad(self.lengths, (0, n - len(self.lengths))) \
            + factor * np.pad(other.lengths, (0, n - len(other.lengths)))
        self.rows += factor * other.rows
        self.codepoints += factor * other.codepoints
        for k, v in other.glyphs.items():
            self.glyphs[k] += factor * v
        for k, v in other.per_label.items():
            self.per_label[k] += factor * v


def text_tally(norm: list[str], split_clusters: list[list[str] | None], cells: int) -> tuple[TextTally, set[str]]:
    """(lengths, glyph uses within `cells`, code points; the clusters found) of normalized texts, given the clusters
    of those with marks (None: one cluster per character): what render_split's SplitStats and the charset
    (charset.text_clusters) count."""
    lengths, glyphs, found, plain = np.zeros(len(norm), np.int64), collections.Counter(), set(), []
    for i, (t, cl) in enumerate(zip(norm, split_clusters)):
        if cl is not None:
            lengths[i] = len(cl)
            glyphs.update(cl[:cells])
            found.update(cl)
        else:
            lengths[i] = len(t)
            plain.append(t)
    if plain:
        points, counts = np.unique(np.frombuffer("".join(t[:cells] for t in plain).encode("utf-32-le"), "<u4"),
                                   return_counts=True)
        glyphs.update({chr(p): int(c) for p, c in zip(points, counts)})
        found.update(chr(p) for p in np.unique(np.frombuffer("".join(plain).encode("utf-32-le"), "<u4")))
    found.discard(SPACE)
    tally = TextTally(float(len(norm)), np.bincount(lengths, minlength=1).astype(float), glyphs,
                      float(sum(map(len, norm))))
    return tally, found


def charset_clusters(texts: list[str], fonts: list[str]) -> set[str]:
    """The drawable clusters of `texts` (the space excluded), found over the whole column in a few C-level passes:
    data.charset.text_clusters's result for the texts the corpus rule keeps (a dropped row's drawable clusters
    are counted here too). Texts without marks or format characters (~90 % of real text) are their characters;
    the others are normalized and split into clusters (atlas.normalize, atlas.clusters) joined by NUL, which
    neither composes nor is whitespace; tests/test_plan.py checks the result against text_clusters."""
    from ..data.atlas import undrawable
    from ..data.charset import text_clusters

    texts = [t for t in texts if isinstance(t, str)]
    if any("\x00" in t for t in texts):
        found = text_clusters(texts)
    else:
        nfc = unicodedata.normalize("NFC", "\x00".join(texts))
        joiners = "".join(map(re.escape, sorted(c for c in set(nfc) if c != "\x00" and not is_plain(c))))
        found = set(nfc) if not joiners else set()
        if joiners:
            has_mark = re.compile(f"[{joiners}]")
            split = nfc.split("\x00")
            marked = [t for t in split if has_mark.search(t)]
            found = set("".join(t for t in split if not has_mark.search(t)))
            texts = re.sub(r"\s+", " ", "\x00".join(marked))
            texts = re.sub(" ?\x00 ?", "\x00", texts).strip(" ")  # normalize: runs of whitespace, ends stripped
            cluster = re.compile(f"[^\x00{joiners}]?[{joiners}]+")  # atlas.clusters: marks join the one before
            found |= set(cluster.findall(texts)) | set(cluster.sub("", texts))
        found = {c for c in found if c != "\x00" and not c.isspace()}
    return {c for c in found if not undrawable(c, fonts)}


@dataclass
class CorpusScan:
    """Running totals of the corpus rule's stream: per split tallies and parquet writers, corpus-wide counts."""

    fonts: list[str]
    cells: int
    texts: dict[str, TextTally] = field(default_factory=dict)
    found: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)
    bad: collections.Counter = field(default_factory=collections.Counter)
    sources: collections.Counter = field(default_factory=collections.Counter)
    extra_bytes: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    exact: bool = True

    def __post_init__(self) -> None:
        from ..data.corpusfile import SPLITS
        from ..data.fonts import load_face

        self.texts = {split: TextTally() for split in SPLITS}
        self.known = frozenset().union(*(load_face(f).codepoints for f in self.fonts))
        self.writers: dict[str, tuple[Any, Any]] = {}
        self._drawable: dict[str, bool] = {}

    @staticmethod
    def _suspect(text: Any, label: Any, error: Any) -> bool:
        """An unparseable line, an empty text or a missing label: the corpus rule's check decides."""
        from ..data.corpusfile import MISSING_LABELS

        return isinstance(error, str) or not isinstance(text, str) or not text.strip() or not isinstance(label, str) \
            or not label.strip() or label.strip().casefold() in MISSING_LABELS

    def _clusters(self, norm: list[str]) -> tuple[list[list[str] | None], np.ndarray]:
        """Per text its clusters where it has marks or format characters (None: one cluster per character), and
        whether a character or cluster of it is undrawable (the corpus rule's bad-row check decides on those)."""
        from ..data.atlas import undrawable

        chars = set("".join(norm))
        odd = {c for c in chars if not c.isspace() and ord(c) not in self.known} | {c for c in chars if not is_plain(c)}
        flag = re.compile("[" + "".join(map(re.escape, sorted(odd))) + "]") if odd else None
        out: list[list[str] | None] = [None] * len(norm)
        bad = np.zeros(len(norm), bool)
        for i, t in enumerate(norm):
            if flag is None or not flag.search(t):
                continue
            cl = out[i] = clusters(t)
            for c in set(cl):
                if c not in self._drawable:
                    self._drawable[c] = not undrawable(c, self.fonts)
                bad[i] |= not self._drawable[c]
        return out, bad

    def read(self, chunk: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, TextTally]]:
        """(the chunk without its bad rows, counted as the corpus rule counts them; per split tallies of the rest)."""
        from ..data.corpus import bad_row_counts, find_bad_rows

        texts, labels = chunk["text"].tolist(), chunk["label"].tolist()
        errors = chunk["error"].tolist() if "error" in chunk else [None] * len(chunk)
        suspect = np.fromiter((self._suspect(t, lb, e) for t, lb, e in zip(texts, labels, errors)), bool, len(texts))
        norm = ["" if s else normalize(t) for t, s in zip(texts, suspect)]
        split_clusters, undrawn = self._clusters(norm)
        suspect |= undrawn
        bad = find_bad_rows(chunk[suspect], self.fonts) if suspect.any() else chunk.iloc[:0]
        if len(bad):
            self.bad.update(bad_row_counts(bad))
        keep = ~chunk.index.isin(bad.index)
        kept, splits = chunk[keep], chunk["split"].to_numpy()
        self.labels.update(kept["label"])
        tallies = {}
        for split in pd.unique(kept["split"]):
            rows = np.flatnonzero(keep & (splits == split))
            tallies[split], found = text_tally([norm[i] for i in rows], [split_clusters[i] for i in rows], self.cells)
            tallies[split].per_label.update(chunk["label"].to_numpy()[rows].tolist())
            self.found |= found
        return kept, tallies

    def add(self, tallies: dict[str, TextTally]) -> None:
        for split, t in tallies.items():
            self.texts[split].add(t)

    def spread(self, tallies: dict[str, TextTally], split_rows: dict[str, float]) -> None:
        """Add `tallies` pooled over their splits, spread over `split_rows` kept rows per split."""
        pool = TextTally()
        for t in tallies.values():
            pool.add(t)
        for split, rows in split_rows.items():
            if pool.rows:
                self.texts[split].add(pool, rows / pool.rows)

    def write(self, kept: pd.DataFrame, ids: dict[str, int]) -> None:
        """Write the rows' split tables to in-memory parquet writers, exactly as data.corpus.SplitWriters does."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..data.corpus import split_table

        for split, part in kept.groupby("split", sort=False):
            table = split_table(part, ids)
            if split not in self.writers:
                sink = pa.BufferOutputStream()
                self.writers[split] = (sink, pq.ParquetWriter(sink, table.schema))
            self.writers[split][1].write_table(table)

    def parquet_bytes(self) -> dict[str, int]:
        """Bytes of each split's file: what was written, plus what was extrapolated."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..data.corpus import split_table

        out = {}
        for split in self.texts:
            if split not in self.writers:
                sink = pa.BufferOutputStream()
                schema = split_table(pd.DataFrame(columns=["id", "text", "label"]), {}).schema
                self.writers[split] = (sink, pq.ParquetWriter(sink, schema))
            sink, writer = self.writers[split]
            writer.close()
            out[f"{split}.parquet"] = int(sink.getvalue().size + self.extra_bytes[split])
        return out


def parquet_rate(kept: pd.DataFrame, ids: dict[str, int]) -> tuple[float, float]:
    """(bytes per row, bytes per extra row group) of these rows' split table, measured by writing it to memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..data.corpus import split_table

    table = split_table(kept, ids)

    def size(parts: list) -> int:
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, table.schema) as writer:
            for part in parts:
                writer.write_table(part)
        return sink.getvalue().size

    half = len(kept) // 2
    one, two, empty = size([table]), size([table.slice(0, half), table.slice(half)]), size([])
    per_group = max(0, two - one)
    return max(0.0, (one - empty - per_group) / max(1, len(kept))), float(per_group)
