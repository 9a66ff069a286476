"""Data-parallel training (torchrun, gloo on CPU): the ranks split each batch, end identical, and match one process.

Tolerance: two processes compute the same global batch mean as one process, only summed in another
order (two half-batch means averaged by the all-reduce), so they differ by float32 rounding (~1e-7
relative per step), which AdamW's division by sqrt(v) can amplify for near-zero gradients as steps add
up. Measured on the toy run: loss curves 2.4e-7 apart, parameters 7e-6. Asserted with 100x headroom:
losses within 1e-5 relative, parameters within 1e-3 absolute (they are O(0.1)).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from pixelpipe.config.resolve import ConfigError, load_config, resolve_config
from pixelpipe.data.windows import random_windows
from pixelpipe.model.checkpoint import load_model
from pixelpipe.train.sampling import StepBatchSampler
from pixelpipe.train.run import train_teacher
from tests._engine_utils import ToyImages, engine_settings, make_trainer, state
from tests.workflow_utils import REPO, TINY, snakemake

LOSS_RTOL, PARAM_ATOL = 1e-5, 1e-3
TOY = {"n": 64, "batch": 8, "epochs": 2, "accum": 2, "train": {"window_prob": 1.0, "window_min_chars": 1}}


def torchrun_toy(out: Path, processes: int = 2, **spec) -> list[dict]:
    """tests/ddp_worker.py in `processes` gloo ranks; each rank's parameters and loss curve."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
           str(REPO / "tests" / "ddp_worker.py"), str(out), json.dumps({**TOY, **spec})]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [{**json.loads((out / f"rank{r}.json").read_text()), "params": load_file(str(out / f"rank{r}.safetensors"))}
            for r in range(processes)]


def one_process(ckpt: Path | None = None):
    trainer = make_trainer(ToyImages(TOY["n"]), batch_size=TOY["batch"], epochs=TOY["epochs"], train=TOY["train"],
                           engine=engine_settings(grad_accum_steps=TOY["accum"], loss_every_steps=1), ckpt_dir=ckpt)
    result = trainer.fit()
    params = state(trainer.model) | {f"objective.{k}": v for k, v in state(trainer.objective).items()}
    return result, params


def assert_close_losses(a: list, b: list) -> None:
    assert [s for s, _ in a] == [s for s, _ in b]  # the same steps
    np.testing.assert_allclose([v for _, v in a], [v for _, v in b], rtol=LOSS_RTOL)


def assert_close_params(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst < PARAM_ATOL, worst


def test_ranks_partition_each_micro_batch_of_one_process():
    one = StepBatchSampler(40, 8, 5, 7, seed=3)
    ranks = [StepBatchSampler(40, 8, 5, 7, seed=3, rank=r, world=2) for r in range(2)]
    for s in [one, *ranks]:
        s.set_position(2, 4)  # resumed at step 2 with micro-batch 4 (accumulation 2)
    for whole, *parts in zip(one, *ranks):
        assert [len(p) for p in parts] == [2, 2] and parts[0] + parts[1] == whole
    with pytest.raises(ValueError, match="does not split over 2 processes"):
        ranks[0].set_position(0, 1)


def test_window_draws_of_a_rank_are_its_rows_of_the_whole_batch():
    glyphs = torch.randint(1, 50, (6, 4))
    lengths = torch.tensor([4, 3, 4, 2, 4, 4])

    def windows(rows=None, sl=slice(None)):
        return random_windows(glyphs[sl], lengths[sl], torch.Generator().manual_seed(7), 1.0, 1, rows=rows)

    whole = windows()
    halves = [windows((0, 6), slice(0, 3)), windows((3, 6), slice(3, 6))]
    assert torch.equal(whole[0], torch.cat([h[0] for h in halves]))
    assert torch.equal(whole[1], torch.cat([h[1] for h in halves]))


def test_batch_must_split_over_accumulation_and_processes():
    with pytest.raises(ConfigError, match=r"teacher.train.batch_size \(30\).*engine.ddp_processes \(4\)"):
        resolve_config({"engine": {"ddp_processes": 4}, "teacher": {"train": {"batch_size": 30}}})


def test_two_gloo_processes_end_identical_and_match_one_process(tmp_path):
    ranks = torchrun_toy(tmp_path / "ddp", ckpt=str(tmp_path / "ckpt"))
    assert all(torch.equal(ranks[0]["params"][k], ranks[1]["params"][k]) for k in ranks[0]["params"])
    ddp = ranks[0]["resolved"]["ddp"]
    assert ddp == {"processes": 2, "nodes": 1, "backend": "gloo", "micro_batch_per_process": 2, "ranks_identical": True}
    assert ranks[0]["loss_curve"] == ranks[1]["loss_curve"]  # the reading is the all-reduced loss
    result, params = one_process()
    assert len(result.loss_curve) == 16  # 64 samples / 8 = 8 steps per epoch, 2 epochs
    assert_close_losses(ranks[0]["loss_curve"], result.loss_curve)
    assert_close_params(ranks[0]["params"], params)
    # rank 0 alone wrote checkpoints; one process resumes from one of them and lands where DDP did
    ckpts = sorted((tmp_path / "ckpt").glob("step-*.json"))
    assert [p.name for p in ckpts] == [f"step-{s}.json" for s in (10, 12, 14, 16, 2, 4, 6, 8)]
    for p in (tmp_path / "ckpt").glob("step-*"):
        if int(p.name.split("-")[1].split(".")[0]) > 6:
            p.unlink()
    resumed, resumed_params = one_process(ckpt=tmp_path / "ckpt")
    assert resumed.resolved["resumed_from_step"] == 6
    assert_close_params(resumed_params, ranks[0]["params"])


@pytest.mark.slow
def test_ddp_resume_is_exact(tmp_path):
    """Kill-and-resume at the same world size: the resumed run's parameters are bit-identical."""
    full = torchrun_toy(tmp_path / "full", ckpt=str(tmp_path / "ckpt"))
    for p in (tmp_path / "ckpt").glob("step-*"):
        if int(p.name.split("-")[1].split(".")[0]) > 4:
            p.unlink()
    resumed = torchrun_toy(tmp_path / "resumed", ckpt=str(tmp_path / "ckpt"))
    assert resumed[0]["resolved"]["resumed_from_step"] == 4
    assert all(torch.equal(full[0]["params"][k], resumed[0]["params"][k]) for k in full[0]["params"])
    assert resumed[0]["loss_curve"] == full[0]["loss_curve"]  # the curve travels in the checkpoint


@pytest.mark.slow
def test_tiny_config_trains_teacher_and_student_in_two_processes(tiny_workdir, tmp_path):
    """The rules under torchrun (engine.ddp_processes: 2): both stages train, the teacher as one process does."""
    workdir = Path(shutil.copytree(tiny_workdir, tmp_path / "copy", symlinks=True))
    shutil.rmtree(workdir / "results/teacher/checkpoints")  # else the finished run's last checkpoint is resumed
    overrides = {"engine": {"ddp_processes": 2, "loss_every_steps": 1}}
    snakemake(workdir, "train", "--forcerun", "train_teacher", overrides=overrides)
    metrics = {role: json.loads((workdir / f"results/metrics/train_{role}/{role}.json").read_text())
               for role in ("teacher", "student")}
    for role, m in metrics.items():
        assert m["resolved"]["ddp"]["processes"] == 2 and m["resolved"]["ddp"]["ranks_identical"], role
        assert len(m["loss_curve"]) == 9, role  # 304 samples / 32 = 9 steps, a reading after each
        assert "torch.distributed.run --standalone --nproc_per_node=2" in (
            workdir / f"logs/train_{role}/{role}.log").read_text()
    assert sorted(p.name for p in (workdir / "results/checkpoints").glob("step-*.json")) == ["step-8.json",
                                                                                          "step-9.json"]
    cfg = load_config(TINY, overrides)
    single, _ = train_teacher(cfg, workdir / "results/cache", workdir / "results/corpus/labels.json",
                              tmp_path / "single", threads=2, log=lambda m: None)
    assert_close_losses(metrics["teacher"]["loss_curve"], single.loss_curve)
    ddp_model, single_model = (load_model(d)[0] for d in (workdir / "results/teacher", tmp_path / "single"))
    assert_close_params(state(ddp_model), state(single_model))
