"""Data-parallel training across processes: who this process is, and the few collectives the engine needs.

torchrun starts one process per GPU (NCCL) or, on CPU, per share of the cores (gloo) and tells each its
RANK, WORLD_SIZE and LOCAL_RANK; across nodes (one torchrun per node, started by srun: pixelpipe.train.slurm_launch)
the agents' c10d rendezvous numbers the ranks over all nodes, and this setup is the same. Without a process group
this is the one process of a world of one and every helper is a no-op, so the engine has a single code path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Dist:
    """This process's place in the data-parallel world."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str | None = None
    nodes: int = 1  # torchrun agents in the rendezvous (GROUP_WORLD_SIZE): one per node

    @property
    def main(self) -> bool:
        """Rank 0 alone writes checkpoints, models, metrics and logs."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1


def current() -> Dist:
    """The initialized process group's view, or the single process."""
    if not (dist.is_available() and dist.is_initialized()):
        return Dist()
    return Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)), dist.get_backend(),
                int(os.environ.get("GROUP_WORLD_SIZE", "1")))


def init(device_kind: str) -> Dist:
    """Join the group torchrun set up (NCCL for CUDA, gloo for CPU); a no-op outside torchrun."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return current()
    if device_kind == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if device_kind == "cuda" else "gloo")
    return current()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier(d: Dist) -> None:
    if d.enabled:
        dist.barrier()


def broadcast(obj, d: Dist):
    """Rank 0's `obj` on every rank (any picklable value: decisions made once, e.g. a batch size)."""
    if not d.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def sum_across(values: list[float], d: Dist, device: torch.device) -> list[float]:
    """Element-wise sum of `values` over ranks (float64, so counts stay exact)."""
    if not d.enabled:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def mean_across(value: torch.Tensor, d: Dist) -> torch.Tensor:
    """Mean of a scalar tensor over ranks (gloo has no AVG: sum, then divide)."""
    if not d.enabled:
        return value
    t = value.detach().float().clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t / d.world


def max_across(value: int, d: Dist, device: torch.device) -> int:
    if not d.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def ranks_identical(modules: list[torch.nn.Module], d: Dist) -> bool:
    """Whether every rank holds exactly rank 0's parameters (DDP's invariant, checked once at the end)."""
    if not d.enabled:
        return True
    flat = torch.cat([p.detach().reshape(-1).float() for m in modules for p in m.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    same = torch.tensor([1.0 if torch.equal(flat, ref) else 0.0], device=flat.device)
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item() == 1.0)
