"""Render texts as glyph-aligned images and write a split's cache shards.

An image is a grid of `lines x line_chars` cells of `cell_height x
cell_width` pixels; cell k (reading order, wrapped line by line) holds the
k-th grapheme cluster of the normalized text, copied from the glyph atlas
(see atlas.py). Texts with more clusters than cells keep their first
`lines * line_chars` clusters: that truncation is counted per image, per
split (manifest) and in the run summary, never silent.

Rendering is a table lookup and one gather per shard, so a split renders in
a second or two in one process; nothing about it is random, so a rerun writes
the same bytes and prediction renders exactly what training saw.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from ..config.settings import TRUNCATION_WARN_SHARE, CellGrid, Section
from ..core import io
from .atlas import GlyphAtlas, clusters, is_plain, normalize, undrawable

CACHE_FORMAT = "pixelpipe.cache/2"


@dataclass(frozen=True)
class RenderSettings(Section, CellGrid):
    """Everything that changes a rendered pixel (stored in manifests and the model config)."""

    SECTION = "render"
    # Keys of the `render` section that are not pixels (they decide how images are grouped into files).
    NOT_PIXELS: ClassVar[tuple[str, ...]] = ("shard_size",)

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


def image_geometry(render: dict[str, Any]) -> tuple[int, int, int]:
    """(channels, height, width) of a `render` settings dict (a manifest's or a model's)."""
    s = RenderSettings.from_section(render)
    return s.shape


class Renderer:
    """Lays texts out as cluster indices into an atlas and copies the atlas cells into images."""

    def __init__(self, settings: RenderSettings, atlas: GlyphAtlas | None = None) -> None:
        self.settings = settings
        self.atlas = atlas or GlyphAtlas(settings.fonts, settings.font_size, settings.cell_height, settings.cell_width)
        # code point -> cell index for one-character clusters (-1: not looked up yet)
        self._by_codepoint = np.full(0x110000, -1, np.int32)
        for cluster, i in self.atlas.index.items():
            if len(cluster) == 1:
                self._by_codepoint[ord(cluster)] = i

    def _codepoint_cells(self, codepoints: np.ndarray) -> np.ndarray:
        cells = self._by_codepoint[codepoints]
        for cp in np.unique(codepoints[cells < 0]):
            self._by_codepoint[cp] = self.atlas.lookup(chr(cp))
        return self._by_codepoint[codepoints] if (cells < 0).any() else cells

    def layout(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(indices int32 [N, capacity] with 0 = blank, clusters per text before truncation [N]).

        Texts without combining marks (nearly all) go through one vectorized
        code point lookup; the others are split into clusters one by one.
        """
        cap = self.settings.cells
        out = np.zeros((len(texts), cap), np.int32)
        full = np.zeros(len(texts), np.int64)
        normal = [normalize(t) for t in texts]
        plain = [i for i, t in enumerate(normal) if is_plain(t)]
        if plain:
            lens = np.fromiter((len(normal[i]) for i in plain), np.int64, len(plain))
            codepoints = np.frombuffer("".join(normal[i] for i in plain).encode("utf-32-le"), np.uint32)
            cells = self._codepoint_cells(codepoints)
            rows = np.repeat(np.asarray(plain), lens)
            pos = np.arange(len(codepoints)) - np.repeat(np.cumsum(lens) - lens, lens)
            keep = pos < cap
            out[rows[keep], pos[keep]] = cells[keep]
            full[plain] = lens
        for row in sorted(set(range(len(texts))) - set(plain)):
            cl = clusters(normal[row])
            full[row] = len(cl)
            out[row, : min(cap, len(cl))] = [self.atlas.lookup(c) for c in cl[:cap]]
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


def render_split(
    texts: Sequence[str],
    labels: Sequence[int],
    ids: Sequence[str | int],
    settings: RenderSettings,
    shard_paths: Sequence[Path],
    manifest_path: Path,
    shard_size: int,
    progress: bool = True,
    desc: str = "render",
    log: Any = None,
) -> dict[str, Any]:
    """Render one split into fixed shard files plus a manifest; return the manifest.

    Row i goes to shard i // shard_size. The shard paths are fixed up front by
    the DAG, so trailing shards may be short or empty (rows dropped upstream);
    empty shards are still written as [0, C, H, W]. The manifest carries the
    split's atlas (every cluster it used), per-row cluster counts (the training
    windows need them) and how many texts were truncated.
    """
    texts, labels, ids = list(texts), [int(x) for x in labels], [x if isinstance(x, str) else int(x) for x in ids]
    n = len(texts)
    if not (len(labels) == len(ids) == n):
        raise ValueError(f"texts ({n}), labels ({len(labels)}) and ids ({len(ids)}) differ in length")
    if not shard_paths or shard_size < 1:
        raise ValueError("need at least one shard path and shard_size >= 1")
    if n > len(shard_paths) * shard_size:
        raise ValueError(f"{n} rows do not fit in {len(shard_paths)} shards of {shard_size}")
    manifest_path = Path(manifest_path)
    renderer = Renderer(settings)
    t0 = time.perf_counter()
    try:
        indices, full = renderer.layout(texts)
    except ValueError as e:
        bad = next(i for i, t in enumerate(texts) if undrawable(t, settings.fonts))
        raise ValueError(f"row {bad}: {e}") from None
    sha256s = []
    with tqdm(total=n, unit="img", desc=desc, disable=not progress) as bar:
        for s, path in enumerate(shard_paths):
            lo, hi = min(s * shard_size, n), min((s + 1) * shard_size, n)
            io.save_npy(path, renderer.images(indices[lo:hi]))
            sha256s.append(io.sha256_file(path))
            bar.update(hi - lo)
    elapsed = time.perf_counter() - t0
    files = [os.path.relpath(p, manifest_path.parent) for p in shard_paths]
    manifest = split_manifest(settings, shard_size, files, sha256s, labels, ids, full, renderer.atlas.to_dict(),
                              round(n / elapsed, 1))
    if log is not None and n and manifest["truncated_share"] > TRUNCATION_WARN_SHARE:
        log(f"warning: {manifest['truncated']} of {n} texts ({100 * manifest['truncated_share']:.1f} %) have more "
            f"than {settings.cells} characters and were truncated; raise render.line_chars or render.lines")
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
                   labels: Sequence[int], ids: Sequence[str | int], full: np.ndarray, atlas: dict[str, Any],
                   images_per_s: float) -> dict[str, Any]:
    """The manifest of one rendered split: what render_split writes and what the planner sizes.

    `full` holds each text's characters before truncation; the manifest keeps the truncated
    lengths per row (training windows need them) and how many texts were truncated.
    """
    n = len(full)
    lengths = np.minimum(full, settings.cells)
    shards = []
    for s, (file, sha) in enumerate(zip(files, sha256s)):
        lo, hi = min(s * shard_size, n), min((s + 1) * shard_size, n)
        shards.append({"file": file, "count": hi - lo, "sha256": sha, "labels": list(labels[lo:hi]),
                       "ids": list(ids[lo:hi]), "lengths": lengths[lo:hi].tolist()})
    n_truncated = int((np.asarray(full) > settings.cells).sum())
    return {"format": CACHE_FORMAT, "render": settings.to_dict(), "shard_size": shard_size, "count": n,
            "truncated": n_truncated, "truncated_share": n_truncated / n if n else 0.0,
            "longest_clusters": int(np.max(full, initial=0)), "shards": shards, "images_per_s": images_per_s,
            "atlas": atlas}
