"""The optimization matrix: short measured teacher training steps under engine switches.

Each variant adds one switch to the fp32 eager baseline (AMP, torch.compile,
channels_last, activation checkpointing, gradient accumulation) or changes
the batch size, and runs the real `engine.Trainer` step (`Trainer.train_step`,
the code that trains) on synthetic images of the configured
size. Every variant runs in a fresh interpreter (`python -m pixelpipe.train.matrix --one`) so its peak memory is
its own. Variants that cannot apply on this device are listed with the reason.

The config stops at `MatrixRun.from_config`: everything below it takes the typed settings. What the matrix writes
(benchmark.json, .md and .png, with the planner's prediction of each variant's step memory) is
pixelpipe.report.matrix (`python -m pixelpipe.report.matrix`, the `benchmark` target).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config.settings import Section
from ..core.cli import ArgumentParser
from ..core.fmt import fmt_bytes
from ..data.render import RenderSettings
from .settings import EngineSettings, ModelSettings, TrainSettings

if TYPE_CHECKING:
    from ..model.encoder import EncoderConfig

# The matrix times the training step on random glyph rows of full length over a random atlas; the class count
# only sizes the head, the glyph count only the atlas the stem is folded over.
TIMING_GLYPHS = 1024
NUM_CLASSES_FOR_TIMING = 19

RESULT_PREFIX = "PIXELPIPE_BENCH_RESULT "


@dataclass(frozen=True)
class MatrixSettings(Section):
    """The `benchmark_matrix` section: which switches and batch sizes are measured, and for how many steps."""

    SECTION = "benchmark_matrix"

    variants: list[str]
    batch_sizes: list[int]
    steps: int
    warmup_steps: int
    accum_steps: int
    cpu_compile: bool


@dataclass(frozen=True)
class MatrixRun:
    """What the matrix reads, built once from the config (`from_config`; the benchmark rule passes the slice it
    declares: `benchmark_matrix`, `teacher`, `render`, `engine` and `hardware.device`)."""

    matrix: MatrixSettings
    model: ModelSettings  # teacher.model
    train: TrainSettings  # teacher.train
    render: RenderSettings
    engine: EngineSettings  # as configured: each variant sets its switches, then the device resolves it
    device: str  # hardware.device

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "MatrixRun":
        teacher = cfg["teacher"]
        return cls(MatrixSettings.from_section(cfg["benchmark_matrix"]), ModelSettings.from_section(teacher["model"]),
                   TrainSettings.from_section(teacher["train"]), RenderSettings.from_section(cfg["render"]),
                   EngineSettings.from_section(cfg["engine"]), cfg["hardware"]["device"])

    def to_config(self) -> dict[str, Any]:
        """The config slice `from_config` reads back (what a variant's interpreter is handed, as JSON)."""
        return {"benchmark_matrix": self.matrix.to_section(),
                "teacher": {"model": self.model.to_section(), "train": self.train.to_section()},
                "render": self.render.to_dict(), "engine": self.engine.to_section(), "hardware": {"device": self.device}}

    @property
    def teacher(self) -> EncoderConfig:
        """The teacher the matrix times: the configured model over the render geometry, NUM_CLASSES_FOR_TIMING
        classes."""
        return self.model.encoder(self.render.to_dict(), NUM_CLASSES_FOR_TIMING)

    @property
    def base_batch(self) -> int:
        """teacher.train.batch_size (an `auto` batch is measured at 64)."""
        return 64 if self.train.batch_size_auto else int(self.train.batch_size)


def _variant(name: str, spec: dict, run: MatrixRun, device_kind: str,
             cuda_capability: tuple[int, int] | None) -> None:
    """Set the switch of variant `name` on `spec` (its engine overrides), or the reason it is skipped here."""
    bm, base_bs = run.matrix, run.base_batch
    if name == "amp":
        if device_kind != "cuda":
            spec["skipped"] = "AMP on CPU: the engine trains in fp32 on CPU (hardware.resolve_precision)"
        else:
            spec["engine"]["precision"] = "bf16" if cuda_capability and cuda_capability[0] >= 8 else "fp16"
            spec["name"] = f"amp ({spec['engine']['precision']})"
    elif name == "compile":
        if device_kind != "cuda" and not bm.cpu_compile:
            spec["skipped"] = ("torch.compile on CPU: inductor needs a C++ compiler and takes minutes to compile "
                               "on a small CPU; set benchmark_matrix.cpu_compile: true to measure it")
        else:
            spec["engine"]["compile"] = "default"
    elif name == "channels_last":
        spec["engine"]["channels_last"] = True
    elif name == "activation_checkpointing":
        spec["engine"]["activation_checkpointing"] = True
    elif name == "accumulation":
        spec["engine"]["grad_accum_steps"] = bm.accum_steps
        spec["name"] = f"accumulation x{bm.accum_steps}"
        if base_bs % bm.accum_steps:
            spec["skipped"] = f"batch size {base_bs} is not divisible by accum_steps {bm.accum_steps}"


def build_matrix(run: MatrixRun, device_kind: str, cuda_capability: tuple[int, int] | None = None) -> list[dict]:
    """The variants to run (with engine overrides) and those skipped (with the reason)."""
    base_bs = run.base_batch
    base = {"precision": "fp32", "compile": "none", "grad_accum_steps": 1, "activation_checkpointing": False,
            "channels_last": False, "grad_free_cycles": False, "augment": False}
    out = []
    for v in run.matrix.variants:
        spec = {"name": v, "batch_size": base_bs, "engine": dict(base), "skipped": None}
        _variant(v, spec, run, device_kind, cuda_capability)
        out.append(spec)
    for bs in run.matrix.batch_sizes:
        if bs != base_bs:
            out.append({"name": f"baseline, batch {bs}", "batch_size": bs, "engine": dict(base), "skipped": None})
    return out


def timing_rows(enc: EncoderConfig, n: int) -> list[dict]:
    """n random full-length glyph rows (the step at the layout's capacity) with random labels."""
    import torch

    glyphs = torch.randint(1, TIMING_GLYPHS, (n, enc.cells))
    labels = torch.randint(0, enc.num_classes, (n,))
    length = torch.tensor(enc.cells)
    return [{"glyphs": glyphs[i], "label": labels[i], "length": length, "index": i} for i in range(n)]


def run_one(run: MatrixRun, spec: dict, threads: int | None) -> dict[str, Any]:
    """Measure one variant in this process (called in a child interpreter by `run_matrix`)."""
    import torch

    from ..core.device import configure_backends, intra_op_threads
    from ..core.hardware import detect_device
    from ..core.measure import RSSSampler
    from ..model.encoder import TRMVisionEncoder, flops_per_sample
    from .distill import ClassificationObjective
    from .engine import Trainer

    info = detect_device(run.device)
    device = torch.device(info.kind)
    engine = dataclasses.replace(run.engine, **spec["engine"], progress=False, profiler=False,
                                 num_workers=0).for_device(info)
    configure_backends(engine.tf32, intra_op_threads(engine.threads, 1, threads))
    steps, warmup, bs = run.matrix.steps, run.matrix.warmup_steps, spec["batch_size"]
    torch.manual_seed(0)
    enc = run.teacher
    model = TRMVisionEncoder(enc, torch.randint(0, 256, (TIMING_GLYPHS, enc.cell_height, enc.cell_width),
                                                dtype=torch.uint8))
    dataset = timing_rows(enc, bs * (steps + warmup))
    train = dataclasses.replace(run.train, epochs=1, batch_size=bs)
    sampler = RSSSampler(0.02)
    sampler.start()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(model, ClassificationObjective(), dataset, None, train, engine, device, log=lambda m: None,
                      desc=spec["name"])
    batches = trainer.batches()
    model.train()

    def timed(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            trainer.train_step(batches)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    warm_s = timed(warmup)  # includes compilation when compile is on
    wall = timed(steps)
    sampler.stop()
    res = {"samples_per_s": steps * bs / wall, "step_s": wall / steps, "warmup_s": warm_s,
           "peak_host_bytes": sampler.peak_host, "micro_batch": trainer.micro, "accum": trainer.accum,
           "precision": engine.precision, "device": info.name, "threads": torch.get_num_threads(),
           "tflops_per_s": 3 * flops_per_sample(enc) * steps * bs / wall / 1e12}
    if device.type == "cuda":
        res["peak_gpu_allocated_bytes"] = torch.cuda.max_memory_allocated()
        res["peak_gpu_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return res


def _measure(run: MatrixRun, spec: dict, threads: int | None, log, timeout_s: float) -> dict[str, Any]:
    """One variant measured in a fresh interpreter: the spec with its measurement, or with why it failed."""
    job = json.dumps({"config": run.to_config(), "spec": spec, "threads": threads})
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pixelpipe.train.matrix", "--one", job], capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ})
    line = next((l for l in proc.stdout.splitlines() if l.startswith(RESULT_PREFIX)), None)
    if proc.returncode or line is None:
        err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        log(f"benchmark: {spec['name']}: failed ({err})")
        return {**spec, "failed": err}
    r = json.loads(line[len(RESULT_PREFIX):])
    log(f"benchmark: {spec['name']}: {r['samples_per_s']:.1f} samples/s, peak host {fmt_bytes(r['peak_host_bytes'])} "
        f"({time.perf_counter() - t0:.0f} s)")
    return {**spec, **r}


def run_matrix(run: MatrixRun, threads: int | None = None, log=print, timeout_s: float = 1800) -> dict[str, Any]:
    """Every variant of the matrix on this machine's device, measured (speedup and memory against the baseline),
    or skipped with the reason."""
    from ..core.hardware import detect_device

    info = detect_device(run.device)
    results = []
    for spec in build_matrix(run, info.kind, info.capability):
        if spec["skipped"]:
            log(f"benchmark: {spec['name']}: skipped ({spec['skipped']})")
            results.append({**spec})
        else:
            results.append(_measure(run, spec, threads, log, timeout_s))
    base = next((r for r in results if r["name"] == "baseline" and "samples_per_s" in r), None)
    for r in results:
        if base and "samples_per_s" in r:
            r["speedup"] = r["samples_per_s"] / base["samples_per_s"]
            r["memory_ratio"] = r["peak_host_bytes"] / base["peak_host_bytes"]
    return {"device": info.name, "device_kind": info.kind, "teacher": run.model.to_section(),
            "image": list(run.render.shape), "steps": run.matrix.steps, "warmup_steps": run.matrix.warmup_steps,
            "variants": results}


def main(argv: list[str] | None = None) -> int:
    """One variant in this interpreter (`--one`, what `run_matrix` starts); the whole matrix and its report are
    `python -m pixelpipe.report.matrix`."""
    ap = ArgumentParser(prog="python -m pixelpipe.train.matrix", description=__doc__.splitlines()[0])
    ap.add_argument("--one", required=True, help=argparse.SUPPRESS)
    job = json.loads(ap.parse_args(argv).one)
    res = run_one(MatrixRun.from_config(job["config"]), job["spec"], job["threads"])
    print(RESULT_PREFIX + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
