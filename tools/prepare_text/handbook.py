"""The Debian Administrator's Handbook (family debian): book prose in sentences, from its translated HTML."""

from __future__ import annotations

import shutil
from pathlib import Path

from .cleaning import Row, stored_form
from .fetch import apt_fetch
from .labels import ENGLISH, provisional_label
from .prose import ParaText, sentences

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
        paragraphs = ParaText(("div", "para"), _HANDBOOK_POISON, {"indexterm"}).feed(page.read_text("utf-8"))
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
