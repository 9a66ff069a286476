"""MediaWiki (family wikimedia): interface messages of core, extensions and skins, read label by label because
all languages at once do not fit in memory."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from .cleaning import Row, clean, stored_form
from .fetch import apt_fetch
from .labels import ENGLISH, provisional_label
from .licensing import dep5_license, dep5_licenses


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
