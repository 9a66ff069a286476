"""Training throughput from the glyph cache against a pixel cache, same model, same batch, one run.

The glyph cache stores each text's glyph ids (2 bytes a cell) and the model folds its stem over the atlas;
a pixel cache (the layout before issue 20) stores every image (128 bytes a cell) and the model convolves
them. Both caches are built here from the same corpus split; the same teacher-sized model then trains
`--steps` steps from each, alternating blocks of steps between them so a busy machine slows both alike.
Reported: samples/s of each, their ratio, bytes on disk and bytes read per epoch.

    python bench/cache_throughput.py --config config.yaml --out docs/sweeps/cache_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from pixelpipe.config.resolve import load_config
from pixelpipe.data.cache import CacheDataset, atlas_tensor
from pixelpipe.model.encoder import TRMVisionEncoder
from pixelpipe.train.distill import ClassificationObjective
from pixelpipe.train.engine import Trainer
from pixelpipe.train.run import encoder_config
from pixelpipe.train.settings import EngineSettings, TrainSettings


class PixelCache(Dataset):
    """The old layout: images (uint8 [N, C, H, W], memory-mapped) with labels and lengths, fetched per batch."""

    def __init__(self, path: Path, labels: np.ndarray, lengths: np.ndarray) -> None:
        self.images = np.load(path, mmap_mode="r")
        self.labels, self.lengths_ = labels, lengths

    def __len__(self) -> int:
        return len(self.labels)

    def __getitems__(self, indices):
        idx = np.asarray(indices)
        return {"image": torch.from_numpy(np.ascontiguousarray(self.images[np.sort(idx)])[np.argsort(np.argsort(idx))]),
                "label": torch.from_numpy(self.labels[idx]), "length": torch.from_numpy(self.lengths_[idx]),
                "index": torch.from_numpy(idx)}

    @staticmethod
    def collate_fn(batch):
        return batch


def build_pixel_cache(glyphs: CacheDataset, out: Path) -> PixelCache:
    """Every row of the glyph cache rendered to pixels, shard by shard, into one memory-mappable .npy."""
    split = glyphs.split
    c, h, w = split.settings.shape
    images = np.lib.format.open_memmap(out, mode="w+", dtype=np.uint8, shape=(len(split), c, h, w))
    start, labels, lengths = 0, [], []
    for _, rows in split.iter_shards():
        images[start : start + len(rows)] = split.images(rows)
        labels.append(np.asarray(rows["label"], np.int64))
        lengths.append(np.asarray(rows["length"], np.int64))
        start += len(rows)
    images.flush()
    del images
    return PixelCache(out, np.concatenate(labels), np.concatenate(lengths))


def trainer_for(cfg: dict, data: Dataset, atlas: torch.Tensor, labels: int, steps: int) -> Trainer:
    torch.manual_seed(0)
    model = TRMVisionEncoder(encoder_config(cfg["teacher"]["model"], cfg["render"], labels), atlas)
    train = TrainSettings.from_section({**cfg["teacher"]["train"], "window_prob": 0.0, "augment": [],
                                        "epochs": steps * cfg["teacher"]["train"]["batch_size"] / len(data)})
    engine = EngineSettings.from_section({**cfg["engine"], "precision": "fp32", "progress": False,
                                          "length_grouping": 0, "num_workers": 0})
    return Trainer(model, ClassificationObjective(), data, None, train, engine, torch.device("cpu"), log=lambda m: None)


def time_blocks(trainers: dict[str, Trainer], steps: int, block: int) -> dict[str, float]:
    iters = {name: t.batches() for name, t in trainers.items()}
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for name, t in trainers.items():  # warm-up
        t.train_step(iters[name])
    for _ in range(0, steps, block):
        for name, t in trainers.items():
            t0 = time.perf_counter()
            for _ in range(block):
                t.train_step(iters[name])
            times[name].append((time.perf_counter() - t0) / block)
    return {name: t.train.batch_size / statistics.median(v) for name, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--cache", required=True, help="a run's results/cache/train directory (glyph cache)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(args.config)
    glyphs = CacheDataset(args.cache)
    labels = int(max(np.asarray(r["label"]).max(initial=0) for _, r in glyphs.split.iter_shards())) + 1
    with tempfile.TemporaryDirectory(dir=Path(args.cache).parent) as tmp:
        pixels = build_pixel_cache(glyphs, Path(tmp) / "images.npy")
        atlas = atlas_tensor(glyphs.split)
        trainers = {"glyph cache": trainer_for(cfg, glyphs, atlas, labels, args.steps + 10),
                    "pixel cache": trainer_for(cfg, pixels, atlas, labels, args.steps + 10)}
        rates = time_blocks(trainers, args.steps, args.block)
        sizes = {"glyph cache": sum(p.stat().st_size for p in glyphs.split.shard_paths),
                 "pixel cache": (Path(tmp) / "images.npy").stat().st_size}
    result = {"rows": len(glyphs), "batch": cfg["teacher"]["train"]["batch_size"], "threads": args.threads,
              "samples_per_s": rates, "ratio_glyph_over_pixel": rates["glyph cache"] / rates["pixel cache"],
              "bytes_on_disk": sizes, "load_average": os.getloadavg()}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
