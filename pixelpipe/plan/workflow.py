"""The whole workflow's plan: every job's prediction in DAG order and the disk per artifact group at its peak."""

from __future__ import annotations

from typing import Any

from ..config.settings import HardwareSettings
from .timefactors import TimeFactors, load_time_factors, machine_key
from .inputs import PlanInputs, PlanSettings, plan_inputs
from .memory import (
    BASELINE_BYTES_PER_NGRAM,
    CPU_INFER_FACTOR,
    CPU_TRAIN_TRANSIENT,
    HOST_BASELINE,
    HOST_RUNTIME,
    ORT_ARENA_FACTOR,
)
from .schedule import DEFAULT_CORES, schedule_stages
from .shapes import parameter_count
from .stages import (
    StagePlan,
    StudentOnnx,
    predict_baseline,
    predict_consolidate,
    predict_corpus,
    predict_deploy_benchmark,
    predict_encode,
    predict_evaluate,
    predict_export_onnx,
    predict_quantize_onnx,
    predict_render,
    predict_train_student,
    predict_train_teacher,
    student_onnx,
)


def _disk_totals(inp: PlanInputs, stages: list[StagePlan], teacher: tuple[StagePlan, int], encoded_peak: int,
                 student: tuple[StagePlan, int], onnx: StudentOnnx) -> dict[str, int]:
    """Disk per artifact group at its peak; `stages` ends with the three deploy stages."""
    keep_last = inp.settings.student.checkpoint.keep_last
    return {
        "corpus": stages[0].disk_written_bytes,
        "cache": sum(s.disk_written_bytes for s in stages if s.rule == "render"),
        "teacher": teacher[0].disk_written_bytes + teacher[1],
        "encoded shards (temp: one per split beside its dataset)": encoded_peak,
        "consolidated dataset": sum(s.disk_written_bytes for s in stages if s.rule == "consolidate"),
        # keep_last checkpoints, plus the new one written before rotation deletes the oldest
        "student checkpoints (peak)": (keep_last + 1) * student[1],
        "student": student[0].disk_written_bytes,
        "deploy (ONNX fp32 + int8, reports, evaluation)": sum(s.disk_written_bytes for s in stages[-4:]),
        # quantize_onnx's temporaries: the pre-processed fp32 model and the int8 file before it is accepted
        "ONNX temporaries (quantize)": onnx.fp32 + onnx.int8,
    }


def plan_workflow(cfg: dict, exact: bool = True, cores: int | None = None,
                  time_factors: TimeFactors | None = None) -> dict[str, Any]:
    """Every stage's prediction plus the disk totals and the run's schedule; `cfg` is a resolved config.

    exact: read the corpus as the corpus rule will (the shipped or user rows whole, Faker's first rows, see
    corpusfacts), so split sizes, cache manifests and the charset are what the stages will write; otherwise
    sample every part of it (the disk preflight, before any job).
    cores: Snakemake's --cores (default 4, the README's command); time_factors: this machine's time factors
    (default: read from time_factors.file for the machine the planner runs on).
    """
    return plan_from_settings(PlanSettings.from_config(cfg), exact, cores, time_factors)


def plan_from_settings(settings: PlanSettings, exact: bool = True, cores: int | None = None,
                       time_factors: TimeFactors | None = None) -> dict[str, Any]:
    """`plan_workflow` below its entry: the config already resolved into the planner's settings."""
    inp = plan_inputs(settings, exact)
    stages = [predict_corpus(inp), predict_baseline(inp), *predict_render(inp)]
    teacher = predict_train_teacher(inp)
    stages.append(teacher[0])
    encoded_peak = 0
    for split in settings.encode_splits:  # encode (one job per shard), then consolidate (one per split)
        encode = predict_encode(inp, split)
        # consolidate deletes each shard once copied: a split's shards and its dataset never both exist whole, so
        # beyond the dataset the split holds one shard at most
        encoded_peak += max((s.disk_written_bytes for s in encode), default=0)
        stages += [*encode, predict_consolidate(inp, split)]
    student = predict_train_student(inp)
    onnx = student_onnx(inp)
    stages += [student[0], predict_export_onnx(inp, onnx), predict_quantize_onnx(inp, onnx),
               predict_deploy_benchmark(inp, onnx), predict_evaluate(inp, onnx, parameter_count(inp.teacher))]
    disk_totals = _disk_totals(inp, stages, teacher, encoded_peak, student, onnx)
    # Every dataset with one encoded shard of each split beside it: an upper bound on the DAG's disk peak,
    # whatever the job order (a split's shards are deleted as its dataset grows).
    disk_peak = sum(disk_totals.values())
    time_factors = time_factors or load_time_factors(settings.time_factors_file, machine_of(settings.hardware))
    timing = schedule_stages(stages, time_factors, settings, cores or DEFAULT_CORES)
    return {"stages": [dict(rule=s.rule, name=s.name, key=s.key, **s.prediction()) for s in stages],
            "run": timing, "peak_host_bytes": max(s.peak_host_bytes for s in stages),
            "disk": disk_totals, "disk_peak_bytes": disk_peak,
            "disk_final_bytes": disk_peak - disk_totals["encoded shards (temp: one per split beside its dataset)"]
            - disk_totals["student checkpoints (peak)"] + settings.student.checkpoint.keep_last * student[1]
            - disk_totals["ONNX temporaries (quantize)"],
            "device": "cuda" if inp.cuda else "cpu", "precision": inp.precision,
            "corpus": {"exact": inp.facts.exact, "rows": inp.sizes, "glyphs": inp.glyphs,
                       "mean_clusters": {s: inp.lengths[s].mean for s in inp.lengths},
                       "longest_clusters": {s: inp.lengths[s].longest for s in inp.lengths}},
            "constants": {"host_baseline": HOST_BASELINE, "host_runtime": HOST_RUNTIME,
                            "cpu_infer_factor": CPU_INFER_FACTOR, "cpu_train_transient": CPU_TRAIN_TRANSIENT,
                            "onnxruntime_arena_factor": ORT_ARENA_FACTOR,
                            "baseline_bytes_per_ngram": BASELINE_BYTES_PER_NGRAM,
                            "cpu_gflops": settings.cpu_gflops, "gpu_tflops": settings.gpu_tflops,
                            "time_factors": {r: vars(f) for r, f in time_factors.rules.items()}}}


def plan_machine(cfg: dict) -> str:
    """The time factors' key of the machine the plan of a resolved config is for (`machine_of` its hardware)."""
    return machine_of(HardwareSettings.from_section(cfg["hardware"]))


def machine_of(hardware: HardwareSettings) -> str:
    """The time factors' key of the machine the plan is for: this CPU, and the GPU the profile will use."""
    if hardware.profile == "cpu":
        return machine_key()
    from ..core.hardware import probe_device

    info = probe_device(hardware.device)
    return machine_key(info.name if info.kind == "cuda" else f"{hardware.profile} (profile; no GPU here)")
