"""Why lr 4e-3 and depth 2 "diverged" in the sweeps of the proportional-rendering model: a probe.

Runs against a checkout of the code before glyph-aligned rendering (commit 0f6491c), whose sweeps
(docs/history.md) show lr 4e-3 and teacher depth 2 ending at chance (4.8 %, 5.4 %); it imports that
checkout's flat package (pixelpipe.cache, pixelpipe.render, ...), never today's:

    mkdir /tmp/pixelpipe-0f6491c && git archive 0f6491c | tar -x -C /tmp/pixelpipe-0f6491c
    python bench/collapse_probe.py --repo /tmp/pixelpipe-0f6491c --lr 0.004 --warmup 0.05
    python bench/collapse_probe.py --repo /tmp/pixelpipe-0f6491c --lr 0.004 --warmup 0.3

It trains that teacher (D=96, depth 1, H2 L2, K4, 32x128 images, 8x8 patches) for one epoch on 9,500
rows with the engine's recipe (AdamW 0.9/0.95, wd 0.05, linear warm-up for --warmup of the steps, then
cosine; clip 1.0; batch 64) and prints, every 25 steps, the loss and how much each stage's output still
varies across the samples of a batch (std over the batch, averaged over features): when that falls to
~0 the model answers the same for every input, which is the collapse.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="checkout of the pre-glyph-atlas code (commit 0f6491c)")
    ap.add_argument("--lr", type=float, default=0.004)
    ap.add_argument("--warmup", type=float, default=0.05, help="share of steps for linear warm-up")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--H", type=int, default=2)
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--data", default="/tmp/pixelpipe-collapse-data")
    args = ap.parse_args()
    sys.path.insert(0, args.repo)  # the old flat package (pixelpipe.cache, ...), not the installed one
    import numpy as np
    import pandas as pd
    import torch
    import torch.nn.functional as F

    try:
        from pixelpipe.cache import CacheDataset, shard_count
        from pixelpipe.config import load_config
        from pixelpipe.corpus import build_corpus
        from pixelpipe.model import EncoderConfig, TRMVisionEncoder
        from pixelpipe.render import RenderSettings, render_split
    except ImportError as err:
        raise SystemExit(f"--repo {args.repo}: not a checkout of commit 0f6491c's flat package ({err})") from None

    torch.set_num_threads(2)
    root = Path(args.data)
    cfg = load_config(Path(args.repo) / "config.yaml", {"corpus": {"num_samples": 9500}})
    if not (root / "done").exists():
        s = RenderSettings.from_config(cfg["render"], seed=0)
        build_corpus(cfg["corpus"], s, root / "corpus", seed=0, log=lambda m: None)
        for split in ("train", "test"):
            df = pd.read_parquet(root / "corpus" / f"{split}.parquet")
            paths = [root / split / f"shard-{i:05d}.npy" for i in range(shard_count(len(df), 2048))]
            render_split(df.text.tolist(), df.label.tolist(), df.id.tolist(), s, paths, root / split / "manifest.json",
                         2048, 2, progress=False)
        (root / "done").write_text("ok")

    def load(split):
        ds = CacheDataset(root / split)
        return torch.from_numpy(np.stack([ds.split.get(i) for i in range(len(ds))])), torch.from_numpy(ds.split.labels)

    xtr, ytr = load("train")
    xte, yte = load("test")
    torch.manual_seed(0)
    m = TRMVisionEncoder(EncoderConfig(image_height=32, image_width=128, channels=1, num_classes=19, patch_size=8, dim=96,
                                       depth=args.depth, heads=4, H_cycles=args.H, L_cycles=args.L, num_capsules=4))
    decay = [p for n, p in m.named_parameters() if p.dim() >= 2 and "pos_embed" not in n and "queries" not in n]
    rest = [p for n, p in m.named_parameters() if not (p.dim() >= 2 and "pos_embed" not in n and "queries" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    bs = 64
    total = len(xtr) // bs
    warm = max(1, int(args.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * min(1, (s - warm) / (total - warm)))))
    spread = {}

    def hook(name):
        def record(module, inputs, output):
            spread[name] = round(float(output.detach().float().std(0).mean()), 4)
        return record

    for name in ("patch_embed", "core", "capsules", "head"):
        getattr(m, name).register_forward_hook(hook(name))
    t0 = time.perf_counter()
    order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(0))
    for step in range(total):
        idx = order[step * bs : (step + 1) * bs]
        loss = F.cross_entropy(m(xtr[idx])["logits"], ytr[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % 25 == 0 or step < 3:
            print(json.dumps({"step": step + 1, "loss": round(loss.item(), 3), "lr": round(sched.get_last_lr()[0], 5),
                              "std_over_batch": dict(spread)}), flush=True)
    m.eval()
    with torch.no_grad():
        acc = float((m(xte)["logits"].argmax(-1) == yte).float().mean())
    print(json.dumps({"lr": args.lr, "warmup": args.warmup, "warmup_steps": warm, "test_accuracy": round(acc, 4),
                      "seconds": round(time.perf_counter() - t0)}))


if __name__ == "__main__":
    main()
