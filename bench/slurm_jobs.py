"""Where the time of a SLURM run goes, job by job: queueing, the job's own start-up, the rule, the polling lag.

Reads the cluster's job history (squeue --states=all: the jobs slurmctld still remembers, MinJobAge) and
the rule times Snakemake's `benchmark:` files measured inside each job, for one workdir:

    python bench/slurm_jobs.py WORKDIR            (SLURM_CONF as for the run)

Per job: queued = submit -> start; overhead = job wall - rule seconds (the jobstep's Snakemake parsing
the workflow, srun); lag = from the end of the job that a submission waited for to that submission,
i.e. how late the executor's status poll noticed (approximated by the latest earlier job end).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
from datetime import datetime
from pathlib import Path


def history() -> list[dict]:
    fmt = "%A|%k|%T|%V|%S|%e"  # %A: one id per array task
    out = subprocess.run(["squeue", "--states=all", "--noheader", f"--format={fmt}"], capture_output=True,
                         text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        jobid, comment, state, *times = line.split("|")
        submit, start, end = (datetime.fromisoformat(t) for t in times)
        rows.append({"id": int(jobid), "tag": comment.removeprefix("rule_"), "state": state, "submit": submit,
                     "start": start, "end": end})
    return sorted(rows, key=lambda r: r["id"])


def rule_seconds(workdir: Path, tag: str) -> float | None:
    """The job's Snakemake benchmark (seconds of the rule itself, measured inside the job).

    Tags are `{rule}` or `{rule}_wildcards_{values}`; benchmarks live at benchmarks/{dir}/{name}.tsv, where
    dir is the rule (or, for the per-split render rules, its prefix) and name the wildcard values.
    """
    rule, _, wildcards = tag.partition("_wildcards_")
    prefix, _, suffix = rule.rpartition("_")
    for folder, name in ((rule, wildcards), (prefix, suffix)):
        files = sorted((workdir / "benchmarks" / folder).glob("*.tsv")) if folder else []
        match = [f for f in files if f.stem.replace("-", "_") == name] or (files if len(files) == 1 else [])
        if match:
            with open(match[0]) as f:
                return float(next(csv.DictReader(f, delimiter="\t"))["s"])
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    args = ap.parse_args()
    jobs = history()
    if not jobs:
        raise SystemExit("squeue --states=all lists no jobs: run this within MinJobAge of the run, with its SLURM_CONF")
    print("| job | queued s | job s | rule s | overhead s | poll lag s |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for j in jobs:
        wall = (j["end"] - j["start"]).total_seconds()
        rule = rule_seconds(args.workdir, j["tag"])
        ended = [o["end"] for o in jobs if o["end"] <= j["submit"]]
        lag = (j["submit"] - max(ended)).total_seconds() if ended else None
        print(f"| {j['tag']} | {(j['start'] - j['submit']).total_seconds():.0f} | {wall:.0f} | "
              f"{'' if rule is None else f'{rule:.1f}'} | {'' if rule is None else f'{wall - rule:.1f}'} | "
              f"{'' if lag is None else f'{lag:.0f}'} |")
    span = (max(j["end"] for j in jobs) - min(j["submit"] for j in jobs)).total_seconds()
    print(f"\n{len(jobs)} jobs, first submit to last end: {span:.0f} s")


if __name__ == "__main__":
    main()
