"""Which writing system a letter belongs to, so a model can say "no language" instead of guessing.

A classifier trained on some languages answers for any input: three emoji or
a sentence in a script none of its languages uses still get the most
probable of its labels, often with a probability near one. The models record
the scripts of the letters their training texts contain (`known_scripts`);
a text with no letter at all, or whose letters all belong to scripts outside
that set, gets no label and a reason (`unknown_reason`). The script of a
letter is read from its Unicode name (what the corpus's own script filter
uses): "LATIN SMALL LETTER A" is Latin, "CJK UNIFIED IDEOGRAPH-4E2D" is CJK,
width and compatibility variants count as their base script.
"""

from __future__ import annotations

import base64
import functools
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..core.arrays import distinct

# Name prefixes that are not a script: the script is the next word(s).
_WIDTH = ("FULLWIDTH ", "HALFWIDTH ", "SMALL ", "MATHEMATICAL ", "PARENTHESIZED ", "CIRCLED ", "SQUARED ")
# Scripts whose names are two words (the first word alone would be ambiguous or wrong).
_TWO_WORDS = ("OL CHIKI", "NEW TAI", "TAI LE", "TAI THAM", "TAI VIET", "SYLOTI NAGRI", "MEETEI MAYEK", "OLD ITALIC",
              "CANADIAN SYLLABICS", "NKO", "HANIFI ROHINGYA", "MASARAM GONDI", "GUNJALA GONDI", "PAU CIN")
# One script under several name prefixes.
_SAME = {"HIRAGANA": "KANA", "KATAKANA": "KANA", "KATAKANA-HIRAGANA": "KANA", "IDEOGRAPHIC": "CJK",
         "KANGXI": "CJK", "BOPOMOFO": "CJK"}
# The registry's scripts (ISO 15924 codes, pixelpipe/data/text/languages.json) under the names `letter_script`
# reads from Unicode names, so "the scripts these languages write" can narrow a gate built from a model's letters.
ISO_15924 = {"Arab": "ARABIC", "Armn": "ARMENIAN", "Beng": "BENGALI", "Cyrl": "CYRILLIC", "Deva": "DEVANAGARI",
             "Ethi": "ETHIOPIC", "Geor": "GEORGIAN", "Grek": "GREEK", "Gujr": "GUJARATI", "Guru": "GURMUKHI",
             "Hang": "HANGUL", "Hani": "CJK", "Hebr": "HEBREW", "Hira": "KANA", "Kana": "KANA", "Khmr": "KHMER",
             "Knda": "KANNADA", "Latn": "LATIN", "Mlym": "MALAYALAM", "Mymr": "MYANMAR", "Olck": "OL CHIKI",
             "Orya": "ORIYA", "Sinh": "SINHALA", "Taml": "TAMIL", "Telu": "TELUGU", "Thai": "THAI"}  # fmt: skip
TRAINING = "training language"  # whose scripts a model's own gate holds (the reason names them)


@functools.lru_cache(maxsize=65536)
def letter_script(ch: str) -> str | None:
    """The script of one letter (Unicode category L*), None for anything else (digits, punctuation, emoji,
    marks, modifier letters)."""
    if not unicodedata.category(ch).startswith("L") or unicodedata.category(ch) == "Lm":
        return None
    name = unicodedata.name(ch, "")
    for prefix in _WIDTH:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    for two in _TWO_WORDS:
        if name.startswith(two):
            return two
    first = name.split(" ", 1)[0] if name else ""
    return _SAME.get(first, first) or None


def text_scripts(text: str) -> set[str]:
    """The scripts of the letters of `text` (empty when it has none)."""
    return {s for s in map(letter_script, text) if s is not None}


def known_scripts(characters: Iterable[str]) -> list[str]:
    """Sorted scripts of the letters among `characters` (the clusters training texts contain)."""
    found: set[str] = set()
    for cluster in characters:
        found |= text_scripts(cluster)
    return sorted(found)


def unknown_reason(text: str, known: Iterable[str], users: str = TRAINING) -> str | None:
    """Why `text` gets no language, or None when a model trained on letters of `known` scripts may answer:
    it has no letter, or every letter is of a script no training text used (`users`: who writes `known`, the
    training languages or the languages a user allowed)."""
    scripts = text_scripts(text)
    if not scripts:
        return "no letters"
    if scripts.isdisjoint(known):
        return f"letters of a script no {users} uses (" + ", ".join(sorted(scripts)).lower() + ")"
    return None


def written_scripts(iso_codes: Iterable[str]) -> set[str] | None:
    """The `letter_script` names of registry scripts (ISO 15924), None if one has no name here (then nothing
    can be narrowed by it)."""
    codes = list(iso_codes)
    if any(code not in ISO_15924 for code in codes):
        return None
    return {ISO_15924[code] for code in codes}


SEVERAL = 255  # a glyph script code: letters of more than one script (classified when a text holds it)


def glyph_script_codes(clusters: Sequence[str]) -> dict[str, Any]:
    """The scripts of an atlas's glyphs for a model file: {"names": scripts, "codes": base64 of one byte a glyph,
    1 + its script's index in names, 0 for no letter, SEVERAL for more than one}. Why: classifying the glyphs a
    predict command's texts hold took 8.5 ms of the held-out prose's 0.9 s, 14 of the UI strings' 2.2 s."""
    names: dict[str, int] = {}
    codes = np.zeros(len(clusters), np.uint8)
    for g, cluster in enumerate(clusters):
        scripts = text_scripts(cluster)
        script = next(iter(scripts)) if len(scripts) == 1 else None
        if script is not None and (script in names or len(names) < SEVERAL - 1):
            codes[g] = names.setdefault(script, len(names) + 1)
        elif scripts:  # several scripts, or one past the codes a byte holds: classified when a text holds it
            codes[g] = SEVERAL
    return {"names": list(names), "codes": base64.b64encode(codes.tobytes()).decode("ascii")}


def read_glyph_scripts(entry: dict[str, Any], glyphs: int) -> tuple[list[str], np.ndarray]:
    """(script names, a code per glyph) of a `glyph_script_codes` entry for an atlas of `glyphs` glyphs; ValueError
    when it is malformed or covers another number of glyphs (a glyph drawn later would get another's script)."""
    names = [str(name) for name in entry["names"]]
    codes = np.frombuffer(base64.b64decode(entry["codes"], validate=True), np.uint8)
    if len(names) >= SEVERAL or (codes[codes != SEVERAL] > len(names)).any():
        raise ValueError(f"glyph scripts: codes beyond the {len(names)} script names")
    if len(codes) != glyphs:
        raise ValueError(f"glyph scripts: {len(codes)} codes for an atlas of {glyphs} glyphs")
    return names, codes


class ScriptGate:
    """`unknown_reason` for laid-out texts, vectorized over glyph ids: per glyph, whether it holds a letter and
    whether one of a known script. A glyph is classified the first time a text holds it, not when the atlas is
    loaded: the every-language atlas has 12,000 glyphs, 60 ms of a predict command's start-up to classify, and a
    command with one text meets a few dozen of them. A model file carries its own glyphs' scripts (`preset`)."""

    def __init__(self, known: Iterable[str], users: str = TRAINING) -> None:
        self.known = frozenset(known)
        self.users = users
        self.clusters: list[str] = []
        self.done = np.zeros(0, bool)
        self.letter = np.zeros(0, bool)
        self.known_letter = np.zeros(0, bool)

    def update(self, clusters: list[str]) -> None:
        """Take the atlas's clusters (glyph-id order; glyphs added since the last call are classified when a text
        holds them)."""
        self._grow(len(clusters))
        self.clusters = clusters

    def _grow(self, glyphs: int) -> None:
        grow = glyphs - len(self.done)
        if grow > 0:
            self.done, self.letter, self.known_letter = (np.concatenate([a, np.zeros(grow, bool)])
                                                         for a in (self.done, self.letter, self.known_letter))

    def preset(self, names: Sequence[str], codes: np.ndarray) -> None:
        """Take the first glyphs' scripts from a model file (`read_glyph_scripts`) instead of classifying them as
        texts bring them."""
        self._grow(len(codes))
        sure = codes != SEVERAL
        known = np.array([False, *(name in self.known for name in names)])
        self.letter[: len(codes)][sure] = codes[sure] > 0
        self.known_letter[: len(codes)][sure] = known[codes[sure]]
        self.done[: len(codes)] |= sure

    def _classify(self, ids: np.ndarray) -> None:
        """Classify the glyphs among `ids` not classified yet."""
        pending = ids[~self.done[ids]]  # nearly always empty: no sort of every id
        for g in distinct(pending).tolist():
            scripts = text_scripts(self.clusters[g])
            self.letter[g], self.known_letter[g], self.done[g] = bool(scripts), bool(scripts & self.known), True

    def reasons(self, ids: np.ndarray, lengths: np.ndarray) -> list[str | None]:
        """Per text of glyph ids [N, cells] and lengths [N]: None, or why it gets no language."""
        self._classify(ids)
        inside = np.arange(ids.shape[1])[None, :] < np.asarray(lengths)[:, None]
        answerable = (self.known_letter[ids] & inside).any(1)
        out: list[str | None] = [None] * len(ids)
        for i in np.flatnonzero(~answerable):
            text = "".join(self.clusters[g] for g in ids[i, : lengths[i]])
            out[i] = unknown_reason(text, self.known, self.users) or "no letters"
        return out
