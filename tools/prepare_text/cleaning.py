"""What a text must be to ship, and the one form it is stored in: every source goes through the same filter so
that no source's markup, placeholders or code reach the corpus."""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from .labels import ENGLISH, char_scripts, label_scripts

MIN_CHARS, MAX_CHARS = 15, 600
MIN_CHARS_DENSE = 6  # Han, Kana, Hangul: a character is a syllable or a word, 15 would halve zh/ja/ko
DENSE_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Hang", "Bopo"})
MIN_SCRIPT_SHARE = 0.6  # share of letters that must be in the language's script(s)


def min_chars(label: str) -> int:
    return MIN_CHARS_DENSE if label_scripts(label) <= DENSE_SCRIPTS else MIN_CHARS


def script_share(text: str, scripts: frozenset[str]) -> float:
    """Share of the letters of text in one of scripts (0 when it has no letter)."""
    letters = [c for c in text if unicodedata.category(c)[0] == "L"]
    if not letters:
        return 0.0
    return sum(bool(char_scripts(c) & scripts) for c in letters) / len(letters)


# Invisible direction/format controls that editors insert; ZWNJ/ZWJ (Persian, Arabic) are letters' business: kept.
INVISIBLE = dict.fromkeys(
    map(ord, "\u00ad\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")
)
_SIMPLE_TAG = re.compile(r"</?(?:b|i|u|em|strong|small|big|span|p|br)\s*/?>", re.IGNORECASE)
PLACEHOLDER_PATTERNS = [  # shared with tests/test_text_data.py: nothing matching these may ship
    r"\{|\}",  # Fluent/ICU/Python-format/mustache/wikitext templates
    r"%(?:\d+\$)?[-#0 +']*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[sdifuxXoScCpgeEn@]",  # printf
    r"%\(\w+\)",  # %(name)s
    r"%\d",  # Qt %1
    r"%[A-Za-z#]",  # strftime and program-specific fields: %B %F (Nautilus), %D %h %w (Konsole), %#
    r"\$\w|\$\{|\$\[",  # $1 $var ${x}, KDE's scripted translations $[properties ...]
    r"&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);",  # entities
    r"<[a-zA-Z/!][^>]*>",  # tags
    r"#\d",  # .properties plural placeholders
    r"\[\[|\]\]|\[https?:|''|~~~|__",  # wikitext
    r"https?://|www\.|\bftp://|mailto:|\S+@\S+\.\w",  # URLs and addresses
]
_PLACEHOLDER = re.compile("|".join(PLACEHOLDER_PATTERNS))
_CODE_LIKE = re.compile(
    r"\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z][A-Za-z]*\b|\b[A-Z][a-z]+[A-Z][a-z]+[A-Z]\w*|::|->|=>|==|&&|\|\||\w\(\)|\\[a-zA-Z]|(?:^|\s)(?:/|~/|\./)\w"
    r"|\.(?:js|json|html?|php|css|txt|png|jpe?g|svg|exe|py|xml|ini|conf|sh|ftl|dll)\b|(?:^|\s)--?[a-z][a-z-]{2,}\b"
    r"|\w=\w|\bnull\b|\btrue\b|\bfalse\b|;\S|`|/\*|\*/|\*\*"
    r"|(?<=\w)_|_(?=\w)"  # identifiers, error codes (NS_ERROR_...) and GTK mnemonics in any script
    r"|\w\|\w|\|[-+*/]\||(?: \| .*){2}"  # option lists a|b|c, KDE's |/| scripting, keyword lists a | b | c
    r"|(?:\. ){3}|@[a-z]|(?:^|\s)#(?=\s|$)"  # dot leaders of help listings, CSS @rules, "Page # of #" fields
)


def clean(text: str) -> str:
    """NFC, invisible controls removed, every whitespace run one space, stripped: how every shipped text is stored."""
    text = unicodedata.normalize("NFC", text).translate(INVISIBLE)
    return re.sub(r"\s+", " ", text).strip()


def strip_simple_markup(text: str) -> str:
    """Access keys (&File) and plain inline tags go; what they wrapped stays."""
    text = _SIMPLE_TAG.sub(" ", text)
    return re.sub(r"&(?=\w)(?![a-zA-Z]+;|#\d+;)", "", text)


def stored_form(text: str) -> str:
    """The text as it would ship (markup stripped, cleaned), for comparing with the English source."""
    return clean(strip_simple_markup(text))


def rejection(text: str, label: str) -> str | None:
    """Why text may not ship under a provisional label ("lang-Script"), or None when it may."""
    if not min_chars(label) <= len(text) <= MAX_CHARS:
        return "length"
    if any(unicodedata.category(c) in ("Cc", "Co", "Cs") for c in text):
        return "control"
    if any(ord(c) > 0xFFFF for c in text):
        return "astral"  # emoji, rare Han: outside the Basic Multilingual Plane the shipped fonts draw
    if _PLACEHOLDER.search(text):
        return "placeholder"
    if _CODE_LIKE.search(text):
        return "code"
    if script_share(text, label_scripts(label)) < MIN_SCRIPT_SHARE:
        return "script"
    nonspace = [c for c in text if not c.isspace()]  # vowel signs (Mc, Mn) are part of the letters they write
    if sum(unicodedata.category(c)[0] in "LM" for c in nonspace) < 0.5 * len(nonspace):
        return "letters"
    return None


Row = tuple[str, str, str]  # (provisional label, origin, text)


def finalize(rows: Iterable[Row], english: set[str] = frozenset()) -> tuple[list[Row], Counter]:
    """Clean, filter, drop copies of the source's English strings, de-duplicate per label; sorted by (label, origin).

    rows: a list, or an iterator that yields each label's rows together (MediaWiki, label by label: the raw rows of
    all its languages never sit in memory at once). english: stored forms of every English string of the source
    (a translation equal to one is untranslated)."""
    if isinstance(rows, list):
        rows.sort(key=lambda r: r[0])
    kept, why = [], Counter()
    for label, group in itertools.groupby(rows, key=lambda r: r[0]):
        seen = set()
        for _, origin, text in sorted((label, r[1], stored_form(r[2])) for r in group):
            reason = rejection(text, label)
            if reason is None and label != ENGLISH and text in english:
                reason = "english"
            if reason is None and text in seen:
                reason = "duplicate"
            if reason:
                why[reason] += 1
                continue
            seen.add(text)
            kept.append((label, origin, text))
    kept.sort()
    return kept, why
