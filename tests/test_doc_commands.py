"""The commands README.md and docs/deploy.md show run as written and print what the docs say they print.

Each `python -m pixelpipe.*` line of their shell blocks (and the `cat ... |` pipes into one) is run by bash in the
tiny run's working directory, where `results/models/student.onnx` is what the docs' paths name. Lines that need
files a user brings (`--image a.png`) or take minutes (the deploy benchmark) are listed and left out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflow_utils import REPO

pytestmark = pytest.mark.slow

DOCS = ("README.md", "docs/deploy.md")
SKIPPED = ("--image",)  # needs pictures the user rendered
TEXTS = ["Guten Morgen zusammen, wie geht es euch?", "Bonjour à tous et bonne journée", "12345"]


def shell_lines(path: Path) -> list[str]:
    """The command lines of a Markdown file's fenced code blocks that run pixelpipe's own commands."""
    out, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        command = line.split("  #")[0].strip()
        if inside and re.match(r"(cat \S+ \| )?python -m pixelpipe\.", command):
            out.append(command)
    return out


def documented() -> list[tuple[str, str]]:
    return [(doc, line) for doc in DOCS for line in shell_lines(REPO / doc) if not any(s in line for s in SKIPPED)]


def test_the_docs_show_predict_and_plan_commands():
    lines = [line for _, line in documented()]
    assert any("--list-languages" in x for x in lines) and any(x.startswith("cat ") for x in lines)
    assert any("pixelpipe.plan" in x for x in lines)


@pytest.mark.parametrize("doc,command", documented())
def test_documented_command_runs_as_written(tiny_workdir, doc, command):
    (tiny_workdir / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    cwd = REPO if "pixelpipe.plan" in command else tiny_workdir  # the plan's config.yaml is the repository's
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{doc}: {command}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    if "pixelpipe.plan" in command:
        assert "total wall" in out.lower() and "peak RAM" in out
    elif "--list-languages" in command:
        assert all(re.fullmatch(r"\S+(\t.+)?", line) for line in out.splitlines()) and out
    elif "--jsonl" in command:
        records = [json.loads(line) for line in out.splitlines()]
        assert len(records) == len(TEXTS) and all("label" in r for r in records)
        assert records[2]["label"] is None and records[2]["reason"] == "no letters"
    elif "--json" in command:
        records = json.loads(out)
        assert len(records) == len(TEXTS) and all(len(r.get("top", [])) == 3 for r in records[:2])
    else:  # plain lines: label<TAB>probability<TAB>text, or unknown<TAB>reason<TAB>text
        expected = len(TEXTS) if "texts.txt" in command else command.count('"') // 2
        lines = out.splitlines()
        assert len(lines) == expected
        assert all(re.match(r"(\S+\t[01]\.\d{4}|unknown\t[^\t]+)\t", line) for line in lines), out
