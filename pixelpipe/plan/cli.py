"""The resource planner: what every stage will need, from the config and corpus size alone.

`python -m pixelpipe.plan --config config.yaml` prints the run's total wall time, peak RAM, peak disk and
longest job on this machine's calibration, then every job as a table (`--json`: in full), and runs the disk
preflight.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..core.fmt import fmt_bytes, fmt_seconds
from .preflight import DiskSpaceError, check_disk
from .workflow import plan_workflow


def format_summary(plan: dict) -> str:
    """The four numbers a user plans with, and where the time model's factors came from."""
    run = plan["run"]
    rules = run["calibrated_rules"]
    source = (f"calibrated on this machine for {len(rules)} rules ({run['calibration_file']})" if rules
              else "the published model (no run on this machine calibrated it yet)")
    shared = ", ".join(run["rules_sharing_cores"]) or "none"
    return "\n".join([
        f"machine:        {run['machine']} (--cores {run['cores']} on {run['machine_cores']} cores)",
        f"total wall:     {fmt_seconds(run['wall_s'])} (time model: {source})",
        f"peak RAM:       {fmt_bytes(run['peak_host_bytes_concurrent'])} (jobs running together; largest job "
        f"{fmt_bytes(plan['peak_host_bytes'])})",
        f"peak disk:      {fmt_bytes(plan['disk_peak_bytes'])} (upper bound)",
        f"longest job:    {run['longest_job']['key']}, {fmt_seconds(run['longest_job']['wall_s'])}",
        f"sharing cores:  {shared} (jobs Snakemake runs side by side on the same cores: their times include it)",
    ]) + "\n"


def format_plan(plan: dict) -> str:
    """The plan as a Markdown table (what `python -m pixelpipe.plan` prints)."""
    gpu = any(s.get("peak_gpu_allocated_bytes") for s in plan["stages"])
    head = ["stage", "samples", "peak host RAM", "disk written", "time"] + (["peak GPU alloc", "peak GPU reserved"] if gpu else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in plan["stages"]:
        row = [s["key"], str(s.get("samples", "")), fmt_bytes(s["peak_host_bytes"]), fmt_bytes(s["disk_written_bytes"]),
               f"{s['wall_s']:.1f} s" if s.get("wall_s") else "-"]
        if gpu:
            row += [fmt_bytes(s.get("peak_gpu_allocated_bytes")), fmt_bytes(s.get("peak_gpu_reserved_bytes"))]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| disk | bytes |", "|---|---|"]
    lines += [f"| {k} | {fmt_bytes(v)} |" for k, v in plan["disk"].items()]
    lines.append(f"| **peak (upper bound)** | **{fmt_bytes(plan['disk_peak_bytes'])}** |")
    lines.append(f"| after the run | {fmt_bytes(plan['disk_final_bytes'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from ..config.resolve import ConfigError, load_config

    ap = argparse.ArgumentParser(prog="python -m pixelpipe.plan", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="config YAML (default: schema defaults)")
    ap.add_argument("--json", action="store_true", help="print the full plan as JSON")
    ap.add_argument("--results", default="results", help="results directory for the disk check")
    ap.add_argument("--cores", type=int, default=None, help="the --cores you will give snakemake (default 4)")
    ap.add_argument("--calibration", default=None,
                    help="calibration file to plan with (default: the config's report.calibration)")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, {"report": {"calibration": args.calibration}} if args.calibration else None)
    except ConfigError as err:
        print(f"pixelpipe: {err}", file=sys.stderr)
        return 2
    plan = plan_workflow(cfg, cores=args.cores)
    print(json.dumps(plan, indent=2, default=str) if args.json else format_summary(plan) + "\n" + format_plan(plan))
    try:
        check_disk(cfg, args.results, plan=plan)
    except DiskSpaceError as err:
        print(f"WARNING: {err}", file=sys.stderr)
        return 1
    return 0
