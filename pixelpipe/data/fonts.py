"""The fonts a config may name, and which code points each one draws.

The atlas and the corpus's bad-row check must agree on what is drawable, so
both ask `load_face`. Two kinds of face, both installed by the README's
install command or shipped in this package, so every machine draws alike:

- matplotlib's bundled TrueType faces (DejaVu, STIX, Computer Modern), drawn
  with Pillow; their coverage comes from each font's cmap (fontTools, which
  matplotlib already depends on), or from a model file that carries it for the
  same font file (`coverage`, `carry_coverage`: predict then needs no fontTools);
- `Unifont`: GNU Unifont 15.0.01's glyph bitmaps for every visible code point
  of the Basic Multilingual Plane (57,086 glyphs, 8x16 or 16x16 pixels: the
  atlas's own cell grid), shipped in pixelpipe/data/fonts/ as the xz-compressed
  `.hex` file of the Debian package `unifont` (licence beside it) and, read at
  run time, the same bitmaps as numpy arrays (`.npz`, tools/make_unifont_arrays.py). Cells are
  copied from the bitmaps: no rasterizer, no hinting, the same pixels on every
  machine and Pillow version.

Names are looked up only among those faces: a config or a model's metadata
cannot make the renderer open any other file on the machine.
"""

from __future__ import annotations

import array
import functools
import importlib.util
import lzma
from pathlib import Path
from typing import Any, Sequence

import numpy as np

FONT_DIR = Path(__file__).parent / "fonts"
BITMAP_FONTS = {"Unifont": "unifont-15.0.01"}  # name -> shipped {stem}.hex.xz and {stem}-combining.txt


@functools.lru_cache(maxsize=1)
def font_dir() -> Path:
    """matplotlib's bundled TrueType faces, located without importing matplotlib (0.4 s that predict's start-up
    does not need to pay)."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:
        raise ValueError("matplotlib is not installed: its bundled fonts draw the glyph atlas")
    return Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf"


@functools.lru_cache(maxsize=1)
def available_fonts() -> tuple[str, ...]:
    """Names a config may give: the bundled TrueType faces' file stems and the shipped bitmap fonts."""
    return tuple(sorted([p.stem for p in font_dir().glob("*.ttf")] + list(BITMAP_FONTS)))


class FontFace:
    """One bundled TrueType font file and the set of code points its cmap maps to glyphs."""

    bitmap = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = font_dir() / f"{name}.ttf"
        size, digest, known = _CARRIED.get(name, (None, None, None))
        if known is not None and size == self.path.stat().st_size and digest == _digest(self.path):
            self.codepoints = known
            return
        from fontTools.ttLib import TTFont

        font = TTFont(self.path, lazy=True)
        self.codepoints = CodepointSet(np.fromiter(font["cmap"].getBestCmap(), np.int64))
        font.close()


# name -> (the font file's size, its SHA-256, its code points) as a model file carries them (`carry_coverage`)
_CARRIED: dict[str, tuple[int, str, "CodepointSet"]] = {}


def _digest(path: Path) -> str:
    """The font file's SHA-256 (CPython's own: 3 ms for DejaVuSans, only when a character is drawn)."""
    from ..core import io

    return io.sha256(path.read_bytes()).hexdigest()


def coverage(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The TrueType faces among `names` as a model file's metadata carries them: {name: {"bytes": the font file's
    size, "sha256": its digest, "ranges": [first, last, first, last, ...] of the code points its cmap maps}}.
    Written at export, so a predict command knows what each face draws without parsing its cmap with fontTools
    (1.4 MiB to import, 4 MiB of its peak memory with the parse, for the three DejaVu faces)."""
    out = {}
    for name in names:
        if name not in BITMAP_FONTS:
            face = load_face(name)
            cps = face.codepoints.array()
            breaks = np.flatnonzero(np.diff(cps) != 1)
            ends = np.stack([cps[np.r_[0, breaks + 1]], cps[np.r_[breaks, len(cps) - 1]]], 1) if len(cps) else cps
            out[name] = {"bytes": face.path.stat().st_size, "sha256": _digest(face.path),
                         "ranges": ends.ravel().tolist()}
    return out


def carry_coverage(entries: dict[str, dict[str, Any]]) -> None:
    """Take a model file's `coverage` for the faces not parsed yet: used for a face only while the installed file
    is the one the model's was (size and SHA-256; another version of a font is parsed, as before). ValueError for
    an entry that is not such coverage."""
    for name, entry in entries.items():
        ranges = np.asarray(entry["ranges"], np.int64)
        if ranges.ndim != 1 or len(ranges) % 2:
            raise ValueError(f"font coverage of {name!r}: ranges must be first, last pairs")
        ranges = ranges.reshape(-1, 2)
        if ((ranges < 0) | (ranges > 0x10FFFF)).any() or (ranges[:, 0] > ranges[:, 1]).any():
            raise ValueError(f"font coverage of {name!r}: ranges outside the code points 0..0x10FFFF or reversed")
        cps = np.concatenate([np.arange(a, b + 1) for a, b in ranges]) if len(ranges) else np.zeros(0, np.int64)
        _CARRIED[name] = (int(entry["bytes"]), str(entry["sha256"]), CodepointSet(cps))


class CodepointSet:
    """A set of code points as a boolean mask (64 KB for the BMP instead of a 3 MB frozenset of ints): `in`,
    `len` and iteration, which is all the font chain asks (frozenset().union takes any iterable)."""

    def __init__(self, codepoints: np.ndarray) -> None:
        self._mask = np.zeros(int(codepoints.max(initial=-1)) + 1, bool)
        self._mask[codepoints] = True

    def __contains__(self, cp: object) -> bool:
        return isinstance(cp, int) and 0 <= cp < len(self._mask) and bool(self._mask[cp])

    def __iter__(self):
        return iter(np.flatnonzero(self._mask).tolist())

    def __len__(self) -> int:
        return int(self._mask.sum())

    def array(self) -> np.ndarray:
        """The code points, sorted, as one int64 array."""
        return np.flatnonzero(self._mask)


def parse_hex(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(code points int64 [G], starts int64 [G + 1], bitmap bytes uint8) of an xz-compressed Unifont .hex file: the
    bitmaps as one byte string with a start per code point (2 MB, where a dict of 57,086 hex strings and a frozenset
    of their code points took 14 MB of the predict command's memory)."""
    cps, starts, blob = array.array("q"), array.array("q", [0]), bytearray()
    with lzma.open(path, "rt", encoding="ascii") as handle:
        for line in handle:
            cp, digits = line.rstrip("\n").split(":", 1)
            cps.append(int(cp, 16))
            blob += bytes.fromhex(digits)
            starts.append(len(blob))
    return np.frombuffer(cps, np.int64), np.frombuffer(starts, np.int64), np.frombuffer(bytes(blob), np.uint8)


def arrays_path(name: str) -> Path:
    """The bitmap font's arrays, written from its .hex file by tools/make_unifont_arrays.py: loaded in 10 ms where
    decompressing and parsing the .hex took 70 ms of every predict command that draws a character anew."""
    return FONT_DIR / f"{BITMAP_FONTS[name]}.npz"


class BitmapFace:
    """A shipped bitmap font in Unifont's .hex format: one line per code point, `XXXX:` then 16 rows of 8 or 16
    bits in hex (32 or 64 digits), and where each combining mark sits: `XXXX:-8` puts its bitmap's left edge 8
    pixels left of the end of the glyph before it. Read from its arrays (`arrays_path`; the .hex when they are
    missing); glyphs are decoded on first use."""

    bitmap = True
    height = 16

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = FONT_DIR / f"{BITMAP_FONTS[name]}.hex.xz"
        source = arrays_path(name)
        if source.is_file():
            with np.load(source) as arrays:
                self._cps, self._starts = arrays["cps"].astype(np.int64), arrays["starts"].astype(np.int64)
                self._bitmaps = arrays["bitmaps"]
        else:
            source = self.path
            self._cps, self._starts, self._bitmaps = parse_hex(source)
        if (np.diff(self._cps) <= 0).any():
            raise ValueError(f"{source}: code points out of order")
        self.codepoints = CodepointSet(self._cps)
        combining = (FONT_DIR / f"{BITMAP_FONTS[name]}-combining.txt").read_text(encoding="ascii").split()
        self.offsets = {int(k, 16): int(v) for k, v in (line.split(":") for line in combining)}

    @functools.lru_cache(maxsize=None)
    def glyph(self, cp: int) -> np.ndarray:
        """uint8 [16, 8 or 16]: the glyph's pixels, ink 255 on 0."""
        i = int(np.searchsorted(self._cps, cp))
        if i == len(self._cps) or self._cps[i] != cp:
            raise KeyError(cp)
        rows = self._bitmaps[self._starts[i] : self._starts[i + 1]].reshape(self.height, -1)
        return np.unpackbits(rows, axis=1) * np.uint8(255)


@functools.lru_cache(maxsize=None)
def load_face(name: str) -> FontFace | BitmapFace:
    """Parse each font's cmap (or bitmap file) once per process."""
    if name not in available_fonts():
        raise ValueError(f"unknown font {name!r}; available: {', '.join(available_fonts())}")
    return BitmapFace(name) if name in BITMAP_FONTS else FontFace(name)
