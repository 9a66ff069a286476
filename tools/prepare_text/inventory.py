"""inventory.json: what people of each shipped language type (CLDR exemplar characters), so the charset covers
more than the characters the shipped text happens to hold."""

from __future__ import annotations

import functools
import json
import shutil
import unicodedata
from collections import defaultdict
from pathlib import Path

from .cleaning import INVISIBLE
from .fetch import npm_fetch
from .labels import char_scripts

CLDR_NPM = "cldr-misc-full@48.2.0"


def unicode_set(pattern: str) -> list[str]:
    """Members of a CLDR exemplar UnicodeSet like '[a-c ä {ch} \\- \\u00A0]' (ranges and {multi} expanded)."""
    body, members, i = pattern.strip()[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if body[i + 1] == "u":
                c, i = chr(int(body[i + 2 : i + 6], 16)), i + 5
            else:
                c, i = body[i + 1], i + 1
        elif c == "{":
            end = body.index("}", i)
            members.append(body[i + 1 : end])
            i = end + 1
            continue
        elif c.isspace():
            i += 1
            continue
        elif c == "-" and members and i + 1 < len(body):
            end = body[i + 1]
            if end == "\\":
                end = body[i + 2] if body[i + 2] != "u" else chr(int(body[i + 3 : i + 7], 16))
            members += [chr(x) for x in range(ord(members[-1]) + 1, ord(end) + 1)]
            i += 2 if body[i + 1] != "\\" else (3 if body[i + 2] != "u" else 7)
            continue
        members.append(c)
        i += 1
    return members


def _chars(members: list[str], upper: bool = False) -> str:
    """Sorted distinct characters of the members (multi-character members split), upper-case forms added.

    Direction marks and other invisibles that clean() removes from every text are left out."""
    chars = {c for m in members for c in m if ord(c) not in INVISIBLE}
    if upper:
        chars |= {u for c in chars for u in c.upper()}
    return "".join(sorted(chars))


INVENTORY_MAX_LETTERS = 5000

# CLDR leaves out characters that real text of the language uses: added, each with the reason.
INVENTORY_SUPPLEMENT = {
    "hy": "\u2024",  # ONE DOT LEADER: typed for the Armenian full stop/mijaket (249 of 9,311 hy rows have it)
}


@functools.cache
def _script_own(kind: str) -> dict[str, frozenset[str]]:
    """Script -> the BMP punctuation (kind "P": ARMENIAN FULL STOP, ARABIC COMMA, DEVANAGARI DANDA...) or digits
    (kind "Nd": Gujarati ૦-૯, Khmer ០-៩) that belong to it."""
    out: dict[str, set[str]] = defaultdict(set)
    for cp in range(0x370, 0x10000):
        c = chr(cp)
        if unicodedata.category(c).startswith(kind):
            for script in char_scripts(c) - {"Zyyy", "Zinh"}:
                out[script].add(c)
    return {k: frozenset(v) for k, v in out.items()}


def cldr_characters(package: Path, label: str) -> dict | None:
    """CLDR's characters.json entry for a final label (zh-Hant, sr-Latn, or the bare language), or None."""
    lang = label.split("-")[0]
    for locale in (label,) if "-" in label and label != "sr-Cyrl" else (label, lang):
        path = package / "main" / locale / "characters.json"
        if path.exists():
            return json.loads(path.read_text("utf-8"))["main"][locale]["characters"]
    return None


def inventory(work: Path, out: Path, registry: list[dict], used: dict[str, set[str]]) -> dict:
    """What people of each language type, from CLDR exemplar characters; writes inventory.json.

    used: the characters of each language's shipped text. A letter set larger than INVENTORY_MAX_LETTERS is no
    list of what people type but a whole block (ko: all 11,172 Hangul syllables): it keeps the letters the text
    uses, recorded under `trimmed`."""
    package, version = npm_fetch(CLDR_NPM, work)
    languages, typographic, trimmed = {}, set(), {}
    for entry in registry:
        label, chars = entry["code"], cldr_characters(package, entry["code"])
        if chars is None:
            continue
        punctuation = unicode_set(chars["punctuation"]) + unicode_set(chars.get("punctuation-auxiliary", "[]"))
        digits = [m for m in unicode_set(chars["numbers"]) if m.isdigit()]
        for script in entry["scripts"]:  # CLDR lists the default numbering system's digits only (0-9 for gu, km)
            punctuation += sorted(_script_own("P").get(script, ()))
            digits += sorted(_script_own("Nd").get(script, ()))
        punctuation += list(INVENTORY_SUPPLEMENT.get(label, ""))
        letters = _chars(unicode_set(chars["exemplarCharacters"]), upper=True)
        if len(letters) > INVENTORY_MAX_LETTERS:
            trimmed[label] = len(letters)
            letters = "".join(c for c in letters if c in used.get(label, ()))
        languages[label] = {
            "letters": letters,
            "punctuation": _chars(punctuation),
            "digits": _chars(digits),
            "auxiliary": _chars(unicode_set(chars["auxiliary"]), upper=True),
        }
        typographic |= set(_chars(punctuation)) | {c for c in _chars(unicode_set(chars["numbers"])) if not c.isdigit()}
    ascii_punct = {chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum()}
    typographic = {c for c in typographic if char_scripts(c) <= {"Zyyy"}}  # a script's own: per language
    common = "".join(sorted(ascii_punct | set("0123456789") | typographic))
    cldr = json.loads((package / "package.json").read_text())
    result = {
        "cldr_version": cldr.get("cldrVersion", version),
        "package": f"npm:cldr-misc-full@{version}",
        "languages": languages,
        "common": common,
        "trimmed": {label: {"cldr_letters": n, "kept": len(languages[label]["letters"])} for label, n in trimmed.items()},
    }
    (out / "inventory.json").write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    (out / "LICENSES").mkdir(parents=True, exist_ok=True)
    shutil.copy(package / "LICENSE", out / "LICENSES" / "Unicode-3.0")
    return result
