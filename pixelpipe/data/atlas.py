"""The glyph atlas: each character drawn once into a fixed cell, texts assembled by copying cells.

A pixel model learns text quickly when its tokens line up with characters
(Lotz et al. 2023, "Text rendering strategies for pixel language models").
So every grapheme cluster (a base character plus its combining marks) gets
one `cell_height x cell_width` bitmap, drawn once with the first configured
font that has its glyphs, and an image is that text's cells side by side in
reading order, wrapped onto `lines` lines of `line_chars` cells.

What the text goes through first (the same at training and at prediction):
NFC normalization (Vietnamese "e" + U+0302 + U+0323 becomes one precomposed
letter), every run of whitespace becomes one space, leading and trailing
whitespace is dropped. Combining marks (Unicode categories Mn, Me) and
invisible format characters (Cf, e.g. the Persian zero-width non-joiner)
join the cluster before them. Right-to-left scripts keep their logical
order (the first character is the leftmost cell) and their isolated letter
forms: no shaping, no bidi reordering, so a text is always the same cells.

Invisible format characters that only steer layout (direction marks, zero-width
space, soft hyphen, word joiner, variation selectors: `IGNORABLE`) are removed
by `normalize`, so they never make a cluster that draws like another; the two
joiners that change spelling, ZWNJ (frequent in Persian) and ZWJ, stay and are
drawn as visible marks (`JOINER_MARKS`).

Drawing is deterministic: a bitmap font's glyph is copied (Unifont, see
fonts.py; combining marks placed where the font says), an outline font's
glyph is drawn with Pillow's basic layout engine (no raqm). The glyph is then
fitted into its cell: ink taller than the cell is scaled down to its height
(never clipped), ink wider than the cell is squeezed to its width (Arabic and
Armenian letters, "W", "m", and every 16-pixel-wide glyph of CJK and Indic
scripts in an 8-pixel cell), narrower ink is centered. Two clusters of one
script that still draw the same cell (a font drawing Persian and Arabic
digits alike, loose marks squeezed together) get distinct drawings when the
atlas is built from a charset: every one but the first carries a small tag
in its top row (`TAG_VALUE` pixels), so each keeps its own glyph; clusters of
different scripts that look alike (Latin "a", Cyrillic "а") keep identical
cells, as a reader sees them. The atlas of the training split travels inside
the model's config and its ONNX metadata, so prediction copies the exact cells
training saw; only clusters training never saw are drawn anew.
"""

from __future__ import annotations

import base64
import functools
import re
import unicodedata
import zlib
from typing import Any, Iterable, Sequence

import numpy as np

from ..core import io
from .fonts import CodepointSet, load_face

ATLAS_FORMAT = "pixelpipe.atlas/1"
SPACE = " "
_JOINING_CATEGORIES = ("Mn", "Me", "Cf")
# Code points scanned for joining characters: planes 0-2 and the tags / variation selectors of plane 14 hold
# every Mn/Me/Cf character (planes 3-13 have none).
_SCAN = (range(0x30000), range(0xE0000, 0xE1000))


def as_ranges(codepoints: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Sorted code points as inclusive (first, last) ranges of consecutive ones."""
    ranges: list[tuple[int, int]] = []
    for cp in codepoints:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return tuple(ranges)


def scan_categories(categories: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """Inclusive ranges of the code points whose unicodedata category is one of `categories` (~50 ms a scan)."""
    wanted = frozenset(categories)
    return as_ranges(cp for block in _SCAN for cp in block if unicodedata.category(chr(cp)) in wanted)


@functools.cache
def _category_ranges(categories: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """`scan_categories` as shipped for this Python's Unicode version (data/unicode_tables.py, written by
    tools/make_unicode_tables.py; a command's start-up skipped two ~50 ms scans), scanned otherwise."""
    from . import unicode_tables

    shipped = unicode_tables.RANGES.get(categories)
    if shipped is not None and unicodedata.unidata_version == unicode_tables.UNIDATA_VERSION:
        return shipped
    return scan_categories(categories)


def _joining_ranges() -> tuple[tuple[int, int], ...]:
    """Inclusive code point ranges of the joining characters (Mn, Me, Cf), from this Python's unicodedata, so
    every fast path agrees with `clusters` on every code point."""
    return _category_ranges(_JOINING_CATEGORIES)


@functools.cache
def _plain_pattern() -> re.Pattern[str]:
    """Fast path for one text: without any joining character a text is its own cluster list."""
    cls = "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in _joining_ranges())
    return re.compile(f"^[^{cls}]*$")


@functools.cache
def joining_table() -> np.ndarray:
    """bool per code point (0..0x10FFFF): a joining character. Many texts are checked in one numpy lookup."""
    table = np.zeros(0x110000, bool)
    for a, b in _joining_ranges():
        table[a : b + 1] = True
    return table


# Format characters that change how a text is spelled, not only how it is laid out: they stay (drawn as marks).
ZWNJ, ZWJ = "\u200c", "\u200d"
# Prepended concatenation marks (Arabic number sign, end of ayah, Syriac abbreviation mark, ...): visible, kept.
_VISIBLE_FORMAT = frozenset({0x600, 0x601, 0x602, 0x603, 0x604, 0x605, 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x110BD,
                             0x110CD})
# Variation selectors and the combining grapheme joiner: invisible marks that only pick a glyph variant.
_INVISIBLE_MARKS = ((0x34F, 0x34F), (0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF))


@functools.cache
def _ignorable_pattern() -> re.Pattern[str]:
    """Every invisible format character but the joiners and the prepended marks (IGNORABLE), and the variation
    selectors: what `normalize` removes."""
    keep = {ord(ZWNJ), ord(ZWJ)} | _VISIBLE_FORMAT
    cps = [cp for a, b in _category_ranges(("Cf",)) for cp in range(a, b + 1) if cp not in keep]
    # as ranges: a class of single code points costs ~40 us a text, ranges ~1 us
    ranges = as_ranges(sorted(cps + [cp for a, b in _INVISIBLE_MARKS for cp in range(a, b + 1)]))
    return re.compile("[" + "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "")
                                    for a, b in ranges) + "]")


def normalize(text: str) -> str:
    """NFC, invisible layout controls removed, whitespace runs to one space, ends stripped: what is laid out."""
    text = unicodedata.normalize("NFC", text)
    if not text.isascii():  # ASCII has none (0.1 us against 2.5 us for the scan)
        text = _ignorable_pattern().sub("", text)
    return SPACE.join(text.split())


def is_plain(text: str) -> bool:
    """True when every character of `text` is a cluster of its own (no marks, no format characters)."""
    return _plain_pattern().match(text) is not None


def clusters(text: str) -> list[str]:
    """Grapheme clusters of a normalized text: a base character and the marks that follow it."""
    if is_plain(text):
        return list(text)
    out: list[str] = []
    for ch in text:
        if out and unicodedata.category(ch) in _JOINING_CATEGORIES:
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _visible(cluster: str) -> str:
    return "".join(c for c in cluster if unicodedata.category(c) != "Cf" or ord(c) in _VISIBLE_FORMAT)


def _drawing_font(visible: str, fonts: Sequence[str]) -> str | None:
    """The first font that has every glyph of a cluster (None: no font can draw it)."""
    return next((f for f in fonts if all(ord(c) in load_face(f).codepoints for c in visible)), None)


@functools.lru_cache(maxsize=8)
def _any_font_codepoints(fonts: tuple[str, ...]) -> np.ndarray:
    """bool per code point (0..0x10FFFF): some font of the chain has it. A mask of 1.1 MB, where a frozenset of
    the ~60,000 code points took 6.8 MB of predict's memory the first time a text held a symbol no font draws."""
    known = np.zeros(0x110000, bool)
    for f in fonts:
        cps = load_face(f).codepoints
        known[cps.array() if isinstance(cps, CodepointSet) else np.fromiter(cps, np.int64, len(cps))] = True
    return known


def undrawable(text: str, fonts: Sequence[str]) -> str:
    """Sorted characters of `text` whose cluster no font of the chain can draw ("" if all can)."""
    text = normalize(text)
    if is_plain(text):  # one character per cluster: drawable iff some font has it
        known = _any_font_codepoints(tuple(fonts))
        return "".join(sorted(c for c in set(text) if not c.isspace() and not known[ord(c)]))
    bad: set[str] = set()
    for cluster in set(clusters(text)):
        visible = _visible(cluster)
        if visible.strip() and _drawing_font(visible, fonts) is None:
            bad |= {c for c in visible if not any(ord(c) in load_face(f).codepoints for f in fonts)} or set(visible)
    return "".join(sorted(bad))


def _cluster_undrawable(cluster: str, fonts: Sequence[str]) -> bool:
    visible = _visible(cluster)
    return bool(visible.strip()) and _drawing_font(visible, fonts) is None


def drop_undrawable(text: str, fonts: Sequence[str]) -> tuple[str, list[str]]:
    """(the normalized text without the clusters no font of the chain draws, those clusters in text order).

    Why: a symbol the fonts lack (an emoji past Unifont's plane) says nothing about the language of the letters
    beside it, so prediction reads the rest rather than refusing the text; training keeps such rows out instead
    (bad rows), so the model never learned a cell for them either way."""
    kept: list[str] = []
    dropped: list[str] = []
    for cluster in clusters(normalize(text)):
        (dropped if _cluster_undrawable(cluster, fonts) else kept).append(cluster)
    return normalize("".join(kept)), dropped


# Control characters (Unicode Cc) but the three that are whitespace in every text file: tab, line feed, carriage
# return. Cc is exactly U+0000-U+001F and U+007F-U+009F.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def control_characters(text: str) -> list[tuple[int, str]]:
    """(index, character) of each control character in `text` (Cc but tab, LF, CR), as the text was given.

    Why: no reader sees them, so a text holding one is binary data or a broken pipe, not writing; and a font that
    draws them anyway (Unifont draws U+0000 as a box) would let such input pass as text."""
    if _CONTROL.search(text) is None:  # nearly every text: one scan, no list
        return []
    return [(m.start(), m.group()) for m in _CONTROL.finditer(text)]


@functools.lru_cache(maxsize=None)
def _font(name: str, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(str(load_face(name).path), size, layout_engine=ImageFont.Layout.BASIC)


def _outline_ink(visible: str, face: str, size: int, cell_height: int) -> np.ndarray:
    """A cluster drawn with an outline font on a canvas three cells tall, the cell's own rows in the middle third
    (baseline where the cell puts it), each mark centered over the base's ink; columns trimmed to the ink."""
    from PIL import Image, ImageDraw

    font = _font(face, size)
    _, descent = font.getmetrics()
    baseline = 2 * cell_height - descent
    canvas_w = 4 * size + 16
    img = Image.new("L", (canvas_w, 3 * cell_height), 0)
    draw = ImageDraw.Draw(img)
    x0 = canvas_w // 2
    draw.text((x0, baseline), visible[0], fill=255, font=font, anchor="ls")
    left, _, right, _ = font.getbbox(visible[0], anchor="ls")
    center = x0 + (left + right) / 2
    for mark in visible[1:]:
        m_left, _, m_right, _ = font.getbbox(mark, anchor="ls")
        draw.text((round(center - (m_left + m_right) / 2), baseline), mark, fill=255, font=font, anchor="ls")
    return np.asarray(img, dtype=np.uint8)


def _bitmap_ink(visible: str, face: str, cell_height: int) -> np.ndarray:
    """A cluster copied from a bitmap font: the base glyph, each mark OR-ed in where the font's combining table
    puts it (its left edge `offset` pixels from the end of the glyph before it); on a canvas three cells tall
    whose middle third is the glyph's 16 rows (scaled to the cell height)."""
    bitmap = load_face(face)
    ink = bitmap.glyph(ord(visible[0]))
    width = ink.shape[1]
    for mark in visible[1:]:
        glyph = bitmap.glyph(ord(mark))
        x = width + bitmap.offsets.get(ord(mark), -glyph.shape[1])
        left, right = min(0, x), max(ink.shape[1], x + glyph.shape[1])
        canvas = np.zeros((bitmap.height, right - left), np.uint8)
        canvas[:, -left : -left + ink.shape[1]] = ink
        canvas[:, x - left : x - left + glyph.shape[1]] |= glyph
        ink, width = canvas, width - left
    if cell_height != bitmap.height:
        ink = _resize(ink, cell_height, max(1, round(ink.shape[1] * cell_height / bitmap.height)))
    pad = np.zeros((cell_height, ink.shape[1]), np.uint8)
    return np.concatenate([pad, ink, pad])


def _resize(ink: np.ndarray, height: int, width: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(ink).resize((width, height), Image.Resampling.BOX), dtype=np.uint8)


def _fit(canvas: np.ndarray, cell_height: int, cell_width: int) -> np.ndarray:
    """The ink of a canvas three cells tall (the cell's rows in the middle) in one cell: kept where it is when it
    fits, moved into the cell when it sticks out, scaled down when taller than the cell (never clipped); then
    squeezed to the cell width when wider, else centered."""
    rows, cols = np.flatnonzero(canvas.max(axis=1)), np.flatnonzero(canvas.max(axis=0))
    if rows.size == 0:
        return np.zeros((cell_height, cell_width), np.uint8)
    ink = canvas[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    top = rows[0] - cell_height
    if ink.shape[0] > cell_height:
        ink = _resize(ink, cell_height, max(1, round(ink.shape[1] * cell_height / ink.shape[0])))
        top = 0
    top = min(max(top, 0), cell_height - ink.shape[0])
    if ink.shape[1] > cell_width:
        ink = _resize(ink, ink.shape[0], cell_width)
    cell = np.zeros((cell_height, cell_width), np.uint8)
    start = (cell_width - ink.shape[1]) // 2
    cell[top : top + ink.shape[0], start : start + ink.shape[1]] = ink
    return cell


JOINER_VALUE = 160  # gray of the joiner marks: no font draws it at the spots they take (bitmaps are 0 or 255)
TAG_VALUE = 96  # gray of the tag pixels that set apart clusters of one script that draw alike


def _mark_joiners(cell: np.ndarray, cluster: str) -> np.ndarray:
    """ZWNJ and ZWJ drawn as visible marks: two pixels at the bottom right (ZWNJ) or bottom left (ZWJ)."""
    for joiner, columns in ((ZWNJ, slice(-2, None)), (ZWJ, slice(0, 2))):
        if joiner in cluster:
            cell[-1, columns] = JOINER_VALUE
    return cell


def draw_cluster(cluster: str, fonts: Sequence[str], size: int, cell_height: int, cell_width: int) -> np.ndarray:
    """One cluster as a uint8 [cell_height, cell_width] bitmap (ink 255 on 0), fitted into its cell (see the
    module docstring); joiners drawn as marks. Raises ValueError when no font has every glyph of the cluster."""
    visible = _visible(cluster)
    if not visible or visible.isspace():
        cell = np.zeros((cell_height, cell_width), np.uint8)
    else:
        face = _drawing_font(visible, fonts)
        if face is None:
            raise ValueError(f"no font of {list(fonts)} draws {cluster!r}")
        if load_face(face).bitmap:
            canvas = _bitmap_ink(visible, face, cell_height)
        else:
            canvas = _outline_ink(visible, face, size, cell_height)
        cell = _fit(canvas, cell_height, cell_width)
    return _mark_joiners(cell, cluster)


def cluster_script(cluster: str) -> str:
    """ISO 15924 script of a cluster's first character (Zyyy: punctuation, digits and symbols all scripts share)."""
    from fontTools import unicodedata as fu

    return fu.script(cluster[0])


def set_apart(clusters_: Sequence[str], cells: np.ndarray) -> list[tuple[str, str]]:
    """Give every cluster that draws the same cell as an earlier cluster of its script a distinct drawing: the
    k-th such cluster of a cell carries k in binary in its top row (TAG_VALUE pixels). Edits cells; returns the
    (kept, tagged) pairs. ValueError when a cell is still shared (more look-alikes than the top row can count)."""
    first: dict[tuple[str, bytes], str] = {}
    count: dict[tuple[str, bytes], int] = {}
    tagged = []
    for i, cluster in enumerate(clusters_):
        key = (cluster_script(cluster), cells[i].tobytes())
        if key not in first:
            first[key] = cluster
            continue
        count[key] = count.get(key, 0) + 1
        bits = [(count[key] >> b) & 1 for b in range(cells.shape[2])]
        if count[key] >= 1 << cells.shape[2]:
            raise ValueError(f"glyph atlas: {count[key] + 1} clusters draw like {first[key]!r}")
        cells[i, 0, [b for b, on in enumerate(bits) if on]] = TAG_VALUE
        tagged.append((first[key], cluster))
    check_distinct(clusters_, cells)
    return tagged


def check_distinct(clusters_: Sequence[str], cells: np.ndarray) -> None:
    """ValueError naming two clusters of one script that share a cell."""
    seen: dict[tuple[str, bytes], str] = {}
    for cluster, cell in zip(clusters_, cells):
        key = (cluster_script(cluster), cell.tobytes())
        if key in seen:
            raise ValueError(f"glyph atlas: {seen[key]!r} and {cluster!r} ({key[0]}) draw the same cell")
        seen[key] = cluster


class GlyphAtlas:
    """Cluster -> cell bitmap, drawn on first use; index 0 is the blank (space) cell.

    `fonts` is a fallback chain: a cluster is drawn with the first font that has
    every glyph it needs. Cells given at construction (an atlas read back from a
    model) are used as they are; only clusters they lack are drawn.
    """

    def __init__(self, fonts: Sequence[str], font_size: int, cell_height: int, cell_width: int,
                 cells: dict[str, np.ndarray] | None = None) -> None:
        self.fonts, self.font_size = tuple(fonts), int(font_size)
        self.cell_height, self.cell_width = int(cell_height), int(cell_width)
        self.index: dict[str, int] = {SPACE: 0}
        self._clusters: list[str] = []  # `clusters`, kept while no cluster is added (the index only grows)
        # every cell in one array, rows past len(self) spare: no array object a glyph (12,000 of them with every
        # language were 1.4 MB of predict's memory) and no restacking when the atlas grows
        self._store = np.zeros((1 + len(cells or {}), cell_height, cell_width), np.uint8)
        self._count = 1
        self.drawn: set[str] = set()  # clusters this process drew (not given at construction)
        self.tagged: list[tuple[str, str]] = []  # (look-alike kept plain, cluster set apart by a tag): from_clusters
        for cluster, cell in (cells or {}).items():
            if cell.shape != (cell_height, cell_width):
                raise ValueError(f"atlas cell for {cluster!r} has shape {cell.shape}, expected "
                                 f"{(cell_height, cell_width)}")
            self._add(cluster, np.asarray(cell, np.uint8))

    def _add(self, cluster: str, cell: np.ndarray) -> int:
        i = self.index.get(cluster)
        if i is None:
            i = self.index[cluster] = self._count
            if self._count == len(self._store):  # a quarter more rows (zero pages stay unmapped until written)
                grown = np.zeros((self._count + self._count // 4 + 64, *self._store.shape[1:]), np.uint8)
                grown[: self._count] = self._store
                self._store = grown
            self._count += 1
        self._store[i] = cell
        return i

    def lookup(self, cluster: str) -> int:
        """The cell index of `cluster`, drawing it if this atlas has not seen it yet."""
        i = self.index.get(cluster)
        if i is None:
            cell = draw_cluster(cluster, self.fonts, self.font_size, self.cell_height, self.cell_width)
            self.drawn.add(cluster)
            i = self._add(cluster, cell)
        return i

    def add_cell(self, cluster: str, cell: np.ndarray) -> int:
        """A glyph given by its pixels (a cell of a pre-rendered image that matches no glyph): its new id."""
        if cell.shape != (self.cell_height, self.cell_width):
            raise ValueError(f"cell has shape {cell.shape}, expected {(self.cell_height, self.cell_width)}")
        return self._add(cluster, np.asarray(cell, np.uint8))

    @property
    def cells(self) -> np.ndarray:
        """All cells as one uint8 [G, cell_height, cell_width] array, in index order: a view of the atlas's own
        (copy it to keep it past the next glyph the atlas draws)."""
        return self._store[: self._count]

    def cells_from(self, start: int, stop: int | None = None) -> np.ndarray:
        """The cells of glyphs `start`..`stop` - 1 (to the end) as one uint8 array: a grown atlas's new glyphs,
        or a chunk of all of them, without restacking all."""
        return self._store[start : self._count if stop is None else min(stop, self._count)]

    def __len__(self) -> int:
        return self._count

    # ---- serialization (model config, ONNX metadata, cache manifest) ----------------------------
    @classmethod
    def from_clusters(cls, clusters: Sequence[str], fonts: Sequence[str], font_size: int, cell_height: int,
                      cell_width: int) -> "GlyphAtlas":
        """An atlas whose glyph ids are the positions in `clusters` (which must start with the space)."""
        if not clusters or clusters[0] != SPACE:
            raise ValueError("a charset starts with the space (glyph id 0, the blank cell)")
        atlas = cls(fonts, font_size, cell_height, cell_width)
        for cluster in clusters[1:]:
            if atlas.lookup(cluster) != len(atlas) - 1:
                raise ValueError(f"charset lists {cluster!r} twice")
        atlas.drawn.clear()  # drawn from the charset: none of them is unseen
        atlas.tagged = set_apart(clusters, atlas.cells)  # edits the atlas's own cells
        return atlas

    @property
    def clusters(self) -> list[str]:
        """Clusters in glyph-id order: the index's own order, since a cluster gets the next id when it is first added
        and keeps it (predict asks twice a chunk of texts: no sort of every cluster, and no new list of 12,000 while
        none was added). Read it, do not change it."""
        if len(self._clusters) != len(self.index):
            self._clusters = list(self.index)
        return self._clusters

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe atlas: cluster list in glyph-id order (space first) plus the zlib-compressed, base64 cells.
        Glyph ids survive a round trip: the cache stores them."""
        names = list(self.clusters)  # its own list: the caller may change it
        cells = self.cells
        # zlib level 6: the every-language atlas (1.6 MB of cells) in 0.06 s to 218 KB; level 9 took 1.0 s for
        # 195 KB, at the start of every run (the disk preflight) and in every job that writes the atlas
        return {"format": ATLAS_FORMAT, "cell": [self.cell_height, self.cell_width], "clusters": names,
                "cells": base64.b64encode(zlib.compress(cells.tobytes(), 6)).decode("ascii"),
                "sha256": atlas_digest(names, cells)}

    @classmethod
    def from_dict(cls, d: dict[str, Any], fonts: Sequence[str], font_size: int) -> "GlyphAtlas":
        """Rebuild a serialized atlas; ValueError when it is malformed or its checksum differs."""
        if d.get("format") != ATLAS_FORMAT:
            raise ValueError(f"not a pixelpipe glyph atlas (format {d.get('format')!r}, expected {ATLAS_FORMAT})")
        h, w = d["cell"]
        names = list(d["clusters"])
        try:
            raw = zlib.decompress(base64.b64decode(d["cells"]))
        except (ValueError, zlib.error) as e:
            raise ValueError(f"glyph atlas cells cannot be decoded: {e}") from None
        if len(raw) != len(names) * h * w:
            raise ValueError(f"glyph atlas has {len(raw)} bytes of cells for {len(names)} clusters of {h}x{w}")
        cells = np.frombuffer(raw, np.uint8).reshape(len(names), h, w)
        if d.get("sha256") != atlas_digest(names, cells):
            raise ValueError("glyph atlas checksum differs: the atlas was altered after it was written")
        index = dict(zip(names, range(len(names))))
        if not names or names[0] != SPACE or len(index) != len(names):  # not as to_dict writes it: one by one
            return cls(fonts, font_size, h, w, cells=dict(zip(names, cells)))
        atlas = cls(fonts, font_size, h, w)  # ids are the positions: the cells in one copy, not 12,000 `_add`s
        atlas._store = np.zeros((len(names) + 1, h, w), np.uint8)  # (10 ms of every predict command's start)
        atlas._store[: len(names)] = cells
        atlas.index, atlas._count, atlas._clusters = index, len(names), names
        return atlas


def atlas_digest(names: Sequence[str], cells: np.ndarray) -> str:
    h = io.sha256("\x00".join(names).encode("utf-8"))
    h.update(np.ascontiguousarray(cells, np.uint8).tobytes())
    return h.hexdigest()
