"""Realistic text perturbations, shared by the evaluation (a score per kind) and by training augmentation.

Real text differs from a clean corpus in ways a reader does not notice or shrugs off: letters of another
script that look the same (copy-paste, homograph spam, a neighbouring language's keyboard), diacritics left
out on a plain keyboard, typos, case, typographic punctuation, sloppy spacing, digits and names.
Each kind is one function here. PERTURBATIONS (what the evaluation scores, issue 18 item 2) and AUGMENTATIONS
(what training may mix in, item 3) name them with one signature `(text, rng, lang) -> str`, `rng` a numpy
Generator, so one seed fixes every output. Every character a table here can produce is drawable by the
default DejaVu fonts (tests/test_perturb.py). The generated tables (look-alikes, quotation marks) and their
sources are in perturb_tables.py; the rest is curated here, each table with its reason.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import numpy as np

from .atlas import clusters
from .perturb_tables import LOOKALIKES, QUOTES

Perturbation = Callable[[str, np.random.Generator, str], str]

# ---- look-alike letters ------------------------------------------------------------------------------------

ARABIC_DIGITS, PERSIAN_DIGITS = "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹"
# Arabic and Persian keyboards type different code points for the same-looking letters and digits: yeh
# (Arabic ي, Persian ی, whose isolated form is Arabic alef maksura ى), kaf (ك, ک) and the digits. They are one
# script, so confusables.txt does not list them; curated. In running (joined) text yeh and kaf look alike;
# in the atlas's isolated forms ك/ک and 4, 5, 6 differ visibly (measured in tests/test_perturb.py).
KEYBOARD_VARIANTS: dict[str, str] = {
    "ي": "ی", "ى": "ی", "ی": "ي", "ك": "ک", "ک": "ك",
    **dict(zip(ARABIC_DIGITS, PERSIAN_DIGITS)), **dict(zip(PERSIAN_DIGITS, ARABIC_DIGITS)),
}  # fmt: skip
LOOKALIKE_CHOICES: dict[str, str] = {**LOOKALIKES, **KEYBOARD_VARIANTS}
# The evaluation swaps each eligible letter with probability 0.5, so words mix both scripts (what fools a
# byte n-gram model most: neither script's n-grams stay whole).
EVAL_LOOKALIKE_RATE = 0.5


def lookalikes(text: str, rng: np.random.Generator, rate: float = 1.0) -> str:
    """Swap each letter that has a look-alike of another script (or keyboard) for one, with probability `rate`.

    The default 1.0 is what a homograph attack or a filter dodge does: every letter that can be swapped
    unseen is swapped. A pixel model should not care; a byte n-gram model sees another language."""
    draws, picks = rng.random(len(text)), rng.random(len(text))
    out = []
    for ch, draw, pick in zip(text, draws, picks):
        alt = LOOKALIKE_CHOICES.get(ch)
        out.append(alt[int(pick * len(alt))] if alt and draw < rate else ch)
    return "".join(out)


# ---- diacritics dropped --------------------------------------------------------------------------------------

# Letters whose mark is part of the base form (no canonical decomposition), and what a plain keyboard types
# instead: Polish ł, Vietnamese đ, Danish ø æ, German ß, French œ, Azerbaijani ı ə (written i, e without an
# Azerbaijani layout), and a few neighbours (Maltese ħ, Sami ŧ, Catalan ŀ, Icelandic ð).
BASE_FORMS: dict[str, str] = {
    "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "ø": "o", "Ø": "O", "ß": "ss", "ẞ": "SS",
    "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ı": "i", "ə": "e", "Ə": "E", "ħ": "h", "Ħ": "H", "ŧ": "t",
    "Ŧ": "T", "ŀ": "l", "Ŀ": "L",
}  # fmt: skip
# Letters that keep their mark because the plain keyboard of their script has them as keys of their own:
# Cyrillic й (ru, uk), ї (uk), ѓ ќ (mk) — dropping them is not what anyone types (ё is dropped: Russians
# commonly write е) — and every precomposed Arabic-script letter (آ أ إ ؤ ئ ۀ ...: keys on Arabic and Persian
# layouts). Arabic harakat and Hebrew niqqud are separate marks (Mn) and are dropped, as is Greek tonos.
KEEP_MARKED = frozenset("йЙїЇѓЃќЌўЎ") | frozenset(
    chr(c) for c in range(0x620, 0x700) if unicodedata.normalize("NFD", chr(c)) != chr(c))


def drop_diacritics(text: str) -> str:
    """The text as typed on a plain keyboard: NFD, combining marks (Mn) dropped, NFC, plus BASE_FORMS.

    German ü becomes u, not the ue a German without umlaut keys writes: the plain-keyboard reading (and the
    harder one for a model, since ue is itself a German signal)."""
    out = []
    for ch in unicodedata.normalize("NFC", text):
        if ch in BASE_FORMS:
            out.append(BASE_FORMS[ch])
        elif ch in KEEP_MARKED or ch.isascii():
            out.append(ch)
        else:
            out.append("".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn"))
    return unicodedata.normalize("NFC", "".join(out))


# ---- typos ---------------------------------------------------------------------------------------------------

# Letter rows of each script's common layout, aligned by key position (a space holds a key with no letter):
# QWERTY, Russian ЙЦУКЕН, Greek, Hebrew SI-1452, Arabic 101. A mistyped key is one of its neighbours.
KEY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("qwertyuiop", "asdfghjkl", "zxcvbnm"),
    ("йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю"),
    (" ςερτυθιοπ", "ασδφγηξκλ", "ζχψωβνμ"),
    ("  קראטוןםפ", "שדגכעיחלךף", "זסבהנמצתץ"),
    ("ضصثقفغعهخحجد", "شسيبلاتنمكط", "ئءؤر ىةوزظ"),
)
TYPO_KINDS = ("swap", "delete", "duplicate", "replace")


def _key_neighbours(rows: tuple[tuple[str, str, str], ...]) -> dict[str, str]:
    """Keys touching each key on a staggered keyboard: same row +-1, the row above at c and c+1, below at c-1, c."""
    out: dict[str, str] = {}
    for layout in rows:
        for r, row in enumerate(layout):
            for c, key in enumerate(row):
                near = [(r, c - 1), (r, c + 1), (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c)]
                keys = [layout[i][j] for i, j in near if 0 <= i < len(layout) and 0 <= j < len(layout[i])]
                if key != " ":
                    out[key] = "".join(k for k in keys if k != " ")
    return out


KEY_NEIGHBOURS = _key_neighbours(KEY_ROWS)


def _script(ch: str) -> str:
    return unicodedata.name(ch, "?").split()[0]


def _replacement(cluster: str, units: list[str], rng: np.random.Generator) -> str:
    """A neighbouring key (case kept) when the script's layout is known, else another letter of the same
    script taken from the text itself (so Armenian, Persian-only letters, Ukrainian і stay in their script)."""
    base = cluster[0]
    near = KEY_NEIGHBOURS.get(base.lower(), "")
    if near:
        key = near[rng.integers(len(near))]
        return key.upper() if base.isupper() else key
    same = [u for u in units if u[0].isalpha() and u != cluster and _script(u[0]) == _script(base)]
    return same[rng.integers(len(same))] if same else cluster + cluster


def typos(text: str, rng: np.random.Generator, rate: float = 0.05) -> str:
    """Each letter mistyped with probability `rate`: swapped with the next letter, deleted, doubled, or
    replaced (see _replacement). A letter is a grapheme cluster as the atlas groups them (atlas.clusters): a typo
    moves, drops or doubles what a key press made, never a mark without its letter. Texts of spaces only come
    back untouched, and the result is never empty."""
    if not text.strip():
        return text
    units = clusters(text)
    hits, kinds = rng.random(len(units)) < rate, rng.integers(len(TYPO_KINDS), size=len(units))
    out: list[str] = []
    i = 0
    while i < len(units):
        unit, kind = units[i], TYPO_KINDS[kinds[i]]
        i += 1
        if not (hits[i - 1] and unit[0].isalpha()):
            out.append(unit)
        elif kind == "swap" and i < len(units) and units[i][0].isalpha() and units[i] != unit:
            out += [units[i], unit]
            i += 1
        elif kind in ("swap", "replace"):
            out.append(_replacement(unit, units, rng))
        elif kind == "duplicate":
            out += [unit, unit]
        # "delete": nothing appended
    result = "".join(out)
    return result if result.strip() else text


# ---- case ----------------------------------------------------------------------------------------------------

CASE_MODES = ("upper", "lower", "title", "sentence", "swap")
DOTTED_I_LANGS = frozenset({"az", "tr"})  # i <-> İ and ı <-> I, not i <-> I
TONOS = "\u0301"  # Greek tonos after NFD
_WORD_START = re.compile(r"(?<![\w'’])[^\W\d_]")
_SENTENCE_START = re.compile(r"(^\W*|[.!?…]\s+)([^\W\d_])")


def _upper(text: str, lang: str) -> str:
    return (text.replace("i", "İ") if lang in DOTTED_I_LANGS else text).upper()


def _lower(text: str, lang: str) -> str:
    return (text.replace("I", "ı").replace("İ", "i") if lang in DOTTED_I_LANGS else text).lower()


def change_case(text: str, rng: np.random.Generator, mode: str | None = None, lang: str = "") -> str:
    """Upper, lower, title, sentence case or swapped case (caps lock on), `mode` drawn from CASE_MODES when
    None. Interface strings come Title Cased, chat in lower case, headlines in capitals. Azerbaijani keeps its
    dotted and dotless i apart; Greek capitals drop the tonos, as Greek all-caps writing does."""
    mode = CASE_MODES[rng.integers(len(CASE_MODES))] if mode is None else mode
    if mode == "upper":
        up = _upper(text, lang)
        return unicodedata.normalize("NFC", unicodedata.normalize("NFD", up).replace(TONOS, "")) if lang == "el" else up
    if mode == "lower":
        return _lower(text, lang)
    if mode == "title":
        return _WORD_START.sub(lambda m: _upper(m.group(), lang), _lower(text, lang))
    if mode == "sentence":
        return _SENTENCE_START.sub(lambda m: m.group(1) + _upper(m.group(2), lang), _lower(text, lang))
    if mode == "swap":
        return "".join(_upper(c, lang) if c.islower() else _lower(c, lang) for c in text)
    raise ValueError(f"unknown case mode {mode!r}; one of {CASE_MODES}")


# ---- typographic punctuation ---------------------------------------------------------------------------------

_OPENS_AFTER = r"(?<![^\s(\[{/–—-])"  # at the start, or after a space, an opening bracket, a slash or a dash
_ARABIC_PUNCT = {"?": "؟", ";": "؛"}


def _quotes(text: str, lang: str) -> str:
    """Straight quotes to the language's (QUOTES: CLDR's double pair for ", its single pair for '): a quote at
    the start or after a space or bracket opens, any other closes; a ' between letters is an apostrophe (’)."""
    dq_open, dq_close, sq_open, sq_close = QUOTES.get(lang, QUOTES["en"])
    text = re.sub(_OPENS_AFTER + '"', dq_open, text).replace('"', dq_close)
    text = re.sub(_OPENS_AFTER + r"'(?=\w)", sq_open, text)
    text = re.sub(r"(?<=[^\W_])'(?=[^\W_])", "’", text)
    return text.replace("'", sq_close)


def typographic(text: str, lang: str) -> str:
    """Straight punctuation as typeset text and word processors write it in `lang`: quotes (see _quotes),
    "..." -> "…", " - " -> " – "; French spacing (no-break space inside « », narrow one before ; : ! ?),
    Arabic-script , ? ; (ar, fa), the Armenian full stop ։ (hy)."""
    text = _quotes(text, lang)
    text = re.sub(r"(?<!\.)\.\.\.(?!\.)", "…", text).replace(" - ", " – ")
    if lang == "fr":
        text = text.replace("«", "«\u00a0").replace("»", "\u00a0»")
        text = re.sub(r"(?<=[^\W_])([;:!?])(?=[\s;:!?]|$)", "\u202f\\1", text)
    elif lang in ("ar", "fa"):
        text = re.sub(r"(?<!\d),|,(?!\d)", "،", text).translate(str.maketrans(_ARABIC_PUNCT))
    elif lang == "hy":
        text = re.sub(r"(?<=[^\W\d_])\.(?=\s|$)", "։", text)
    return text


# ---- punctuation and spacing variants ------------------------------------------------------------------------

WRAPPERS = ('""', "''", "()", "[]", "«»", "“”", "„“")  # a quoted or bracketed fragment cut from a longer text
_MARK = re.compile(r"(?<=\S)[,.;:!?]")
_MARK_SPACE = re.compile(r"(?<=[,.;:!?]) (?=\w)")


def _pick(matches: list[re.Match[str]], rng: np.random.Generator) -> re.Match[str] | None:
    return matches[rng.integers(len(matches))] if matches else None


def _space_before_mark(text: str, rng: np.random.Generator) -> str | None:
    m = _pick(list(_MARK.finditer(text)), rng)
    return None if m is None else text[: m.start()] + " " + text[m.start():]


def _no_space_after_mark(text: str, rng: np.random.Generator) -> str | None:
    m = _pick(list(_MARK_SPACE.finditer(text)), rng)
    return None if m is None else text[: m.start()] + text[m.end():]


def _toggle_final_period(text: str, rng: np.random.Generator) -> str | None:
    if text.endswith(".") and not text.endswith(".."):
        return text[:-1]
    return text + "." if text[-1:].isalnum() else None


def _double_mark(text: str, rng: np.random.Generator) -> str | None:
    m = _pick(list(re.finditer(r"[!?]", text)), rng)
    return None if m is None else text[: m.end()] + m.group() + text[m.end():]


def _wrap(text: str, rng: np.random.Generator) -> str | None:
    pair = WRAPPERS[rng.integers(len(WRAPPERS))]
    return pair[0] + text + pair[1]


SPACING_VARIANTS = (_space_before_mark, _no_space_after_mark, _toggle_final_period, _double_mark, _wrap)


def punctuation_spacing(text: str, rng: np.random.Generator) -> str:
    """One variant real text has (drawn among those that apply): a space before a punctuation mark, none after
    one, the final period dropped or added, a ! or ? doubled, the text wrapped in quotes or brackets."""
    if not text.strip():
        return text
    for k in rng.permutation(len(SPACING_VARIANTS)):
        out = SPACING_VARIANTS[k](text, rng)
        if out is not None:
            return out
    return text


# ---- digits and names ----------------------------------------------------------------------------------------

# Names that stay in Latin letters in every language's text (brands, products, and first names common
# across Europe), so a model must not take them for English.
NAMES = ("Firefox", "Google", "Wikipedia", "Linux", "Windows", "Android", "GitHub", "YouTube", "Python",
         "Mozilla", "WhatsApp", "iPhone", "Bluetooth", "Wi-Fi", "PDF", "USB", "Anna", "Maria", "David",
         "Thomas", "Elena", "Michael")
POINT_DECIMAL_LANGS = frozenset({"en", "he"})  # CLDR: the rest of the default languages write 3,5
NATIVE_DIGITS = {"ar": (ARABIC_DIGITS, "٫"), "fa": (PERSIAN_DIGITS, "٫")}  # digits and decimal separator


def _number(rng: np.random.Generator, lang: str) -> str:
    """A number as `lang`'s text writes one: a count, a thousand, a decimal, a year, a date, a percentage,
    a time or a version; ar and fa text uses its own digits half of the time."""
    a, b, c = (int(x) for x in rng.integers(1, [1000, 100, 30]))
    year = int(rng.integers(1950, 2031))
    comma = lang not in POINT_DECIMAL_LANGS
    group = (" " if rng.random() < 0.5 else ".") if comma else ","
    kinds = (str(a), f"{a}{group}{b:03d}", f"{a}{',' if comma else '.'}{b % 10}", str(year),
             f"{c:02d}.{b % 12 + 1:02d}.{year}", f"{year}-{b % 12 + 1:02d}-{c:02d}", f"{c}/{b % 12 + 1}/{year}",
             f"{b}%", f"{b} %", f"{c % 24}:{b % 60:02d}", f"{b % 20}.{c % 10}", f"v{c % 10}.{b % 20}.{a % 10}")
    token = kinds[rng.integers(len(kinds))]
    if lang in NATIVE_DIGITS and rng.random() < 0.5:
        digits, decimal = NATIVE_DIGITS[lang]  # ar and fa write 3,5: their "," is the decimal separator
        token = token.translate(str.maketrans({**dict(zip("0123456789", digits)), ",": decimal}))
    return token


def insert_digits_names(text: str, rng: np.random.Generator, lang: str) -> str:
    """A number (see _number) or a name (NAMES) inserted at a word boundary: real sentences carry both, and
    neither tells the language."""
    token = _number(rng, lang) if rng.random() < 0.5 else NAMES[rng.integers(len(NAMES))]
    words = text.split(" ")
    at = int(rng.integers(len(words) + 1))
    return " ".join(words[:at] + [token] + words[at:]).strip()


# ---- registries ----------------------------------------------------------------------------------------------


def _lookalikes(text: str, rng: np.random.Generator, lang: str) -> str:
    return lookalikes(text, rng, EVAL_LOOKALIKE_RATE)


def _no_diacritics(text: str, rng: np.random.Generator, lang: str) -> str:
    return drop_diacritics(text)


def _typos(text: str, rng: np.random.Generator, lang: str) -> str:
    return typos(text, rng)


def _case(text: str, rng: np.random.Generator, lang: str) -> str:
    return change_case(text, rng, lang=lang)


def _typographic(text: str, rng: np.random.Generator, lang: str) -> str:
    return typographic(text, lang)


def _punctuation_spacing(text: str, rng: np.random.Generator, lang: str) -> str:
    return punctuation_spacing(text, rng)


# What the evaluation scores (one column each): named module-level functions, so the registries pickle into
# DataLoader workers.
PERTURBATIONS: dict[str, Perturbation] = {
    "lookalikes": _lookalikes, "no_diacritics": _no_diacritics, "typos": _typos, "case": _case,
    "typographic": _typographic,
}  # fmt: skip
AUGMENTATIONS: dict[str, Perturbation] = {
    **PERTURBATIONS, "punctuation_spacing": _punctuation_spacing, "digits_names": insert_digits_names,
}  # fmt: skip
