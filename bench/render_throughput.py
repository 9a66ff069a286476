"""Rendering throughput of the default layout, in one process.

Renders the built-in corpus (the config's corpus settings) with the config's
render settings, shard by shard as render_split does, and reports images/s
for: the whole split cold (atlas drawn from scratch, as a render job does),
and warm repeats (atlas drawn; layout + gather only). Writing .npy files is
left out: that is disk speed, not rendering.

    python bench/render_throughput.py --config config.yaml [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time

from pixelpipe.config.resolve import load_config
from pixelpipe.data.corpus import generate_default_corpus
from pixelpipe.data.render import Renderer, RenderSettings


def render_all(renderer: Renderer, texts: list[str], shard_size: int) -> float:
    t0 = time.perf_counter()
    indices, _ = renderer.layout(texts)
    for start in range(0, len(texts), shard_size):
        renderer.images(indices[start : start + shard_size])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cfg = load_config(args.config)
    c = cfg["corpus"]
    texts = generate_default_corpus(c["num_samples"], c["min_chars"], c["max_chars"], cfg["seed"])["text"].tolist()
    settings = RenderSettings.from_section(cfg["render"])
    renderer = Renderer(settings)
    cold = render_all(renderer, texts, cfg["render"]["shard_size"])
    warm = [render_all(renderer, texts, cfg["render"]["shard_size"]) for _ in range(args.repeats)]
    result = {"images": len(texts), "image_shape": list(settings.shape), "glyphs": len(renderer.atlas),
              "cold_images_per_s": round(len(texts) / cold), "warm_images_per_s": round(len(texts) / min(warm)),
              "cold_s": round(cold, 3), "warm_s": [round(w, 3) for w in warm]}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
