"""The reports: every stage in memory/time reports, errors computed, plots written;
the optimization matrix's variant list and one measured variant."""

from __future__ import annotations

import pytest

from pixelpipe.config.resolve import load_config
from pixelpipe.core.io import read_json, write_json
from pixelpipe.plan.workflow import plan_workflow
from pixelpipe.report.matrix import benchmark_markdown, with_prediction
from pixelpipe.train.matrix import MatrixRun, build_matrix, run_one
from pixelpipe.report.reports import PLOTS, err_pct, write_reports
from tests.workflow_utils import TINY

REPORT_FILES = ["memory.json", "memory.md", "time.json", "time.md", "summary.md", *PLOTS]


@pytest.fixture(scope="module")
def tiny_cfg():
    return load_config(TINY)


@pytest.fixture()
def fake_results(tmp_path, tiny_cfg):
    """A results tree whose metrics are the plan scaled by known factors (no workflow run needed)."""
    results = tmp_path / "results"
    for i, s in enumerate(plan_workflow(tiny_cfg)["stages"]):
        samples = s.get("samples", 0)  # deploy_benchmark records no sample count
        m = {"rule": s["rule"], "wall_s": 1.0 + i, "samples": samples, "samples_per_s": samples / (1.0 + i),
             "peak_host_bytes": int(s["peak_host_bytes"] / 1.25), "disk_written_bytes": s["disk_written_bytes"],
             "started_at": 100.0 + i, "finished_at": 101.0 + i, "predicted": {k: v for k, v in s.items() if k not in ("rule", "name", "key")}}
        if s["rule"].startswith("train_"):
            m["components"] = {c: {"seconds": 0.1, "share": 0.2, "calls": 3} for c in ("data_wait", "forward", "backward", "optimizer", "h2d_augment")}
            m["forward_parts"] = {p: {"seconds": 0.02, "share": 0.25, "calls": 3} for p in ("embed", "recursion", "capsules", "head")}
        write_json(results / "metrics" / s["rule"] / f"{s['name']}.json", m)
        bench = tmp_path / "benchmarks" / s["rule"] / f"{s['name']}.tsv"
        bench.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text(f"s\th:m:s\tmax_rss\n{2.5 + i}\t0:00:02\t100\n")
    for role in ("teacher", "student"):
        (results / role).mkdir(parents=True)
        (results / role / "metrics.csv").write_text("epoch,step,split,loss,accuracy,lr,samples_per_s\n"
                                                    "1,9,train,2.9,,0.003,100\n1,9,val,2.8,0.1,,\n1,9,test,2.8,0.12,,\n")
    return results


def test_err_pct():
    assert err_pct(110, 100) == pytest.approx(10.0)
    assert err_pct(None, 100) is None and err_pct(5, 0) is None


def test_reports_from_metrics(fake_results, tiny_cfg, tmp_path):
    out = tmp_path / "reports"
    plan = plan_workflow(tiny_cfg)
    res = write_reports([fake_results / "metrics" / s["rule"] / f"{s['name']}.json" for s in plan["stages"]],
                        sorted((tmp_path / "benchmarks").rglob("*.tsv")), fake_results, plan, out)
    for f in REPORT_FILES:
        assert (out / f).stat().st_size > 0, f
    mem = read_json(out / "memory.json")
    keys = {s["key"] for s in mem["stages"]}
    assert keys == {s["key"] for s in plan_workflow(tiny_cfg)["stages"]}
    for s in mem["stages"]:
        host = s["resources"]["peak_host_bytes"]
        assert host["error_pct"] == pytest.approx(25.0, abs=0.01)  # measured = predicted / 1.25
        assert s["resources"]["disk_written_bytes"]["error_pct"] == pytest.approx(0.0, abs=1e-9)
    md = (out / "memory.md").read_text()
    assert md.count("| +25.0 % ⚠ |") == len(keys)  # flagged: outside ±15 %
    time_md = (out / "time.md").read_text()
    assert "forward by model part" in time_md and "| recursion |" in time_md
    assert "| corpus/all | " in time_md and "| 2.50 s |" in time_md  # the corpus job's benchmark row, paired by path
    assert read_json(out / "time.json")["stages"][0]["snakemake_benchmark"]["s"] == 2.5
    assert "Largest prediction error" in (out / "summary.md").read_text()
    # encoded shards leave the disk when their split consolidates
    disk = mem["disk_over_dag"]
    i = next(i for i, d in enumerate(disk) if d["after"] == "consolidate/train")
    assert disk[i]["predicted_bytes"] < disk[i - 1]["predicted_bytes"]
    assert res["rows"]


def test_benchmark_matrix_on_cpu_skips_with_reasons(tiny_cfg):
    run = MatrixRun.from_config(tiny_cfg)
    specs = build_matrix(run, "cpu")
    by = {s["name"]: s for s in specs}
    assert "fp32" in by["amp"]["skipped"]
    assert "cpu_compile" in by["compile"]["skipped"]
    assert by["baseline"]["skipped"] is None and by["channels_last"]["engine"]["channels_last"]
    assert by["accumulation x2"]["engine"]["grad_accum_steps"] == 2
    assert {"baseline, batch 16", "baseline, batch 64"} <= set(by)
    cuda = {s["name"]: s for s in build_matrix(run, "cuda", (8, 0))}
    assert cuda["amp (bf16)"]["skipped"] is None and cuda["compile"]["skipped"] is None


def test_benchmark_variant_measures_the_engine_step(tiny_cfg):
    cfg = {**tiny_cfg, "benchmark_matrix": {**tiny_cfg["benchmark_matrix"], "steps": 2, "warmup_steps": 1}}
    run = MatrixRun.from_config(cfg)
    assert MatrixRun.from_config(run.to_config()) == run  # what a variant's interpreter is handed
    spec = next(s for s in build_matrix(run, "cpu") if s["name"] == "accumulation x2")
    r = run_one(run, spec, threads=1)
    assert r["samples_per_s"] > 0 and r["peak_host_bytes"] > 100e6
    assert (r["micro_batch"], r["accum"]) == (16, 2)
    measured = with_prediction(run, {**spec, **r, "speedup": 1.0}, "cpu")
    assert measured["predicted_train_bytes"] > 0
    md = benchmark_markdown({"machine": "m", "device": "cpu", "teacher": {}, "image": [1, 16, 256], "steps": 2,
                             "warmup_steps": 1, "variants": [measured,
                                                             {"name": "amp", "skipped": "AMP on CPU: fp32"}]})
    assert "accumulation x2" in md and "skipped: AMP on CPU" in md


@pytest.mark.slow
def test_tiny_workflow_writes_reports_with_every_stage(tiny_workdir):
    workdir = tiny_workdir
    out = workdir / "results" / "reports"
    for f in REPORT_FILES:
        assert (out / f).stat().st_size > 0, f
    jobs = {f"{p.parent.name}/{p.stem}" for p in (workdir / "results" / "metrics").glob("*/*.json")}
    assert len(jobs) == 19  # 14 pipeline jobs + baseline + export_onnx, quantize_onnx, deploy_benchmark, evaluate
    assert {"export_onnx/student", "quantize_onnx/student", "deploy_benchmark/student", "evaluate/heldout"} <= jobs
    mem, tim = read_json(out / "memory.json"), read_json(out / "time.json")
    assert {s["key"] for s in mem["stages"]} == jobs == {s["key"] for s in tim["stages"]}
    md = (out / "memory.md").read_text() + (out / "time.md").read_text()
    for job in jobs:
        assert f"| {job} |" in md
    for s in mem["stages"]:  # measured and predicted side by side, for host RAM and disk
        for res in ("peak_host_bytes", "disk_written_bytes"):
            assert s["resources"][res]["measured"] > 0 and s["resources"][res]["predicted"] > 0
    train = next(s for s in tim["stages"] if s["key"] == "train_teacher/teacher")
    assert {"data_wait", "forward", "backward", "optimizer"} <= set(train["components"])
    assert set(train["forward_parts"]) == {"embed", "recursion", "capsules", "head"}
    enc = next(s for s in tim["stages"] if s["rule"] == "encode")
    assert "write" in enc["components"]
    assert train["snakemake_benchmark"]["s"] > 0  # Snakemake's own benchmark TSV is read too


def test_accuracy_summary_pools_the_heldout_sets(tmp_path):
    """The end-of-run summary names the held-out accuracy pooled over every set (clean text, all lengths)."""
    from pixelpipe.report.summary import accuracy_summary

    rows = [{"model": m, "set": s, "perturbation": p, "bucket": "all", "n": n, "correct": c}
            for m, per_set in {"student": {"prose": (10, 9), "ui": (30, 27)}, "ngram": {"prose": (10, 10), "ui": (30, 24)}}.items()
            for s, (n, c) in per_set.items() for p in ("clean", "typos")]
    write_json(tmp_path / "eval" / "evaluation.json", {"rows": rows, "sets": {"prose": 10, "ui": 30}})
    text = accuracy_summary(tmp_path)
    assert "held-out real text" in text and "student 90.00 %" in text and "ngram 85.00 %" in text
