"""Planner's peak-GPU-memory prediction against the peaks `bench/engine_gpu.py` measured.

    PYTHONPATH=. python bench/gpu_memory_check.py docs/gpu/engine_gpu.json

Predictions are made from the config alone (pixelpipe.plan.memory.predict_train_memory,
allocated bytes: no allocator reserve) for each measured row's switches and batch.
"""

from __future__ import annotations

import json
import sys

from pixelpipe.model.encoder import EncoderConfig
from pixelpipe.plan.memory import predict_train_memory


def allocated(pred: dict) -> int:
    return (pred["weights"] + pred["gradients"] + pred["optimizer_state"] + pred["amp_weight_copies"]
            + sum(pred["activations"].values()) + pred["backward_workspace"] + pred["input_buffers"])


def main(path: str) -> None:
    report = json.load(open(path))
    cfg = EncoderConfig.from_dict(report["model"]["config"])
    print(f"| row | batch | predicted GiB | measured GiB ({report['device']}) | error |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in report["rows"]:
        row, res = r["row"], r.get("result") or {}
        if not res:
            continue
        pred = predict_train_memory(cfg, row["batch"], row["precision"], row["activation_checkpointing"],
                                    row["grad_free_cycles"])
        p, meas = allocated(pred) / 2**30, res["peak_allocated_gib"]
        print(f"| {r['name']} | {row['batch']} | {p:.2f} | {meas:.2f} | {100 * (p - meas) / meas:+.1f} % |")
    f = report.get("finder") or {}
    if "per_sample_bytes" in f:
        pred = predict_train_memory(cfg, 1, f["precision"])["per_sample_activation_bytes"]
        print(f"\nPer-sample activation memory ({f['precision']}): planner {pred / 2**20:.1f} MiB, "
              f"batch-size finder measured {f['per_sample_bytes'] / 2**20:.1f} MiB "
              f"({100 * (pred - f['per_sample_bytes']) / f['per_sample_bytes']:+.1f} %).")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/gpu/engine_gpu.json")
