"""The whole DAG on the tiny config: artifacts, shapes, and what reruns when config changes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
import yaml
from safetensors.torch import load_file

from pixelpipe.config.resolve import load_config, load_schema, resolve_config, runtime_keys
from pixelpipe.core.io import sha256_file
from pixelpipe.data.cache import CacheSplit, rows_per_label
from pixelpipe.data.consolidate import open_dataset
from pixelpipe.model.checkpoint import load_model
from pixelpipe.train.run import train_teacher
from tests.conftest import TRAIN_BUDGET_S
from tests.workflow_utils import TINY, planned_jobs, snakemake, snakemake_command, snakemake_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tiny_workdir):
    return tiny_workdir


def test_tiny_train_target_finishes_within_budget(workdir):
    seconds = float((workdir / "train_seconds.txt").read_text())
    assert seconds < TRAIN_BUDGET_S, f"tiny train target took {seconds:.0f} s (budget {TRAIN_BUDGET_S} s)"


def test_corpus_artifacts(workdir):
    labels = json.loads((workdir / "results/corpus/labels.json").read_text())
    assert len(labels["labels"]) == 19
    total = 0
    for split in ("train", "val", "test"):
        df = pd.read_parquet(workdir / f"results/corpus/{split}.parquet")
        assert list(df.columns) == ["id", "text", "label", "source", "origin"]  # provenance per row
        assert df["label"].between(0, 18).all()
        total += len(df)
    assert total == 380


def test_cache_shards_and_manifest(workdir):
    manifest = json.loads((workdir / "results/cache/train/manifest.json").read_text())
    shards = sorted((workdir / "results/cache/train").glob("shard-*.npy"))
    assert [s.name for s in shards] == ["shard-00000.npy", "shard-00001.npy", "shard-00002.npy"]  # 304 rows / 128
    assert sum(s["count"] for s in manifest["shards"]) == manifest["count"] == 304
    # texts of 20-40 characters on a 32-cell line: the longer ones are truncated, and counted
    rows = [np.load(path, mmap_mode="r") for path in shards]
    lengths = np.concatenate([r["length"] for r in rows])
    assert lengths.max() == 32 and 0 < manifest["truncated"] <= int((lengths == 32).sum())
    assert manifest["longest_clusters"] > 32
    for info, path, arr in zip(manifest["shards"], shards, rows):
        assert arr["glyphs"].dtype == np.uint16 and arr.shape == (info["count"],) and arr["glyphs"].shape[1] == 32
        assert sha256_file(path) == info["sha256"]


def test_teacher_and_student_models(workdir):
    teacher, tcfg = load_model(workdir / "results/teacher")
    student, scfg = load_model(workdir / "results/student")
    assert teacher.cfg.dim == 16 and student.cfg.dim == 32
    for cfg in (tcfg, scfg):
        assert 0.0 <= cfg["metrics"]["test_accuracy"] <= 1.0
        assert cfg["render"]["line_chars"] == 32 and cfg["atlas"]["clusters"][0] == " "
        assert cfg["text_length"] == {"min_chars": 15, "max_chars": 32}
        assert cfg["hardware_profile"] == "cpu"
        assert cfg["resolved"]["engine"]["precision"] == "fp32"
    metrics = pd.read_csv(workdir / "results/student/metrics.csv")
    assert set(metrics["split"]) == {"train", "val", "test"}
    assert "stem.proj.weight" in load_file(str(workdir / "results/student/model.safetensors"))
    samples = {role: json.loads((workdir / f"results/metrics/train_{role}/{role}.json").read_text())["samples"]
               for role in ("teacher", "student")}
    assert samples == {"teacher": 9 * 32, "student": 9 * 32}  # 304 train rows, batches of 32


def test_a_capped_role_trains_on_its_share_of_each_language(workdir, tmp_path):
    """train.rows_per_language through the teacher stage on the tiny run's cache: it reads the drawn rows only."""
    cfg = load_config(TINY, {"teacher": {"train": {"rows_per_language": 12}}})
    read = rows_per_label(CacheSplit(workdir / "results/cache/train"), 12, seed=cfg["seed"])
    result, _ = train_teacher(cfg, workdir / "results/cache", workdir / "results/corpus/labels.json",
                              tmp_path / "teacher", threads=2, log=lambda m: None)
    assert len(read) <= 12 * 19 < 304 and result.samples == len(read) // 32 * 32 and result.steps == len(read) // 32


def test_encoded_shards_are_gone_and_dataset_matches_manifest(workdir):
    assert not list((workdir / "results/encoded").rglob("*.npz"))
    for split, n in (("train", 304), ("val", 38), ("test", 38)):
        manifest = json.loads((workdir / f"results/dataset/{split}/manifest.json").read_text())
        arrays = open_dataset(workdir / f"results/dataset/{split}", verify=True)
        assert manifest["count"] == n
        assert arrays["sketches"].shape == (n, 2, 16) and arrays["sketches"].dtype == np.float16
        assert arrays["children"].shape == (n, 2, 4, 16) and arrays["children"].dtype == np.float16
        assert arrays["checksums"].shape == (n, 2, 4) and arrays["checksums"].dtype == np.uint8
        assert arrays["logits"].shape == (n, 19) and arrays["logits"].dtype == np.float32
        cache_labels = np.concatenate([np.load(path, mmap_mode="r")["label"]
                                       for path in sorted((workdir / f"results/cache/{split}").glob("shard-*.npy"))])
        np.testing.assert_array_equal(arrays["labels"], cache_labels)


def test_only_last_k_checkpoints_kept(workdir):
    ckpts = sorted(p.name for p in (workdir / "results/checkpoints").glob("step-*.json"))
    assert ckpts == ["step-8.json", "step-9.json"]  # 9 steps, every 2, keep_last 2


def test_logs_benchmarks_and_metrics_for_every_job(workdir):
    for rule in ("corpus", "render", "train_teacher", "encode", "consolidate", "train_student"):
        assert list((workdir / "logs" / rule).glob("*.log")), rule
        assert list((workdir / "benchmarks" / rule).glob("*.tsv")), rule
        for m in (workdir / "results/metrics" / rule).glob("*.json"):
            data = json.loads(m.read_text())
            assert data["wall_s"] > 0 and data["peak_rss_bytes"] > 0


def test_nothing_to_do_when_nothing_changed(workdir):
    assert planned_jobs(workdir) == {}


def test_snakemake_commands_need_no_cores(workdir):
    """What a user types after a run: none of it may ask for --cores, and none may want to redo anything."""
    unlocked = snakemake(workdir, "--unlock", cores=None)
    assert "Unlocked working directory" in unlocked.stdout + unlocked.stderr
    summary = snakemake(workdir, "--summary", cores=None).stdout
    assert "results/plan.json" in summary and "update pending" not in summary
    for cores in (None, 1, 3):  # the plan reads --cores as a resource: another count reruns nothing
        assert planned_jobs(workdir, target="all", cores=cores) == {}, f"--cores {cores}"


@pytest.mark.parametrize("section, key, reruns", [
    ("baseline", "epochs", {"baseline"}),
    ("export", "parity_atol", {"export_onnx", "quantize_onnx", "deploy_benchmark"}),
    ("quantize", "range_samples", {"quantize_onnx", "deploy_benchmark"}),
])
def test_deploy_and_baseline_settings_rerun_their_rules_and_evaluate(workdir, section, key, reruns):
    """The README's rerun table: evaluate scores the ONNX models and the baseline, so it reruns with them."""
    value = resolve_config(yaml.safe_load(TINY.read_text()))[section][key]
    jobs = planned_jobs(workdir, target="all", overrides={section: {key: value * 2}})
    assert jobs == dict.fromkeys(reruns | {"evaluate", "plan", "report", "all"}, 1)


def test_student_setting_reruns_only_student(workdir):
    jobs = planned_jobs(workdir, overrides={"student": {"train": {"lr": 0.001}}})
    assert jobs == {"train_student": 1, "train": 1}


def test_teacher_setting_reruns_teacher_encode_consolidate_student(workdir):
    assert planned_jobs(workdir, overrides={"teacher": {"train": {"lr": 0.001}}}) == TEACHER_CHAIN


def test_render_setting_reruns_everything_from_render(workdir):
    jobs = planned_jobs(workdir, overrides={"render": {"font_size": 11}})
    assert jobs == {"render_train": 1, "render_val": 1, "render_test": 1, "train_teacher": 1, "encode": 3,
                    "consolidate": 1, "train_student": 1, "train": 1}


ENGINE_SCHEMA = load_schema()["properties"]["engine"]["properties"]
TEACHER_CHAIN = {"train_teacher": 1, "encode": 3, "consolidate": 1, "train_student": 1, "train": 1}


def flipped(key: str) -> object:
    """A valid value for engine.`key` that differs from the tiny run's."""
    spec, value = ENGINE_SCHEMA[key], resolve_config(yaml.safe_load(TINY.read_text()))["engine"][key]
    if "enum" in spec:
        return next(v for v in spec["enum"] if v != value)
    return {"boolean": lambda: not value, "integer": lambda: value + 1, "number": lambda: value / 2}[spec["type"]]()


def test_runtime_only_engine_switches_rerun_nothing(workdir):
    """Every switch the schema marks `x-runtime`, all changed at once: they reach the jobs as resources."""
    assert planned_jobs(workdir, overrides={"engine": {k: flipped(k) for k in runtime_keys()}}) == {}


def test_runtime_only_engine_switches_refresh_only_plan_and_report_on_the_default_target(workdir):
    jobs = planned_jobs(workdir, target="all", overrides={"engine": {k: flipped(k) for k in runtime_keys()}})
    assert jobs == {"plan": 1, "report": 1, "all": 1}


@pytest.mark.parametrize("key", [k for k in ENGINE_SCHEMA if k not in runtime_keys()])
def test_output_affecting_engine_switch_reruns_training(workdir, key):
    assert planned_jobs(workdir, overrides={"engine": {key: flipped(key)}}) == TEACHER_CHAIN


def test_killed_student_resumes_from_checkpoint(workdir, tmp_path):
    """Delete the student's outputs but keep its checkpoints: the rerun resumes from the newest one."""
    workdir = Path(shutil.copytree(workdir, tmp_path / "copy", symlinks=True))
    for name in ("model.safetensors", "config.json", "metrics.csv"):
        (workdir / "results/student" / name).unlink()
    log = workdir / "logs/train_student/student.log"
    log.unlink()
    snakemake(workdir, "train")
    assert "resumed from step-9.json" in log.read_text()


def command_line(process: psutil.Process) -> str:
    """A process's command line, or "" once it has gone."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def kill_when_running(proc: subprocess.Popen, rule: str, timeout: float = 120) -> None:
    """kill -9 the Snakemake run `proc` (its process group, and every job process it started) once a job of `rule`
    runs: the lock and the job's half-written outputs stay behind, as after a crash."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        children = psutil.Process(proc.pid).children(recursive=True)
        if any(rule in command_line(c) for c in children):
            os.killpg(proc.pid, signal.SIGKILL)
            for child in children:  # a job that runs in a process group of its own
                with contextlib.suppress(psutil.Error):
                    child.kill()
            proc.wait(timeout=30)
            return
        time.sleep(0.05)
    raise AssertionError(f"no {rule} job ran (snakemake exit code {proc.poll()})")


def test_killed_run_is_unlocked_without_cores_and_resumes(workdir, tmp_path):
    """kill -9 during a training job: a plain rerun refuses (the lock stays), `snakemake --unlock` (no --cores)
    frees it, and the rerun finishes the target."""
    workdir = Path(shutil.copytree(workdir, tmp_path / "copy", symlinks=True))
    for name in ("model.safetensors", "config.json", "metrics.csv"):
        (workdir / "results/student" / name).unlink()
    proc = subprocess.Popen(snakemake_command(workdir, "train"), cwd=workdir, env=snakemake_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kill_when_running(proc, "train_student")
    assert proc.returncode == -signal.SIGKILL
    refused = snakemake(workdir, "train", check=False)
    assert refused.returncode != 0 and "LockException" in refused.stdout + refused.stderr
    snakemake(workdir, "--unlock", cores=None)
    snakemake(workdir, "train")
    assert (workdir / "results/student/model.safetensors").exists()
    assert planned_jobs(workdir) == {}


def test_bad_config_fails_before_any_job_names_the_key(tmp_path):
    proc = snakemake(tmp_path, "--dry-run", "train", overrides={"teacher": {"train": {"lr": -1}}}, check=False)
    assert proc.returncode != 0
    assert "teacher.train.lr" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()
