"""Where a training step's time goes: forward, backward and optimizer of a finished run's teacher or student.

    PYTHONPATH=. python bench/train_step.py --run DIR [--role teacher] [--seconds 15] [--threads 2]

DIR is a finished run's working directory (results/{role}, results/cache/train). It loads the role's trained model
(architecture and weights), takes the engine's optimizer (AdamW with the n-gram tables' sparse rows) and runs
training steps on batches of 64 of the run's train cache, trimmed as the engine trims them, for --seconds after
10 warm-up steps, timing each part. Labels-only loss for both roles (the student's distillation terms are left
out: their cost is a few small matrix products). Run it with PYTHONPATH at another checkout to compare versions
on the same run and machine. bench/busy_machine.py takes its steps from here (`measure_steps`).
"""

from __future__ import annotations

import argparse
import json
import time


def measure_steps(run: str, role: str, seconds: float, batch: int, threads: int) -> dict:
    """Training steps of `role` on `run`'s train cache for `seconds` after 10 warm-up steps: steps/s and ms per
    part. torch is imported before pixelpipe: importing pixelpipe sets OMP_WAIT_POLICY when it is unset, and
    busy_machine.py measures libgomp with the variable unset too."""
    import numpy as np
    import torch

    from pixelpipe.core.device import configure_backends
    from pixelpipe.data.cache import CacheDataset
    from pixelpipe.model.checkpoint import load_model
    from pixelpipe.train.distill import ClassificationObjective
    from pixelpipe.train.optim import LazyAdamW, param_groups
    from pixelpipe.train.scoring import trimmed

    configure_backends(tf32=False, threads=threads)
    model, _ = load_model(f"{run}/results/{role}")
    model.train()
    data = CacheDataset(f"{run}/results/cache/train", verify=False)
    objective = ClassificationObjective()
    opt = LazyAdamW(param_groups([model, objective], 0.05), lr=1e-4, betas=(0.9, 0.95))
    rng = np.random.default_rng(0)
    parts = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}

    def step(record: bool) -> None:
        b = trimmed(data.__getitems__(rng.integers(0, len(data), batch).tolist()), model.cfg.line_chars,
                    model.cfg.lines)
        t0 = time.perf_counter()
        loss, _ = objective.forward(model, b)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if record:
            parts["forward"] += t1 - t0
            parts["backward"] += t2 - t1
            parts["optimizer"] += t3 - t2

    for _ in range(10):
        step(False)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step(True)
        n += 1
    wall = time.perf_counter() - t0
    return {"role": role, "steps": n, "steps_per_s": n / wall, "threads": torch.get_num_threads(),
            "ms_per_step": round(1000 * wall / n, 2), **{f"{k}_ms": round(1000 * v / n, 2) for k, v in parts.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--role", default="teacher", choices=["teacher", "student"])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    print(json.dumps(measure_steps(args.run, args.role, args.seconds, args.batch, args.threads)))


if __name__ == "__main__":
    main()
