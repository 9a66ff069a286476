"""Which bundled fonts can draw which text.

Corpus checks and the renderer must agree on what is drawable, so both ask a
`FontSet`. Coverage comes from each font's cmap (via fontTools, which
matplotlib already depends on); the fonts themselves are matplotlib's bundled
DejaVu faces, so every machine that installs the environment renders alike.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Sequence

import matplotlib
from fontTools.ttLib import TTFont

FONT_DIR = Path(matplotlib.get_data_path()) / "fonts" / "ttf"

DEFAULT_FONTS = (
    "DejaVuSans",
    "DejaVuSans-Bold",
    "DejaVuSans-Oblique",
    "DejaVuSerif",
    "DejaVuSerif-Bold",
    "DejaVuSansMono",
)


def available_fonts() -> list[str]:
    """File stems of the bundled fonts a config may name."""
    return sorted(p.stem for p in FONT_DIR.glob("*.ttf"))


class FontFace:
    """One font file and the set of code points its cmap maps to glyphs."""

    def __init__(self, name: str) -> None:
        path = FONT_DIR / f"{name}.ttf"
        if not path.is_file():
            raise ValueError(f"unknown font {name!r}; available: {', '.join(available_fonts())}")
        self.name = name
        self.path = path
        font = TTFont(path, lazy=True)
        self.codepoints = frozenset(font["cmap"].getBestCmap())
        font.close()

    def missing(self, text: str) -> set[str]:
        """Characters of `text` this face has no glyph for (whitespace is always drawable)."""
        return {c for c in set(text) if not c.isspace() and ord(c) not in self.codepoints}

    def covers(self, text: str) -> bool:
        return not self.missing(text)


@functools.lru_cache(maxsize=None)
def load_face(name: str) -> FontFace:
    """Parse each font's cmap once per process."""
    return FontFace(name)


class FontSet:
    """The faces a render config may pick from, in config order."""

    def __init__(self, names: Sequence[str] = DEFAULT_FONTS) -> None:
        if not names:
            raise ValueError("at least one font is needed")
        self.names = tuple(names)
        self.faces = [load_face(n) for n in self.names]

    def faces_for(self, text: str) -> list[int]:
        """Indices of faces that can draw every character of `text`."""
        return [i for i, face in enumerate(self.faces) if face.covers(text)]

    def missing_chars(self, text: str) -> str:
        """Sorted characters that stop `text` being drawn in one face ("" if it can be).

        These are the characters no face draws. In the rare case where every
        character is drawn by some face but no single face draws them all, it
        is the characters the best-covering face lacks, so that "" always means
        the renderer will succeed.
        """
        misses = [face.missing(text) for face in self.faces]
        if any(not m for m in misses):
            return ""
        nowhere = set.intersection(*misses)
        return "".join(sorted(nowhere or min(misses, key=len)))
