"""Wall time: for the compute-bound stages, model FLOPs over a sustained throughput figure (report.cpu_gflops,
or report.gpu_tflops on CUDA) plus a fixed start-up (no figure, no prediction); for the data stages (corpus,
render, consolidate), rows or bytes over rates measured on the 2-core machine (DATA_RATES)."""

from __future__ import annotations

# Seconds a torch stage spends before and after its work (imports, model load, saving).
STAGE_STARTUP_S = 3.0

# How much of the sustained figure each core type reaches on CPU: the recursive core's large matmuls and
# attention run faster than the deployment student's narrow n-gram convolution (dim 32, ReLU), whose cost
# is memory traffic as much as FLOPs. Fitted on the default run's two training jobs (idle 2-core machine:
# teacher 80.2 s for a predicted 107.0 s at 1.0, student 41.6 s for 29.5 s, evaluation passes included; with
# them at CPU_INFER_EFFICIENCY below the final default run predicts 78.7 s and measures 83.2 s for the
# teacher); checked at 1x, 10x and 100x the corpus by bench/growth.py (docs/benchmarks.md).
CPU_CORE_EFFICIENCY = {"recursive": 1.35, "none": 0.69}
# Inference (encode, the training jobs' evaluation passes) runs faster per FLOP than training: no backward, no
# saved tensors. Calibrated with engine.evaluate on the default run's test split (7,600 rows, batch 64, 2
# threads): teacher 3,401 rows/s (78.6 GFLOP/s), student 14,923 rows/s (44.9 GFLOP/s); checked at 1x, 10x
# and 100x the corpus by bench/growth.py (docs/benchmarks.md).
CPU_INFER_EFFICIENCY = {"recursive": 1.75, "none": 1.0}
# An encode job's meter starts after the imports: what it spends besides its batches is loading the teacher.
ENCODE_STARTUP_S = 0.2


def sustained_gflops(report: dict, cuda: bool) -> float | None:
    """The throughput the predictions divide by, in GFLOP/s (None: no time prediction)."""
    if cuda:
        tflops = report.get("gpu_tflops")
        return tflops * 1000 if tflops else None
    return report.get("cpu_gflops")


def _rate(gflops: float, core: str, cuda: bool, table: dict[str, float] = CPU_CORE_EFFICIENCY) -> float:
    return gflops * 1e9 * (1.0 if cuda else table.get(core, 1.0))


def train_wall_s(flops: float, samples: int, eval_flops: float, gflops: float | None, core: str = "recursive",
                 cuda: bool = False) -> float | None:
    """A training job: forward and backward (3x the forward FLOPs) per trained sample, plus `eval_flops` for the
    evaluation forwards."""
    if not gflops:
        return None
    return (STAGE_STARTUP_S + 3 * flops * samples / _rate(gflops, core, cuda)
            + eval_flops / _rate(gflops, core, cuda, CPU_INFER_EFFICIENCY))


def encode_wall_s(flops: float, samples: int, gflops: float | None, core: str = "recursive",
                  cuda: bool = False) -> float | None:
    """An encode job: one forward per sample."""
    return ENCODE_STARTUP_S + samples * flops / _rate(gflops, core, cuda, CPU_INFER_EFFICIENCY) if gflops else None


# The data stages' rates on the 2-core machine (one process each), and what a job spends besides its rows
# (imports, the atlas, fonts, loading the shipped sources). Calibrated on runs other than those it is checked
# on in docs/benchmarks.md: the default run (76,000 real rows), and a corpus of 40,000 Faker rows.
DATA_RATES = {  # corpus: 37,994 and 75,987 real rows in 2.48 and 4.53 s; 40,000 Faker rows in 4.75 s
              "corpus_real_rows_per_s": 18_500, "corpus_faker_rows_per_s": 9_260, "corpus_startup_s": 0.43,
              # the default run's three render and three consolidate jobs (7,600 and 60,787 rows)
              "render_rows_per_s": 118_000, "render_startup_s": 0.33,
              "consolidate_bytes_per_s": 456e6, "consolidate_startup_s": 0.03}


def corpus_wall_s(real_rows: int, faker_rows: int) -> float:
    r = DATA_RATES
    return r["corpus_startup_s"] + real_rows / r["corpus_real_rows_per_s"] + faker_rows / r["corpus_faker_rows_per_s"]


def render_wall_s(rows: int) -> float:
    return DATA_RATES["render_startup_s"] + rows / DATA_RATES["render_rows_per_s"]


def consolidate_wall_s(nbytes: int) -> float:
    return DATA_RATES["consolidate_startup_s"] + nbytes / DATA_RATES["consolidate_bytes_per_s"]
