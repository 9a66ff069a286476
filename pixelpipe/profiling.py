"""The profiler switch: a short torch.profiler window written as a Chrome trace plus a table."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from .io import write_json, write_text


def start_profiler(out_dir: Path, device: torch.device, wait: int = 2, warmup: int = 2, active: int = 5):
    """Profile steps [wait+warmup, wait+warmup+active); step it once per optimizer step."""
    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])

    def on_ready(prof: profile) -> None:
        prof.export_chrome_trace(str(out_dir / "trace.json"))
        write_text(out_dir / "key_averages.txt", prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
        rows = {}
        for evt in prof.key_averages():
            if evt.key.startswith(("encoder.", "ProfilerStep", "Optimizer.step", "autograd::engine")):
                rows[evt.key] = {"calls": evt.count, "cpu_total_ms": evt.cpu_time_total / 1000,
                                 "device_total_ms": getattr(evt, "device_time_total", 0) / 1000}
        write_json(out_dir / "components.json", rows)

    prof = profile(activities=activities, schedule=schedule(wait=wait, warmup=warmup, active=active),
                   on_trace_ready=on_ready, record_shapes=False)
    prof.__enter__()
    return prof
