"""Run a training stage in N processes under torchrun, from inside one Snakemake job.

The job's own process keeps the log and the StageMeter (whose process-tree sampling then covers every
rank on its node): it writes the stage's arguments to a JSON spec, runs
`python -m torch.distributed.run --standalone --nproc_per_node=N -m pixelpipe.train.ddp_launch SPEC`
(on several nodes: srun starting one torchrun per node, pixelpipe.train.slurm_launch), and reads back what
rank 0 wrote. Each rank joins the process group (NCCL on CUDA, gloo on CPU), runs the same stage function,
and only rank 0 logs and writes outputs. With one process on one node the stage runs in the job's process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from ..core import distributed
from ..core.device import available_cores
from ..core.io import read_json, write_json
from . import slurm_launch
from .settings import TrainResult

PATH_ARGS = ("cache_root", "dataset_dir", "teacher_dir", "labels_path", "out_dir", "ckpt_dir", "profile_dir")


def _stages() -> dict[str, Callable]:
    from .run import train_student, train_teacher

    return {"teacher": train_teacher, "student": train_student}


def torchrun_command(processes: int, spec: Path) -> list[str]:
    """torchrun through the running interpreter, so the job's environment is the ranks' environment."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
            "-m", "pixelpipe.train.ddp_launch", str(spec)]


def launch_command(processes: int, nodes: int, threads: int, spec: Path) -> list[str]:
    """torchrun on this node, or (nodes > 1, inside a SLURM job only) srun starting one torchrun per node."""
    if nodes <= 1:
        return torchrun_command(processes, spec)
    return slurm_launch.srun_torchrun_command(slurm_launch.allocation(nodes), processes, threads, spec)


def rank_threads(threads: int | None, processes: int) -> int:
    """Each rank's share of the job's cores (Snakemake may grant more threads than the machine has cores)."""
    cores = available_cores()
    return max(1, min(threads or cores, cores) // processes)


def run_stage(stage: str, kwargs: dict, processes: int, log: Callable[[str], None],
              log_path: str | None = None, nodes: int = 1) -> tuple[TrainResult, dict]:
    """`train_{stage}(**kwargs)` in `processes` ranks on each of `nodes` nodes (a node's threads split between its
    ranks); (result, summary) of rank 0."""
    if processes <= 1 and nodes <= 1:
        return _stages()[stage](**kwargs, log=log)
    job_threads = min(kwargs.get("threads") or available_cores(), available_cores())  # a node's cores
    kwargs = {**kwargs, "threads": rank_threads(job_threads, processes)}
    # Across nodes rank 0 may run on any node: the spec and its result live beside the outputs (shared filesystem).
    with tempfile.TemporaryDirectory(prefix=".ddp-" if nodes > 1 else "pixelpipe-ddp-",
                                     dir=kwargs["out_dir"] if nodes > 1 else None) as tmp:
        spec, result = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        write_json(spec, {"stage": stage, "result": str(result),
                          "kwargs": {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}})
        cmd = launch_command(processes, nodes, job_threads, spec)
        log(f"{stage}: {nodes} node(s) x {processes} DDP processes: {' '.join(cmd)}")
        sink = open(log_path, "a", buffering=1) if log_path else None
        try:
            env = {**os.environ, "OMP_NUM_THREADS": str(kwargs["threads"])}  # else torchrun sets 1 and warns
            rc = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT if sink else None, env=env).returncode
        finally:
            if sink:
                sink.close()
        if rc != 0 or not result.exists():
            raise RuntimeError(f"{stage}: {'srun' if nodes > 1 else 'torchrun'} exited with status {rc}; the ranks' "
                               f"output is in "
                               f"{log_path or 'stderr'}")
        data = read_json(result)
    return TrainResult(**data["result"]), data["summary"]


def _gpu_peaks(d: distributed.Dist) -> dict:
    """The largest rank's GPU peaks: the job's own process never touches the ranks' allocators."""
    import torch

    if d.backend != "nccl":
        return {}
    dev = torch.device("cuda", torch.cuda.current_device())
    return {"peak_gpu_allocated_bytes": distributed.max_across(torch.cuda.max_memory_allocated(dev), d, dev),
            "peak_gpu_reserved_bytes": distributed.max_across(torch.cuda.max_memory_reserved(dev), d, dev),
            "gpu": torch.cuda.get_device_name(dev)}


def worker(spec_path: str) -> None:
    """One rank: join the group, run the stage, rank 0 writes (result, summary) where the job reads it."""
    from ..config.settings import HardwareSettings
    from ..core.hardware import detect_device

    spec = read_json(spec_path)
    kwargs = {k: Path(v) if k in PATH_ARGS and v is not None else v for k, v in spec["kwargs"].items()}
    # the process group's backend follows the device; the stage function turns the rest of the config into settings
    d = distributed.init(detect_device(HardwareSettings.from_section(kwargs["cfg"]["hardware"]).device).kind)

    def log(msg: str) -> None:
        if d.main:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    try:
        result, summary = _stages()[spec["stage"]](**kwargs, log=log)
        summary = {**summary, **_gpu_peaks(d), "ddp_processes": d.world, "ddp_nodes": d.nodes}
        if d.main:
            write_json(spec["result"], {"result": asdict(result), "summary": summary})
    finally:
        distributed.shutdown()


if __name__ == "__main__":
    worker(sys.argv[1])
