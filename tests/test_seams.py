"""Modules meet at public names: no module of the package imports another's private (underscore) names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pixelpipe"


def test_no_private_names_imported_across_modules():
    bad = []
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and node.module:
                bad += [f"{f.name}: from .{node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, bad


def test_bench_drives_the_trainer_through_train_step():
    text = (PACKAGE / "train" / "matrix.py").read_text()
    assert "._micro_step" not in text and "._optimizer_step" not in text and "._batches" not in text


SCRIPTS = Path(__file__).resolve().parents[1] / "workflow_scripts"


def test_scripts_read_only_what_their_rule_declares():
    """Params, input, output, threads, resources, log: never the whole config (runtime-only engine switches
    come as resources, see pixelpipe.config.resolve.runtime_resources)."""
    offenders = {f.name for f in SCRIPTS.glob("*.py") if "sm.config" in f.read_text() or "snakemake.config" in f.read_text()}
    assert not offenders, f"scripts reading snakemake.config: {sorted(offenders)}"


def test_stage_context_names_the_stage_and_meters_every_other_output(tmp_path):
    import json
    from types import SimpleNamespace

    from pixelpipe.workflow_job import stage, stage_name

    class Output(list):
        pass

    out = Output([str(tmp_path / "a.npy"), str(tmp_path / "m.json")])
    out.metrics = str(tmp_path / "m.json")
    sm = SimpleNamespace(rule="render_val", log=[str(tmp_path / "x.log")], output=out)
    with stage(sm) as (log, meter):
        (tmp_path / "a.npy").write_bytes(b"x" * 10)
        log("hello")
        meter.record(samples=1)
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["rule"] == "render" and "hello" in (tmp_path / "x.log").read_text()
    assert stage_name("train_teacher") == "train_teacher" and stage_name("plan") == "plan"
