"""Why the TRM trailed a plain conv net, and what closed the gap: an ablation on the default corpus.

Every variant is trained the same way on the same glyph-aligned images of the
default corpus (the config's corpus and render settings): AdamW (0.9, 0.95),
weight decay 0.05, linear warm-up then cosine, grad clip 1, random training
windows of 15+ characters on every sample (windows.random_windows), the
student's size unless a variant says otherwise. Reported: validation and test
accuracy (full texts), and accuracy on fresh texts of another Faker seed: 15-40
character phrases and single Faker sentences (bench/language_id.py's texts).
The n-gram baseline (pixelpipe.train.baseline) is trained on the same split.

Variants that the product no longer has (a capsule-only head, learned
positions without local mixing) are made here by overriding
TRMVisionEncoder.head_input; the conv net is the 87 k-parameter reference of
issue 13 (pair stem, 1-D convolution over neighbouring tokens, mean+max, linear).

    python bench/stem_ablation.py --out docs/ablation.json [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from language_id import fresh_texts  # bench/ is on sys.path when this script runs
from torch import nn

from pixelpipe.config.resolve import load_config
from pixelpipe.data.corpus import assign_splits, generate_default_corpus
from pixelpipe.data.render import Renderer, RenderSettings
from pixelpipe.data.windows import random_windows
from pixelpipe.model.encoder import TRMVisionEncoder, count_parameters, flops_per_sample
from pixelpipe.train.baseline import train_baseline
from pixelpipe.train.run import encoder_config

STUDENT = {"dim": 48, "depth": 1, "heads": 4, "mlp_ratio": 2.0, "H_cycles": 1, "L_cycles": 1, "num_capsules": 4}
# name -> (model overrides, head: "full" | "capsules" | "capsules+tokens", epochs, lr)
VARIANTS = {
    "TRM, pair stem only, learned positions, capsule head": (
        {"mixer_kernel": 0, "positions": True}, "capsules", 3, 2e-3),
    "+ local mixing (k=3, hidden 1 x D)": ({"mixer_kernel": 3, "mixer_ratio": 1.0, "positions": True}, "capsules", 3, 2e-3),
    "+ mean/max of the answer tokens in the head": (
        {"mixer_kernel": 3, "mixer_ratio": 1.0, "positions": True}, "capsules+tokens", 3, 2e-3),
    "- learned positions": ({"mixer_kernel": 3, "mixer_ratio": 1.0, "positions": False}, "capsules+tokens", 3, 2e-3),
    "+ wider n-gram bank (hidden 4 x D), pooled into the head": (
        {"mixer_kernel": 3, "mixer_ratio": 4.0, "positions": False}, "full", 3, 2e-3),
    "+ lr 4e-3 (the default student)": ({"mixer_kernel": 3, "mixer_ratio": 4.0, "positions": False}, "full", 3, 4e-3),
    "default student, 5 epochs": ({"mixer_kernel": 3, "mixer_ratio": 4.0, "positions": False}, "full", 5, 4e-3),
    "conv net reference (87 k parameters), 6 epochs": (None, "conv", 6, 2e-3),
}


class Ablated(TRMVisionEncoder):
    """The encoder with a narrower head: capsules only, or capsules + pooled answer tokens."""

    def __init__(self, cfg, head_kind: str):
        super().__init__(cfg)
        self.head_kind = head_kind
        n = cfg.num_capsules * cfg.dim + (2 * cfg.dim if head_kind == "capsules+tokens" else 0)
        if head_kind != "full":
            self.head_norm, self.head = nn.LayerNorm(n), nn.Linear(n, cfg.num_classes)

    def head_input(self, sketches, y, local):
        if self.head_kind == "full":
            return super().head_input(sketches, y, local)
        out = [sketches.flatten(1)]
        if self.head_kind == "capsules+tokens":
            out += [y.mean(1), y.amax(1)]
        return torch.cat(out, dim=-1)


class ConvNet(nn.Module):
    def __init__(self, channels: int, classes: int, cell: tuple[int, int], width: int = 128):
        super().__init__()
        h, w = cell
        self.pad = w
        self.stem = nn.Conv2d(channels, width, (h, 2 * w), stride=(h, w))
        self.conv = nn.Conv1d(width, width, 3, padding=1)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = F.pad(x.float() / 255 if x.dtype == torch.uint8 else x, (0, self.pad))
        h = F.gelu(self.conv(F.gelu(self.stem(x)).flatten(2)))
        return {"logits": self.head(torch.cat([h.mean(-1), h.amax(-1)], -1))}


@torch.no_grad()
def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    hits = sum(int((model(torch.from_numpy(x[i : i + 512]))["logits"].argmax(-1).numpy() == y[i : i + 512]).sum())
               for i in range(0, len(x), 512))
    return 100 * hits / len(x)


def train(model: nn.Module, data: dict, geometry: tuple, epochs: int, lr: float, seed: int = 0) -> float:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "queries" not in n and "pos_embed" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "queries" not in n and "pos_embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}], lr=lr,
                            betas=(0.9, 0.95))
    x, y, n = (torch.from_numpy(data[k]) for k in ("train_x", "train_y", "train_n"))
    bs, steps_per_epoch = 64, len(x) // 64
    total = epochs * steps_per_epoch
    warm = max(1, int(0.05 * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm))))
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for i in range(steps_per_epoch):
            idx = order[i * bs : (i + 1) * bs]
            images = random_windows(x[idx], n[idx], geometry, gen, prob=1.0, min_chars=15)
            loss = F.cross_entropy(model(images)["logits"], y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
    return time.perf_counter() - t0


def make_data(cfg: dict) -> tuple[dict, RenderSettings, list[str]]:
    c = cfg["corpus"]
    df = generate_default_corpus(c["num_samples"], c["min_chars"], c["max_chars"], cfg["seed"])
    split = assign_splits(len(df), c["splits"], cfg["seed"])
    labels = sorted(set(df["label"]))
    settings = RenderSettings.from_section(cfg["render"])
    renderer = Renderer(settings)
    data = {}
    for s in ("train", "val", "test"):
        part = df[split == s]
        images, full = renderer.render(part["text"].tolist())
        data[f"{s}_x"], data[f"{s}_n"] = images, np.minimum(full, settings.cells)
        data[f"{s}_y"] = np.array([labels.index(l) for l in part["label"]])
        data[f"{s}_text"] = part["text"].tolist()
    for kind, items in fresh_texts(40).items():
        if kind == "sentences":
            continue
        data[f"{kind}_x"] = renderer.render([t for t, _ in items])[0]
        data[f"{kind}_y"] = np.array([labels.index(lang) for _, lang in items])
        data[f"{kind}_text"] = [t for t, _ in items]
    return data, settings, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", nargs="*", help="variant names (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    cfg = load_config(args.config)
    data, settings, labels = make_data(cfg)
    geometry = (settings.cell_height, settings.cell_width, settings.lines, settings.line_chars)
    rows = []
    splits = ("train", "val", "test", "phrases", "single")
    base = train_baseline({s: data[f"{s}_text"] for s in splits}, {s: data[f"{s}_y"] for s in splits}, len(labels),
                          cfg["baseline"]["buckets"], cfg["baseline"]["epochs"], cfg["baseline"]["lr"],
                          cfg["baseline"]["batch_size"], cfg["seed"], log=lambda m: None)
    rows.append({"variant": "character 1-3-gram linear baseline (text, no pixels)", "parameters": base["parameters"],
                 "train_s": round(base["train_s"], 1)}
                | {s: round(100 * base[f"{s}_accuracy"], 2) for s in splits[1:]})
    print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"config": args.config, "rows": rows}, indent=1) + "\n")
    for name, (overrides, head, epochs, lr) in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        torch.manual_seed(cfg["seed"])
        if head == "conv":
            model = ConvNet(settings.channels, len(labels), (settings.cell_height, settings.cell_width))
            mflop = None
        else:
            enc = encoder_config({**cfg["student"]["model"], **STUDENT, **overrides}, settings.to_dict(), len(labels))
            model = Ablated(enc, head)
            mflop = round(flops_per_sample(enc) / 1e6, 1)
        seconds = train(model, data, geometry, epochs, lr, cfg["seed"])
        row = {"variant": name, "parameters": count_parameters(model), "forward_mflop": mflop, "epochs": epochs,
               "lr": lr, "train_s": round(seconds, 1)}
        row.update({k: round(accuracy(model, data[f"{k}_x"], data[f"{k}_y"]), 2)
                    for k in ("val", "test", "phrases", "single")})
        rows.append(row)
        print(json.dumps(row), flush=True)
        args.out.write_text(json.dumps({"config": args.config, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
