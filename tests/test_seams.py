"""Modules meet at public names: no module of the package imports another's private (underscore) names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pixelpipe"


def test_no_private_names_imported_across_modules():
    bad = []
    for f in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and node.module:
                bad += [f"{f.name}: from .{node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, bad


def test_bench_drives_the_trainer_through_train_step():
    text = (PACKAGE / "bench.py").read_text()
    assert "._micro_step" not in text and "._optimizer_step" not in text and "._batches" not in text
