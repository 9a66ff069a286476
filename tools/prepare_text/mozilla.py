"""Firefox and Thunderbird (family mozilla): interface strings of every Debian langpack, Fluent and .properties."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from .cleaning import Row, clean, stored_form
from .fetch import apt_fetch, apt_packages, fluent_syntax
from .labels import ENGLISH, provisional_label


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
