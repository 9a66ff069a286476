"""Time factors: per-machine factors on the planner's published time model, learned from the jobs a machine
has already run (results/metrics/*/*.json against results/plan.json).

Every job's predicted time is `startup_s + work_s x factor x contention`: `work_s` at the published rates
(walltime.py), `factor` this machine's measured ratio for the job's rule (1.0 where it has none), and
`contention` how much the job's cores are shared with the jobs Snakemake runs beside it (schedule.py). The
factors live in one small versioned JSON file (`time_factors.file`, default `time_factors.json` in the
working directory, outside results/ so it outlives a results directory and can be copied to a cluster),
keyed by machine: the CPU model and core count, or the GPU's name. The report rule writes it, the plan rule
reads it (rules/report.smk says how each declares it).

Not to be confused with calibration, which in this project means only the models' probabilities: the temperature
fit (train/calibrate.py) and the held-out calibration error (evaluate/calibration.py).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.cli import UserError

TIME_FACTORS_VERSION = 1
DEFAULT_FILE = "time_factors.json"  # the schema's default time_factors.file
# The file's name (and default) when its key was report.calibration: read while no time_factors.json exists beside it,
# so a machine's factors survive the rename (the next report writes them to time_factors.json).
LEGACY_FILE = "calibration.json"

# How a rule's work scales: what the report groups the factors by (training, inference, data: I/O and pandas).
RULE_KIND = {"corpus": "data", "render": "data", "consolidate": "data", "baseline": "data",
             "train_teacher": "training", "train_student": "training",
             "encode": "inference", "export_onnx": "inference", "quantize_onnx": "inference",
             "deploy_benchmark": "inference", "evaluate": "inference"}
# Measurements a rule keeps in the time factors file ([published start-up, published work, time alone] each): the
# factors are refitted over them whenever a run adds its own, so runs of different sizes separate the start-up.
KEEP_POINTS = 16


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo; the platform's processor string elsewhere)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key(cuda_name: str | None = None, cores: int | None = None) -> str:
    """Which machine a factor belongs to: `cpu: <model> x<cores>`, and `+ cuda: <GPU name>` where the jobs use one."""
    cpu = f"cpu: {cpu_model()} x{cores or os.cpu_count()}"
    return f"{cpu} + cuda: {cuda_name}" if cuda_name else cpu


@dataclass
class RuleFactor:
    """One rule's factor on one machine: the median over its measured jobs of (solo time - start-up) / work."""

    factor: float
    jobs: int
    error_before_pct: float  # median |error| of the published model on those jobs
    error_after_pct: float  # ... and with this factor (and the measured contention)
    overhead_s: float | None = None  # process start and imports: Snakemake's benchmark time less the stage body
    startup_s: float | None = None  # fitted start-up where the rule's jobs differ enough in size to separate it
    points: list = field(default_factory=list)  # [published start-up, published work, time alone] per job


@dataclass
class TimeFactors:
    """The factors for one machine (empty: the published model alone)."""

    machine: str
    rules: dict[str, RuleFactor] = field(default_factory=dict)
    source: str | None = None  # the file they came from

    def overhead(self, rule: str, default: float) -> float:
        f = self.rules.get(rule)
        return f.overhead_s if f and f.overhead_s is not None else default

    def startup(self, rule: str, published: float) -> float:
        f = self.rules.get(rule)
        return f.startup_s if f and f.startup_s is not None else published

    def factor(self, rule: str) -> tuple[float, str]:
        """(factor, where it came from) for a rule: its own, else the median of its kind's, else 1.0."""
        if rule in self.rules:
            return self.rules[rule].factor, f"measured ({self.rules[rule].jobs} jobs)"
        kind = [f.factor for r, f in self.rules.items() if RULE_KIND.get(r) == RULE_KIND.get(rule)]
        if kind:
            return statistics.median(kind), f"{RULE_KIND.get(rule)} jobs' median"
        return 1.0, "published default"


class TimeFactorsError(UserError):
    """A time factors file this pixelpipe cannot read; the message names it and what to do (one line, no traceback)."""


def readable_file(path: str | os.PathLike | None) -> Path | None:
    """The file the factors are read from: `path`, or while it does not exist and has the default name, the
    legacy calibration.json beside it; None when neither exists (or `path` is null)."""
    if not path:
        return None
    p = Path(path)
    if p.is_file():
        return p
    legacy = p.with_name(LEGACY_FILE)
    return legacy if p.name == DEFAULT_FILE and legacy.is_file() else None


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise TimeFactorsError(f"time factors file {path} cannot be read ({str(err).splitlines()[0]}): delete it "
                               "(the next run writes a new one)") from None
    if not isinstance(data, dict) or data.get("version") != TIME_FACTORS_VERSION:
        version = data.get("version") if isinstance(data, dict) else None
        raise TimeFactorsError(f"{path}: time factors version {version!r}, this pixelpipe reads "
                               f"{TIME_FACTORS_VERSION}: delete it (the next run writes a new one)")
    return data


def load_time_factors(path: str | os.PathLike | None, machine: str) -> TimeFactors:
    """This machine's factors from the time factors file (none there, or no file: an empty TimeFactors)."""
    source = readable_file(path)
    if source is None:
        return TimeFactors(machine)
    rules = _read(source).get("machines", {}).get(machine, {}).get("rules", {})
    return TimeFactors(machine, {r: RuleFactor(**v) for r, v in rules.items()}, str(source))


def interval_contention(jobs: list[dict], cores: int) -> list[float]:
    """Each job's mean core sharing over its run: max(1, sum of the running jobs' cores / machine cores),
    averaged over its wall time. `jobs` have started_at, finished_at and threads (cores each asks for).

    One sweep over the start and end times (sorted): the sharing is constant between two of them, its running
    integral is read at each job's start and end, so thousands of encode jobs cost no more than a sort."""
    import numpy as np

    if not jobs:
        return []
    starts = np.array([j["started_at"] for j in jobs], float)
    ends = np.array([j["finished_at"] for j in jobs], float)
    want = np.array([min(j.get("threads", 1), cores) for j in jobs], float)
    edges = np.unique(np.concatenate([starts, ends]))
    # demand on [edges[i], edges[i + 1]): the cores of the jobs started at or before edges[i] and not yet ended
    delta = np.zeros(len(edges))
    np.add.at(delta, np.searchsorted(edges, starts), want)
    np.add.at(delta, np.searchsorted(edges, ends), -want)
    sharing = np.maximum(1.0, np.cumsum(delta)[:-1] / cores)
    integral = np.concatenate([[0.0], np.cumsum(sharing * np.diff(edges))])
    span = ends - starts
    inside = integral[np.searchsorted(edges, ends)] - integral[np.searchsorted(edges, starts)]
    return [float(x) for x in np.where(span > 0, inside / np.where(span > 0, span, 1.0), 1.0)]


def fit(plan: Mapping[str, Any], metrics: Iterable[dict], cores: int) -> dict[str, RuleFactor]:
    """Per-rule factors from one run: its plan (each stage's startup_s and work_s) and its jobs' metrics."""
    by_key = {s["key"]: s for s in plan["stages"]}
    jobs = [m for m in metrics if m.get("status", "ok") == "ok" and "started_at" in m and "finished_at" in m]
    contention = interval_contention(jobs, cores)
    per_rule: dict[str, list[tuple[float, float, dict]]] = {}
    overheads: dict[str, list[float]] = {}
    for m, c in zip(jobs, contention):
        s = by_key.get(m["key"]) if "key" in m else None
        if not s or not s.get("work_s"):
            continue
        per_rule.setdefault(m["rule"], []).append((m["wall_s"], c, s))
        bench = m.get("snakemake_benchmark") or {}
        if isinstance(bench.get("s"), float):
            overheads.setdefault(m["rule"], []).append(max(0.0, bench["s"] - m["wall_s"]))
    fitted = {}
    for rule, rows in per_rule.items():
        points = [[s["startup_s"], s["work_s"], wall / c] for wall, c, s in rows]
        f, startup = factor_from_points(points)
        before, after = [], []
        for wall, c, s in rows:
            before.append(abs(s["startup_s"] + s["work_s"] - wall) / wall * 100)
            after.append(abs(((s["startup_s"] if startup is None else startup) + s["work_s"] * f) * c - wall) / wall * 100)
        over = overheads.get(rule)
        fitted[rule] = RuleFactor(round(f, 4), len(rows), round(statistics.median(before), 1),
                                  round(statistics.median(after), 1),
                                  round(statistics.median(over), 2) if over else None,
                                  None if startup is None else round(startup, 3),
                                  [[float(f"{x:.5g}") for x in pt] for pt in points])
    return fitted


def factor_from_points(points: list[list[float]]) -> tuple[float, float | None]:
    """(factor, fitted start-up or None) over [published start-up, published work, time alone] points: where their
    work spans at least a factor 2, a least-squares line (time alone = start-up + factor x work); else (one size
    cannot tell a fixed cost from a rate) the median factor over the published start-up."""
    points = [pt for pt in points if pt[1] > 0]
    if not points:
        return 1.0, None
    works = [w for _, w, _ in points]
    if len(points) >= 2 and max(works) >= 2 * min(works):
        solos = [t for *_, t in points]
        mw, ms = statistics.mean(works), statistics.mean(solos)
        rate = sum((w - mw) * (t - ms) for w, t in zip(works, solos)) / sum((w - mw) ** 2 for w in works)
        startup = ms - rate * mw
        if rate > 0 and startup >= 0:
            return rate, startup
    return statistics.median(max(t - s0, 0.05 * t) / w for s0, w, t in points), None


def save_time_factors(path: str | os.PathLike, machine: str, fitted: Mapping[str, RuleFactor]) -> dict:
    """Merge this run's factors into the file (the rules it measured replace that machine's; other machines and
    rules stay), atomically, starting from the legacy calibration.json while `path` does not exist yet; returns the
    whole file's content. The file is written even when nothing was fitted: the report rule declares it."""
    p = Path(path)
    source = readable_file(p)
    data = json.loads(source.read_text()) if source else {}
    if data.get("version") != TIME_FACTORS_VERSION:
        data = {"version": TIME_FACTORS_VERSION, "machines": {}}
    if fitted:
        _merge(data["machines"].setdefault(machine, {"rules": {}}), fitted)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(p)
    return data


def _merge(entry: dict, fitted: Mapping[str, RuleFactor]) -> None:
    """One machine's entry with this run's factors merged in (each rule refitted over its kept points)."""
    for rule, f in fitted.items():
        old = entry["rules"].get(rule, {})
        points = (old.get("points", []) + f.points)[-KEEP_POINTS:]
        factor, startup = factor_from_points(points) if points else (f.factor, f.startup_s)
        entry["rules"][rule] = {**vars(f), "factor": round(factor, 4), "points": points,
                                "startup_s": None if startup is None else round(startup, 3)}
    entry["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    entry["runs"] = entry.get("runs", 0) + 1

