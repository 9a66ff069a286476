"""The fonts a config may name, and which code points each one draws.

The atlas and the corpus's bad-row check must agree on what is drawable, so
both ask `load_face`. Coverage comes from each font's cmap (via fontTools,
which matplotlib already depends on); the fonts are matplotlib's bundled
faces, so every machine that installs the environment draws alike. Names are
looked up only among those faces: a config or a model's metadata cannot make
the renderer open any other file on the machine.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path


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
    """File stems of the bundled fonts a config may name."""
    return tuple(sorted(p.stem for p in font_dir().glob("*.ttf")))


class FontFace:
    """One bundled font file and the set of code points its cmap maps to glyphs."""

    def __init__(self, name: str) -> None:
        if name not in available_fonts():
            raise ValueError(f"unknown font {name!r}; available: {', '.join(available_fonts())}")
        self.name = name
        from fontTools.ttLib import TTFont

        self.path = font_dir() / f"{name}.ttf"
        font = TTFont(self.path, lazy=True)
        self.codepoints = frozenset(font["cmap"].getBestCmap())
        font.close()


@functools.lru_cache(maxsize=None)
def load_face(name: str) -> FontFace:
    """Parse each font's cmap once per process."""
    return FontFace(name)
