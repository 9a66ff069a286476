"""Training on several nodes: srun starts one torchrun per node, the agents meet at a c10d rendezvous.

Three levels: the command lines a 2-node SLURM allocation yields (faked SLURM answers, runs anywhere); two
torchrun agents started on this host exactly as srun starts them on two nodes (no SLURM needed); and the tiny
teacher trained by Snakemake through a real two-node SLURM cluster (.ci/slurm-up.sh with two node entries on
this host, one slurmd each), compared with one process within test_ddp's tolerances.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pixelpipe.config.resolve import ConfigError, load_config, resolve_config
from pixelpipe.model.checkpoint import load_model
from pixelpipe.train import slurm_launch
from pixelpipe.train.ddp_launch import run_stage
from pixelpipe.train.run import train_teacher
from tests import slurm_cluster
from tests._engine_utils import state
from tests.test_ddp import TOY, assert_close_losses, assert_close_params, one_process
from tests.workflow_utils import REPO, TINY, snakemake

SLURM_ANSWERS = {  # what squeue and scontrol say inside job 4242 on nodes gpu-a017 and gpu-a018
    ("squeue", "-h", "-j", "4242", "-o", "%N"): "gpu-a[017-018]",
    ("scontrol", "show", "hostnames", "gpu-a[017-018]"): "gpu-a017\ngpu-a018",
    ("scontrol", "-o", "show", "node", "gpu-a017"):
        "NodeName=gpu-a017 Arch=x86_64 CoresPerSocket=32 NodeAddr=10.1.0.17 NodeHostName=gpu-a017 Version=22.05.8",
}


def fake_slurm(args: list[str]) -> str:
    return SLURM_ANSWERS[tuple(args)]


def test_command_lines_for_a_two_node_allocation():
    """The plugin's jobstep leaves only SLURM_JOB_ID: the nodes come from squeue, the address from NodeAddr."""
    alloc = slurm_launch.allocation(2, {"SLURM_JOB_ID": "4242"}, fake_slurm)
    assert alloc == slurm_launch.Allocation("4242", ("gpu-a017", "gpu-a018"), "10.1.0.17")
    cmd = slurm_launch.srun_torchrun_command(alloc, processes=4, threads=32, spec=Path("/shared/spec.json"))
    python = cmd[6]
    assert cmd == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=32",
                   "--kill-on-bad-exit=1", python, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=4",
                   "--rdzv_backend=c10d", "--rdzv_endpoint=10.1.0.17:19242", "--rdzv_id=4242",
                   "-m", "pixelpipe.train.ddp_launch", "/shared/spec.json"]
    # with the variable present no squeue is needed
    env = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu-a[017-018]"}
    answers = {k: v for k, v in SLURM_ANSWERS.items() if k[0] != "squeue"}
    assert slurm_launch.allocation(2, env, lambda a: answers[tuple(a)]) == alloc


def test_allocation_of_another_size_is_one_line_naming_the_key():
    with pytest.raises(slurm_launch.MultiNodeError, match=r"engine.nodes is 3, but SLURM job 4242 has 2 node") as err:
        slurm_launch.allocation(3, {"SLURM_JOB_ID": "4242"}, fake_slurm)
    assert "\n" not in str(err.value)


def test_several_nodes_outside_slurm_fail_before_training(tmp_path, monkeypatch):
    """The training stage's own entry point, as a job of the local executor would call it."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    kwargs = {"cfg": {}, "out_dir": tmp_path, "threads": 1}
    with pytest.raises(slurm_launch.MultiNodeError, match=r"^engine.nodes is 2, but this job runs outside SLURM "
                                                           r"\(no SLURM_JOB_ID\)") as err:
        run_stage("teacher", kwargs, processes=1, nodes=2, log=lambda m: None)
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())  # nothing left behind


def test_batch_must_split_over_the_processes_of_every_node():
    with pytest.raises(ConfigError, match=r"teacher.train.batch_size \(36\).*engine.ddp_processes \(2\) x "
                                          r"engine.nodes \(4\)"):
        resolve_config({"engine": {"ddp_processes": 2, "nodes": 4}, "teacher": {"train": {"batch_size": 36}}})
    assert resolve_config({"engine": {"ddp_processes": 2, "nodes": 4}})["engine"]["nodes"] == 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_torchrun_agents_meet_at_the_rendezvous_and_match_one_process(tmp_path):
    """Two agents started as srun starts them on two nodes (the same command, c10d on the first node's address),
    here both on 127.0.0.1: one rank each, ending identical and within test_ddp's tolerances of one process."""
    out = tmp_path / "ranks"
    out.mkdir()
    agent = slurm_launch.torchrun_agent(2, 1, f"127.0.0.1:{free_port()}", "pixelpipe-test")
    cmd = [*agent, str(REPO / "tests" / "ddp_worker.py"), str(out), json.dumps(TOY)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    agents = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
              for _ in range(2)]
    logs = [a.communicate(timeout=300)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], "\n".join(log[-3000:] for log in logs)
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    from safetensors.torch import load_file

    params = [load_file(str(out / f"rank{r}.safetensors")) for r in range(2)]
    assert ranks[0]["resolved"]["ddp"] == {"processes": 2, "nodes": 2, "backend": "gloo",
                                           "micro_batch_per_process": 2, "ranks_identical": True}
    assert all(params[0][k].equal(params[1][k]) for k in params[0])
    result, single = one_process()
    assert_close_losses(ranks[0]["loss_curve"], result.loss_curve)
    assert_close_params(params[0], single)


# ---- through a real two-node SLURM cluster ----

PROFILES = ("--profile", str(REPO / "profiles" / "slurm"), "--profile", str(REPO / "profiles" / "slurm-local"))
CACHE = [f"results/cache/{split}/manifest.json" for split in ("train", "val", "test")] + ["results/corpus/labels.json"]
TWO_NODES = {"engine": {"nodes": 2, "loss_every_steps": 1}}


@pytest.fixture(scope="module")
def two_node_cluster():
    reason = slurm_cluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    state_dir = Path(tempfile.mkdtemp(prefix="pp-slurm2-"))  # short: munge's socket path is limited to 108 bytes
    with slurm_cluster.local_cluster(state_dir, nodes=2) as env:
        yield state_dir, env
    shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def two_node_teacher(two_node_cluster, tmp_path_factory):
    """Corpus and cache locally, then train_teacher through sbatch with engine.nodes: 2 (one CPU per node)."""
    state_dir, env = two_node_cluster
    workdir = tmp_path_factory.mktemp("two_nodes")
    snakemake(workdir, *CACHE)
    t0 = time.perf_counter()
    snakemake(workdir, "results/teacher/model.safetensors", *PROFILES, "--set-threads", "train_teacher=1",
              overrides=TWO_NODES, env=env)
    (workdir / "slurm_seconds.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    return workdir, state_dir, env


@pytest.mark.slow
def test_teacher_trains_on_two_slurm_nodes(two_node_teacher):
    workdir, state_dir, env = two_node_teacher
    [job] = [j for j in slurm_cluster.job_history(env) if slurm_cluster.rule_of(j["comment"]) == "train_teacher"]
    record = {r["JobId"]: r for r in slurm_cluster.jobcomp_records(state_dir)}[job["id"]]
    assert (record["JobState"], record["NodeCnt"], record["ProcCnt"]) == ("COMPLETED", "2", "2")
    for node in ("pp-node1", "pp-node2"):  # srun's step ran a task on each node's slurmd
        assert f"launch task StepId={job['id']}.0 " in (state_dir / "log" / f"slurmd-{node}.log").read_text(), node
    log = (workdir / "logs/train_teacher/teacher.log").read_text()
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1" in log and "--nnodes=2 --nproc_per_node=1" in log
    metrics = json.loads((workdir / "results/metrics/train_teacher/teacher.json").read_text())
    assert metrics["resolved"]["ddp"] == {"processes": 2, "nodes": 2, "backend": "gloo",
                                          "micro_batch_per_process": 16, "ranks_identical": True}
    assert metrics["ddp_nodes"] == 2 and len(metrics["loss_curve"]) == 9  # 304 samples / 32, a reading each step
    assert not list((workdir / "results/teacher").glob(".ddp-*"))  # the shared spec directory is gone


@pytest.mark.slow
def test_two_slurm_nodes_train_as_one_process_does(two_node_teacher, tmp_path):
    workdir = two_node_teacher[0]
    cfg = load_config(TINY, {"engine": {"loss_every_steps": 1}})
    single, _ = train_teacher(cfg, workdir / "results/cache", workdir / "results/corpus/labels.json",
                              tmp_path / "single", threads=1, log=lambda m: None)
    metrics = json.loads((workdir / "results/metrics/train_teacher/teacher.json").read_text())
    assert_close_losses(metrics["loss_curve"], single.loss_curve)
    two_nodes, one = (load_model(d)[0] for d in (workdir / "results/teacher", tmp_path / "single"))
    assert_close_params(state(two_nodes), state(one))
