"""One tiny end-to-end run per test session, shared by every test that reads its results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.workflow_utils import snakemake

TRAIN_BUDGET_S = 120


@pytest.fixture(scope="session")
def tiny_workdir(tmp_path_factory) -> Path:
    """`snakemake train` on tests/configs/tiny.yaml (timed), then the default target: ONNX, int8, reports."""
    workdir = tmp_path_factory.mktemp("tiny_run")
    t0 = time.perf_counter()
    snakemake(workdir, "train")
    train_s = time.perf_counter() - t0
    (workdir / "train_seconds.txt").write_text(f"{train_s:.1f}\n")
    snakemake(workdir)
    return workdir


@pytest.fixture(scope="session")
def tiny_run(tiny_workdir) -> Path:
    """The tiny run's results/ directory."""
    return tiny_workdir / "results"


@pytest.fixture(scope="session")
def deployed_student(tmp_path_factory):
    """A tiny `core: none` student over an atlas of real text, exported to ONNX in seconds (tests/_deploy_utils.py)."""
    from tests._deploy_utils import Deployed

    return Deployed(tmp_path_factory.mktemp("deployed") / "student.onnx")
