"""Parsing the workflow (`snakemake -n`, `--lint`) imports no torch and runs no planner: fast, and no device probe."""

from __future__ import annotations

import re

import pytest

from tests.workflow_utils import snakemake

# modules that must stay out of the main Snakemake process until a job runs
FORBIDDEN = ("torch", "torch.cuda", "pixelpipe.plan.preflight", "pixelpipe.plan.workflow", "pixelpipe.train.engine")


@pytest.mark.parametrize("flag", ["--dry-run", "--lint"])
def test_parsing_imports_no_torch_and_runs_no_planner(tmp_path, flag):
    proc = snakemake(tmp_path, flag, env={"PYTHONPROFILEIMPORTTIME": "1"})
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", proc.stderr, re.MULTILINE))
    assert "pixelpipe.config.resolve" in imported, "the import log did not record the workflow's own imports"
    assert not imported & set(FORBIDDEN), f"{flag} imported {sorted(imported & set(FORBIDDEN))}"
    assert not (tmp_path / "results" / "plan.json").exists()
