"""Train teacher+student variants of a config end to end (no Snakemake) and report test accuracy.

Used to choose the CPU defaults: accuracy does not depend on the device when
precision is fp32, so the sweep may run on a fast machine (`--device cuda`)
while wall times for the README are measured with Snakemake on the target CPU.

    python bench/accuracy_sweep.py --out /tmp/sweep --variants bench/lr_depth_variants.json --teacher-only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import pandas as pd

from pixelpipe.config.resolve import deep_merge, load_config
from pixelpipe.data.cache import CacheSplit
from pixelpipe.data.consolidate import consolidate
from pixelpipe.data.corpus import build_corpus, shard_count
from pixelpipe.data.render import RenderSettings, render_split
from pixelpipe.model.encoder import flops_per_sample
from pixelpipe.train.encode import encode_shard
from pixelpipe.train.run import load_teacher, train_student, train_teacher


def prepare_cache(cfg: dict, root: Path) -> Path:
    key = json.dumps({"corpus": cfg["corpus"], "render": cfg["render"], "seed": cfg["seed"]}, sort_keys=True)
    cache_root = root / f"data-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    if (cache_root / "done").exists():
        return cache_root
    settings = RenderSettings.from_section(cfg["render"])
    build_corpus(cfg["corpus"], cfg["render"]["fonts"], cache_root / "corpus", seed=cfg["seed"])
    for split in ("train", "val", "test"):
        df = pd.read_parquet(cache_root / "corpus" / f"{split}.parquet")
        n = shard_count(len(df), cfg["render"]["shard_size"])
        paths = [cache_root / "cache" / split / f"shard-{i:05d}.npy" for i in range(n)]
        render_split(df["text"].tolist(), df["label"].tolist(), df["id"].tolist(), settings, paths,
                     cache_root / "cache" / split / "manifest.json", shard_size=cfg["render"]["shard_size"],
                     progress=False)
    (cache_root / "done").write_text("ok")
    return cache_root


def last_epoch_rate(history: list[dict]) -> float:
    """Samples/s of the last epoch alone (first-epoch compile and warm-up excluded), validation included."""
    if len(history) < 2:
        return history[-1]["samples_per_s"]
    a, b = history[-2], history[-1]
    return (b["samples_seen"] - a["samples_seen"]) / max(1e-9, b["elapsed_s"] - a["elapsed_s"])


def run_variant(name: str, cfg: dict, root: Path, teacher_only: bool = False) -> dict:
    import torch

    data = prepare_cache(cfg, root)
    out = root / name
    t0 = time.perf_counter()
    tres, tsum = train_teacher(cfg, data / "cache", data / "corpus" / "labels.json", out / "teacher")
    t_teacher = time.perf_counter() - t0
    if teacher_only:
        losses = [h.get("train_loss") for h in tres.history]
        return {"variant": name, "teacher_acc": tsum["test_accuracy"], "teacher_s": round(t_teacher, 1),
                "teacher_params": tsum["parameters"], "train_loss_per_epoch": losses,
                "val_acc_per_epoch": [h.get("val_accuracy") for h in tres.history]}
    device = torch.device("cuda" if torch.cuda.is_available() and cfg["hardware"]["device"] != "cpu" else "cpu")
    teacher = load_teacher(out / "teacher", device)
    split = CacheSplit(data / "cache" / "train")
    encoded, start, enc_s = [], 0, 0.0
    precision = tres.resolved["engine"]["precision"]
    for i, (path, count) in enumerate(zip(split.shard_paths, split.shard_counts)):
        enc = out / "encoded" / f"shard-{i:05d}.npz"
        stats = encode_shard(teacher, path, split.labels[start : start + count], enc, device, precision,
                             cfg["encode"]["batch_size"], progress=False)
        enc_s += stats["encode_s"]
        encoded.append(enc)
        start += count
    consolidate(encoded, out / "dataset" / "train")
    t1 = time.perf_counter()
    sres, ssum = train_student(cfg, data / "cache", out / "dataset" / "train", out / "teacher",
                            data / "corpus" / "labels.json", out / "student", out / "checkpoints")
    t_student = time.perf_counter() - t1
    from pixelpipe.train.run import encoder_config

    n_labels = len(json.loads((data / "corpus" / "labels.json").read_text())["labels"])
    tf = flops_per_sample(encoder_config(cfg["teacher"]["model"], cfg["render"], n_labels))
    sf = flops_per_sample(encoder_config(cfg["student"]["model"], cfg["render"], n_labels))
    return {"variant": name, "teacher_acc": tsum["test_accuracy"], "student_acc": ssum["test_accuracy"],
            "teacher_s": round(t_teacher, 1), "student_s": round(t_student, 1),
            "teacher_mflop": round(tf / 1e6, 1), "student_mflop": round(sf / 1e6, 1),
            "teacher_params": tsum["parameters"], "student_params": ssum["parameters"],
            "teacher_samples_per_s": round(last_epoch_rate(tres.history), 1),
            "student_samples_per_s": round(last_epoch_rate(sres.history), 1),
            "encode_images_per_s": round(len(split) / max(enc_s, 1e-9), 1), "precision": precision,
            "device": tres.resolved.get("device", str(device))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--variants", required=True, help="JSON file: {name: config overrides}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--teacher-only", action="store_true", help="train and test the teacher only (lr/depth sweeps)")
    ap.add_argument("--keep-precision", action="store_true", help="do not force fp32 (for timing GPU profiles)")
    args = ap.parse_args()
    variants = json.loads(Path(args.variants).read_text())
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, overrides in variants.items():
        base = {} if args.keep_precision else {"engine": {"precision": "fp32"}}
        cfg = load_config(args.config, deep_merge(deep_merge(base, {"engine": {"progress": False}}), overrides))
        try:
            rows.append(run_variant(name, cfg, root, args.teacher_only))
        except Exception as err:  # one broken variant must not lose the others
            rows.append({"variant": name, "error": repr(err)})
        print(json.dumps(rows[-1]), flush=True)
        (root / "sweep.json").write_text(json.dumps(rows, indent=2))
    print(pd.DataFrame(rows).to_markdown(index=False) if hasattr(pd.DataFrame, "to_markdown") else pd.DataFrame(rows))


if __name__ == "__main__":
    main()
