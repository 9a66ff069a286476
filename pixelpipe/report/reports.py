"""Memory and time reports: every stage's prediction against its measurement, with plots.

Inputs are only files the stages already wrote, each declared by the report
rule: results/plan.json (the planner's predictions, made once before the
stages ran), results/metrics/{rule}/{name}.json (StageMeter: what each stage
measured), benchmarks/{rule}/{name}.tsv (Snakemake's own benchmark:), the
models' config.json and metrics.csv, and the cache manifests. Every number is labelled as measured
or predicted; error % = (predicted - measured) / measured.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

from ..config.stages import STAGE_RULES
from ..core.fmt import fmt_bytes, fmt_pct, fmt_seconds
from ..core.io import read_json, write_json, write_text
from ..plan.timefactors import RULE_KIND, TIME_FACTORS_VERSION, cpu_model, fit, machine_key, save_time_factors
from .summary import summary_markdown_lines

RULE_ORDER = list(STAGE_RULES)
# resource -> (label, unit kind)
RESOURCES = {
    "peak_host_bytes": ("peak host RAM (main anonymous RSS + workers' USS)", "bytes"),
    "disk_written_bytes": ("disk written", "bytes"),
    "peak_gpu_allocated_bytes": ("peak GPU allocated", "bytes"),
    "peak_gpu_reserved_bytes": ("peak GPU reserved", "bytes"),
    "checkpoint_bytes": ("checkpoints left on disk", "bytes"),
}
PLOTS = ("predicted_vs_measured.png", "time_per_rule.png", "train_breakdown.png", "throughput.png",
         "curves.png", "disk_over_dag.png")


def machine_description() -> str:
    """CPU model, cores and RAM (and the GPU when CUDA is present): which machine measured this."""
    desc = f"{cpu_model()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    try:
        import torch

        if torch.cuda.is_available():
            desc += f", {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return desc


def _rule_key(rule: str) -> int:
    return RULE_ORDER.index(rule) if rule in RULE_ORDER else len(RULE_ORDER)


def load_metrics(metrics_paths: Iterable[str | os.PathLike],
                 benchmark_paths: Iterable[str | os.PathLike] = ()) -> list[dict]:
    """The StageMeter JSONs the report rule declares, each with its job's Snakemake benchmark row
    (`benchmarks/{rule}/{name}.tsv` pairs with `results/metrics/{rule}/{name}.json`), in DAG order."""
    benchmarks = {f"{Path(p).parent.name}/{Path(p).stem}": p for p in benchmark_paths}
    out = []
    for p in metrics_paths:
        m = read_json(p)
        m["name"] = Path(p).stem
        m["key"] = f"{m['rule']}/{m['name']}"
        bench = benchmarks.get(f"{Path(p).parent.name}/{m['name']}")
        m["snakemake_benchmark"] = read_benchmark_tsv(bench) if bench else None
        out.append(m)
    return sorted(out, key=lambda m: (_rule_key(m["rule"]), m.get("started_at", 0), m["name"]))


def read_benchmark_tsv(path: str | os.PathLike) -> dict | None:
    """The last row of a Snakemake `benchmark:` file (None when it is empty)."""
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {k: _num(v) for k, v in rows[-1].items()} if rows else None


def _num(v: str) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def err_pct(pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas in (None, 0):
        return None
    return 100.0 * (pred - meas) / meas


def compare(metrics: list[dict], plan: dict) -> list[dict]:
    """One row per stage: {resource: {predicted, measured, error_pct}} for the resources both sides have."""
    planned = {s["key"]: s for s in plan["stages"]}
    rows = []
    for m in metrics:
        pred = planned.get(m["key"], {})
        row = {"key": m["key"], "rule": m["rule"], "name": m["name"], "resources": {}}
        for res in list(RESOURCES) + ["wall_s"]:
            if res in m or res in pred:
                row["resources"][res] = {"predicted": pred.get(res), "measured": m.get(res),
                                         "error_pct": err_pct(pred.get(res), m.get(res))}
        rows.append(row)
    return rows


def disk_over_dag(metrics: list[dict], plan: dict) -> list[dict]:
    """Cumulative disk after each job (finish order): encoded shards leave when their split consolidates."""
    planned = {s["key"]: s for s in plan["stages"]}
    events = sorted(metrics, key=lambda m: m.get("finished_at", 0))
    meas = pred = 0.0  # stage outputs plus the checkpoints training leaves behind
    encoded: dict[str, list[tuple[float, float]]] = {}
    out = []
    for m in events:
        plan_m = planned.get(m["key"], {})
        p = plan_m.get("disk_written_bytes", 0)
        meas += m.get("disk_written_bytes", 0) + m.get("checkpoint_bytes", 0)
        pred += p + plan_m.get("checkpoint_bytes", 0)
        if m["rule"] == "encode":
            encoded.setdefault(m["name"].split("-")[0], []).append((m.get("disk_written_bytes", 0), p))
        if m["rule"] == "consolidate":
            for dm, dp in encoded.pop(m["name"], []):
                meas -= dm
                pred -= dp
        out.append({"after": m["key"], "measured_bytes": meas, "predicted_bytes": pred,
                    "t": m.get("finished_at")})
    return out


def _fmt(res: str, v: float | None) -> str:
    return fmt_seconds(v) if res == "wall_s" else fmt_bytes(v)


def memory_markdown(rows: list[dict], plan: dict, machine: str, tolerance: float) -> str:
    lines = ["# Memory and disk: predicted vs measured", "",
             f"Measured on: {machine}. Predicted: `pixelpipe.plan` from the config alone, before the stage ran. "
             f"Error = (predicted - measured) / measured; goal ±{tolerance:.0f} %.", "",
             "| stage | resource | predicted | measured | error |", "|---|---|---|---|---|"]
    for r in rows:
        for res, v in r["resources"].items():
            if res == "wall_s" or (v["measured"] is None and v["predicted"] is None):
                continue
            flag = "" if v["error_pct"] is None or abs(v["error_pct"]) <= tolerance else " ⚠"
            lines.append(f"| {r['key']} | {RESOURCES[res][0]} | {_fmt(res, v['predicted'])} | "
                         f"{_fmt(res, v['measured'])} | {fmt_pct(v['error_pct'])}{flag} |")
    lines += ["", "## Predicted disk by artifact (plan)", "", "| artifact | predicted |", "|---|---|"]
    lines += [f"| {k} | {fmt_bytes(v)} |" for k, v in plan["disk"].items()]
    lines += [f"| peak, upper bound | {fmt_bytes(plan['disk_peak_bytes'])} |", ""]
    return "\n".join(lines)


def time_markdown(rows: list[dict], metrics: list[dict], machine: str, plan: dict | None = None,
                  fitted: dict | None = None) -> str:
    plan = plan or {}
    run = plan.get("run", {})
    planned = {s["key"]: s for s in plan.get("stages", [])}
    lines = ["# Time per stage", "", f"Measured on: {machine}. `wall` is StageMeter's (the stage body); "
             "`snakemake s` is Snakemake's benchmark (the whole job, interpreter start included); "
             "`predicted` is the planner's, made before the run: the published model scaled by this machine's "
             "time factor where it had one (`factor from`), times `shared` (how much the jobs Snakemake ran beside "
             "it shared its cores, as scheduled).", "",
             "| stage | samples | measured wall | snakemake s | measured samples/s | predicted wall | error | factor from "
             "| shared |", "|---|---|---|---|---|---|---|---|---|"]
    by_key = {m["key"]: m for m in metrics}
    for r in rows:
        m = by_key[r["key"]]
        w = r["resources"].get("wall_s", {})
        b = m["snakemake_benchmark"]
        t = planned.get(r["key"], {}).get("detail", {}).get("time", {})
        lines.append(f"| {r['key']} | {m.get('samples', '-')} | {m['wall_s']:.2f} s | "
                     f"{b['s']:.2f} s | " if b else f"| {r['key']} | {m.get('samples', '-')} | {m['wall_s']:.2f} s | - | ")
        lines[-1] += (f"{m['samples_per_s']:.0f} | " if m.get("samples_per_s") else "- | ")
        lines[-1] += (f"{_fmt('wall_s', w.get('predicted'))} | {fmt_pct(w.get('error_pct'))} | "
                      f"{t.get('factor_from', '-')} | {'x%.2f' % t['contention'] if 'contention' in t else '-'} |")
    if run:
        lines += ["", "## The plan's time factors", "",
                  f"Machine key: `{run.get('machine')}`; time factors file: `{run.get('time_factors_file') or 'none'}`; "
                  f"rules with factors measured on this machine when the plan was made: "
                  f"{', '.join(run.get('rules_with_factors') or []) or 'none (the published model)'}. Predicted run: "
                  f"{run.get('wall_s')} s on --cores {run.get('cores')} ({run.get('machine_cores')} cores here)."]
    if fitted:
        lines += ["", "## Time factors fitted on this run (merged into the time factors file)", "",
                  "Error = median |predicted - measured| / measured over the rule's jobs: `published` is the model "
                  "before any time factor, `with factor` with this run's factor and the measured sharing of cores.", "",
                  "| rule | kind | factor | jobs | error published | error with factor | process overhead |",
                  "|---|---|---|---|---|---|---|"]
        for rule, f in sorted(fitted.items(), key=lambda x: _rule_key(x[0])):
            over = f"{f['overhead_s']:.1f} s" if f.get("overhead_s") is not None else "-"
            lines.append(f"| {rule} | {RULE_KIND.get(rule, '-')} | {f['factor']:.3f} | {f['jobs']} | "
                         f"{f['error_before_pct']:.0f} % | {f['error_after_pct']:.0f} % | {over} |")
    for m in metrics:
        if m.get("components"):
            total = sum(c["seconds"] for c in m["components"].values()) or 1.0
            lines += ["", f"## {m['key']}: time by component (measured)", "", "| component | seconds | share |", "|---|---|---|"]
            lines += [f"| {k} | {c['seconds']:.3f} | {100 * c['seconds'] / total:.1f} % |" for k, c in m["components"].items()]
            parts = m.get("forward_parts") or {}
            if parts:
                lines += ["", "forward by model part (measured, module hooks):", "", "| part | seconds | share of forward |",
                          "|---|---|---|"]
                lines += [f"| {k} | {c['seconds']:.3f} | {100 * c['share']:.1f} % |" for k, c in parts.items()]
    return "\n".join(lines) + "\n"


def read_curves(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as f:
        return [{k: _num(v) if v != "" else None for k, v in row.items()} for row in csv.DictReader(f)]


# ---- plots --------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _pyplot().close(fig)


def plot_predicted_vs_measured(path: Path, rows: list[dict]) -> None:
    """One panel per resource: the planner's prediction beside StageMeter's measurement, per job."""
    plt = _pyplot()
    resources = [r for r in RESOURCES if any(row["resources"].get(r, {}).get("measured") for row in rows)]
    fig, axes = plt.subplots(1, len(resources), figsize=(6 * len(resources), 0.35 * len(rows) + 2), squeeze=False)
    for ax, res in zip(axes[0], resources):
        keys = [r["key"] for r in rows if res in r["resources"]]
        pred = [(r["resources"][res]["predicted"] or 0) / 2**20 for r in rows if res in r["resources"]]
        meas = [(r["resources"][res]["measured"] or 0) / 2**20 for r in rows if res in r["resources"]]
        y = range(len(keys))
        ax.barh([i - 0.2 for i in y], pred, 0.4, label="predicted", color="tab:orange")
        ax.barh([i + 0.2 for i in y], meas, 0.4, label="measured", color="tab:blue")
        ax.set_yticks(list(y), keys, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("MiB")
        if res == "disk_written_bytes":
            ax.set_xscale("log")
        ax.set_title(RESOURCES[res][0], fontsize=9)
        ax.legend(fontsize=7)
    _save(fig, path)


def plot_time_per_rule(path: Path, rows: list[dict], metrics: list[dict]) -> None:
    """Measured wall time summed per rule, with the planner's indicative prediction where it has one."""
    plt = _pyplot()
    by_rule: dict[str, list[float]] = {}
    for m in metrics:
        by_rule.setdefault(m["rule"], []).append(m["wall_s"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(by_rule)
    ax.bar(names, [sum(v) for v in by_rule.values()], color="tab:blue", label="measured (sum over jobs)")
    pred: dict[str, float] = {}
    for r in rows:
        p = r["resources"].get("wall_s", {}).get("predicted")
        if p:
            pred[r["rule"]] = pred.get(r["rule"], 0) + p
    ax.scatter([n for n in names if n in pred], [pred[n] for n in names if n in pred], color="tab:orange", zorder=3,
               label="predicted")
    ax.set_ylabel("seconds")
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    ax.legend(fontsize=8)
    ax.set_title("time per rule")
    _save(fig, path)


def _component_seconds(m: dict, c: str) -> float:
    """Seconds of one bar segment: a forward part, the forward's unattributed rest, or a step component."""
    if c.startswith("forward."):
        return m.get("forward_parts", {}).get(c.split(".", 1)[1], {}).get("seconds", 0.0)
    if c == "forward" and m.get("forward_parts"):
        parts = sum(v["seconds"] for v in m["forward_parts"].values())
        return max(0.0, m["components"].get("forward", {}).get("seconds", 0.0) - parts)
    return m.get("components", {}).get(c, {}).get("seconds", 0.0)


def plot_train_breakdown(path: Path, metrics: list[dict]) -> None:
    """Where training (and one encode job) spent its time, by step component and forward part."""
    plt = _pyplot()
    trains = [m for m in metrics if m["rule"].startswith("train_")]
    trains += [m for m in metrics if m["rule"] == "encode" and m.get("components")][:1]
    comps = sorted({c for m in trains for c in m.get("components", {})}
                   | {f"forward.{p}" for m in trains for p in m.get("forward_parts", {})})
    has_parts = any(x.startswith("forward.") for x in comps)
    comps = list(dict.fromkeys([c for c in comps if not (c == "forward" and has_parts)]
                               + (["forward"] if "forward" in comps else [])))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    left = [0.0] * len(trains)
    cmap = plt.get_cmap("tab20")
    for j, c in enumerate(comps):
        vals = [_component_seconds(m, c) for m in trains]
        label = "forward (rest; all of it without parts)" if c == "forward" and has_parts else c
        ax.barh(range(len(trains)), vals, left=left, label=label, color=cmap(j % 20))
        left = [a + b for a, b in zip(left, vals)]
    ax.set_yticks(range(len(trains)), [m["key"] for m in trains], fontsize=8)
    ax.set_xlabel("seconds (measured)")
    ax.set_title("training step (and one encode job) by component")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    _save(fig, path)


def plot_throughput(path: Path, metrics: list[dict]) -> None:
    """Samples per second of every job that reports one."""
    plt = _pyplot()
    thr = [m for m in metrics if m.get("samples_per_s")]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(thr) + 1.5))
    ax.barh([m["key"] for m in thr], [m["samples_per_s"] for m in thr], color="tab:green")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("samples / s (measured, stage wall time)")
    ax.set_title("throughput")
    _save(fig, path)


def plot_curves(path: Path, results: Path) -> None:
    """Loss and accuracy per optimizer step of the teacher and the student, with their test points."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for role, style in (("teacher", "-"), ("student", "--")):
        rows_c = read_curves(results / role / "metrics.csv")
        for split, color in (("train", "tab:blue"), ("val", "tab:orange")):
            for ax, key in zip(axes, ("loss", "accuracy")):
                pts = [r for r in rows_c if r["split"] == split and r.get(key) is not None]
                if pts:
                    ax.plot([r["step"] for r in pts], [r[key] for r in pts], style, marker="o", color=color,
                            label=f"{role} {split}")
        test = [r for r in rows_c if r["split"] == "test"]
        if test:
            axes[1].scatter([test[-1]["step"]], [test[-1]["accuracy"]], marker="*", s=80, label=f"{role} test")
    axes[0].set_title("loss (measured)")
    axes[1].set_title("accuracy (measured)")
    for ax in axes:
        ax.set_xlabel("optimizer step")
        ax.legend(fontsize=7)
    _save(fig, path)


def plot_disk_over_dag(path: Path, disk: list[dict]) -> None:
    """Bytes on disk after each finished job, measured against the planner's running prediction."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    x = range(len(disk))
    ax.step(x, [d["measured_bytes"] / 2**20 for d in disk], where="post", label="measured")
    ax.step(x, [d["predicted_bytes"] / 2**20 for d in disk], where="post", linestyle="--", label="predicted")
    ax.set_xticks(list(x), [d["after"] for d in disk], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("MiB on disk (outputs + checkpoints)")
    ax.set_title("disk usage over the DAG (jobs in finish order)")
    ax.legend(fontsize=8)
    _save(fig, path)


def make_plots(out: Path, rows: list[dict], metrics: list[dict], disk: list[dict], results: Path) -> None:
    """Every figure of the report, one function each."""
    plot_predicted_vs_measured(out / "predicted_vs_measured.png", rows)
    plot_time_per_rule(out / "time_per_rule.png", rows, metrics)
    plot_train_breakdown(out / "train_breakdown.png", metrics)
    plot_throughput(out / "throughput.png", metrics)
    plot_curves(out / "curves.png", results)
    plot_disk_over_dag(out / "disk_over_dag.png", disk)


def summary_markdown(rows: list[dict], metrics: list[dict], plan: dict, machine: str, tolerance: float,
                     results: Path) -> str:
    worst: dict[str, tuple[float, str]] = {}
    for r in rows:
        for res, v in r["resources"].items():
            if v["error_pct"] is not None and abs(v["error_pct"]) >= abs(worst.get(res, (0.0, ""))[0]):
                worst[res] = (v["error_pct"], r["key"])
    total_wall = sum(m["wall_s"] for m in metrics)
    lines = ["# pixelpipe run summary", "", f"Machine: {machine}", "",
             f"- stages measured: {len(metrics)} ({', '.join(sorted({m['rule'] for m in metrics}, key=_rule_key))})",
             f"- summed stage wall time (measured): {total_wall:.1f} s",
             f"- predicted disk peak (upper bound): {fmt_bytes(plan['disk_peak_bytes'])}", ""]
    lines += ["## Models (measured on the test split)", "", *summary_markdown_lines(results), ""]
    lines += ["", f"## Largest prediction error per resource (goal ±{tolerance:.0f} %)", "",
              "| resource | largest error | stage | within goal |", "|---|---|---|---|"]
    for res, (e, key) in worst.items():
        label = RESOURCES[res][0] if res in RESOURCES else "wall time"
        ok = "yes" if abs(e) <= tolerance else ("no (time is indicative)" if res == "wall_s" else "no")
        lines.append(f"| {label} | {e:+.1f} % | {key} | {ok} |")
    lines += ["", "Details: memory.md, time.md; plots: " + ", ".join(PLOTS), ""]
    return "\n".join(lines)


def write_reports(metrics_paths: Iterable[str | os.PathLike], benchmark_paths: Iterable[str | os.PathLike],
                  results: str | os.PathLike, plan: dict, out_dir: str | os.PathLike, tolerance: float = 15.0,
                  time_factors_file: str | os.PathLike | None = None) -> dict:
    """`plan` is what pixelpipe.plan predicted (results/plan.json); `metrics_paths` and `benchmark_paths` are
    every job's StageMeter JSON and Snakemake benchmark; `results` holds the models' metrics and manifests.
    The time factors fitted on this run go to time_factors.json beside the reports and, merged, into
    `time_factors_file` (the machine's, kept across results directories) when one is given."""
    results, out = Path(results), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = load_metrics(metrics_paths, benchmark_paths)
    rows = compare(metrics, plan)
    disk = disk_over_dag(metrics, plan)
    machine = machine_description()
    write_json(out / "memory.json", {"machine": machine, "tolerance_pct": tolerance,
                                     "note": "predicted: pixelpipe.plan before the stage ran; measured: StageMeter",
                                     "stages": [{**r, "resources": {k: v for k, v in r["resources"].items() if k != "wall_s"}}
                                                for r in rows],
                                     "disk_plan": plan["disk"], "disk_peak_predicted_bytes": plan["disk_peak_bytes"],
                                     "disk_over_dag": disk})
    times = [{"key": r["key"], "rule": r["rule"], "wall_s": r["resources"].get("wall_s"),
              "samples": m.get("samples"), "samples_per_s_measured": m.get("samples_per_s"),
              "snakemake_benchmark": m["snakemake_benchmark"], "components": m.get("components"),
              "forward_parts": m.get("forward_parts")} for r, m in zip(rows, metrics)]
    write_json(out / "time.json", {"machine": machine, "stages": times})
    write_text(out / "memory.md", memory_markdown(rows, plan, machine, tolerance))
    run = plan.get("run", {})
    factors = fit(plan, metrics, run.get("machine_cores") or os.cpu_count() or 1)
    fitted = {r: vars(f) for r, f in factors.items()}
    key = run.get("machine") or machine_key()
    write_json(out / "time_factors.json", {"version": TIME_FACTORS_VERSION, "machines": {key: {"rules": fitted}}})
    if time_factors_file:  # written even when nothing was fitted: the report rule declares it as an output
        save_time_factors(time_factors_file, key, factors)
    write_text(out / "time.md", time_markdown(rows, metrics, machine, plan, fitted))
    write_text(out / "summary.md", summary_markdown(rows, metrics, plan, machine, tolerance, results))
    make_plots(out, rows, metrics, disk, results)
    return {"rows": rows, "plan": plan}
