"""Wall time of the compute-bound stages: model FLOPs over a sustained throughput figure (report.cpu_gflops,
or report.gpu_tflops on CUDA) plus a fixed start-up; no figure, no prediction."""

from __future__ import annotations

# Seconds a torch stage spends before and after its work (imports, model load, saving).
STAGE_STARTUP_S = 3.0

# How much of the sustained figure each core type reaches on CPU: the recursive core's large matmuls and
# attention run faster than the deployment student's narrow n-gram convolution (dim 32, ReLU), whose cost
# is memory traffic as much as FLOPs. Fitted on the default run's two training jobs (idle 2-core machine:
# teacher 80.2 s for a predicted 107.0 s at 1.0, student 41.6 s for 29.5 s); checked at 10x and 100x
# the corpus by bench/growth.py (docs/benchmarks.md).
CPU_CORE_EFFICIENCY = {"recursive": 1.35, "none": 0.69}


def sustained_gflops(report: dict, cuda: bool) -> float | None:
    """The throughput the predictions divide by, in GFLOP/s (None: no time prediction)."""
    if cuda:
        tflops = report.get("gpu_tflops")
        return tflops * 1000 if tflops else None
    return report.get("cpu_gflops")


def _rate(gflops: float, core: str, cuda: bool) -> float:
    return gflops * 1e9 * (1.0 if cuda else CPU_CORE_EFFICIENCY.get(core, 1.0))


def train_wall_s(flops: float, samples: int, eval_flops: float, gflops: float | None, core: str = "recursive",
                 cuda: bool = False) -> float | None:
    """A training job: forward and backward (3x the forward FLOPs) per trained sample, plus `eval_flops` for the
    evaluation forwards."""
    if not gflops:
        return None
    return STAGE_STARTUP_S + (3 * flops * samples + eval_flops) / _rate(gflops, core, cuda)


def encode_wall_s(flops: float, samples: int, gflops: float | None, core: str = "recursive",
                  cuda: bool = False) -> float | None:
    """An encode job: one forward per sample."""
    return STAGE_STARTUP_S + samples * flops / _rate(gflops, core, cuda) if gflops else None
