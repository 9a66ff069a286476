"""Wall time, published model: each job is a fixed start-up plus its work at published rates (`WallTime`).
For the compute-bound stages the work is model FLOPs over a sustained throughput figure (report.cpu_gflops, or
report.gpu_tflops on CUDA, whose default is the hardware profile's GPU_TFLOPS) plus the n-gram tables' rows; for
the data and deploy stages, rows, texts or bytes over rates measured on the 2-core machine (DATA_RATES,
DEPLOY_RATES). A machine's own runs then scale each rule's work (timefactors.py), and schedule.py adds the
sharing of cores between jobs that run side by side."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WallTime:
    """A job alone on the machine at the published rates: `startup_s` + `work_s` (the time factors scale the work)."""

    startup_s: float
    work_s: float

    @property
    def total_s(self) -> float:
        return self.startup_s + self.work_s


# Sustained model TFLOP/s each GPU profile is assumed to reach before a run on it has fitted the planner's time factors
# (about a third of the card's dense fp16/bf16 peak: 65, 125 and 990 TFLOP/s). Not measured on a GPU.
GPU_TFLOPS = {"t4": 20.0, "a10g": 40.0, "h100": 300.0}

# Seconds a training stage spends besides its steps and evaluation passes (model and loaders built, the
# temperature fitted, the model saved): 4.6-6.9 s on the 2-core EPYC, from a 7,600- and a 76,000-row run.
STAGE_STARTUP_S = 6.0

# How much of the sustained figure each core type reaches on CPU: the recursive core's large matmuls and
# attention run faster than the deployment student's narrow n-gram convolution (dim 32, ReLU), whose cost
# is memory traffic as much as FLOPs. "recursive" was fitted on the Xeon's default run before the n-gram tables
# (teacher 80.2 s for a predicted 107.0 s at 1.0; bench/growth.py checked it at 1x-100x the corpus); "none" was
# set, with the table terms below, from the first default run with tables on the 2-core EPYC (teacher 134 s,
# student 101 s); how far the published model is off before any time factors: docs/benchmarks.md.
# "none" was refitted with a per-row term on the every-language default's run (Xeon, 2af6b35; teacher 207 s,
# student 250 s measured, 186 and 86 s predicted before): two jobs, two unknowns, so in-sample; the previous
# version's two runs of that default (teacher 232 / 245 s, student 259 / 271 s) were then within -11 % and -4 % (before
# the row and step terms below were refitted on the EPYC, which is faster: the Xeon's time factors now scale them up).
CPU_CORE_EFFICIENCY = {"recursive": 1.35, "none": 1.65}
# Inference (encode, the training jobs' evaluation passes) runs faster per FLOP than training: no backward, no
# saved tensors. "recursive": scoring.evaluate on the Xeon's default test split before the tables (teacher 3,401
# rows/s, 78.6 GFLOP/s); "none": set from the encode jobs of the first default run with tables on the EPYC.
CPU_INFER_EFFICIENCY = {"recursive": 1.75, "none": 0.4}
# An encode job's meter starts after the imports: what it spends besides its batches is loading the teacher.
ENCODE_STARTUP_S = 0.2


def sustained_gflops(cpu_gflops: float, gpu_tflops: float | None, cuda: bool, profile: str = "cpu") -> float:
    """The throughput the predictions divide by, in GFLOP/s: report.gpu_tflops (default: the profile's
    GPU_TFLOPS; an A10G's where the profile is auto or cpu) on CUDA, report.cpu_gflops on CPU."""
    if cuda:
        return 1000 * (gpu_tflops or GPU_TFLOPS.get(profile, GPU_TFLOPS["a10g"]))
    return cpu_gflops


def _rate(gflops: float, core: str, cuda: bool, table: dict[str, float] = CPU_CORE_EFFICIENCY) -> float:
    return gflops * 1e9 * (1.0 if cuda else table.get(core, 1.0))


# The n-gram tables cost memory traffic, not FLOPs: each n-gram of a trained text reads its row, scatters a
# gradient into it and LazyAdamW rewrites it with its two moments. Seconds per n-gram row element (row width x
# n-grams) trained, and per element read in inference; set from the first default run with tables on the 2-core
# EPYC (teacher 2^19 x 128, student 2^17 x 64).
TABLE_TRAIN_S_PER_ELEMENT = 1.37e-9  # 5.0e-9 before the refit with a per-row term (same runs as "none" above)
TABLE_INFER_S_PER_ELEMENT = 2.0e-9
# What training costs on a CPU besides its FLOPs and table rows, whatever the model's size: a share for each row
# (building its batch in Python: window cuts, text rewrites, glyph rows) and a share for each optimizer step (the
# sparse table's update of the rows a batch touches, which common n-grams share, the small dense updates, kernel
# launches), so a larger batch costs less a row (the profile: docs/benchmarks.md "Where the training time goes").
# Least squares over the training jobs of both every-language defaults on the 2-core EPYC (teacher 153 / 219 s at
# batch 128 / 256, student 189 / 177 s at 64 / 256; docs/benchmarks.md "More reads at batch 256"): within -10 % to
# +8 % of them, in-sample (one per-row term of 411 us, fitted on the Xeon, was off by +124 % and +143 % at batch 256).
CPU_TRAIN_ROW_S = 45e-6
CPU_TRAIN_STEP_S = 19.3e-3


def train_wall_s(flops: float, samples: int, eval_flops: float, gflops: float, core: str = "recursive",
                 cuda: bool = False, table_elements: float = 0.0, eval_table_elements: float = 0.0,
                 steps: int = 0) -> WallTime:
    """A training job: forward and backward (3x the forward FLOPs) per trained sample, plus `eval_flops` for the
    evaluation forwards; `table_elements` = n-gram rows x row width over all trained samples; on a CPU also
    CPU_TRAIN_ROW_S a trained sample and CPU_TRAIN_STEP_S an optimizer step."""
    table = 0.0 if cuda else (table_elements * TABLE_TRAIN_S_PER_ELEMENT + eval_table_elements * TABLE_INFER_S_PER_ELEMENT
                              + samples * CPU_TRAIN_ROW_S + steps * CPU_TRAIN_STEP_S)
    return WallTime(STAGE_STARTUP_S, 3 * flops * samples / _rate(gflops, core, cuda)
                    + eval_flops / _rate(gflops, core, cuda, CPU_INFER_EFFICIENCY) + table)


def encode_wall_s(flops: float, samples: int, gflops: float, core: str = "recursive",
                  cuda: bool = False, table_elements: float = 0.0) -> WallTime:
    """An encode job: one forward per sample (and its n-gram rows)."""
    table = 0.0 if cuda else table_elements * TABLE_INFER_S_PER_ELEMENT
    return WallTime(ENCODE_STARTUP_S, samples * flops / _rate(gflops, core, cuda, CPU_INFER_EFFICIENCY) + table)


# The data stages' rates on the 2-core machine (one process each), and what a job spends besides its rows
# (imports, the atlas, fonts, loading the shipped sources). Fitted on runs other than those it is checked
# on in docs/benchmarks.md: the default run (76,000 real rows), and a corpus of 40,000 Faker rows.
DATA_RATES = {  # corpus: 37,994 and 75,987 real rows in 2.48 and 4.53 s; 40,000 Faker rows in 4.75 s
              "corpus_real_rows_per_s": 18_500, "corpus_faker_rows_per_s": 9_260, "corpus_startup_s": 0.43,
              "corpus_user_rows_per_s": 50_000,  # a user file: read, split and written once (not fitted)
              # the default run's three render and three consolidate jobs (7,600 and 60,787 rows)
              "render_rows_per_s": 118_000, "render_startup_s": 0.33,
              "consolidate_bytes_per_s": 456e6, "consolidate_startup_s": 0.03}


def corpus_wall_s(real_rows: int, faker_rows: int, user_rows: int = 0) -> WallTime:
    r = DATA_RATES
    return WallTime(r["corpus_startup_s"], real_rows / r["corpus_real_rows_per_s"]
                    + faker_rows / r["corpus_faker_rows_per_s"] + user_rows / r["corpus_user_rows_per_s"])


def render_wall_s(rows: int) -> WallTime:
    return WallTime(DATA_RATES["render_startup_s"], rows / DATA_RATES["render_rows_per_s"])


def consolidate_wall_s(nbytes: int) -> WallTime:
    return WallTime(DATA_RATES["consolidate_startup_s"], nbytes / DATA_RATES["consolidate_bytes_per_s"])


# The baseline and deploy stages: what each job's time grows with (rows, texts, bytes), set from the first
# default run with tables on the 2-core EPYC; a machine's own runs replace them (timefactors.py).
DEPLOY_RATES = {"baseline_ngrams_per_s": 2.0e6, "baseline_startup_s": 1.0,
                "export_bytes_per_s": 20e6, "export_rows_per_s": 800, "export_startup_s": 5.0,
                "quantize_bytes_per_s": 10e6, "quantize_startup_s": 0.5,
                "benchmark_texts_per_s": 1_500, "benchmark_startup_s": 1.0,
                "evaluate_scores_per_s": 11_000, "evaluate_startup_s": 2.0}


def baseline_wall_s(ngrams_trained: float) -> WallTime:
    r = DEPLOY_RATES
    return WallTime(r["baseline_startup_s"], ngrams_trained / r["baseline_ngrams_per_s"])


def export_wall_s(onnx_bytes: int, parity_rows: int) -> WallTime:
    r = DEPLOY_RATES
    return WallTime(r["export_startup_s"], onnx_bytes / r["export_bytes_per_s"] + parity_rows / r["export_rows_per_s"])


def quantize_wall_s(onnx_bytes: int) -> WallTime:
    return WallTime(DEPLOY_RATES["quantize_startup_s"], onnx_bytes / DEPLOY_RATES["quantize_bytes_per_s"])


def benchmark_wall_s(texts: int) -> WallTime:
    return WallTime(DEPLOY_RATES["benchmark_startup_s"], texts / DEPLOY_RATES["benchmark_texts_per_s"])


def evaluate_wall_s(scores: int) -> WallTime:
    """`scores`: texts x models x perturbations the evaluation reads."""
    return WallTime(DEPLOY_RATES["evaluate_startup_s"], scores / DEPLOY_RATES["evaluate_scores_per_s"])
