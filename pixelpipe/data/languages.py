"""The language registry (pixelpipe/data/text/languages.json), read with json alone: names and scripts.

Why a module of its own: predict needs a language's name and the scripts it is
written in, and must start in a fraction of a second without pandas or torch;
`sources.registry` (the corpus's view) is this same dictionary. A model trained
on a user's corpus may have labels that are not registry codes: they get no
name and no scripts, and nothing is assumed about them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path

REGISTRY = Path(__file__).parent / "text" / "languages.json"


@functools.cache
def registry() -> dict[str, dict]:
    """Language code -> its languages.json entry (name, scripts, groups, strings, families, udhr)."""
    entries = json.loads(REGISTRY.read_text(encoding="utf-8"))["languages"] if REGISTRY.exists() else []
    return {e["code"]: e for e in entries}


def names(codes: Iterable[str]) -> dict[str, str | None]:
    """Code -> English name for each of `codes` (None for a code the registry lacks: a user corpus's label)."""
    reg = registry()
    return {code: reg[code]["name"] if code in reg else None for code in codes}


def scripts(codes: Iterable[str]) -> list[str] | None:
    """The ISO 15924 scripts the languages `codes` are written in, sorted; None when one of them is not in the
    registry (its scripts are unknown, so the set cannot be narrowed by them)."""
    reg = registry()
    found: set[str] = set()
    for code in codes:
        if code not in reg:
            return None
        found.update(reg[code]["scripts"])
    return sorted(found)
