"""Locale codes -> one label per language ("lang-Script"): each source spells languages its own way, and the
threshold, the registry and every shipped row must agree on one. CLDR decides what a code means."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path

from .fetch import npm_fetch

CLDR_CORE_NPM = "cldr-core@48.2.0"
CLDR_NAMES_NPM = "cldr-localenames-full@48.2.0"
ENGLISH = "en-Latn"  # the provisional label of English (labels are "lang-Script" until the registry is written)

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


def final_labels(provisional: Iterable[str]) -> dict[str, str]:
    """Provisional "lang-Script" -> the label users see: the bare language in its usual script (CLDR: sr is
    Cyrillic), lang-Script in another (sr-Latn, be-Latn), and always for Chinese (zh-Hans, zh-Hant)."""
    out = {}
    for label in provisional:
        lang, script = label.split("-")
        plain = lang not in ALWAYS_SCRIPT_LABEL and script == default_script(lang)
        out[label] = lang if plain else label
    return out


def label_scripts(label: str) -> frozenset[str]:
    """ISO 15924 codes a provisional label's letters may be in (Jpan: Hiragana, Katakana, Han)."""
    script = label.rsplit("-", 1)[1]
    return frozenset(COMPOSITE_SCRIPTS.get(script, (script,)))


@functools.lru_cache(maxsize=None)
def char_scripts(c: str) -> frozenset[str]:
    """Scripts a character belongs to (Unicode Script_Extensions, via fontTools: ー is Hiragana and Katakana)."""
    from fontTools import unicodedata as fu

    return frozenset(fu.script_extension(c))


def language_name(label: str) -> str:
    """English name of a final label (zh-Hans: Simplified Chinese; sr-Latn: Serbian (Latin))."""
    cldr = cldr_core()
    names = cldr["languages"]
    if label in names:
        return names[label]
    lang, _, script = label.partition("-")
    base = names.get(lang) or FALLBACK_NAMES.get(lang, lang)
    return f"{base} ({cldr['scripts'].get(script, script)})" if script else base
