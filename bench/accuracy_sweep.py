"""Train teacher + student variants end to end (no Snakemake), judge them on held-out real text, time the
deployed student.

Each variant is a set of config overrides. The corpus and its glyph cache are built once per corpus/render
config, a teacher once per teacher config (variants that share it reuse it), then encode, consolidate and
the student. Every model is scored on the held-out sets of the `evaluate` stage (clean and perturbed, by
length), and the student is exported (folded ONNX) and timed through the Predictor on one thread: the
accuracy-against-texts/s sweep of docs/benchmarks.md.

    python bench/accuracy_sweep.py --variants bench/student_variants.json --out /tmp/sweep  # {name: overrides}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from pixelpipe.config.resolve import deep_merge, load_config
from pixelpipe.data.cache import CacheSplit
from pixelpipe.data.charset import read_charset
from pixelpipe.data.consolidate import consolidate
from pixelpipe.data.corpus import build_corpus, shard_count
from pixelpipe.data.encoded import dataset_fields
from pixelpipe.data.render import RenderSettings, render_split
from pixelpipe.model.encoder import flops_per_sample
from pixelpipe.evaluate.accuracy import accuracy_table, score
from pixelpipe.evaluate.scorers import TorchScorer
from pixelpipe.evaluate.sets import EvaluateSettings, heldout_sets
from pixelpipe.train.encode import encode_shard
from pixelpipe.train.run import encoder_config, load_teacher, train_student, train_teacher


def _key(*parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


def prepare_cache(cfg: dict, root: Path) -> Path:
    data = root / f"data-{_key(cfg['corpus'], cfg['render'], cfg['seed'])}"
    if (data / "done").exists():
        return data
    build_corpus(cfg["corpus"], cfg["render"]["fonts"], data / "corpus", seed=cfg["seed"], log=lambda m: None)
    charset = read_charset(data / "corpus" / "charset.json")
    settings = RenderSettings.from_section(cfg["render"])
    for split in ("train", "val", "test"):
        corpus = data / "corpus" / f"{split}.parquet"
        import pyarrow.parquet as pq

        n = shard_count(pq.ParquetFile(corpus).metadata.num_rows, cfg["render"]["shard_size"])
        paths = [data / "cache" / split / f"shard-{i:05d}.npy" for i in range(n)]
        render_split(corpus, charset, settings, paths, data / "cache" / split / "manifest.json",
                     shard_size=cfg["render"]["shard_size"], progress=False)
    (data / "done").write_text("ok")
    return data


def teacher_for(cfg: dict, data: Path, root: Path) -> tuple[Path, dict]:
    out = root / f"teacher-{_key(cfg['teacher'], cfg['engine'], data.name)}"
    if not (out / "summary.json").exists():
        t0 = time.perf_counter()
        _, summary = train_teacher(cfg, data / "cache", data / "corpus" / "labels.json", out, log=lambda m: None)
        summary = {"test_accuracy": summary["test_accuracy"], "parameters": summary["parameters"],
                   "train_s": round(time.perf_counter() - t0, 1)}
        (out / "summary.json").write_text(json.dumps(summary))
    return out, json.loads((out / "summary.json").read_text())


def student_for(cfg: dict, data: Path, teacher: Path, out: Path) -> dict:
    import torch

    views = cfg["encode"]["views"]
    suffix = f"-views{views}-{_key(cfg['student']['train'], cfg['seed'])}" if views > 1 else ""
    dataset = teacher.parent / f"dataset-{teacher.name}{suffix}"
    if not (dataset / "manifest.json").exists():
        model, split = load_teacher(teacher, torch.device("cpu")), CacheSplit(data / "cache" / "train")
        encoded = [dataset / f"shard-{i:05d}.npz" for i in range(len(split.shard_paths))]
        for i, path in enumerate(encoded):
            encode_shard(model, split.shard(i), f"train-{i:05d}", path, torch.device("cpu"), batch_size=256,
                         progress=False, views=views, window_min_chars=cfg["student"]["train"]["window_min_chars"],
                         seed=cfg["seed"])
        consolidate(encoded, dataset, fields=dataset_fields(views))
    t0 = time.perf_counter()
    _, summary = train_student(cfg, data / "cache", dataset, teacher, data / "corpus" / "labels.json", out / "student",
                               out / "checkpoints", log=lambda m: None)
    return {"test_accuracy": summary["test_accuracy"], "parameters": summary["parameters"],
            "train_s": round(time.perf_counter() - t0, 1)}


def deployed_speed(student: Path, texts: list[str], out: Path) -> dict:
    """Export the folded student and time the Predictor on one thread over `texts` (after one warm-up pass)."""
    from pixelpipe.deploy.export import export_student
    from pixelpipe.deploy.predictor import Predictor
    from pixelpipe.model.checkpoint import load_model

    model, config = load_model(student)
    export_student(model, config, out / "student.onnx", log=lambda m: None)
    predictor = Predictor(out / "student.onnx", threads=1, batch_size=64, threshold=0.0)  # forced choice
    predictor.predict(texts)
    t0 = time.perf_counter()
    predictor.predict(texts)
    return {"texts_per_s": round(len(texts) / (time.perf_counter() - t0)), "onnx_bytes": (out / "student.onnx").stat().st_size}


def heldout(scorers: dict, cfg: dict, labels: list[str]) -> dict:
    settings = EvaluateSettings.from_section(cfg["evaluate"])
    sets = heldout_sets(settings, labels, cfg["render"]["fonts"], cfg["seed"])
    rows = score(scorers, sets, settings.perturbations, cfg["seed"], log=lambda m: None).rows
    out = {}
    for model in scorers:
        clean = accuracy_table(rows, perturbation="clean", set=list(sets))
        out[model] = {b: round(float(clean.loc[b, model]), 2) for b in (">40", "15-40", "all")}
        kinds = accuracy_table(rows, bucket="all", set=list(sets))
        out[model].update({k: round(float(kinds.loc[k, model]), 2) for k in settings.perturbations})
    return out, [t for df in sets.values() for t in df["text"]]


def teacher_scores(teacher: Path, cfg: dict, labels: list[str]) -> dict:
    """The teacher's held-out scores, computed once per teacher (every variant sharing it reuses them)."""
    path = teacher / "heldout.json"
    if not path.exists():
        path.write_text(json.dumps(heldout({"teacher": TorchScorer(teacher)}, cfg, labels)[0]["teacher"]))
    return json.loads(path.read_text())


def run_variant(name: str, cfg: dict, root: Path) -> dict:
    data = prepare_cache(cfg, root)
    labels = json.loads((data / "corpus" / "labels.json").read_text())["labels"]
    teacher, tsum = teacher_for(cfg, data, root)
    out = root / name
    ssum = student_for(cfg, data, teacher, out)
    scores, texts = heldout({"student": TorchScorer(out / "student")}, cfg, labels)
    scores["teacher"] = teacher_scores(teacher, cfg, labels)
    mean_len = float(np.mean([min(len(t), cfg["render"]["line_chars"] * cfg["render"]["lines"]) for t in texts]))
    tcfg = encoder_config(cfg["teacher"]["model"], cfg["render"], len(labels))
    scfg = encoder_config(cfg["student"]["model"], cfg["render"], len(labels))
    from pixelpipe.deploy.fold import deployed_flops
    from pixelpipe.model.checkpoint import load_model

    student_model, _ = load_model(out / "student")
    return {"variant": name, "teacher": {**tsum, **scores["teacher"]}, "student": {**ssum, **scores["student"]},
            "mean_chars": round(mean_len, 1),
            "mflops_at_mean_length": {"teacher": round(flops_per_sample(tcfg, mean_len) / 1e6, 2),
                                      "student": round(flops_per_sample(scfg, mean_len) / 1e6, 2),
                                      "student_deployed": round(deployed_flops(student_model, mean_len) / 1e6, 3)},
            "deployed": deployed_speed(out / "student", texts, out), "overrides": cfg.get("_overrides")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--variants", required=True, help="JSON file: {name: config overrides}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", help="run only these variants")
    args = ap.parse_args()
    variants = json.loads(Path(args.variants).read_text())
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    results = root / "sweep.jsonl"
    for name, overrides in variants.items():
        if args.only and name not in args.only:
            continue
        cfg = load_config(args.config, deep_merge({"engine": {"progress": False, "precision": "fp32"}}, overrides))
        cfg["_overrides"] = overrides
        try:
            row = run_variant(name, cfg, root)
        except Exception as err:  # one broken variant must not lose the others
            row = {"variant": name, "error": repr(err)}
        print(json.dumps(row), flush=True)
        with results.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
