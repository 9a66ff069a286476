"""Run the real Snakefile in a scratch directory and read what it plans."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "configs" / "tiny.yaml"


def snakemake_command(workdir: Path, *args: str, overrides: dict | None = None, cores: int | None = 4) -> list[str]:
    """The command line of a Snakemake run on the tiny config in `workdir`; `cores=None` gives no --cores, as in
    `snakemake --unlock` or `snakemake --report`."""
    configs = [str(TINY)]
    if overrides:
        extra = workdir / "override.yaml"
        extra.write_text(yaml.safe_dump(overrides))
        configs.append(str(extra))
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--configfile", *configs, *(["--cores", str(cores)] if cores else []), *args]


def snakemake_env(env: dict | None = None) -> dict:
    """The environment the runs get: this checkout's package first."""
    return {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}


def snakemake(workdir: Path, *args: str, overrides: dict | None = None, check: bool = True,
              env: dict | None = None, cores: int | None = 4) -> subprocess.CompletedProcess:
    cmd = snakemake_command(workdir, *args, overrides=overrides, cores=cores)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=snakemake_env(env), timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def planned_jobs(workdir: Path, target: str = "train", overrides: dict | None = None,
                 cores: int | None = 4) -> dict[str, int]:
    """Rule -> job count that a dry run would execute ({} when nothing is to be done)."""
    proc = snakemake(workdir, "--dry-run", target, overrides=overrides, cores=cores)
    out = proc.stdout + proc.stderr
    if "Nothing to be done" in out:
        return {}
    m = re.search(r"Job stats:\n(.*?)\n\s*total\s+\d+", out, re.S)
    assert m, f"no job stats in dry-run output:\n{out[-3000:]}"
    jobs: dict[str, int] = collections.Counter()
    for line in m.group(1).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            jobs[parts[0]] = int(parts[1])
    return dict(jobs)
