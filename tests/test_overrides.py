"""Command-line overrides: Snakemake passes nested `--config` values as strings; the schema types them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pixelpipe.config.resolve import ConfigError, coerce_strings, load_config, load_schema, resolve_config
from tests.workflow_utils import REPO, TINY

SCHEMA = load_schema()


def coerced(cfg: dict) -> dict:
    return coerce_strings(cfg, SCHEMA, SCHEMA)


@pytest.mark.parametrize("override,path,expected", [
    ({"seed": "3"}, "seed", 3),                                                     # integer
    ({"student": {"train": {"lr": "0.01"}}}, "student.train.lr", 0.01),             # number, through a $ref
    ({"teacher": {"train": {"lr": "1e-3"}}}, "teacher.train.lr", 0.001),
    ({"report": {"disk_preflight": "False"}}, "report.disk_preflight", False),      # boolean
    ({"report": {"disk_preflight": "false"}}, "report.disk_preflight", False),
    ({"engine": {"tf32": "True"}}, "engine.tf32", True),
    ({"engine": {"augment": "true"}}, "engine.augment", True),
    ({"report": {"gpu_tflops": "null"}}, "report.gpu_tflops", None),                # number or null
    ({"time_factors": {"file": "None"}}, "time_factors.file", "None"),              # string or null: a string stays
    ({"report": {"cpu_gflops": "30"}}, "report.cpu_gflops", 30),
    ({"render": {"channels": "3"}}, "render.channels", 3),                          # enum of integers
    ({"engine": {"compile": "none"}}, "engine.compile", "none"),                    # enum of strings: as it is
    ({"teacher": {"train": {"batch_size": "48"}}}, "teacher.train.batch_size", 48),  # integer or 'auto'
    ({"teacher": {"train": {"batch_size": "auto"}}}, "teacher.train.batch_size", "auto"),
    ({"corpus": {"path": "null"}}, "corpus.path", "null"),                          # string or null: a string stays
    ({"corpus": {"split_column": "3"}}, "corpus.split_column", "3"),
    ({"corpus": {"text_column": "True"}}, "corpus.text_column", "True"),            # string
    ({"deploy_benchmark": {"batch_sizes": ["1", "32"]}}, "deploy_benchmark.batch_sizes", [1, 32]),  # array
    ({"encode": {"splits": ["train", "val"]}}, "encode.splits", ["train", "val"]),   # array of enums
    ({"corpus": {"splits": {"train": "0.6", "val": "0.2", "test": "0.2"}}},          # object
     "corpus.splits", {"train": 0.6, "val": 0.2, "test": 0.2}),
])
def test_strings_become_the_schema_type(override, path, expected):
    value = resolve_config(override)
    for key in path.split("."):
        value = value[key]
    assert value == expected and type(value) is type(expected)


def test_typed_values_and_unknown_keys_are_left_alone():
    cfg = {"seed": 3, "student": {"train": {"lr": 0.01, "lrr": "0.01"}}, "render": {"fonts": ["DejaVuSans"]}}
    assert coerced(cfg) == cfg
    with pytest.raises(ConfigError, match=r"'lrr' was unexpected"):
        resolve_config(cfg)


@pytest.mark.parametrize("override,message", [
    ({"student": {"train": {"lr": "abc"}}}, "config key 'student.train.lr': 'abc' is not of type 'number'"),
    ({"seed": "3.5"}, "config key 'seed': '3.5' is not of type 'integer'"),
    ({"report": {"disk_preflight": "1"}}, "config key 'report.disk_preflight': '1' is not of type 'boolean'"),
    ({"engine": {"threads": "True"}}, "config key 'engine.threads': 'True' is not of type 'integer'"),
    ({"render": {"channels": "2"}}, "config key 'render.channels': '2' is not one of [1, 3]"),
    # a number the schema's bound rejects: the bound, not the type, is what the message says
    ({"student": {"train": {"lr": "-1"}}},
     "config key 'student.train.lr': -1 is less than or equal to the minimum of 0"),
])
def test_what_cannot_be_coerced_fails_naming_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        resolve_config(override)
    assert message in str(err.value)


def test_a_config_file_is_typed_alike(tmp_path):
    """`python -m pixelpipe.plan --config FILE` resolves through load_config: YAML reads 1e-3 as a string."""
    path = tmp_path / "c.yaml"
    path.write_text("student:\n  train: {lr: 1e-3}\nreport: {disk_preflight: 'false'}\n")
    cfg = load_config(path)
    assert cfg["student"]["train"]["lr"] == 0.001 and cfg["report"]["disk_preflight"] is False


def dry_run(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess, Path]:
    """`snakemake --dry-run train --config ...` on a copy of the workflow whose Snakefile also writes the
    config the rules see to resolved.json."""
    wf, run = tmp_path / "workflow", tmp_path / "run"
    wf.mkdir(), run.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("Snakefile", ".git", ".snakemake", "results"):
            (wf / entry.name).symlink_to(entry)
    resolved = tmp_path / "resolved.json"
    dump = f"\nimport json\nPath({str(resolved)!r}).write_text(json.dumps(config))\n"
    (wf / "Snakefile").write_text((REPO / "Snakefile").read_text() + dump)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(wf / "Snakefile"), "--directory", str(run),
           "--configfile", str(TINY), "--cores", "4", "--dry-run", "train", "--config", *overrides]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=run, env=env, timeout=300), resolved


def test_snakemake_config_overrides_reach_the_rules_typed(tmp_path):
    proc, resolved = dry_run(tmp_path, "student={'train': {'lr': 0.01}}", "seed=3",
                             "report={'disk_preflight': False}", "engine={'threads': 3}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = json.loads(resolved.read_text())
    assert cfg["student"]["train"]["lr"] == 0.01 and isinstance(cfg["student"]["train"]["lr"], float)
    assert cfg["student"]["train"]["batch_size"] == 32  # the rest of the section still comes from tiny.yaml
    assert cfg["seed"] == 3 and cfg["report"]["disk_preflight"] is False and cfg["engine"]["threads"] == 3
    assert "engine_threads=3" in proc.stdout  # the runtime switch reaches the jobs as an integer resource


def test_snakemake_config_override_that_cannot_be_typed_fails_naming_the_key(tmp_path):
    proc, resolved = dry_run(tmp_path, "student={'train': {'lr': abc}}")
    assert proc.returncode != 0 and not resolved.exists()
    assert "config key 'student.train.lr': 'abc' is not of type 'number'" in proc.stdout + proc.stderr
