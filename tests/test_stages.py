"""The stage list is one declaration: the rules, the metrics inputs, the planner and the reports agree with STAGES."""

from __future__ import annotations

import re
from pathlib import Path

from pixelpipe.config.resolve import load_config
from pixelpipe.config.stages import STAGE_RULES, metrics_files
from pixelpipe.plan.workflow import plan_workflow
from pixelpipe.report import reports as report
from tests.workflow_utils import TINY

ROOT = Path(__file__).resolve().parents[1]
# Rules that are not stages: the planner, the reports, the optimization matrix, and the Snakefile's targets.
NOT_STAGES = {"plan", "report", "benchmark_matrix", "all", "train", "benchmark"}
# Rules declared once per split (`name: f"render_{_split}"`) are one stage.
PER_SPLIT_NAME = re.compile(r'^\s+f"(\w+)_\{_split\}"', re.MULTILINE)


def rule_names() -> set[str]:
    names = set()
    for f in [*ROOT.glob("rules/*.smk"), ROOT / "Snakefile"]:
        text = f.read_text()
        names |= set(re.findall(r"^rule (\w+):", text, re.MULTILINE)) | set(PER_SPLIT_NAME.findall(text))
    return names


def test_every_rule_is_a_stage_or_an_explicit_helper():
    rules = rule_names()
    assert rules - NOT_STAGES == set(STAGE_RULES), (
        f"rules missing from STAGES: {sorted(rules - NOT_STAGES - set(STAGE_RULES))}; "
        f"stages without a rule: {sorted(set(STAGE_RULES) - rules)}")


def test_reports_and_planner_follow_stages():
    assert report.RULE_ORDER == list(STAGE_RULES)
    plan = plan_workflow(load_config(TINY), exact=False)
    order = list(dict.fromkeys(s["rule"] for s in plan["stages"]))
    assert order == list(STAGE_RULES), "the planner predicts other stages, or in another order, than STAGES"


def test_metrics_files_cover_every_job():
    files = metrics_files({"train": 2, "val": 1, "test": 1}, ["train", "val"])
    assert files[0] == "results/metrics/corpus/all.json"
    assert "results/metrics/encode/train-00001.json" in files and "results/metrics/render/test.json" in files
    assert not any("/encode/test-" in f or "/consolidate/test" in f for f in files)
    assert {f.split("/")[2] for f in files} == set(STAGE_RULES)
