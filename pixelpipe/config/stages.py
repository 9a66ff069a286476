"""The workflow's stages in DAG order: the one list the rules' metrics inputs, the planner and the reports share.

A stage is one Snakemake rule whose jobs each write a StageMeter JSON at
`results/metrics/{rule}/{job}.json`. `jobs` says how many jobs a rule has: one
(`job` is its fixed name), one per split, or one per cache shard of an encoded
split. Helper rules (plan, report, benchmark_matrix and the targets all,
train, benchmark) measure nothing and are not stages; tests/test_stages.py
checks this list against the `rule` lines in rules/*.smk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ONCE, PER_SPLIT, PER_ENCODED_SPLIT, PER_ENCODED_SHARD = "once", "split", "encoded_split", "encoded_shard"


@dataclass(frozen=True)
class Stage:
    rule: str
    jobs: str  # ONCE | PER_SPLIT | PER_ENCODED_SPLIT | PER_ENCODED_SHARD
    job: str = ""  # the job's name when it runs once

    def job_names(self, n_shards: Mapping[str, int], encoded_splits: Iterable[str]) -> list[str]:
        """The names of this stage's jobs (the stem of each metrics file)."""
        if self.jobs == ONCE:
            return [self.job]
        if self.jobs == PER_SPLIT:
            return list(n_shards)
        if self.jobs == PER_ENCODED_SPLIT:
            return list(encoded_splits)
        return [f"{split}-{i:05d}" for split in encoded_splits for i in range(n_shards[split])]


STAGES: tuple[Stage, ...] = (
    Stage("corpus", ONCE, "all"),
    Stage("baseline", ONCE, "baseline"),
    Stage("render", PER_SPLIT),  # rules render_{split}
    Stage("train_teacher", ONCE, "teacher"),
    Stage("encode", PER_ENCODED_SHARD),
    Stage("consolidate", PER_ENCODED_SPLIT),
    Stage("train_student", ONCE, "student"),
    Stage("export_onnx", ONCE, "student"),
    Stage("quantize_onnx", ONCE, "student"),
    Stage("deploy_benchmark", ONCE, "student"),
    Stage("evaluate", ONCE, "heldout"),
)
STAGE_RULES: tuple[str, ...] = tuple(s.rule for s in STAGES)


def job_files(template: str, n_shards: Mapping[str, int], encoded_splits: Iterable[str]) -> list[str]:
    """`template` (with `{stage}` and `{job}`) filled for every job, in DAG order."""
    encoded_splits = list(encoded_splits)
    return [template.format(stage=s.rule, job=job) for s in STAGES for job in s.job_names(n_shards, encoded_splits)]


def metrics_files(n_shards: Mapping[str, int], encoded_splits: Iterable[str], root: str = "results") -> list[str]:
    """Every job's StageMeter JSON, in DAG order: what the report compares against the plan."""
    return job_files(root + "/metrics/{stage}/{job}.json", n_shards, encoded_splits)


def benchmark_files(n_shards: Mapping[str, int], encoded_splits: Iterable[str]) -> list[str]:
    """Every job's Snakemake `benchmark:` file, in DAG order (each rule writes `benchmarks/{stage}/{job}.tsv`)."""
    return job_files("benchmarks/{stage}/{job}.tsv", n_shards, encoded_splits)
