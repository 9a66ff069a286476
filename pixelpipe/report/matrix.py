"""The optimization matrix: short measured teacher training steps under engine switches.

Each variant adds one switch to the fp32 eager baseline (AMP, torch.compile,
channels_last, activation checkpointing, gradient accumulation) or changes
the batch size, and runs the real `engine.Trainer` step (`Trainer.train_step`,
the code that trains) on synthetic images of the configured
size. Every variant runs in a fresh interpreter so its peak memory is its own.
Variants that cannot apply on this device are listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..core.cli import ArgumentParser, fail
from ..core.fmt import fmt_bytes
from ..core.io import write_json, write_text
from ..data.render import RenderSettings

# The matrix times the training step on random glyph rows of full length over a random atlas; the class count
# only sizes the head, the glyph count only the atlas the stem is folded over.
TIMING_GLYPHS = 1024
NUM_CLASSES_FOR_TIMING = 19

RESULT_PREFIX = "PIXELPIPE_BENCH_RESULT "


def build_matrix(cfg: dict, device_kind: str, cuda_capability: tuple[int, int] | None = None) -> list[dict]:
    """The variants to run (with engine overrides) and those skipped (with the reason)."""
    bm = cfg["benchmark_matrix"]
    base_bs = cfg["teacher"]["train"]["batch_size"]
    base_bs = 64 if base_bs == "auto" else int(base_bs)
    base = {"precision": "fp32", "compile": "none", "grad_accum_steps": 1, "activation_checkpointing": False,
            "channels_last": False, "grad_free_cycles": False, "augment": False}
    out = []
    for v in bm["variants"]:
        spec = {"name": v, "batch_size": base_bs, "engine": dict(base), "skipped": None}
        if v == "amp":
            if device_kind != "cuda":
                spec["skipped"] = "AMP on CPU: the engine trains in fp32 on CPU (hardware.resolve_precision)"
            else:
                spec["engine"]["precision"] = "bf16" if cuda_capability and cuda_capability[0] >= 8 else "fp16"
                spec["name"] = f"amp ({spec['engine']['precision']})"
        elif v == "compile":
            if device_kind != "cuda" and not bm["cpu_compile"]:
                spec["skipped"] = ("torch.compile on CPU: inductor needs a C++ compiler and takes minutes to compile "
                                   "on a small CPU; set benchmark_matrix.cpu_compile: true to measure it")
            else:
                spec["engine"]["compile"] = "default"
        elif v == "channels_last":
            spec["engine"]["channels_last"] = True
        elif v == "activation_checkpointing":
            spec["engine"]["activation_checkpointing"] = True
        elif v == "accumulation":
            spec["engine"]["grad_accum_steps"] = bm["accum_steps"]
            spec["name"] = f"accumulation x{bm['accum_steps']}"
            if base_bs % bm["accum_steps"]:
                spec["skipped"] = f"batch size {base_bs} is not divisible by accum_steps {bm['accum_steps']}"
        out.append(spec)
    for bs in bm["batch_sizes"]:
        if bs != base_bs:
            out.append({"name": f"baseline, batch {bs}", "batch_size": bs, "engine": dict(base), "skipped": None})
    return out


def timing_rows(enc, n: int) -> list[dict]:
    """n random full-length glyph rows (the step at the layout's capacity) with random labels."""
    import torch

    glyphs = torch.randint(1, TIMING_GLYPHS, (n, enc.cells))
    labels = torch.randint(0, enc.num_classes, (n,))
    length = torch.tensor(enc.cells)
    return [{"glyphs": glyphs[i], "label": labels[i], "length": length, "index": i} for i in range(n)]


def run_one(cfg: dict, spec: dict, threads: int | None) -> dict[str, Any]:
    """Measure one variant in this process (called in a child interpreter by `run_matrix`)."""
    import torch

    from ..core.hardware import detect_device
    from ..core.measure import RSSSampler
    from ..model.encoder import TRMVisionEncoder, flops_per_sample
    from ..plan import inputs, memory
    from ..train.distill import ClassificationObjective
    from ..core.device import configure_backends, intra_op_threads
    from ..train.engine import Trainer
    from ..train.settings import EngineSettings, TrainSettings

    info = detect_device(cfg["hardware"]["device"])
    device = torch.device(info.kind)
    engine = EngineSettings.from_config({**cfg["engine"], **spec["engine"], "progress": False, "profiler": False,
                                         "num_workers": 0}, info)
    configure_backends(engine.tf32, intra_op_threads(engine.threads, 1, threads))
    bm = cfg["benchmark_matrix"]
    steps, warmup, bs = bm["steps"], bm["warmup_steps"], spec["batch_size"]
    torch.manual_seed(0)
    enc = inputs.encoder_for(cfg, "teacher", NUM_CLASSES_FOR_TIMING)
    model = TRMVisionEncoder(enc, torch.randint(0, 256, (TIMING_GLYPHS, enc.cell_height, enc.cell_width),
                                                dtype=torch.uint8))
    dataset = timing_rows(enc, bs * (steps + warmup))
    tcfg = cfg["teacher"]["train"]
    train = TrainSettings.from_section({**tcfg, "epochs": 1, "batch_size": bs})
    sampler = RSSSampler(0.02)
    sampler.start()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(model, ClassificationObjective(), dataset, None, train, engine, device, log=lambda m: None,
                      desc=spec["name"])
    batches = trainer.batches()
    model.train()

    def run(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            trainer.train_step(batches)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    warm_s = run(warmup)  # includes compilation when compile is on
    wall = run(steps)
    sampler.stop()
    pred = memory.predict_train_memory(enc, trainer.micro, engine.precision, engine.activation_checkpointing,
                                       engine.grad_free_cycles, device=device.type)
    res = {"samples_per_s": steps * bs / wall, "step_s": wall / steps, "warmup_s": warm_s,
           "peak_host_bytes": sampler.peak_host, "micro_batch": trainer.micro, "accum": trainer.accum,
           "precision": engine.precision, "device": info.name, "threads": torch.get_num_threads(),
           "tflops_per_s": 3 * flops_per_sample(enc) * steps * bs / wall / 1e12,
           # CUDA: allocated peak; CPU: RSS the step adds (allocated + CPU transients), excluding the process baseline
           "predicted_train_bytes": pred["allocated_peak"] if device.type == "cuda" else pred["reserved_peak"]}
    if device.type == "cuda":
        res["peak_gpu_allocated_bytes"] = torch.cuda.max_memory_allocated()
        res["peak_gpu_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return res


def run_matrix(cfg: dict, threads: int | None = None, log=print, timeout_s: float = 1800) -> dict[str, Any]:
    from ..core.hardware import detect_device
    from .reports import machine_description

    info = detect_device(cfg["hardware"]["device"])
    specs = build_matrix(cfg, info.kind, info.capability)
    results = []
    for spec in specs:
        if spec["skipped"]:
            log(f"benchmark: {spec['name']}: skipped ({spec['skipped']})")
            results.append({**spec})
            continue
        cmd = [sys.executable, "-m", "pixelpipe.report.matrix", "--one", json.dumps({"cfg": cfg, "spec": spec, "threads": threads})]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env={**os.environ})
        line = next((l for l in proc.stdout.splitlines() if l.startswith(RESULT_PREFIX)), None)
        if proc.returncode or line is None:
            err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            log(f"benchmark: {spec['name']}: failed ({err})")
            results.append({**spec, "failed": err})
            continue
        r = json.loads(line[len(RESULT_PREFIX):])
        log(f"benchmark: {spec['name']}: {r['samples_per_s']:.1f} samples/s, peak host {fmt_bytes(r['peak_host_bytes'])} "
            f"({time.perf_counter() - t0:.0f} s)")
        results.append({**spec, **r})
    base = next((r for r in results if r["name"] == "baseline" and "samples_per_s" in r), None)
    for r in results:
        if base and "samples_per_s" in r:
            r["speedup"] = r["samples_per_s"] / base["samples_per_s"]
            r["memory_ratio"] = r["peak_host_bytes"] / base["peak_host_bytes"]
    return {"machine": machine_description(), "device": info.name, "teacher": cfg["teacher"]["model"],
            "image": list(RenderSettings.from_section(cfg["render"]).shape),
            "steps": cfg["benchmark_matrix"]["steps"], "warmup_steps": cfg["benchmark_matrix"]["warmup_steps"],
            "variants": results}


def benchmark_markdown(b: dict) -> str:
    gpu = any("peak_gpu_allocated_bytes" in r for r in b["variants"])
    lines = ["# Optimization matrix (teacher training step)", "",
             f"Measured on: {b['machine']} ({b['device']}). Teacher {b['teacher']}, images {b['image']}, "
             f"{b['steps']} timed steps after {b['warmup_steps']} warm-up steps, synthetic full-length glyph rows, "
             "each variant in a fresh process. `predicted step memory` is pixelpipe.plan.memory.predict_train_memory "
             "(weights, grads, AdamW state, activations; on CPU with the allocator transients, and without the "
             "baseline a torch training process holds before its first step); every other number is measured.", "",
             "| variant | batch | samples/s | speedup | peak host RAM | " + ("peak GPU alloc | peak GPU reserved | " if gpu else "")
             + "predicted step memory | warm-up s |",
             "|---|---|---|---|---|" + ("---|---|" if gpu else "") + "---|---|"]
    skipped = []
    for r in b["variants"]:
        if r.get("skipped") or r.get("failed"):
            skipped.append(f"- **{r['name']}**: {'skipped: ' + r['skipped'] if r.get('skipped') else 'failed: ' + r['failed']}")
            continue
        row = (f"| {r['name']} | {r['batch_size']} | {r['samples_per_s']:.1f} | {r.get('speedup', 1):.2f}x | "
               f"{fmt_bytes(r['peak_host_bytes'])} | ")
        if gpu:
            row += f"{fmt_bytes(r.get('peak_gpu_allocated_bytes'))} | {fmt_bytes(r.get('peak_gpu_reserved_bytes'))} | "
        row += f"{fmt_bytes(r['predicted_train_bytes'])} | {r['warmup_s']:.1f} |"
        lines.append(row)
    if skipped:
        lines += ["", "Not measured here:", ""] + skipped
    return "\n".join(lines) + "\n"


def benchmark_plot(b: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in b["variants"] if "samples_per_s" in r]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.4 * len(rows) + 1.8))
    names = [r["name"] for r in rows]
    axes[0].barh(names, [r.get("speedup", 1.0) for r in rows], color="tab:blue")
    axes[0].axvline(1.0, color="k", lw=0.8)
    axes[0].set_xlabel("speedup vs fp32 eager baseline (measured)")
    mem_key = "peak_gpu_allocated_bytes" if any("peak_gpu_allocated_bytes" in r for r in rows) else "peak_host_bytes"
    axes[1].barh(names, [r.get(mem_key, 0) / 2**20 for r in rows], color="tab:orange")
    axes[1].set_xlabel(("peak GPU allocated" if mem_key.startswith("peak_gpu") else "peak host RAM") + " MiB (measured)")
    for ax in axes:
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle(f"teacher step on {b['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_benchmark(cfg: dict, out_json: str | Path, out_md: str | Path, out_png: str | Path,
                    threads: int | None = None, log=print) -> dict:
    b = run_matrix(cfg, threads, log)
    write_json(out_json, b)
    write_text(out_md, benchmark_markdown(b))
    benchmark_plot(b, Path(out_png))
    return b


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m pixelpipe.report.matrix", description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--config", default=None)
    ap.add_argument("--out", default="results/reports")
    args = ap.parse_args(argv)
    if args.one:
        job = json.loads(args.one)
        res = run_one(job["cfg"], job["spec"], job["threads"])
        print(RESULT_PREFIX + json.dumps(res), flush=True)
        return 0
    from ..config.resolve import ConfigError, load_config

    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        return fail(f"pixelpipe: {err}")
    out = Path(args.out)
    write_benchmark(cfg, out / "benchmark.json", out / "benchmark.md", out / "benchmark.png")
    print((out / "benchmark.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
