"""Wall time of the compute-bound stages: model FLOPs over a sustained throughput figure (report.cpu_gflops,
or report.gpu_tflops on CUDA) plus a fixed start-up; no figure, no prediction."""

from __future__ import annotations

# Seconds a torch stage spends before and after its work (imports, model load, saving).
STAGE_STARTUP_S = 3.0


def sustained_gflops(report: dict, cuda: bool) -> float | None:
    """The throughput the predictions divide by, in GFLOP/s (None: no time prediction)."""
    if cuda:
        tflops = report.get("gpu_tflops")
        return tflops * 1000 if tflops else None
    return report.get("cpu_gflops")


def train_wall_s(flops: float, samples: int, eval_flops: float, gflops: float | None) -> float | None:
    """A training job: forward and backward (3x the forward FLOPs) per trained sample, plus `eval_flops` for the
    evaluation forwards."""
    if not gflops:
        return None
    return STAGE_STARTUP_S + (3 * flops * samples + eval_flops) / (gflops * 1e9)


def encode_wall_s(flops: float, samples: int, gflops: float | None) -> float | None:
    """An encode job: one forward per sample."""
    return STAGE_STARTUP_S + samples * flops / (gflops * 1e9) if gflops else None
