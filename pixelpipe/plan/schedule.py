"""The run as Snakemake would schedule it on one machine: which jobs run side by side, how much they slow each
other down, and the whole run's wall time.

Snakemake starts a ready job while the threads of the running jobs fit `--cores`; the machine then shares its
real cores between them. A job's speed is 1 / max(1, sum of the running jobs' threads (each at most the
machine's cores) / machine cores): two 2-thread encode jobs on 2 cores each run at half speed, and the plan
says so (`contention`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .inputs import PlanSettings

# What each rule waits for (the rules' inputs, by rule): a job starts once every job of these rules is done.
RULE_DEPENDS: dict[str, tuple[str, ...]] = {
    "corpus": (), "baseline": ("corpus",), "render": ("corpus",), "train_teacher": ("render",),
    "encode": ("train_teacher",), "consolidate": ("encode",), "train_student": ("consolidate",),
    "export_onnx": ("train_student",), "quantize_onnx": ("export_onnx",),
    "deploy_benchmark": ("quantize_onnx",), "evaluate": ("train_teacher", "quantize_onnx", "baseline"),
}


@dataclass
class ScheduledJob:
    key: str
    rule: str
    threads: int
    solo_s: float  # its time alone on the machine (start-up and work, scaled by this machine's time factors)
    overhead_s: float = 0.0  # process start and imports, outside the measured stage body
    start_s: float = 0.0
    end_s: float = 0.0
    contention: float = 1.0  # mean sharing over its run (1 = its cores to itself)


def simulate(jobs: Sequence[ScheduledJob], snakemake_cores: int, machine_cores: int,
             depends: Mapping[str, tuple[str, ...]] = RULE_DEPENDS) -> float:
    """Fill in each job's start, end and contention; return the run's wall time (s). Jobs are started in the
    given order among those ready, as Snakemake's greedy scheduler does for jobs of equal priority."""
    remaining = {id(j): j.solo_s for j in jobs}
    pending_rules: dict[str, int] = {}
    for j in jobs:
        pending_rules[j.rule] = pending_rules.get(j.rule, 0) + 1
    waiting = list(jobs)
    running: list[ScheduledJob] = []
    shared: dict[int, float] = {id(j): 0.0 for j in jobs}
    now = 0.0
    while waiting or running:
        used = sum(min(j.threads, snakemake_cores) for j in running)
        for j in list(waiting):
            ready = all(pending_rules.get(d, 0) == 0 for d in depends.get(j.rule, ()))
            want = min(j.threads, snakemake_cores)
            if ready and (used + want <= snakemake_cores or not running):
                waiting.remove(j)
                running.append(j)
                j.start_s = now
                remaining[id(j)] += j.overhead_s
                used += want
        if not running:  # a job whose dependencies never finish (not in this plan): start it anyway
            j = waiting.pop(0)
            j.start_s = now
            remaining[id(j)] += j.overhead_s
            running.append(j)
            continue
        demand = sum(min(j.threads, machine_cores) for j in running)
        slow = max(1.0, demand / machine_cores)
        step = min(remaining[id(j)] for j in running) * slow
        for j in running:
            remaining[id(j)] -= step / slow
            shared[id(j)] += step * slow
        now += step
        for j in [j for j in running if remaining[id(j)] <= 1e-9]:
            running.remove(j)
            j.end_s = now
            pending_rules[j.rule] -= 1
            span = j.end_s - j.start_s
            j.contention = shared[id(j)] / span if span > 0 else 1.0
    return now


# Cores each rule asks Snakemake for (its `threads:`; the training rules' grow with engine.ddp_processes, the
# benchmark's is deploy_benchmark.threads or every core); rules not listed ask for one.
RULE_THREADS = {"train_teacher": 4, "train_student": 4, "encode": 2, "baseline": 2, "export_onnx": 2,
                "quantize_onnx": 2, "evaluate": 2}
# A job's process start, imports and file checks outside its measured stage body, until a run measures them
# (Snakemake's benchmark time less the StageMeter wall): torch stages import more.
PROCESS_OVERHEAD_S = {"data": 1.5, "training": 4.0, "inference": 3.0}


def rule_threads(rule: str, settings: PlanSettings) -> int:
    """The cores a job of `rule` asks Snakemake for under these settings (the rule's `threads:`)."""
    if rule in ("train_teacher", "train_student"):
        return max(RULE_THREADS[rule], settings.engine.ddp_processes)
    if rule == "deploy_benchmark":
        return settings.deploy_benchmark.threads or os.cpu_count() or 1
    return RULE_THREADS.get(rule, 1)


DEFAULT_CORES = 4  # the README's `snakemake --cores 4`


def schedule_stages(stages: Sequence, time_factors, settings: PlanSettings, cores: int,
                    machine_cores: int | None = None) -> dict:
    """Scale every StagePlan's time by this machine's time factors, schedule the run, and set each stage's `wall_s`
    (its stage body as measured, with the sharing of cores) and `detail['time']`; returns the run's summary for the
    plan."""
    from .timefactors import RULE_KIND

    machine_cores = machine_cores or os.cpu_count() or 1
    jobs = []
    for s in stages:
        factor, source = time_factors.factor(s.rule)
        body = time_factors.startup(s.rule, s.time.startup_s) + s.time.work_s * factor
        overhead = time_factors.overhead(s.rule, PROCESS_OVERHEAD_S[RULE_KIND.get(s.rule, "data")])
        jobs.append(ScheduledJob(s.key, s.rule, rule_threads(s.rule, settings), body, overhead))
        s.detail["time"] = {"published_s": round(s.time.total_s, 3), "factor": factor, "factor_from": source,
                            "alone_s": round(body, 3), "threads": jobs[-1].threads}
    wall = simulate(jobs, cores, machine_cores)
    for s, j in zip(stages, jobs):
        s.wall_s = j.solo_s * j.contention
        s.detail["time"]["contention"] = round(j.contention, 3)
        s.detail["time"]["start_s"], s.detail["time"]["end_s"] = round(j.start_s, 2), round(j.end_s, 2)
    shared = sorted({j.rule for j in jobs if j.contention > 1.05})
    peak = 0
    for t in sorted({j.start_s for j in jobs}):  # host RAM of the jobs running together, at each job start
        peak = max(peak, sum(s.peak_host_bytes for s, j in zip(stages, jobs) if j.start_s <= t < j.end_s))
    longest = max(zip(stages, jobs), key=lambda p: p[1].end_s - p[1].start_s)
    return {"wall_s": round(wall, 1), "cores": cores, "machine_cores": machine_cores,
            "machine": time_factors.machine, "time_factors_file": time_factors.source,
            "rules_with_factors": sorted(time_factors.rules),
            "longest_job": {"key": longest[0].key, "wall_s": round(longest[1].end_s - longest[1].start_s, 1)},
            "peak_host_bytes_concurrent": int(peak), "rules_sharing_cores": shared}
