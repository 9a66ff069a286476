"""Run the tiny workflow once per test session (shared by test_plan and test_report)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "configs" / "tiny.yaml"
_DONE: dict[str, Path] = {}


def snakemake(workdir: Path, *args: str, env: dict | None = None, configfile: Path = TINY) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(configfile), "--cores", "2", *args]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=900)


def tiny_workdir(tmp_path_factory) -> Path:
    """The tiny config run through the default target (student + reports), once."""
    if "dir" not in _DONE:
        workdir = tmp_path_factory.mktemp("tiny_run")
        proc = snakemake(workdir)
        assert proc.returncode == 0, proc.stderr[-4000:]
        _DONE["dir"] = workdir
    return _DONE["dir"]
