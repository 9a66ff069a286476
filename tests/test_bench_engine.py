"""The GPU benchmark script runs end to end at a tiny size on CPU (--quick --cpu-smoke)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_cpu_smoke(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "bench/engine_gpu.py", "--out", str(tmp_path), "--quick", "--cpu-smoke"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "engine_gpu.json").read_text())
    rows = {r["name"]: r for r in report["rows"]}
    for name in ("fp32 eager", "+TF32", "+bf16 autocast", "+channels_last", "+activation checkpointing",
                 "+grad_free_cycles", "batch 8", "batch 32"):
        assert rows[name]["status"] == "ok", (name, rows[name].get("traceback"))
        assert rows[name]["result"]["samples_per_s"] > 0
    assert rows["fp32 eager"]["result"]["speedup"] == 1.0
    assert rows["+compile default"]["status"].startswith("skipped")
    assert 1 <= report["finder"]["micro_batch"] <= 64
    assert report["encode"]["rows_per_s"] > 0
    md = (tmp_path / "engine_gpu.md").read_text()
    assert "| fp32 eager |" in md and "torch " in md and "Batch-size finder" in md
    assert not (tmp_path / "_bench_cache").exists()


def test_a_failing_row_is_recorded_not_fatal(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("engine_gpu_bench", ROOT / "bench" / "engine_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    real = bench.run_row

    def flaky(row, *a):
        if row.name == "+TF32":
            raise RuntimeError("simulated compiler crash\nwith detail")
        return real(row, *a)

    monkeypatch.setattr(bench, "run_row", flaky)
    monkeypatch.setattr(bench, "run_encode", lambda *a: (_ for _ in ()).throw(ValueError("no encode")))
    assert bench.main(["--out", str(tmp_path), "--quick", "--cpu-smoke", "--workers", "0"]) == 0
    report = json.loads((tmp_path / "engine_gpu.json").read_text())
    status = {r["name"]: r["status"] for r in report["rows"]}
    assert status["+TF32"] == "error: RuntimeError: simulated compiler crash"
    assert status["+bf16 autocast"] == "ok" and "error" in report["encode"]
    assert "error: RuntimeError" in (tmp_path / "engine_gpu.md").read_text()
