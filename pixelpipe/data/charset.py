"""The charset: every glyph a run knows, in glyph-id order, shared by all splits.

The corpus stage writes it (results/corpus/charset.json): the space (id 0,
the blank cell), then, sorted, every grapheme cluster any split's texts use
and, with `corpus.inventory`, every character people of the corpus's
languages type (CLDR's exemplar letters, digits and punctuation, shipped in
pixelpipe/data/text/inventory.json) that the fonts can draw. Each render job
draws its atlas from this list, so a glyph id means the same character in
every split, in the models and in the deployed embedding tables; characters
a user types that the corpus lacks are known glyphs rather than drawn anew.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core import io
from .atlas import SPACE, clusters, is_plain, normalize, undrawable

CHARSET_FORMAT = "pixelpipe.charset/1"
INVENTORY_PATH = Path(__file__).parent / "text" / "inventory.json"


def text_clusters(texts: Iterable[str]) -> set[str]:
    """Every grapheme cluster of the normalized texts (the space excluded)."""
    found: set[str] = set()
    for text in texts:
        if not isinstance(text, str):
            continue
        norm = normalize(text)
        found.update(norm if is_plain(norm) else clusters(norm))
    found.discard(SPACE)
    return found


@functools.cache
def _inventory() -> dict:
    if not INVENTORY_PATH.exists():
        return {"common": "", "languages": {}}
    return json.loads(INVENTORY_PATH.read_text(encoding="utf-8"))


@functools.cache
def inventory_characters(languages: tuple[str, ...] | None = None) -> frozenset[str]:
    """Characters of the given languages (None: every registry language) that CLDR lists (letters both cases,
    digits, punctuation), plus common punctuation."""
    data = _inventory()
    chars: set[str] = set(data.get("common", ""))
    for lang, entry in data["languages"].items():
        if languages is None or lang in languages:
            for key in ("letters", "auxiliary", "punctuation", "digits"):
                chars.update(entry.get(key, ""))
    return frozenset(c for c in chars if not c.isspace())


def build_charset(found: Iterable[str], fonts: Sequence[str], inventory: bool | Sequence[str]) -> list[str]:
    """[space] + sorted(found clusters | drawable inventory characters): the glyph-id order of a run.

    inventory: False (none), True (every registry language's), or the languages whose characters to add."""
    if inventory is False:
        extra: set[str] = set()
    else:
        wanted = None if inventory is True else tuple(sorted(inventory))
        extra = {c for c in inventory_characters(wanted) if not undrawable(c, fonts)}
    return [SPACE] + sorted((set(found) | extra) - {SPACE})


def write_charset(path: str | Path, charset: Sequence[str]) -> None:
    io.write_json(path, {"format": CHARSET_FORMAT, "clusters": list(charset)})


def read_charset(path: str | Path) -> list[str]:
    data = io.read_json(path)
    if data.get("format") != CHARSET_FORMAT or not data.get("clusters") or data["clusters"][0] != SPACE:
        raise ValueError(f"{path} is not a pixelpipe charset ({CHARSET_FORMAT}); rerun the corpus rule")
    return list(data["clusters"])
