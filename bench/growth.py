"""Measured growth: the default layout at 1x, 10x and 100x the corpus, through the `train` target.

Each scale runs `snakemake --cores 4 train` in its own directory (plus the `plan` rule first, whose
results/plan.json holds the planner's prediction for every job), with the built-in corpus of real text
filled by Faker where it runs out (`corpus.sources` + `faker`). Training is capped at 1x's number of steps
at 10x and 100x (throughput is measured, not accuracy); encode, consolidate, corpus and render process
every row. Per stage: wall time, rows/s, peak host RAM, disk written, beside the planner's prediction; the
disk of results/ is sampled through the run (its peak against what stays at the end); the growth
exponent of time and disk in rows between consecutive scales (1 = linear); RSS against 1x (flat = bounded).

    python bench/growth.py --scales 17100 171000 1710000 --out docs/sweeps/growth.json --workdir /tmp/growth

`--replan REPORT` recomputes only the planner's side of an earlier report with the planner as it is now (the
plan needs the config and the shipped sources, nothing measured), for a planner changed after the runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
STAGES = ("corpus", "render", "train_teacher", "encode", "consolidate", "train_student")
BATCH = 64


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


class DiskSampler(threading.Thread):
    """Peak bytes under results/ (every `every` seconds) while the workflow runs."""

    def __init__(self, root: Path, every: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.root, self.every, self.peak, self.done = root, every, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.peak = max(self.peak, disk_bytes(self.root))
            except FileNotFoundError:  # a file renamed or deleted while walking
                pass
            self.done.wait(self.every)


def config_for(rows: int, base_rows: int, steps: dict[str, int]) -> dict:
    """The scale's overrides: corpus size, Faker filling the real text, training capped at 1x's steps."""
    train_rows = int(rows * 0.8)
    cfg = {"corpus": {"num_samples": rows, "sources": ["firefox", "mediawiki", "handbook", "debconf", "faker"]},
           "engine": {"progress": False}}
    if rows != base_rows:
        cfg["teacher"] = {"train": {"epochs": steps["teacher"] * BATCH / train_rows}}
        cfg["student"] = {"train": {"epochs": steps["student"] * BATCH / train_rows}}
    return cfg


def snakemake(workdir: Path, *targets: str) -> float:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(REPO / "config.yaml"), str(workdir / "scale.yaml"), "--cores", "2", *targets]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(targets)} failed in {workdir}:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def stage_rows(workdir: Path, plan: dict) -> dict[str, dict]:
    """Per stage, summed over its jobs: wall (job-seconds: the work, whatever ran in parallel), rows, peak
    host bytes (the largest job), disk written, and the planner's predictions for the same jobs."""
    out = {}
    planned = {s["key"]: s for s in plan["stages"]}
    for stage in STAGES:
        jobs = sorted((workdir / "results" / "metrics" / stage).glob("*.json"))
        ms = [json.loads(p.read_text()) for p in jobs]
        preds = [planned.get(f"{stage}/{p.stem}", {}) for p in jobs]
        walls = [p.get("wall_s") for p in preds]
        out[stage] = {"jobs": len(ms), "wall_s": sum(m["wall_s"] for m in ms), "rows": sum(m.get("samples", 0) for m in ms),
                      "peak_host_bytes": max(m["peak_host_bytes"] for m in ms),
                      "disk_bytes": sum(m.get("disk_written_bytes", 0) for m in ms),
                      "predicted_host_bytes": max((p.get("peak_host_bytes", 0) for p in preds), default=None),
                      "predicted_disk_bytes": sum(p.get("disk_written_bytes", 0) for p in preds),
                      "predicted_wall_s": sum(walls) if walls and None not in walls else None}
    return out


def run_scale(rows: int, base_rows: int, steps: dict[str, int], root: Path) -> dict:
    workdir = root / f"rows-{rows}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "scale.yaml").write_text(yaml.safe_dump(config_for(rows, base_rows, steps)))
    snakemake(workdir, "results/plan.json")
    plan = json.loads((workdir / "results" / "plan.json").read_text())
    sampler = DiskSampler(workdir / "results")
    sampler.start()
    wall = snakemake(workdir, "train")
    sampler.done.set()
    sampler.join()
    return {"rows": rows, "train_target_s": wall, "stages": stage_rows(workdir, plan),
            "disk_peak_bytes": sampler.peak, "disk_final_bytes": disk_bytes(workdir / "results"),
            "cache_bytes": disk_bytes(workdir / "results" / "cache"),
            "planned_disk_peak_bytes": plan.get("disk_peak_bytes"), "planned_disk_final_bytes": plan.get("disk_final_bytes")}


def exponents(a: dict, b: dict) -> dict[str, dict]:
    """d log(y) / d log(rows) between two scales, for time and disk per stage; RSS as a ratio to the smaller."""
    k = math.log(b["rows"] / a["rows"])
    out = {}
    for stage in STAGES:
        sa, sb = a["stages"][stage], b["stages"][stage]
        out[stage] = {"time": math.log(sb["wall_s"] / sa["wall_s"]) / k if sa["wall_s"] > 0 else None,
                      "disk": math.log(sb["disk_bytes"] / sa["disk_bytes"]) / k if sa["disk_bytes"] > 0 else None,
                      "rss_ratio": sb["peak_host_bytes"] / sa["peak_host_bytes"]}
    return out


def replan(report: dict, root: Path) -> dict:
    """The same measurements beside the current planner's predictions."""
    from pixelpipe.config.resolve import load_config
    from pixelpipe.plan.workflow import plan_workflow

    for scale in report["scales"]:
        workdir = root / f"rows-{scale['rows']}"
        cfg = load_config(str(REPO / "config.yaml"), yaml.safe_load((workdir / "scale.yaml").read_text()))
        plan = json.loads(json.dumps(plan_workflow(cfg), default=str))
        (workdir / "results" / "plan.replanned.json").write_text(json.dumps(plan, indent=1) + "\n")
        scale["stages"] = stage_rows(workdir, plan)
        scale["planned_disk_peak_bytes"], scale["planned_disk_final_bytes"] = plan["disk_peak_bytes"], plan["disk_final_bytes"]
    scales = report["scales"]
    report["exponents"] = {f"{a['rows']}->{b['rows']}": exponents(a, b) for a, b in zip(scales, scales[1:])}
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[17100, 171000, 1710000])
    ap.add_argument("--workdir", default="/tmp/growth")
    ap.add_argument("--out", default=None)
    ap.add_argument("--replan", default=None, help="an earlier report: re-predict its scales with today's planner")
    args = ap.parse_args()
    root = Path(args.workdir)
    if args.replan:
        report = replan(json.loads(Path(args.replan).read_text()), root)
        Path(args.out or args.replan).write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps(report["exponents"], indent=1))
        return
    results = []
    steps: dict[str, int] = {}
    for rows in args.scales:
        results.append(run_scale(rows, args.scales[0], steps, root))
        if not steps:  # 1x trains its full schedule; the larger scales take as many steps
            first = root / f"rows-{rows}" / "results" / "metrics"
            steps = {role: json.loads((first / f"train_{role}" / f"{role}.json").read_text())["resolved"]["total_steps"]
                     for role in ("teacher", "student")}
        print(json.dumps(results[-1], indent=1), flush=True)
    report = {"scales": results, "training_steps_at_larger_scales": steps,
              "exponents": {f"{a['rows']}->{b['rows']}": exponents(a, b) for a, b in zip(results, results[1:])},
              "machine": {"cores": os.cpu_count(), "load_average": os.getloadavg()}}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["exponents"], indent=1))


if __name__ == "__main__":
    main()
