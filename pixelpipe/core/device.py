"""How torch runs on this machine: backends and threads, autocast, torch.compile, and out-of-memory recovery.

Training, evaluation, encoding and the batch-size finder share these, so one device choice means the same
thing in each of them.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable, TypeVar

import torch
from torch import nn

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def is_oom(err: BaseException) -> bool:
    """CUDA's out-of-memory error, and on CPU a MemoryError or torch's failed allocation."""
    text = str(err).lower()
    return (isinstance(err, (torch.cuda.OutOfMemoryError, MemoryError)) or "out of memory" in text
            or "can't allocate memory" in text)


T = TypeVar("T")


def halve_on_oom(run: Callable[[int], T], batch_size: int, what: str, log: Callable[[str], None] = print) -> T:
    """`run(batch_size)`, halving the batch and starting over after each out-of-memory error (evaluation, encoding).

    The retry happens outside the `except` block, so the failed attempt's tensors are freed first.
    """
    while True:
        try:
            return run(batch_size)
        except (RuntimeError, MemoryError) as err:
            if not is_oom(err) or batch_size <= 1:
                raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        batch_size //= 2
        log(f"{what}: out of memory; retrying with batch size {batch_size}")


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), which can be fewer than the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def intra_op_threads(engine_threads: int, processes: int, job_threads: int | None) -> int | None:
    """torch threads for one process: engine.threads is the job's, so each DDP rank takes its share;
    0 keeps the job's own count (`job_threads`, already a rank's share under DDP)."""
    return (engine_threads // max(1, processes) or 1) if engine_threads else job_threads


def configure_backends(tf32: bool, threads: int | None = None) -> None:
    """TF32 matmuls (or not), cuDNN autotuning, and the intra-op thread count capped at the usable cores."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    if threads:
        # More intra-op threads than cores only spin-wait (Snakemake may grant a rule more threads than cores).
        torch.set_num_threads(max(1, min(threads, available_cores())))


def autocast_context(device: torch.device, precision: str) -> torch.autocast:
    """Mixed precision on CUDA for bf16/fp16; a disabled autocast everywhere else (CPU runs fp32)."""
    if device.type != "cuda" or precision == "fp32":
        return torch.autocast(device_type=device.type, enabled=False)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type="cuda", dtype=dtype)


def compile_model(model: nn.Module, mode: str, grad_accum_steps: int,
                  log: Callable[[str], None]) -> tuple[nn.Module, str]:
    """torch.compile, refusing CUDA-graph modes under accumulation; returns (module, mode actually used).

    CUDA graphs replay static buffers, so gradients accumulated over several
    replays of a captured backward are overwritten; the fallback keeps the
    same autotuning without graphs and says so in the log.
    """
    if mode == "none":
        return model, "none"
    if grad_accum_steps > 1 and mode in CUDA_GRAPH_MODES:
        fallback = "max-autotune-no-cudagraphs" if mode == "max-autotune" else "default"
        msg = f"compile mode '{mode}' uses CUDA graphs, which gradient accumulation breaks; using '{fallback}'"
        warnings.warn(msg)
        log("WARNING: " + msg)
        mode = fallback
    return torch.compile(model, mode=mode), mode
