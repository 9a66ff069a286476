"""The tiny pipeline's default target, built once per test session and shared by the deploy/predict tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
_BUILT: dict[str, Path] = {}  # imported by several modules: build once even if pytest makes two fixture defs


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """results/ of `snakemake` (default target) on tests/configs/tiny.yaml: student, ONNX, int8, deploy report."""
    if "results" in _BUILT:
        return _BUILT["results"]
    work = tmp_path_factory.mktemp("deploy")
    cfg = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())
    cfg["deploy_benchmark"] = {"warmup": 1, "repeats": 3, "threads": 1}
    cfg["quantize"] = {"calibration_samples": 64}
    # a student whose weights outweigh the graph (2.4k parameters would not shrink: Q/DQ nodes cost bytes too)
    cfg["student"]["model"].update(dim=32, heads=2)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(work),
                           "--configfile", str(work / "config.yaml"), "--cores", "2", "--quiet"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _BUILT["results"] = work / "results"
    return _BUILT["results"]
