"""Which font chain should draw the glyph atlas of every shipped language? Coverage, atlas time and size, and
clusters that collapse to one cell, measured on the shipped training text (docs/benchmarks.md, "Fonts").

For each chain: the share of each language's distinct clusters (and of its rows) the chain draws; the atlas
built from the charset of all shipped training text plus every registry language's CLDR inventory (draw time,
cells, bytes raw and as stored in a model); how many clusters draw the same cell as another cluster of their own
script before the atlas sets them apart (CJK: Han, Kana, Hangul counted apart), with examples.

    python bench/font_atlas.py [--noto DIR] [--out docs/sweeps/font_atlas.json]

--noto DIR measures a third chain, DejaVu + the Noto faces of the PyPI wheels manimgx-fonts and manimgx-fonts-cjk
(2026.9.26.post1) unpacked in DIR, drawn through the same code (the bench points the atlas at those files; a
config never can).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from pixelpipe.data import atlas as atlas_mod
from pixelpipe.data import sources
from pixelpipe.data.atlas import GlyphAtlas, cluster_script, undrawable
from pixelpipe.data.charset import build_charset, text_clusters

DEJAVU = ["DejaVuSans", "DejaVuSerif", "DejaVuSansMono"]
CHAINS = {"unifont": ["Unifont"], "dejavu+unifont": DEJAVU + ["Unifont"]}
DENSE = {"Hani", "Hira", "Kana", "Hang"}


class _Face:
    bitmap = False

    def __init__(self, path: Path) -> None:
        from fontTools.ttLib import TTCollection, TTFont

        self.path = path
        font = TTCollection(path).fonts[0] if path.suffix == ".ttc" else TTFont(path, lazy=True)
        self.codepoints = frozenset(font["cmap"].getBestCmap())


def use_noto(folder: Path) -> list[str]:
    """Point the atlas's face lookup at the Noto files too; returns the chain DejaVu + Noto."""
    faces = {p.stem.split("[")[0].split("-VF")[0]: _Face(p) for p in sorted(folder.rglob("*.tt[fc]"))
             if "Emoji" not in p.name and "Italic" not in p.name}
    original = atlas_mod.load_face
    atlas_mod.load_face = lambda name: faces[name] if name in faces else original(name)
    atlas_mod._any_font_codepoints.cache_clear()
    return DEJAVU + ["NotoSans"] + sorted(n for n in faces if n != "NotoSans")


def training_texts() -> dict[str, list[str]]:
    texts = defaultdict(list)
    for source in sources.training_sources():
        frame = sources.load_source(source)
        for text, label in zip(frame["text"], frame["label"]):
            texts[label].append(text)
    return texts


def coverage(texts: dict[str, list[str]], chain: list[str]) -> dict[str, dict]:
    """Per language: distinct clusters (a character with its marks), the share the chain draws (one font must have
    every glyph of a cluster), rows with a cluster no font draws (the corpus's bad rows)."""
    out = {}
    for lang, rows in sorted(texts.items()):
        found = text_clusters(rows)
        missing = {c for c in found if undrawable(c, chain)}
        bad_rows = sum(bool(text_clusters([t]) & missing) for t in rows) if missing else 0
        out[lang] = {"chars": len(found), "drawn": 1 - len(missing) / max(1, len(found)),
                     "bad_rows": bad_rows, "rows": len(rows), "missing": " ".join(sorted(missing))[:80]}
    return out


def collapsed(charset: list[str], cells: np.ndarray) -> dict:
    """Clusters that draw the same cell as another cluster of their script (before the atlas tags them)."""
    groups = defaultdict(list)
    for cluster, cell in zip(charset, cells):
        groups[(cluster_script(cluster), cell.tobytes())].append(cluster)
    shared = [g for g in groups.values() if len(g) > 1]
    by_script = Counter()
    for g in shared:
        by_script[cluster_script(g[0])] += len(g)
    return {"clusters_sharing_a_cell": sum(len(g) for g in shared), "cells_shared": len(shared),
            "by_script": dict(by_script.most_common()), "cjk": sum(n for s, n in by_script.items() if s in DENSE),
            "examples": ["".join(g) for g in shared[:30]]}


def measure(chain: list[str], texts: dict[str, list[str]]) -> dict:
    found = {c for rows in texts.values() for c in text_clusters(rows)}
    found = {c for c in found if not undrawable(c, chain)}
    charset = build_charset(found, chain, inventory=True)
    t0 = time.perf_counter()
    atlas = GlyphAtlas(chain, 12, 16, 8)
    for cluster in charset[1:]:
        atlas.lookup(cluster)
    draw_s = time.perf_counter() - t0
    raw = atlas.cells.copy()
    t0 = time.perf_counter()
    built = GlyphAtlas.from_clusters(charset, chain, 12, 16, 8)
    build_s = time.perf_counter() - t0
    stored = len(json.dumps(built.to_dict()))
    cov = coverage(texts, chain)
    return {"chain": chain, "clusters": len(charset), "draw_s": round(draw_s, 2), "build_s": round(build_s, 2),
            "cells_bytes": int(raw.nbytes), "stored_bytes": stored, "tagged": len(built.tagged),
            "collapsed": collapsed(charset, raw),
            "clusters_undrawn": sum(round(c["chars"] * (1 - c["drawn"])) for c in cov.values()),
            "rows_with_undrawn": sum(c["bad_rows"] for c in cov.values()),
            "languages_not_fully_drawn": {k: v for k, v in cov.items() if v["drawn"] < 1}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--noto", type=Path, help="folder with the unpacked manimgx-fonts(-cjk) wheels")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    texts = training_texts()
    chains = dict(CHAINS)
    if args.noto:
        chains["dejavu+noto"] = use_noto(args.noto)
    results = {name: measure(chain, texts) for name, chain in chains.items()}
    for name, r in results.items():
        print(f"{name}: {r['clusters']} clusters, drawn in {r['draw_s']} s (from_clusters {r['build_s']} s), "
              f"{r['cells_bytes'] / 1e6:.2f} MB raw, {r['stored_bytes'] / 1e6:.2f} MB stored; "
              f"{r['collapsed']['clusters_sharing_a_cell']} clusters share a cell with another of their script "
              f"(CJK {r['collapsed']['cjk']}), {r['tagged']} tagged; undrawn clusters {r['clusters_undrawn']}, "
              f"rows with one {r['rows_with_undrawn']}")
    if args.out:
        args.out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
