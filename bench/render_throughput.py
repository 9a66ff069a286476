"""Layout throughput of the glyph-id cache, in one process: rows/s of what a render job computes.

Builds the config's corpus (the built-in real text by default) with pixelpipe.data.corpus.build_corpus in a
temporary directory, then lays each split's texts out as glyph ids shard by shard, as render_split does
(Renderer.layout on `render.shard_size` rows at a time). Reported for all splits together:

  cold  per split: the atlas drawn from the run's charset (GlyphAtlas.from_clusters), then every shard laid
        out: what a render job computes
  warm  the same renderers again (atlas drawn, code point lookups cached): layout only, best of --repeats

Writing the structured .npy shards and their sha256 is left out: that is disk speed, not layout.

    python bench/render_throughput.py --config config.yaml [--repeats 3] [--num-samples N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from pixelpipe.config.resolve import load_config
from pixelpipe.data.atlas import GlyphAtlas
from pixelpipe.data.charset import read_charset
from pixelpipe.data.corpus import build_corpus
from pixelpipe.data.corpusfile import SPLITS
from pixelpipe.data.render import Renderer, RenderSettings


def corpus_texts(cfg: dict) -> tuple[dict[str, list[str]], list[str]]:
    """({split: texts}, charset) of the config's corpus, built as the corpus rule builds it."""
    with tempfile.TemporaryDirectory() as tmp:
        build_corpus(cfg["corpus"], cfg["render"]["fonts"], Path(tmp), cfg["seed"], log=lambda m: None)
        texts = {s: pq.read_table(Path(tmp) / f"{s}.parquet", columns=["text"])["text"].to_pylist() for s in SPLITS}
        return texts, read_charset(Path(tmp) / "charset.json")


def lay_out(renderer: Renderer, texts: list[str], shard_size: int) -> int:
    """Lay `texts` out shard by shard; the number of texts the layout truncated."""
    truncated = 0
    for start in range(0, len(texts), shard_size):
        _, full = renderer.layout(texts[start : start + shard_size])
        truncated += int((full > renderer.settings.cells).sum())
    return truncated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-samples", type=int, default=None, help="override corpus.num_samples (smoke runs)")
    ap.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    args = ap.parse_args()
    overrides = {"corpus": {"num_samples": args.num_samples}} if args.num_samples else None
    cfg = load_config(args.config, overrides)
    settings, shard_size = RenderSettings.from_section(cfg["render"]), cfg["render"]["shard_size"]
    texts, charset = corpus_texts(cfg)
    rows = sum(map(len, texts.values()))
    renderers, atlas_s, truncated = {}, 0.0, 0
    t0 = time.perf_counter()
    for split, split_texts in texts.items():
        t_atlas = time.perf_counter()
        atlas = GlyphAtlas.from_clusters(charset, settings.fonts, settings.font_size, settings.cell_height,
                                         settings.cell_width)
        atlas_s += time.perf_counter() - t_atlas
        renderers[split] = Renderer(settings, atlas)
        truncated += lay_out(renderers[split], split_texts, shard_size)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for split, split_texts in texts.items():
            lay_out(renderers[split], split_texts, shard_size)
        warm.append(time.perf_counter() - t0)
    result = {"config": args.config, "rows": rows, "splits": {s: len(t) for s, t in texts.items()},
              "sources": cfg["corpus"]["sources"], "cells": settings.cells, "glyphs": len(charset),
              "truncated": truncated, "shard_size": shard_size,
              "cold_rows_per_s": round(rows / cold), "warm_rows_per_s": round(rows / min(warm)) if warm else None,
              "cold_s": round(cold, 3), "atlas_s": round(atlas_s, 3), "warm_s": [round(w, 3) for w in warm]}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
