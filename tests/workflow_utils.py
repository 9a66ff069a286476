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


def snakemake(workdir: Path, *args: str, overrides: dict | None = None, check: bool = True,
              env: dict | None = None) -> subprocess.CompletedProcess:
    configs = [str(TINY)]
    if overrides:
        extra = workdir / "override.yaml"
        extra.write_text(yaml.safe_dump(overrides))
        configs.append(str(extra))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", *configs, "--cores", "4", *args]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=full_env, timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def planned_jobs(workdir: Path, target: str = "train", overrides: dict | None = None) -> dict[str, int]:
    """Rule -> job count that a dry run would execute ({} when nothing is to be done)."""
    proc = snakemake(workdir, "--dry-run", target, overrides=overrides)
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
