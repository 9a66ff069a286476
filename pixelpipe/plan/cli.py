"""The resource planner: what every stage will need, from the config and corpus size alone.

`python -m pixelpipe.plan --config config.yaml` prints the run's total wall time, peak RAM, peak disk and
longest job with this machine's time factors, a warning under them for each that this machine cannot hold (exit
status 1 when the disk cannot), then every job as a table (`--json`: in full).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..core.cli import ArgumentParser, UserError, fail
from ..core.fmt import fmt_bytes, fmt_seconds
from .preflight import DiskSpaceError, check_plan_disk
from .workflow import plan_workflow


def ram_warning(plan: dict, total: int, available: int) -> str | None:
    """The warning when the run's peak RAM (the header's figure: jobs running together) exceeds this machine's
    memory, or what is available now; None when it fits."""
    peak, largest = plan["run"]["peak_host_bytes_concurrent"], plan["peak_host_bytes"]
    if peak <= available:
        return None
    where = (f"this machine's {fmt_bytes(total)} of RAM" if peak > total
             else f"the {fmt_bytes(available)} of RAM available now ({fmt_bytes(total)} in all)")
    hint = ("; its largest job fits: fewer --cores runs fewer jobs at once" if largest <= available
            else f"; its largest job alone needs {fmt_bytes(largest)}")
    return f"peak RAM {fmt_bytes(peak)} exceeds {where}{hint}"


def machine_memory() -> tuple[int, int]:
    """(total, available) bytes of this machine's RAM."""
    import psutil

    vm = psutil.virtual_memory()
    return vm.total, vm.available


def disk_warning(plan: dict, results: str) -> str | None:
    """The disk preflight's refusal (the header's peak against the free space of the results filesystem plus what
    results/ holds), or None when the run fits."""
    try:
        check_plan_disk(plan, results)
    except DiskSpaceError as err:
        return str(err)
    return None


def format_summary(plan: dict) -> str:
    """The four numbers a user plans with, and where the time model's factors came from."""
    run = plan["run"]
    rules = run["rules_with_factors"]
    source = (f"this machine's time factors for {len(rules)} rules ({run['time_factors_file']})" if rules
              else "the published model (no run on this machine has fitted time factors yet)")
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


def _parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m pixelpipe.plan", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="config YAML (default: schema defaults)")
    ap.add_argument("--json", action="store_true", help="print the full plan as JSON")
    ap.add_argument("--results", default="results", help="results directory for the disk check")
    ap.add_argument("--cores", type=int, default=None, help="the --cores you will give snakemake (default 4)")
    ap.add_argument("--time-factors", default=None,
                    help="time factors file to plan with (default: the config's time_factors.file)")
    return ap


def _load(args: argparse.Namespace) -> tuple[dict, str | None]:
    """(the resolved config, the corpus's warning if any); the ConfigError / CorpusError the workflow raises when
    it parses the DAG, so the planner refuses what `snakemake -n` refuses."""
    from ..config.resolve import load_config
    from ..data.corpus import builtin_shortfall, planned_split_sizes

    cfg = load_config(args.config, {"time_factors": {"file": args.time_factors}} if args.time_factors else None)
    return cfg, builtin_shortfall(cfg["corpus"], planned_split_sizes(cfg["corpus"]))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cores is not None and args.cores < 1:
        return fail("--cores must be >= 1")
    try:
        cfg, shortfall = _load(args)
        plan = plan_workflow(cfg, cores=args.cores)
    except UserError as err:  # a config, corpus or time factors file the run cannot use
        return fail(f"pixelpipe: {err}")
    disk = disk_warning(plan, args.results)
    warnings = [w for w in (shortfall, ram_warning(plan, *machine_memory()), disk) if w]
    if args.json:
        print(json.dumps({**plan, "warnings": warnings}, indent=2, default=str))
        for line in warnings:
            print(f"warning: {line}", file=sys.stderr)
    else:
        print(format_summary(plan) + "".join(f"WARNING:        {w}\n" for w in warnings) + "\n" + format_plan(plan))
    return 1 if disk else 0
