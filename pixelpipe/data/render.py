"""Lay texts out as glyph-aligned cells and write a split's cache shards of glyph ids.

An image is a grid of `lines x line_chars` cells of `cell_height x
cell_width` pixels; cell k (reading order, wrapped line by line) holds the
k-th grapheme cluster of the normalized text, copied from the glyph atlas
(see atlas.py). Texts with more clusters than cells keep their first
`lines * line_chars` clusters: that truncation is counted per image, per
split (manifest) and in the run summary, never silent.

The cache stores what makes an image bit-exactly: each text's glyph ids
(2 bytes per cell, against 128 bytes of pixels) plus the split's atlas.
Images are assembled where they are consumed (`Renderer.images` here, one
gather; the models fold the stem over the atlas and need no image at all).
Nothing about it is random, so a rerun writes the same bytes and prediction
renders exactly what training saw.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from ..config.settings import CellGrid, Section
from ..core.arrays import distinct
from ..core import io
from ..core.batching import trimmed_width
from .atlas import GlyphAtlas, joining_table, normalize

CACHE_FORMAT = "pixelpipe.cache/3"


@dataclass(frozen=True)
class RenderSettings(Section, CellGrid):
    """Everything that changes a rendered pixel (stored in manifests and the model config)."""

    SECTION = "render"
    # Keys of the `render` section that are not pixels (they decide how images are grouped into files).
    NOT_PIXELS: ClassVar[tuple[str, ...]] = ("shard_size", "truncation_warning")

    fonts: tuple[str, ...]
    font_size: int
    cell_height: int
    cell_width: int
    line_chars: int
    lines: int
    channels: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "fonts", tuple(self.fonts))
        if self.channels not in (1, 3):
            raise ValueError(f"render.channels must be 1 or 3, got {self.channels}")
        if not self.fonts:
            raise ValueError("render.fonts needs at least one font")
        for key in ("font_size", "cell_height", "cell_width", "line_chars", "lines"):
            if getattr(self, key) < 1:
                raise ValueError(f"render.{key} must be >= 1, got {getattr(self, key)}")

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> "RenderSettings":
        """Build from the `render` section, with or without its NOT_PIXELS keys; any other key must be a field."""
        return super().from_section({k: v for k, v in section.items() if k not in cls.NOT_PIXELS})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; `RenderSettings.from_section(d)` round-trips it."""
        d = dataclasses.asdict(self)
        d["fonts"] = list(self.fonts)
        return d

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.channels, self.image_height, self.image_width)


class Renderer:
    """Lays texts out as cluster indices into an atlas and copies the atlas cells into images."""

    def __init__(self, settings: RenderSettings, atlas: GlyphAtlas | None = None) -> None:
        self.settings = settings
        self.atlas = atlas or GlyphAtlas(settings.fonts, settings.font_size, settings.cell_height, settings.cell_width)
        # code point -> cell index for one-character clusters (-1: not looked up yet); the BMP and the atlas's own
        # code points, grown when a text brings a higher one (all of Unicode would be 4.25 MiB in predict's peak)
        singles = {ord(cluster): i for cluster, i in self.atlas.index.items() if len(cluster) == 1}
        self._by_codepoint = np.full(max([0xFFFF, *singles]) + 1, -1, np.int32)
        self._by_codepoint[list(singles)] = list(singles.values())

    def _codepoint_cells(self, codepoints: np.ndarray) -> np.ndarray:
        top = int(codepoints.max(initial=0))
        if top >= len(self._by_codepoint):
            self._by_codepoint = np.concatenate([self._by_codepoint,
                                                 np.full(top + 1 - len(self._by_codepoint), -1, np.int32)])
        cells = self._by_codepoint[codepoints]
        for cp in distinct(codepoints[cells < 0]):
            self._by_codepoint[cp] = self.atlas.lookup(chr(cp))
        return self._by_codepoint[codepoints] if (cells < 0).any() else cells

    def layout(self, texts: Sequence[str], capacity: int | None = None,
               fit: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(indices int32 [N, capacity] with 0 = blank, clusters per text before truncation [N]; 0 = empty).
        `capacity`: the layout's cells unless given (a long text read in windows: core/longtext.py); `fit`: only
        the columns the longest text can fill (its code points, in whole lines of a layout of several), up to
        `capacity`: a chunk of short texts laid out at a long text's capacity holds no blank columns.

        All texts' code points are split into clusters at once (a cluster starts at every code point that is not
        a joining character, and at a text's start: `atlas.clusters`); one-character clusters (nearly all) go
        through one vectorized code point -> cell lookup, the others through the atlas one by one. Clusters past
        the capacity are never looked up (nor drawn). Clusters the atlas lacks are drawn in that order (the
        one-character ones first), which decides only the ids of the glyphs drawn anew.
        """
        cap, n = capacity or self.settings.cells, len(texts)
        normal = [normalize(t) for t in texts]
        lens = np.fromiter(map(len, normal), np.int64, n)
        s = self.settings  # a text has at most as many clusters as code points: the width before the temporaries
        out = np.zeros((n, trimmed_width(int(lens.max(initial=0)), s.line_chars, s.lines, cap) if fit else cap),
                       np.int32)
        text = "".join(normal)
        codepoints = np.frombuffer(text.encode("utf-32-le"), np.uint32)
        rows = np.repeat(np.arange(n), lens)
        first = np.zeros(len(codepoints), bool)
        first[(np.cumsum(lens) - lens)[lens > 0]] = True
        begins = np.flatnonzero(first | ~joining_table()[codepoints])  # where each cluster starts
        sizes = np.diff(np.append(begins, len(codepoints)))
        row = rows[begins]
        full = np.bincount(row, minlength=n)
        pos = np.arange(len(begins)) - np.repeat(np.cumsum(full) - full, full)
        keep = pos < cap
        cells = np.empty(len(begins), np.int32)
        single = keep & (sizes == 1)
        cells[single] = self._codepoint_cells(codepoints[begins[single]])
        several = np.flatnonzero(keep & (sizes > 1))
        if len(several):
            known, lookup = self.atlas.index.get, self.atlas.lookup  # a known cluster without a method call
            cells[several] = [i if (i := known(c := text[a : a + k])) is not None else lookup(c)
                              for a, k in zip(begins[several].tolist(), sizes[several].tolist())]
        out[row[keep], pos[keep]] = cells[keep]
        return out, full

    def images(self, indices: np.ndarray) -> np.ndarray:
        """uint8 [N, C, H, W] from cluster indices [N, capacity].

        Each cell row (cell_width bytes) is gathered as one element, straight into
        the image's layout [N, line, pixel row, cell]: one gather, no copy after it.
        """
        s = self.settings
        n = len(indices)
        rows = np.ascontiguousarray(self.atlas.cells).view(np.dtype((np.void, s.cell_width)))[..., 0]  # [G, ch]
        pixel_rows = np.arange(s.cell_height)[None, None, :, None]
        gathered = np.ascontiguousarray(rows.T)[pixel_rows, indices.reshape(n, s.lines, 1, s.line_chars)]
        gray = gathered.view(np.uint8).reshape(n, 1, s.image_height, s.image_width)
        return np.ascontiguousarray(np.repeat(gray, 3, axis=1)) if s.channels == 3 else gray

    def render(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(images uint8 [N, C, H, W], clusters per text before truncation [N]) for `texts`."""
        indices, full = self.layout(texts)
        return self.images(indices), full


def glyph_dtype(glyphs: int) -> str:
    """The glyph id type for a charset of `glyphs`: uint16 while it fits, else uint32."""
    return "uint16" if glyphs <= np.iinfo(np.uint16).max + 1 else "uint32"


def row_dtype(cells: int, ids: str) -> np.dtype:
    """One cache row: its glyph ids, label and length."""
    return np.dtype([("glyphs", np.dtype(ids).newbyteorder("<"), (cells,)), ("label", "<i8"), ("length", "<i4")])


def shard_dtype(cells: int, glyphs: int) -> np.dtype:
    return row_dtype(cells, glyph_dtype(glyphs))


def iter_chunks(path: Path, columns: Sequence[str], size: int) -> Iterator[dict[str, list]]:
    """A parquet file's `columns` in chunks of exactly `size` rows (the last one shorter), read batch by batch."""
    import pyarrow.parquet as pq

    buf: dict[str, list] = {c: [] for c in columns}
    # pre_buffer=False: pre-buffered reads keep every row group read so far until the file is closed (the
    # render job's peak grew with the split: 101 MB at 17,100 rows, 248 MB at 1.71 M)
    for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=size, columns=list(columns)):
        for c in columns:
            buf[c].extend(batch.column(c).to_pylist())
        while len(buf[columns[0]]) >= size:
            yield {c: v[:size] for c, v in buf.items()}
            buf = {c: v[size:] for c, v in buf.items()}
    if buf[columns[0]]:
        yield buf


class SplitStats:
    """What a split's manifest reports about its texts, accumulated shard by shard."""

    def __init__(self, glyphs: int) -> None:
        self.glyph_counts = np.zeros(glyphs, np.int64)
        self.rows = self.truncated = self.characters = 0
        self.longest, self.shortest = 0, None

    def add(self, indices: np.ndarray, full: np.ndarray, cells: int) -> None:
        lengths = np.minimum(full, cells)
        valid = np.arange(indices.shape[1])[None, :] < lengths[:, None]
        self.glyph_counts += np.bincount(indices[valid], minlength=len(self.glyph_counts))[: len(self.glyph_counts)]
        self.rows += len(full)
        self.truncated += int((full > cells).sum())
        self.characters += int(lengths.sum())
        if len(full):
            self.longest = max(self.longest, int(full.max()))
            self.shortest = int(lengths.min()) if self.shortest is None else min(self.shortest, int(lengths.min()))

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.rows, "truncated": self.truncated,
                "truncated_share": self.truncated / self.rows if self.rows else 0.0,
                "longest_clusters": self.longest, "shortest_clusters": self.shortest or 0,
                "mean_clusters": self.characters / self.rows if self.rows else 0.0,
                "glyph_counts": self.glyph_counts.tolist()}


def render_split(
    corpus_path: Path,
    charset: Sequence[str],
    settings: RenderSettings,
    shard_paths: Sequence[Path],
    manifest_path: Path,
    shard_size: int,
    progress: bool = True,
    desc: str = "render",
    log: Any = None,
    truncation_warning: float = 0.25,
) -> dict[str, Any]:
    """Lay one split's texts out as glyph ids, shard by shard, streaming the corpus file; return the manifest.

    Row i goes to shard i // shard_size. The shard paths are fixed up front by the DAG, so trailing
    shards may be short or empty (rows dropped upstream); empty shards are still written. The atlas is
    drawn from the run's charset (pixelpipe.data.charset), so glyph ids agree across splits; a text
    with a character the charset lacks means the charset is stale and fails the rule.
    """
    if not shard_paths or shard_size < 1:
        raise ValueError("need at least one shard path and shard_size >= 1")
    manifest_path = Path(manifest_path)
    atlas = GlyphAtlas.from_clusters(charset, settings.fonts, settings.font_size, settings.cell_height,
                                     settings.cell_width)
    renderer, dtype = Renderer(settings, atlas), shard_dtype(settings.cells, len(charset))
    stats, sha256s = SplitStats(len(charset)), []
    chunks = iter_chunks(Path(corpus_path), ["text", "label"], shard_size)
    t0 = time.perf_counter()
    from tqdm import tqdm

    with tqdm(unit="row", desc=desc, disable=not progress) as bar:
        for s, path in enumerate(shard_paths):
            chunk = next(chunks, {"text": [], "label": []})
            indices, full = renderer.layout(chunk["text"])
            if len(atlas) != len(charset):
                raise ValueError(f"{corpus_path} has characters missing from the charset ({sorted(atlas.drawn)[:5]}): "
                                 "results/corpus/charset.json is stale; rerun the corpus rule")
            rows = np.zeros(len(full), dtype)
            rows["glyphs"], rows["label"], rows["length"] = indices, chunk["label"], np.minimum(full, settings.cells)
            io.save_npy(path, rows)
            sha256s.append(io.sha256_file(path))
            stats.add(indices, full, settings.cells)
            bar.update(len(full))
    if next(chunks, None) is not None:
        raise ValueError(f"{corpus_path} has more than {len(shard_paths)} shards of {shard_size} rows")
    files = [os.path.relpath(p, manifest_path.parent) for p in shard_paths]
    manifest = split_manifest(settings, shard_size, files, sha256s, stats, atlas.to_dict(), dtype,
                              round(stats.rows / max(time.perf_counter() - t0, 1e-9), 1), truncation_warning)
    if log is not None and stats.rows and manifest["truncated_share"] > truncation_warning:
        log(f"warning: {manifest['truncated']} of {stats.rows} texts ({100 * manifest['truncated_share']:.1f} %) have "
            f"more than {settings.cells} characters and were truncated; raise render.line_chars or render.lines")
    io.write_json(manifest_path, manifest)
    return manifest


def verify_shards(split_dir: str | os.PathLike, files: Sequence[str] | None = None) -> dict[str, Any]:
    """Check the shards of a rendered split (all, or the file names in `files`) against its manifest.

    Every reader of the cache calls this before it uses a shard, so a damaged shard stops the
    stage with an IntegrityError naming the file and the render rule to rerun. Returns the manifest.
    """
    split_dir = Path(split_dir)
    manifest_path = split_dir / "manifest.json"
    manifest = io.read_json(manifest_path)
    listed = {entry["file"]: entry for entry in manifest["shards"]}
    rerun = f"render_{split_dir.name}"
    for name in listed if files is None else files:
        if name not in listed:
            raise io.IntegrityError(f"{split_dir / name} is not listed in {manifest_path}; rebuild the split: "
                                    f"snakemake --forcerun {rerun}")
        io.verify_file(split_dir / name, listed[name].get("sha256"), str(manifest_path), rerun)
    return manifest


def split_manifest(settings: RenderSettings, shard_size: int, files: Sequence[str], sha256s: Sequence[str],
                   stats: SplitStats, atlas: dict[str, Any], dtype: np.dtype, rows_per_s: float,
                   truncation_warning: float = 0.25) -> dict[str, Any]:
    """The manifest of one rendered split: what render_split writes and what the planner sizes. Per-row data
    (glyph ids, labels, lengths) lives in the shards, so the manifest stays small at any corpus size."""
    counts = [min(shard_size, max(0, stats.rows - s * shard_size)) for s in range(len(files))]
    shards = [{"file": f, "count": c, "sha256": sha} for f, c, sha in zip(files, counts, sha256s)]
    return {"format": CACHE_FORMAT, "render": settings.to_dict(), "shard_size": shard_size,
            "glyph_dtype": dtype["glyphs"].base.name, **stats.to_dict(), "shards": shards,
            "rows_per_s": rows_per_s, "truncation_warning": truncation_warning, "atlas": atlas}
