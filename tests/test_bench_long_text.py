"""bench/long_text_errors.py on the tiny run: the students' misses on long held-out texts, by family."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.workflow_utils import REPO, TINY


def load_bench():
    spec = importlib.util.spec_from_file_location("long_text_errors", REPO / "bench" / "long_text_errors.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_misses_are_counted_by_family_and_pair():
    bench = load_bench()
    truth = ["bs", "hr", "ms", "de", "nb"]
    got = bench.misses(truth, ["hr", "hr", "id", "nl", "no"], key=lambda t: {"nb": "no"}.get(t, t))
    assert got["accuracy"] == 40.0 and got["misses"] == 3
    assert got["by_family"] == {"bs/hr/sr-Latn": 1, "ms/id": 1, "other": 1}
    assert sorted(map(tuple, got["pairs"])) == [("bs", "hr", 1), ("de", "nl", 1), ("ms", "id", 1)]


@pytest.mark.slow
def test_the_tiny_runs_students_on_long_texts(tiny_workdir, tmp_path):
    out = tmp_path / "long.json"
    proc = subprocess.run([sys.executable, "bench/long_text_errors.py", "--runs", str(tiny_workdir), str(tiny_workdir),
                           "--config", str(TINY), "--min-chars", "60", "--out", str(out)],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["texts"] > 10
    student = result[str(tiny_workdir)]
    assert student["misses"] == sum(student["by_family"].values()) >= sum(n for _, _, n in student["pairs"])
    assert student["accuracy"] == pytest.approx(100 * (1 - student["misses"] / result["texts"]), abs=0.01)
    assert f"{student['misses']} misses of {result['texts']}" in proc.stdout
