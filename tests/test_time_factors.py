"""The planner's time factors: fitted from measured jobs, kept per machine in a versioned file (time_factors.file),
applied to the published model; the schedule's sharing of cores; every job predicted on CPU and GPU profiles."""

from __future__ import annotations

import json

import pytest

from pixelpipe.config.resolve import load_config
from pixelpipe.plan.timefactors import (
    RuleFactor,
    TimeFactors,
    fit,
    interval_contention,
    load_time_factors,
    machine_key,
    save_time_factors,
)
from pixelpipe.plan.cli import main as plan_main
from pixelpipe.plan.schedule import ScheduledJob, simulate
from pixelpipe.plan.workflow import plan_workflow
from tests.workflow_utils import TINY


def test_two_jobs_on_two_cores_each_asking_two_share_them():
    jobs = [{"started_at": 0.0, "finished_at": 10.0, "threads": 2}, {"started_at": 0.0, "finished_at": 10.0, "threads": 2},
            {"started_at": 10.0, "finished_at": 15.0, "threads": 2}]
    assert interval_contention(jobs, cores=2) == pytest.approx([2.0, 2.0, 1.0])
    # half the first job's time beside another: 1.5 on average
    half = [{"started_at": 0.0, "finished_at": 10.0, "threads": 2}, {"started_at": 5.0, "finished_at": 10.0, "threads": 2}]
    assert interval_contention(half, cores=2)[0] == pytest.approx(1.5)


def test_schedule_runs_side_by_side_within_snakemake_cores_and_respects_dependencies():
    def jobs():
        return [ScheduledJob("train_teacher/teacher", "train_teacher", 4, 2.0), ScheduledJob("encode/a", "encode", 2, 10.0),
                ScheduledJob("encode/b", "encode", 2, 10.0)]

    together = jobs()
    wall = simulate(together, snakemake_cores=4, machine_cores=2)
    a, b = together[1], together[2]
    assert a.start_s == b.start_s == pytest.approx(2.0)  # after the teacher it encodes with
    assert a.contention == pytest.approx(2.0) and wall == pytest.approx(22.0)
    serial = jobs()
    wall = simulate(serial, snakemake_cores=2, machine_cores=2)  # --cores 2: one encode at a time, each alone
    assert serial[2].start_s == pytest.approx(12.0) and serial[2].contention == pytest.approx(1.0)
    assert wall == pytest.approx(22.0)


def _plan_and_metrics(factor: float):
    plan = {"stages": [{"key": "encode/a", "rule": "encode", "startup_s": 1.0, "work_s": 4.0},
                       {"key": "encode/b", "rule": "encode", "startup_s": 1.0, "work_s": 2.0},
                       {"key": "corpus/all", "rule": "corpus", "startup_s": 0.5, "work_s": 1.0}]}
    metrics = [{"key": "encode/a", "rule": "encode", "wall_s": 1.0 + 4.0 * factor, "started_at": 0.0,
                "finished_at": 1.0 + 4.0 * factor, "threads": 2, "snakemake_benchmark": {"s": 3.0 + 4.0 * factor}},
               {"key": "encode/b", "rule": "encode", "wall_s": 1.0 + 2.0 * factor, "started_at": 100.0,
                "finished_at": 101.0 + 2.0 * factor, "threads": 2}]
    return plan, metrics


def test_fit_recovers_the_factor_and_states_the_error_before_and_after(tmp_path):
    plan, metrics = _plan_and_metrics(3.0)
    fitted = fit(plan, metrics, cores=2)
    assert set(fitted) == {"encode"}  # corpus was not measured: no factor invented for it
    f = fitted["encode"]
    assert f.factor == pytest.approx(3.0) and f.jobs == 2
    assert f.error_after_pct == pytest.approx(0.0) and f.error_before_pct > 50
    assert f.overhead_s == pytest.approx(2.0)


def test_fit_divides_out_the_measured_sharing_of_cores():
    plan, metrics = _plan_and_metrics(1.0)
    for m in metrics:  # both ran at once on 2 cores, each twice as long as alone
        m["started_at"], m["finished_at"], m["wall_s"] = 0.0, 2 * (1.0 + 4.0), 2 * (1.0 + 4.0)
    plan["stages"][1]["work_s"] = 4.0
    assert fit(plan, metrics, cores=2)["encode"].factor == pytest.approx(1.0)


def test_time_factors_file_merges_per_machine_and_is_versioned(tmp_path):
    path = tmp_path / "time_factors.json"
    save_time_factors(path, "cpu: A x2", {"encode": RuleFactor(2.0, 3, 50.0, 5.0)})
    save_time_factors(path, "cpu: B x8", {"encode": RuleFactor(0.5, 3, 50.0, 5.0)})
    save_time_factors(path, "cpu: A x2", {"corpus": RuleFactor(1.5, 1, 20.0, 0.0, 0.4)})
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["machines"]["cpu: A x2"]["runs"] == 2
    a = load_time_factors(path, "cpu: A x2")
    assert a.factor("encode") == (2.0, "measured (3 jobs)") and a.factor("corpus")[0] == 1.5
    assert a.factor("export_onnx") == (2.0, "inference jobs' median")  # a kind's median for an unmeasured rule
    assert load_time_factors(path, "cpu: C x4").factor("encode") == (1.0, "published default")
    assert load_time_factors(tmp_path / "none.json", "x").rules == {}
    path.write_text(json.dumps({"version": 99}))
    with pytest.raises(ValueError, match="version"):
        load_time_factors(path, "cpu: A x2")


def test_a_calibration_json_from_before_the_rename_is_read_until_time_factors_json_exists(tmp_path):
    """The file was calibration.json (report.calibration): a machine's factors survive the rename, and the next
    report writes them, with its own, to time_factors.json."""
    legacy = tmp_path / "calibration.json"
    save_time_factors(legacy, "m", {"encode": RuleFactor(2.0, 3, 50.0, 5.0, points=[[1.0, 4.0, 9.0]])})
    path = tmp_path / "time_factors.json"
    old = load_time_factors(path, "m")
    assert old.factor("encode")[0] == 2.0 and old.source == str(legacy)
    save_time_factors(path, "m", {"corpus": RuleFactor(1.5, 1, 20.0, 0.0)})
    new = load_time_factors(path, "m")
    assert new.source == str(path) and set(new.rules) == {"encode", "corpus"}
    assert json.loads(path.read_text())["machines"]["m"]["runs"] == 2
    other = tmp_path / "cluster.json"  # a name the user chose: no fallback
    assert load_time_factors(other, "m").rules == {}


def test_a_report_with_nothing_fitted_still_writes_the_declared_file(tmp_path):
    """The report rule declares the file as an output: it exists after every report, unchanged in content."""
    path = tmp_path / "time_factors.json"
    save_time_factors(path, "m", {})
    assert json.loads(path.read_text()) == {"version": 1, "machines": {}}


@pytest.fixture(scope="module")
def tiny_cfg():
    return load_config(TINY, {"time_factors": {"file": None}})


def test_every_job_is_predicted_and_a_factor_scales_its_work(tiny_cfg):
    plan = plan_workflow(tiny_cfg, cores=2, time_factors=TimeFactors(machine_key()))
    assert all(s.get("wall_s", 0) > 0 for s in plan["stages"]), [s["key"] for s in plan["stages"] if not s.get("wall_s")]
    teacher = next(s for s in plan["stages"] if s["rule"] == "train_teacher")
    scaled = plan_workflow(tiny_cfg, cores=2, time_factors=TimeFactors(machine_key(), {
        "train_teacher": RuleFactor(3.0, 1, 0.0, 0.0)}))
    t3 = next(s for s in scaled["stages"] if s["rule"] == "train_teacher")
    alone = teacher["startup_s"] + 3.0 * teacher["work_s"]
    assert t3["wall_s"] == pytest.approx(alone * t3["detail"]["time"]["contention"])
    assert t3["detail"]["time"]["factor_from"] == "measured (1 jobs)"
    run = scaled["run"]
    assert run["wall_s"] > plan["run"]["wall_s"] and run["rules_with_factors"] == ["train_teacher"]
    assert run["longest_job"]["key"] and run["peak_host_bytes_concurrent"] >= scaled["peak_host_bytes"]


def test_gpu_profiles_predict_every_job_before_any_gpu_run(tiny_cfg):
    cfg = load_config(TINY, {"hardware": {"profile": "t4"}, "time_factors": {"file": None}})
    plan = plan_workflow(cfg, cores=4)
    assert plan["device"] == "cuda"
    assert all(s.get("wall_s", 0) > 0 for s in plan["stages"])


def test_plan_command_prints_the_four_numbers(capsys, tmp_path):
    assert plan_main(["--config", str(TINY), "--cores", "2", "--time-factors", str(tmp_path / "none.json")]) in (0, 1)
    out = capsys.readouterr().out
    for line in ("total wall:", "peak RAM:", "peak disk:", "longest job:", "sharing cores:"):
        assert line in out
    assert "the published model" in out


def test_jobs_of_different_sizes_separate_the_start_up_from_the_rate():
    plan = {"stages": [{"key": f"render/{n}", "rule": "render", "startup_s": 0.3, "work_s": w}
                       for n, w in (("train", 10.0), ("val", 1.0), ("test", 1.0))]}
    metrics = [{"key": f"render/{n}", "rule": "render", "wall_s": 2.0 + 3.0 * w, "started_at": 10.0 * i,
                "finished_at": 10.0 * i + 2.0 + 3.0 * w, "threads": 1}
               for i, (n, w) in enumerate((("train", 10.0), ("val", 1.0), ("test", 1.0)))]
    f = fit(plan, metrics, cores=2)["render"]
    assert f.startup_s == pytest.approx(2.0) and f.factor == pytest.approx(3.0) and f.error_after_pct == pytest.approx(0.0)
    cal = TimeFactors("m", {"render": f})
    assert cal.startup("render", 0.3) == pytest.approx(2.0) and cal.startup("corpus", 0.4) == 0.4


def test_runs_of_two_sizes_in_the_file_separate_the_start_up(tmp_path):
    """One job per run cannot tell a fixed cost from a rate; the file keeps each run's points and refits."""
    path = tmp_path / "time_factors.json"
    small = RuleFactor(2.0, 1, 0.0, 0.0, points=[[3.0, 10.0, 5.0 + 1.0 * 10.0]])
    big = RuleFactor(1.0, 1, 0.0, 0.0, points=[[3.0, 100.0, 5.0 + 1.0 * 100.0]])
    save_time_factors(path, "m", {"train_student": small})
    assert load_time_factors(path, "m").factor("train_student")[0] == pytest.approx(1.2)  # (15 - 3) / 10
    save_time_factors(path, "m", {"train_student": big})
    cal = load_time_factors(path, "m")
    assert cal.factor("train_student")[0] == pytest.approx(1.0) and cal.startup("train_student", 3.0) == pytest.approx(5.0)
