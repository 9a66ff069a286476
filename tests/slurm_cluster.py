"""A local SLURM cluster for the tests (one node, or several node entries on this host): .ci/slurm-up.sh starts it,
.ci/slurm-down.sh stops it by PID.

The tests skip (with the reason) where it cannot run: not Linux, not root, no SLURM binaries (CI
installs Debian's slurm-wlm with apt only where it can), no executor plugin, or a real SLURM set up.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
UP, DOWN = REPO / ".ci" / "slurm-up.sh", REPO / ".ci" / "slurm-down.sh"
BINARIES = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")
ETC_CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# One-node cluster written by pixelpipe"


def unavailable_reason() -> str | None:
    """Why a local cluster cannot be started here, or None when it can."""
    if sys.platform != "linux":
        return "the local SLURM cluster needs Linux"
    if os.geteuid() != 0:
        return "the local SLURM cluster needs root (slurmd runs the jobs)"
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return (f"SLURM binaries missing ({', '.join(missing)}): apt-get install slurm-wlm munge "
                "(.ci/run does where it is root and has apt-get)")
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm missing: pip install -r requirements-slurm.txt"
    if ETC_CONF.exists() and not ETC_CONF.read_text().startswith(MARKER):
        return f"{ETC_CONF} belongs to a real SLURM setup: the test cluster does not replace it"
    return None


@contextlib.contextmanager
def local_cluster(state_dir: Path, nodes: int = 1) -> Iterator[dict[str, str]]:
    """Start the cluster (`nodes` node entries on this host), yield the environment its clients need, stop it
    whatever happens."""
    proc = subprocess.run([str(UP), str(state_dir)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PIXELPIPE_SLURM_NODES": str(nodes)})
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"slurm-up.sh failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        yield {"SLURM_CONF": str(state_dir / "slurm.conf")}
    finally:
        subprocess.run([str(DOWN), str(state_dir)], capture_output=True, text=True, timeout=120)


def job_history(env: dict[str, str]) -> list[dict[str, str]]:
    """Every job slurmctld still remembers (MinJobAge): raw id (one per array task), name, state, comment (rule tag)."""
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%A|%j|%T|%k"], capture_output=True,
                         text=True, check=True, env={**os.environ, **env}).stdout
    keys = ("id", "name", "state", "comment")
    return [dict(zip(keys, line.split("|", 3))) for line in out.splitlines() if line.strip()]


def jobcomp_records(state_dir: Path) -> list[dict[str, str]]:
    """The cluster's own line per finished job (jobcomp/filetxt), as key=value dicts."""
    path = state_dir / "log" / "jobcomp.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in lines if line.strip()]


def rule_of(comment: str) -> str:
    """The plugin tags each job `rule_{name}` or `rule_{name}_wildcards_{values}`."""
    return comment.removeprefix("rule_").split("_wildcards_", 1)[0]
