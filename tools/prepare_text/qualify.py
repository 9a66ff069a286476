"""The steps that span sources: de-duplication across them, which languages ship (the threshold), the caps, the
held-out leak key. They run over every staged source on each build, never one source alone."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

from .cleaning import Row, clean
from .labels import ENGLISH

# A language ships when its training text, de-duplicated over all training sources, has at least
# THRESHOLD_STRINGS distinct strings and at least THRESHOLD_FAMILIES source families give it THRESHOLD_FAMILY_MIN
# each (SOURCES.md: how these numbers were chosen from the counts).
THRESHOLD_STRINGS = 2000
THRESHOLD_FAMILIES = 2
THRESHOLD_FAMILY_MIN = 500
CAP_TRAIN = 1500  # rows shipped per training source and language (a seeded, origin-spread sample when more)
CAP_HELDOUT = 1000  # rows shipped per held-out source and language


def leak_key(text: str) -> str:
    """The comparison key for held-out vs training texts: case-folded, trailing punctuation and spaces dropped."""
    return clean(text).casefold().rstrip(" .!?:;…")


def drop_shared(rows: dict[str, list[Row]]) -> Counter:
    """Across the given sources: a (label, text) kept once (the first source in SOURCES order), and a text found
    under two labels kept only under English when one of them is English (an untranslated copy), else dropped
    under all (a small translation copying its neighbour: awa from hi). Edits rows; returns drops per label."""
    seen, labels_of = set(), defaultdict(set)
    for sid in rows:
        unique = []
        for row in rows[sid]:
            if (row[0], row[2]) not in seen:
                seen.add((row[0], row[2]))
                unique.append(row)
                labels_of[row[2]].add(row[0])
        rows[sid] = unique
    dropped = Counter()
    for sid in rows:
        kept = []
        for row in rows[sid]:
            owners = labels_of[row[2]]
            if len(owners) == 1 or (row[0] == ENGLISH and ENGLISH in owners):
                kept.append(row)
            else:
                dropped[row[0]] += 1
        rows[sid] = kept
    return dropped


def qualifying(rows: dict[str, list[Row]], families: dict[str, str]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(provisional label -> its strings per family, for the labels that meet the threshold; the same for those that
    do not)."""
    per = defaultdict(Counter)
    for sid, source_rows in rows.items():
        for label, _, _ in source_rows:
            per[label][families[sid]] += 1
    ok, short = {}, {}
    for label, by_family in sorted(per.items()):
        rich = [f for f, n in by_family.items() if n >= THRESHOLD_FAMILY_MIN]
        meets = sum(by_family.values()) >= THRESHOLD_STRINGS and len(rich) >= THRESHOLD_FAMILIES
        (ok if meets else short)[label] = dict(sorted(by_family.items()))
    return ok, short


def cap(rows: list[Row], limit: int) -> list[Row]:
    """At most limit rows per label: those whose sha256(origin, text) is smallest (spread over every file and
    locale of the source, the same on every run), in (label, origin) order."""
    by_label = defaultdict(list)
    for row in rows:
        by_label[row[0]].append(row)
    out = []
    for label, group in by_label.items():
        if len(group) > limit:
            group = sorted(group, key=lambda r: hashlib.sha256(f"{r[1]}\0{r[2]}".encode()).digest())[:limit]
        out += group
    return sorted(out)
