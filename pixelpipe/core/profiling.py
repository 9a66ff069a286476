"""The profiler switch: a short torch.profiler window written as a Chrome trace plus tables.

`trace.json` opens in chrome://tracing or Perfetto; `components.json` holds the
per-model-part rows (record_function ranges in model/encoder.py); `timing.md` is the
per-component table of the whole run (data wait, host-to-device + augmentation,
forward, backward, optimizer) from the engine's ComponentTimer, followed by
the profiled window's per-model-part split of the forward.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from .io import read_json, write_json, write_text

PART_PREFIXES = ("encoder.", "ProfilerStep", "Optimizer.step", "autograd::engine")


def profile_schedule(remaining_steps: int) -> tuple[int, int, int]:
    """(wait, warmup, active) that fits in the steps left, so short runs still write a trace."""
    if remaining_steps >= 9:
        return 2, 2, 5
    warmup = 1 if remaining_steps >= 2 else 0
    return 0, warmup, max(1, remaining_steps - warmup)


def start_profiler(out_dir: Path, device: torch.device, remaining_steps: int = 9):
    """Profile a window of optimizer steps; call `.step()` once per step and `.stop()` at the end."""
    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    wait, warmup, active = profile_schedule(remaining_steps)

    def on_ready(prof: profile) -> None:
        prof.export_chrome_trace(str(out_dir / "trace.json"))
        write_text(out_dir / "key_averages.txt", prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
        rows: dict[str, dict[str, float]] = {}
        for evt in prof.key_averages():
            if not evt.key.startswith(PART_PREFIXES):
                continue
            # Backward ops are summed into one row: the per-op split is in key_averages.txt.
            key = "backward (autograd ops)" if evt.key.startswith("autograd::engine") else evt.key
            row = rows.setdefault(key, {"calls": 0, "cpu_total_ms": 0.0, "device_total_ms": 0.0})
            row["calls"] += evt.count
            row["cpu_total_ms"] += evt.cpu_time_total / 1000
            row["device_total_ms"] += getattr(evt, "device_time_total", 0) / 1000
        write_json(out_dir / "components.json", rows)

    prof = profile(activities=activities, schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                   on_trace_ready=on_ready, record_shapes=False)
    prof.start()
    return prof


def write_component_table(out_dir: Path, components: dict[str, dict[str, float]]) -> str:
    """timing.md: the run's per-component seconds and shares, then the profiled per-part rows."""
    lines = ["| component | seconds | share | calls |", "| --- | ---: | ---: | ---: |"]
    for name, c in sorted(components.items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| {name} | {c['seconds']:.3f} | {100 * c['share']:.1f} % | {c['calls']} |")
    parts_path = Path(out_dir) / "components.json"
    if parts_path.exists():
        lines += ["", "Profiled window, per model part (record_function ranges):", "",
                  "| range | calls | CPU ms | device ms |", "| --- | ---: | ---: | ---: |"]
        for key, r in read_json(parts_path).items():
            lines.append(f"| {key} | {r['calls']} | {r['cpu_total_ms']:.2f} | {r['device_total_ms']:.2f} |")
    text = "\n".join(lines) + "\n"
    write_text(Path(out_dir) / "timing.md", text)
    return text
