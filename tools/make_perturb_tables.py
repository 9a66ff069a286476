"""Write pixelpipe/data/perturb_tables.py: the look-alike letters and the quotation marks used by
pixelpipe.data.perturb. Run once by hand; the generated module is committed, so nothing is read or
downloaded when the workflow runs.

Sources (both registry packages, fetched with their ordinary clients):
- Look-alikes: Unicode's confusables data (UTS #39, confusables.txt) as shipped in the PyPI package
  confusable-homoglyphs (its confusables.json; `pip install confusable-homoglyphs==3.3.1`, or Debian's
  python3-confusable-homoglyphs). Its groups are closed transitively (Cyrillic "а" and Greek "α" are both
  listed under Latin "a", never under each other), then a pair is kept only when both letters belong to a
  script of the default languages, the scripts differ, the fonts draw both, and their rendered atlas cells
  (DejaVu, 12 px in a 16x8 cell, the schema's defaults) differ in at most MAX_PIXELS pixels.
- Quotation marks: CLDR's delimiters (npm package cldr-misc-full, `npm pack cldr-misc-full@48.2.0`,
  main/{lang}/delimiters.json).

    python tools/make_perturb_tables.py --cldr /path/to/cldr-misc-full/package/main \\
        [--confusables path/to/confusables.json --package-version 3.3.1]  # default: the installed package
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.resources
import json
import unicodedata
from pathlib import Path

import numpy as np

from pixelpipe.data.atlas import draw_cluster, undrawable

FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")
FONT_SIZE, CELL_HEIGHT, CELL_WIDTH = 12, 16, 8
MAX_PIXELS = 8  # of 128: pixels whose gray level differs by more than INK_STEP
INK_STEP = 64
LANGS = ("ar", "az", "cs", "da", "de", "el", "en", "es", "fa", "fr", "he", "hy", "it", "mk", "nl", "pl", "ru", "uk", "vi")
SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "ARABIC", "HEBREW")
# The letters of those scripts that people's keyboards and copy-paste produce (no mathematical, fullwidth or
# small-capital forms): Basic Latin to Latin Extended-B, Azerbaijani's schwa (the one letter of a default
# language in IPA Extensions), Greek and Coptic, Cyrillic and its supplement, Armenian, Hebrew letters, Arabic.
BLOCKS = ((0x41, 0x24F), (0x259, 0x259), (0x370, 0x3FF), (0x400, 0x52F), (0x531, 0x58F), (0x5D0, 0x5FF),
          (0x620, 0x6FF))
DOUBLE, SINGLE = set("„“”‟«»"), set("‚‘’‛‹›")
OUT = Path(__file__).resolve().parents[1] / "pixelpipe" / "data" / "perturb_tables.py"


def script(ch: str) -> str:
    return unicodedata.name(ch, "?").split()[0]


def eligible(ch: str) -> bool:
    return (len(ch) == 1 and any(a <= ord(ch) <= b for a, b in BLOCKS) and unicodedata.category(ch).startswith("L")
            and script(ch) in SCRIPTS and not undrawable(ch, FONTS))


def groups(confusables: dict[str, list[dict[str, str]]]) -> list[set[str]]:
    """Transitive closure of the confusable lists (union-find over every listed character)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key, entries in confusables.items():
        for e in entries:
            parent[find(e["c"])] = find(key)
    out: dict[str, set[str]] = {}
    for x in list(parent):
        out.setdefault(find(x), set()).add(x)
    return list(out.values())


def pixel_difference(a: str, b: str) -> int:
    ca, cb = (draw_cluster(c, FONTS, FONT_SIZE, CELL_HEIGHT, CELL_WIDTH).astype(int) for c in (a, b))
    return int((np.abs(ca - cb) > INK_STEP).sum())


def lookalikes(confusables: dict[str, list[dict[str, str]]]) -> dict[str, list[tuple[str, int]]]:
    table: dict[str, list[tuple[str, int]]] = {}
    for group in groups(confusables):
        letters = sorted(c for c in group if eligible(c))
        for a in letters:
            near = [(b, pixel_difference(a, b)) for b in letters if script(b) != script(a)]
            near = sorted((b, d) for b, d in near if d <= MAX_PIXELS)
            if near:
                table[a] = near
    return dict(sorted(table.items()))


def quotes(cldr_main: Path) -> dict[str, tuple[str, str, str, str]]:
    """(double open, double close, single open, single close) per language: CLDR's pair of double marks for
    straight double quotes and its pair of single marks for straight single quotes, whichever of its two
    pairs (quotation, alternateQuotation) that is; English's pair where CLDR gives no such pair (nl's pairs
    are both single, fr's both double): a straight quote keeps its kind, double or single."""
    out = {}
    for lang in LANGS:
        d = json.loads((cldr_main / lang / "delimiters.json").read_text())["main"][lang]["delimiters"]
        pairs = [(d["quotationStart"], d["quotationEnd"]), (d["alternateQuotationStart"], d["alternateQuotationEnd"])]
        double = next((p for p in pairs if set(p) <= DOUBLE), ("“", "”"))
        single = next((p for p in pairs if set(p) <= SINGLE), ("‘", "’"))
        out[lang] = (*double, *single)
    return out


HEADER = '''"""Tables for pixelpipe.data.perturb, generated by tools/make_perturb_tables.py: do not edit by hand.

LOOKALIKES: Unicode's confusables data (UTS #39 confusables.txt, (c) Unicode, Inc., Unicode License v3) as
shipped in PyPI confusable-homoglyphs {version} (confusables.json, MIT), closed transitively; a pair is kept
when its letters are of different scripts among Latin, Cyrillic, Greek, Armenian, Arabic and Hebrew and
their atlas cells (DejaVu, {size} px, {height}x{width} cell) differ in at most {max_pixels} pixels (the count
is in each comment). {count} letters, {pairs} pairs, {identical} of them pixel-identical.
QUOTES: CLDR 48 delimiters (npm cldr-misc-full 48.2.0, (c) Unicode, Inc., Unicode License v3) as
(double open, double close, single open, single close); see the generator for the choice of pairs.
"""
'''


def render(table: dict[str, list[tuple[str, int]]], quote_table: dict[str, tuple[str, ...]], version: str) -> str:
    pairs = [d for near in table.values() for _, d in near]
    lines = [HEADER.format(version=version, size=FONT_SIZE, height=CELL_HEIGHT, width=CELL_WIDTH,
                           max_pixels=MAX_PIXELS, count=len(table), pairs=len(pairs),
                           identical=pairs.count(0)),
             "LOOKALIKES: dict[str, str] = {"]
    for a, near in table.items():
        lines.append(f'    "{a}": (  # U+{ord(a):04X} {unicodedata.name(a)}')
        lines += [f'        "{b}"  # U+{ord(b):04X} {unicodedata.name(b)}, {d} px' for b, d in near]
        lines.append("    ),")
    lines += ["}", "", "QUOTES: dict[str, tuple[str, str, str, str]] = {"]
    lines += [f'    "{lang}": (' + ", ".join(f'"{m}"' for m in q) + ")," for lang, q in quote_table.items()]
    lines += ["}", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cldr", type=Path, required=True, help="cldr-misc-full's main/ folder")
    ap.add_argument("--confusables", type=Path, help="confusables.json (default: the installed package's)")
    ap.add_argument("--package-version", help="confusable-homoglyphs version of that file (default: the installed)")
    args = ap.parse_args()
    path = args.confusables or importlib.resources.files("confusable_homoglyphs") / "confusables.json"
    package_version = args.package_version or importlib.metadata.version("confusable-homoglyphs")
    table = lookalikes(json.loads(Path(str(path)).read_text()))
    OUT.write_text(render(table, quotes(args.cldr), package_version))
    print(f"wrote {OUT}: {len(table)} letters with look-alikes")


if __name__ == "__main__":
    main()
