"""The optimization matrix's report: each variant pixelpipe.train.matrix measured (the Trainer's step under one
engine switch), with the planner's prediction of its step memory beside it, as benchmark.json, benchmark.md and
benchmark.png (`python -m pixelpipe.report.matrix`; the `benchmark` target).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..core.cli import ArgumentParser, fail
from ..core.fmt import fmt_bytes
from ..core.io import write_json, write_text
from ..train.matrix import MatrixRun, run_matrix


def with_prediction(run: MatrixRun, variant: dict[str, Any], device_kind: str) -> dict[str, Any]:
    """A measured variant with `predicted_train_bytes`: pixelpipe.plan.memory.predict_train_memory of its step
    (micro-batch, precision and switches as measured; CUDA: allocated peak; CPU: the RSS the step adds, allocated
    + CPU transients, without the process baseline)."""
    from ..plan.memory import predict_train_memory

    engine = variant["engine"]
    pred = predict_train_memory(run.teacher, variant["micro_batch"], variant["precision"],
                                engine["activation_checkpointing"], engine["grad_free_cycles"], device=device_kind)
    return {**variant, "predicted_train_bytes": pred["allocated_peak" if device_kind == "cuda" else "reserved_peak"]}


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
    """Run the matrix of a config (or the slice the benchmark rule declares) and write its report: the entry, the
    config stops here (`MatrixRun`)."""
    from .reports import machine_description

    run = MatrixRun.from_config(cfg)
    measured = run_matrix(run, threads, log)
    kind = measured["device_kind"]
    b = {"machine": machine_description(), **measured,
         "variants": [with_prediction(run, r, kind) if "samples_per_s" in r else r for r in measured["variants"]]}
    write_json(out_json, b)
    write_text(out_md, benchmark_markdown(b))
    benchmark_plot(b, Path(out_png))
    return b


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m pixelpipe.report.matrix", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None)
    ap.add_argument("--out", default="results/reports")
    args = ap.parse_args(argv)
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
