"""Render text to small grayscale images and write a split's cache shards.

Rendering must be reproducible bit for bit: the student's config stores the
render settings so prediction re-renders exactly as training did, and a rerun
of the DAG must write the same shards. Every random choice therefore comes
from (settings.seed, row key) through a stable hash, never Python's salted
hash() or global random state.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math
import multiprocessing as mp
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont, features
from tqdm import tqdm

from . import io
from .fonts import DEFAULT_FONTS, FontSet

CACHE_FORMAT = "pixelpipe.cache/1"


@dataclass(frozen=True)
class RenderSettings:
    """Everything that changes a rendered pixel (stored in manifests and the student config)."""

    height: int = 32
    width: int = 128
    channels: int = 1
    font_size_min: int = 10
    font_size_max: int = 13
    padding: int = 2
    fonts: tuple[str, ...] = DEFAULT_FONTS
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "fonts", tuple(self.fonts))
        if self.channels not in (1, 3):
            raise ValueError(f"render.channels must be 1 or 3, got {self.channels}")
        if not 0 < self.font_size_min <= self.font_size_max:
            raise ValueError(
                f"render.font_size_min ({self.font_size_min}) must be > 0 and <= font_size_max ({self.font_size_max})"
            )
        if min(self.height, self.width) <= 2 * self.padding:
            raise ValueError(f"render.padding ({self.padding}) leaves no room in {self.height}x{self.width}")

    @classmethod
    def from_config(cls, cfg: dict[str, Any], seed: int | None = None) -> "RenderSettings":
        """Build from the config's `render` section; other keys there (shard_size, workers) are ignored."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "seed"]
        kwargs = {k: cfg[k] for k in names if k in cfg and cfg[k] is not None}
        kwargs["seed"] = int(seed if seed is not None else cfg.get("seed", 0))
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; `RenderSettings(**d)` round-trips it."""
        d = dataclasses.asdict(self)
        d["fonts"] = list(self.fonts)
        return d


def layout_engine() -> str:
    """Pillow's text layout engine here: "raqm" shapes Arabic/Hebrew (RTL, joining), "basic" does not."""
    return "raqm" if features.check("raqm") else "basic"


def _stable_seed(*parts: object) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _wrap(text: str, font: ImageFont.FreeTypeFont, max_width: float) -> list[str]:
    """Greedy word wrap; a word wider than a line is broken between characters."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        current = ""
        for word in paragraph.split():
            candidate = f"{current} {word}" if current else word
            if font.getlength(candidate) <= max_width:
                current = candidate
                continue
            if current:
                lines.append(current)
            current = ""
            for ch in word:
                if current and font.getlength(current + ch) > max_width:
                    lines.append(current)
                    current = ""
                current += ch
        if current:
            lines.append(current)
    return lines


class TextRenderer:
    """Draws text with the configured fonts; build one per process and reuse it."""

    def __init__(self, settings: RenderSettings) -> None:
        self.settings = settings
        self.fontset = FontSet(settings.fonts)
        self._fonts: dict[tuple[int, int], ImageFont.FreeTypeFont] = {}

    def _font(self, face: int, size: int) -> ImageFont.FreeTypeFont:
        key = (face, size)
        if key not in self._fonts:
            self._fonts[key] = ImageFont.truetype(str(self.fontset.faces[face].path), size)
        return self._fonts[key]

    def missing_chars(self, text: str) -> str:
        return self.fontset.missing_chars(text)

    def render_with_info(self, text: str, key: int) -> tuple[np.ndarray, dict[str, Any]]:
        """Render `text` as uint8 [C, H, W] (ink 255 on 0) plus {font, size, lines, overflow}."""
        s = self.settings
        faces = self.fontset.faces_for(text)
        if not faces:
            raise ValueError(f"fonts {list(s.fonts)} cannot draw characters {self.missing_chars(text)!r}")
        rng = random.Random(_stable_seed(s.seed, key))
        face = rng.choice(faces)
        size = rng.randint(s.font_size_min, s.font_size_max)
        inner_w, inner_h = s.width - 2 * s.padding, s.height - 2 * s.padding
        while True:
            font = self._font(face, size)
            ascent, descent = font.getmetrics()
            line_h = ascent + descent
            lines = _wrap(text, font, inner_w)
            if len(lines) * line_h <= inner_h or size <= s.font_size_min:
                break
            size -= 1
        fit = max(1, inner_h // line_h)
        overflow = len(lines) > fit
        lines = lines[:fit]

        img = Image.new("L", (s.width, s.height), 0)
        draw = ImageDraw.Draw(img)
        for i, line in enumerate(lines):
            draw.text((s.padding, s.padding + i * line_h), line, fill=255, font=font)
        arr = np.asarray(img, dtype=np.uint8)[None]
        if s.channels == 3:
            arr = np.repeat(arr, 3, axis=0)
        info = {"font": s.fonts[face], "size": size, "lines": lines, "overflow": overflow}
        return np.ascontiguousarray(arr), info

    def render(self, text: str, key: int) -> np.ndarray:
        return self.render_with_info(text, key)[0]


# --- split rendering ---------------------------------------------------------------

_WORKER_RENDERER: TextRenderer | None = None


def _init_worker(settings: RenderSettings) -> None:
    global _WORKER_RENDERER
    _WORKER_RENDERER = TextRenderer(settings)


def _render_rows(renderer: TextRenderer, texts: list[str], start: int) -> tuple[np.ndarray, int]:
    s = renderer.settings
    out = np.empty((len(texts), s.channels, s.height, s.width), dtype=np.uint8)
    overflow = 0
    for j, text in enumerate(texts):
        try:
            out[j], info = renderer.render_with_info(text, start + j)
        except ValueError as e:
            raise ValueError(f"row {start + j}: {e}") from None
        overflow += info["overflow"]
    return out, overflow


def _render_rows_in_worker(texts: list[str], start: int) -> tuple[np.ndarray, int]:
    assert _WORKER_RENDERER is not None
    return _render_rows(_WORKER_RENDERER, texts, start)


def _ordered_results(pool: ProcessPoolExecutor, tasks: Iterable[tuple], depth: int) -> Iterator[Any]:
    """Like pool.map, but keeps at most `depth` chunks in flight so memory stays bounded."""
    pending: collections.deque = collections.deque()
    it = iter(tasks)
    for task in it:
        pending.append(pool.submit(_render_rows_in_worker, *task))
        if len(pending) >= depth:
            break
    while pending:
        done = pending.popleft().result()
        nxt = next(it, None)
        if nxt is not None:
            pending.append(pool.submit(_render_rows_in_worker, *nxt))
        yield done


def render_split(
    texts: Sequence[str],
    labels: Sequence[int],
    ids: Sequence[str | int],
    settings: RenderSettings,
    shard_paths: Sequence[Path],
    manifest_path: Path,
    shard_size: int,
    workers: int,
    progress: bool = True,
    desc: str = "render",
) -> dict[str, Any]:
    """Render one split into fixed shard files plus a manifest; return the manifest.

    Row i gets key i and goes to shard i // shard_size. The shard paths are
    fixed up front by the DAG, so trailing shards may be short or empty (rows
    dropped upstream); empty shards are still written as [0, C, H, W].
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
    workers = max(1, int(workers))
    chunk = max(1, min(256, shard_size, math.ceil(n / (4 * workers))))
    bounds = [(min(s * shard_size, n), min((s + 1) * shard_size, n)) for s in range(len(shard_paths))]
    tasks = [(texts[a : min(a + chunk, hi)], a) for lo, hi in bounds for a in range(lo, hi, chunk)]
    C, H, W = settings.channels, settings.height, settings.width

    t0 = time.perf_counter()
    overflow = 0
    shards = []
    pool = None
    if workers > 1 and len(tasks) > 1:
        # fork, not spawn: spawn re-imports __main__, which re-runs a Snakemake script body.
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(settings,))
        results = _ordered_results(pool, tasks, depth=2 * workers)
    else:
        renderer = TextRenderer(settings)
        results = (_render_rows(renderer, *task) for task in tasks)
    try:
        with tqdm(total=n, unit="img", desc=desc, disable=not progress) as bar:
            for path, (lo, hi) in zip(shard_paths, bounds):
                images = np.empty((hi - lo, C, H, W), dtype=np.uint8)
                for a in range(lo, hi, chunk):
                    block, n_over = next(results)
                    images[a - lo : a - lo + len(block)] = block
                    overflow += n_over
                    bar.update(len(block))
                io.save_npy(path, images)
                shards.append(
                    {
                        "file": os.path.relpath(path, manifest_path.parent),
                        "count": hi - lo,
                        "sha256": io.sha256_file(path),
                        "labels": labels[lo:hi],
                        "ids": ids[lo:hi],
                    }
                )
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    elapsed = time.perf_counter() - t0

    manifest = {
        "format": CACHE_FORMAT,
        "render": settings.to_dict(),
        "layout_engine": layout_engine(),
        "shard_size": shard_size,
        "count": n,
        "overflow": overflow,
        "shards": shards,
        "images_per_s": round(n / elapsed, 1) if elapsed > 0 else None,
    }
    io.write_json(manifest_path, manifest)
    return manifest
