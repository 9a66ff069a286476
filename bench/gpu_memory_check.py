"""Planner's peak-GPU-memory prediction against the peaks `bench/engine_gpu.py` measured.

    PYTHONPATH=. python bench/engine_gpu.py --out DIR            # on the GPU
    PYTHONPATH=. python bench/gpu_memory_check.py DIR/engine_gpu.json

Predictions are made from the config alone (pixelpipe.plan.memory.predict_train_memory,
allocated bytes: no allocator reserve) for each measured row's switches and batch, and for the
batch-size finder's measured per-sample activation bytes. Rows without a GPU peak (a `--cpu-smoke`
file) are listed as not measured. docs/gpu/engine_gpu.json holds the previous pixel layout's H100
run (224x224 images); it is checked with that commit's script (docs/history.md), not this one.
"""

from __future__ import annotations

import json
import sys

from pixelpipe.config.settings import SectionError
from pixelpipe.model.encoder import EncoderConfig
from pixelpipe.plan.memory import predict_train_memory


def allocated(pred: dict) -> int:
    return (pred["weights"] + pred["gradients"] + pred["optimizer_state"] + pred["amp_weight_copies"]
            + sum(pred["activations"].values()) + pred["backward_workspace"] + pred["input_buffers"])


def encoder(report: dict, path: str) -> EncoderConfig:
    try:
        return EncoderConfig.from_dict(report["model"]["config"])
    except SectionError as err:
        raise SystemExit(f"{path}: its model config is not today's glyph-layout encoder (measured by an earlier "
                         f"bench/engine_gpu.py; docs/history.md): {str(err).split(':', 1)[1][:160]}") from None


def main(path: str) -> None:
    with open(path) as f:
        report = json.load(f)
    cfg = encoder(report, path)
    device = "cpu" if report.get("cpu_smoke") else "cuda"
    print(f"| row | batch | predicted GiB | measured GiB ({report['device']}) | error |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in report["rows"]:
        row, res = r["row"], r.get("result") or {}
        pred = predict_train_memory(cfg, row["batch"], row["precision"], row["activation_checkpointing"],
                                    row["grad_free_cycles"], device=device)
        p, meas = allocated(pred) / 2**30, res.get("peak_allocated_gib")
        error = f"{100 * (p - meas) / meas:+.1f} %" if meas else f"not measured ({r['status']})"
        print(f"| {r['name']} | {row['batch']} | {p:.2f} | {'-' if meas is None else f'{meas:.2f}'} | {error} |")
    f = report.get("finder") or {}
    if "per_sample_bytes" in f:
        pred = predict_train_memory(cfg, 1, f["precision"], device=device)["per_sample_activation_bytes"]
        print(f"\nPer-sample activation memory ({f['precision']}, {device}): planner {pred / 2**20:.2f} MiB, "
              f"batch-size finder measured {f['per_sample_bytes'] / 2**20:.2f} MiB "
              f"({100 * (pred - f['per_sample_bytes']) / f['per_sample_bytes']:+.1f} %).")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
