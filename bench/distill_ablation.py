"""Distillation ablation: the shipped student trained with the frozen teacher (the config's student.distill) and on
labels alone (kl_weight = sketch_weight = 0), over several seeds, judged on the evaluate stage's held-out sets by
length bucket (docs/benchmarks.md, issue 24). Arm `transfer` adds the transfer set (student.distill.transfer: the
train rows beyond student.train.rows_per_language, soft targets only) at the distilled arm's number of steps.

It reuses a finished pipeline run (its cache, encoded dataset, teacher and labels), so only the students train:

    python bench/distill_ablation.py --results results --seeds 0 1 2 --out /tmp/ablation [--arms distilled transfer]

`--arm NAME=JSON` adds an arm of config overrides (e.g. `kd='{"student": {"distill": {"ce_weight": 0.2}}}'`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from pixelpipe.config.resolve import deep_merge, load_config
from pixelpipe.evaluate.accuracy import accuracy_table, score
from pixelpipe.evaluate.scorers import TorchScorer
from pixelpipe.evaluate.sets import EvaluateSettings, heldout_sets
from pixelpipe.train.run import train_student

BUCKETS = ("all", "<20", "20-40", "40-100", ">100", "15-40")
ARMS = {"distilled": {}, "labels_only": {"student": {"distill": {"kl_weight": 0.0, "sketch_weight": 0.0}}},
        "transfer": {"student": {"distill": {"transfer": True}}}}


def same_steps(cfg: dict, cache: Path) -> dict:
    """A transfer arm reads every train row: its epochs set so that it takes the distilled arm's optimizer steps
    (as train.sampling.schedule counts them)."""
    from pixelpipe.data.cache import CacheSplit, rows_per_label
    from pixelpipe.train.sampling import schedule

    train = cfg["student"]["train"]
    if not cfg["student"]["distill"]["transfer"] or train["rows_per_language"] is None:
        return cfg
    split = CacheSplit(cache / "train", verify=False)
    share = len(rows_per_label(split, train["rows_per_language"], cfg["seed"]))
    steps = schedule(share, train["batch_size"], train["epochs"])[1]
    return deep_merge(cfg, {"student": {"train": {"epochs": steps / schedule(len(split), train["batch_size"], 1)[0]}}})


def heldout_buckets(student: Path, cfg: dict, labels: list[str]) -> dict[str, float]:
    """Clean held-out accuracy (%) of a trained student, by length bucket, all sets pooled."""
    settings = EvaluateSettings.from_section(cfg["evaluate"])
    sets = heldout_sets(settings, labels, cfg["render"]["fonts"], cfg["seed"])
    rows = score({"student": TorchScorer(student)}, sets, [], cfg["seed"], log=lambda m: None).rows
    table = accuracy_table(rows, perturbation="clean", set=list(sets))
    return {b: round(float(table.loc[b, "student"]), 2) for b in BUCKETS if b in table.index}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"), help="a finished run's results directory")
    ap.add_argument("--config", default="config.yaml", help="the config that run used")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="*", choices=list(ARMS), default=["distilled", "labels_only"])
    ap.add_argument("--arm", action="append", default=[], metavar="NAME=JSON",
                    help="one more arm: its name and its config overrides as JSON (repeatable)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    for spec in args.arm:
        name, _, overrides = spec.partition("=")
        try:
            ARMS[name] = json.loads(overrides) if name and name not in ARMS else None
        except json.JSONDecodeError as e:
            ap.error(f"--arm {spec!r}: the overrides after '=' are not JSON ({e})")
        if not isinstance(ARMS[name], dict):
            ap.error(f"--arm {spec!r}: give a new arm's name, '=', and a JSON object of config overrides")
        args.arms.append(name)
    labels = json.loads((args.results / "corpus" / "labels.json").read_text())["labels"]
    rows = []
    for seed in args.seeds:
        for arm in args.arms:
            overrides = deep_merge(ARMS[arm], {"seed": seed, "engine": {"progress": False}})
            cfg = same_steps(load_config(args.config, overrides), args.results / "cache")
            out = args.out / f"{arm}-seed{seed}"
            t0 = time.perf_counter()
            train_student(cfg, args.results / "cache", args.results / "dataset" / "train", args.results / "teacher",
                          args.results / "corpus" / "labels.json", out / "student", out / "checkpoints",
                          log=lambda m: None)
            row = {"arm": arm, "seed": seed, "train_s": round(time.perf_counter() - t0, 1),
                   **heldout_buckets(out / "student", cfg, labels)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    summary = {}
    for arm in args.arms:
        mine = [r for r in rows if r["arm"] == arm]
        summary[arm] = {b: {"mean": round(statistics.mean(r[b] for r in mine), 2),
                            "stdev": round(statistics.stdev(r[b] for r in mine), 2) if len(mine) > 1 else 0.0}
                        for b in BUCKETS if b in mine[0]}
    gain = {f"{arm}_minus_labels_only": {b: round(summary[arm][b]["mean"] - summary["labels_only"][b]["mean"], 2)
                                         for b in summary[arm]}
            for arm in summary if arm != "labels_only" and "labels_only" in summary}
    result = {"runs": rows, "summary": summary, **gain}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ablation.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"summary": summary, "gain": gain}, indent=2))


if __name__ == "__main__":
    main()
