"""Training on several nodes through SLURM: one torchrun per node, started by srun, meeting at a c10d rendezvous.

snakemake-executor-plugin-slurm submits a training job with `engine.nodes: N > 1` as `sbatch --nodes=N --ntasks=N`
(the rule's `mpi` resource: the plugin's jobstep then runs the job in the batch step on the first node instead of
inside a one-task srun). The job's process finds its allocation and runs, from there,

    srun --nodes=N --ntasks=N --ntasks-per-node=1 --cpus-per-task=C --kill-on-bad-exit=1 \\
        python -m torch.distributed.run --nnodes=N --nproc_per_node=P --rdzv_backend=c10d \\
        --rdzv_endpoint=FIRST_NODE:PORT --rdzv_id=JOB_ID -m pixelpipe.train.ddp_launch SPEC

The command is the same on every node: the agent on the first node hosts the c10d store, the rendezvous numbers the
nodes and the N x P ranks, and each rank joins the process group as under one torchrun (pixelpipe.core.distributed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# The c10d store's port on the first node: a function of the job id, so two jobs that share a first node do not
# collide (unless their ids are a multiple of PORT_SPAN apart), and below Linux's ephemeral range (32768-60999).
PORT_BASE, PORT_SPAN = 15000, 15000


class MultiNodeError(RuntimeError):
    """engine.nodes > 1 where it cannot run: outside SLURM, or an allocation of another size (one line)."""


@dataclass(frozen=True)
class Allocation:
    """The SLURM job a multi-node training runs in: its id and nodes (the first hosts the rendezvous)."""

    job_id: str
    hosts: tuple[str, ...]
    address: str  # the first node's address as SLURM reaches it (NodeAddr; the node name on most clusters)

    @property
    def port(self) -> int:
        return PORT_BASE + int(self.job_id) % PORT_SPAN


def slurm_output(args: list[str]) -> str:
    """stdout of a SLURM client command (squeue, scontrol), stripped; a failure is one line naming the command."""
    try:
        proc = subprocess.run(args, check=False, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise MultiNodeError(f"engine.nodes > 1 needs the SLURM client commands: '{args[0]}' is not on PATH") from None
    if proc.returncode != 0:
        raise MultiNodeError(f"engine.nodes > 1: `{' '.join(args)}` failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def node_address(host: str, run: Callable[[list[str]], str] = slurm_output) -> str:
    """Where the other nodes reach `host`: its NodeAddr in SLURM (several node names may share one host)."""
    m = re.search(r"\bNodeAddr=(\S+)", run(["scontrol", "-o", "show", "node", host]))
    return m.group(1) if m else host


def allocation(nodes: int, env: Mapping[str, str] = os.environ,
               run: Callable[[list[str]], str] = slurm_output) -> Allocation:
    """The SLURM job this process runs in, checked against `engine.nodes`.

    snakemake-executor-plugin-slurm's jobstep keeps SLURM_JOB_ID but drops the other SLURM_* variables, so the
    node list comes from squeue when SLURM_JOB_NODELIST is gone.
    """
    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id:
        raise MultiNodeError(f"engine.nodes is {nodes}, but this job runs outside SLURM (no SLURM_JOB_ID): "
                             "several nodes train only as a SLURM job (snakemake --profile profiles/slurm); "
                             "set engine.nodes: 1 to train on this machine")
    nodelist = env.get("SLURM_JOB_NODELIST") or run(["squeue", "-h", "-j", job_id, "-o", "%N"])
    hosts = tuple(run(["scontrol", "show", "hostnames", nodelist]).split())
    if len(hosts) != nodes:
        raise MultiNodeError(f"engine.nodes is {nodes}, but SLURM job {job_id} has {len(hosts)} node(s) "
                             f"({nodelist}): the training rules ask for engine.nodes through the `nodes` resource; "
                             "remove any `nodes` your profile sets for train_teacher/train_student")
    return Allocation(job_id, hosts, node_address(hosts[0], run))


def torchrun_agent(nodes: int, processes: int, endpoint: str, rdzv_id: str) -> list[str]:
    """One node's torchrun (the same on every node): `processes` ranks, c10d rendezvous of `nodes` agents."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--nproc_per_node={processes}",
            "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", f"--rdzv_id={rdzv_id}"]


def srun_torchrun_command(alloc: Allocation, processes: int, threads: int, spec: Path) -> list[str]:
    """One torchrun per node of `alloc` (each with `processes` ranks and the node's `threads` cores), by srun."""
    n = len(alloc.hosts)
    srun = ["srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", f"--cpus-per-task={threads}",
            "--kill-on-bad-exit=1"]
    agent = torchrun_agent(n, processes, f"{alloc.address}:{alloc.port}", alloc.job_id)
    return srun + agent + ["-m", "pixelpipe.train.ddp_launch", str(spec)]
