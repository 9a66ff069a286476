"""The resource planner: exact disk arithmetic, the activation model, the disk preflight,
and its predictions on the tiny config against what the stages measured."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from pixelpipe.config.resolve import load_config
from pixelpipe.core.io import read_json
from pixelpipe.model.encoder import TRMVisionEncoder
from pixelpipe.plan.memory import activation_bytes_per_sample, predict_train_memory
from pixelpipe.plan.preflight import DiskSpaceError, check_disk
from pixelpipe.plan.shapes import model_tensors
from pixelpipe.plan.sizes import npy_bytes, npz_bytes, safetensors_bytes
from pixelpipe.plan.workflow import plan_workflow
from tests._engine_utils import encoder_config
from tests.workflow_utils import TINY, snakemake

TOLERANCE_PCT = 15.0  # the goal for peak host RAM and disk
# disk is arithmetic; JSON/CSV side files, parquet and the ONNX graph bytes (a fit, see plan.ONNX_GRAPH) are the estimates
DISK_TOLERANCE_PCT = 2.0
# A stage whose whole output is a small JSON report (the baseline's, deploy.{json,md}) is checked in bytes.
SMALL_FILE_SLACK = 512
DEPLOY_STAGES = ("export_onnx/student", "quantize_onnx/student", "deploy_benchmark/student")


@pytest.fixture(scope="module")
def tiny_cfg():
    return load_config(TINY)


def test_npy_and_npz_sizes_are_exact(tmp_path):
    arrays = {"a": np.zeros((37, 4, 16), np.float16), "b": np.zeros((37, 19), np.float32), "c": np.zeros((37,), np.int64)}
    np.save(tmp_path / "a.npy", arrays["a"])
    assert (tmp_path / "a.npy").stat().st_size == npy_bytes((37, 4, 16), np.float16)
    np.savez(tmp_path / "x.npz", **arrays)
    assert (tmp_path / "x.npz").stat().st_size == npz_bytes({k: (v.shape, v.dtype) for k, v in arrays.items()})


def test_safetensors_size_within_bytes(tmp_path):
    cfg = encoder_config(line_chars=8, dim=24, num_capsules=3, num_classes=7)
    model = TRMVisionEncoder(cfg)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "m.safetensors"))
    real = (tmp_path / "m.safetensors").stat().st_size
    assert abs(safetensors_bytes(model_tensors(cfg)) - real) <= 64  # header offsets' digit count only


@pytest.mark.parametrize("grad_free", [False, True])
def test_activation_model_matches_saved_tensors(grad_free):
    """The per-sample activation term against the bytes autograd actually saves (CPU, fp32)."""
    cfg = encoder_config(line_chars=96, dim=64, heads=4, mixer_ratio=4.0, H_cycles=1, L_cycles=2, num_capsules=4)
    model = TRMVisionEncoder(cfg).train()
    model.grad_free_cycles = grad_free
    saved: dict[int, int] = {}

    def pack(t):
        # count each storage once: views of one buffer (q, k, v of qkv) are one allocation
        ptr = t.untyped_storage().data_ptr()
        saved[ptr] = max(saved.get(ptr, 0), t.untyped_storage().nbytes())
        return t

    batch = 8
    x = torch.randint(0, 256, (batch, 1, cfg.image_height, cfg.image_width), dtype=torch.uint8)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    weights = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    measured = sum(v for k, v in saved.items() if k not in weights) / batch
    predicted = sum(activation_bytes_per_sample(cfg, 4, grad_free_cycles=grad_free).values())
    assert abs(predicted - measured) / measured < 0.15, (predicted, measured)


def test_predict_train_memory_is_linear_in_batch():
    cfg = encoder_config(lines=4, line_chars=104, dim=768, depth=2, heads=12, mlp_ratio=4.0, H_cycles=2, L_cycles=3,
                         num_capsules=12)
    m8, m16 = (predict_train_memory(cfg, b, "bf16") for b in (8, 16))
    per_sample = m8["per_sample_activation_bytes"]
    assert sum(m16["activations"].values()) - sum(m8["activations"].values()) == 8 * per_sample
    assert m8["weights"] == 4 * m8["parameters"] and m8["gradients"] == 4 * m8["trained_parameters"]
    assert m8["optimizer_state"] == 8 * m8["trained_parameters"] < 8 * m8["parameters"]
    assert m8["reserved_peak"] > m8["allocated_peak"]
    ckpt = predict_train_memory(cfg, 8, "bf16", activation_checkpointing=True)
    assert ckpt["per_sample_activation_bytes"] < per_sample / 2


def test_plan_lists_every_job(tiny_cfg):
    plan = plan_workflow(tiny_cfg)
    keys = {s["key"] for s in plan["stages"]}
    assert {"corpus/all", "render/train", "train_teacher/teacher", "encode/train-00002", "consolidate/test",
            "train_student/student"} <= keys
    assert len([k for k in keys if k.startswith("encode/")]) == 5
    assert set(DEPLOY_STAGES) <= keys
    assert plan["disk"]["deploy (ONNX fp32 + int8, reports)"] > 0
    assert plan["disk_peak_bytes"] == sum(plan["disk"].values())
    assert {s["key"]: s for s in plan["stages"]}["encode/val-00000"]["disk_written_bytes"] > 0


def test_disk_preflight_refuses_when_peak_exceeds_free(tiny_cfg, tmp_path):
    need = plan_workflow(tiny_cfg, exact=False)["disk_peak_bytes"]
    exact = plan_workflow(tiny_cfg)["disk_peak_bytes"]
    assert abs(need - exact) / exact < 0.05  # the preflight's estimate (no corpus yet) is close to the exact plan
    assert check_disk(tiny_cfg, tmp_path / "results", free=need + 1)["need"] == need
    with pytest.raises(DiskSpaceError) as err:
        check_disk(tiny_cfg, tmp_path / "results", free=need // 2)
    assert str(need) in str(err.value) and str(need // 2) in str(err.value)


def test_workflow_refuses_to_start_without_disk(tiny_cfg, tmp_path):
    need = plan_workflow(tiny_cfg, exact=False)["disk_peak_bytes"]
    assert snakemake(tmp_path, "-n", "train", env={"PIXELPIPE_FREE_BYTES": "1000"}).returncode == 0  # a dry run plans nothing
    proc = snakemake(tmp_path, "train", env={"PIXELPIPE_FREE_BYTES": "1000"}, check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "exceeds" in out and f"({need} bytes)" in out and "(1000 bytes)" in out
    assert not (tmp_path / "results").exists()  # refused before any job ran
    # (the accepting side is exercised by every workflow run, e.g. the slow tests' tiny run)


def test_plan_cli_prints_table(capsys):
    from pixelpipe.plan.cli import main

    assert main(["--config", str(TINY), "--results", "/nonexistent/results"]) == 0
    out = capsys.readouterr().out
    assert "| train_teacher/teacher |" in out and "| quantize_onnx/student |" in out and "peak (upper bound)" in out


@pytest.mark.slow
def test_plan_cli_from_a_non_editable_install(tmp_path):
    """`pip install .` (a copy, not the checkout) carries the schema: the planner runs outside the repository."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(repo)], check=True, cwd=tmp_path)
    assert (target / "pixelpipe" / "config" / "schema.yaml").is_file()
    shutil.copy(TINY, tmp_path / "config.yaml")
    proc = subprocess.run([sys.executable, "-m", "pixelpipe.plan", "--config", "config.yaml"], cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target), "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| train_teacher/teacher |" in proc.stdout


@pytest.mark.slow
def test_predictions_within_tolerance_on_tiny(tiny_workdir):
    """Every stage's predicted peak host RAM and disk (results/plan.json) against StageMeter's measurement (CPU)."""
    workdir = tiny_workdir
    plan = {s["key"]: s for s in read_json(workdir / "results" / "plan.json")["stages"]}
    metrics = sorted((workdir / "results" / "metrics").glob("*/*.json"))
    # corpus, baseline, 3 render, teacher, 5 encode, 3 consolidate, student, export, quantize, deploy
    assert len(metrics) == 18 and set(plan) == {f"{p.parent.name}/{p.stem}" for p in metrics}
    failures = []
    for path in metrics:
        m = read_json(path)
        pred = plan[f"{path.parent.name}/{path.stem}"]
        for key, tol in (("peak_host_bytes", TOLERANCE_PCT), ("disk_written_bytes", DISK_TOLERANCE_PCT)):
            err = 100 * (pred[key] - m[key]) / m[key]
            if abs(err) > tol and not (key == "disk_written_bytes" and abs(pred[key] - m[key]) <= SMALL_FILE_SLACK):
                failures.append(f"{m['rule']}/{path.stem} {key}: predicted {pred[key]}, measured {m[key]} ({err:+.1f} %)")
    assert not failures, "\n".join(failures)
