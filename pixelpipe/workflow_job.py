"""The opening lines every workflow script shares, as one context manager.

`with stage(snakemake) as (log, meter):` routes the job's output into its log
file and, when the rule declares a `metrics` output, measures the job with a
StageMeter over every other output. The stage name comes from STAGES (the
`render_{split}` rules are the `render` stage). Scripts read only what their
rule declares (params, input, output, threads, resources, log), never
`snakemake.config`: the rule's params decide what reruns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .config.stages import STAGE_RULES
from .core.logs import stage_log
from .core.measure import StageMeter


def stage_name(rule: str) -> str:
    """The STAGES entry a Snakemake rule belongs to (`render_val` -> `render`); helper rules keep their name."""
    return next((s for s in STAGE_RULES if rule == s or rule.startswith(s + "_")), rule)


@contextlib.contextmanager
def stage(sm: Any) -> Iterator[tuple[Callable[[str], None], StageMeter | None]]:
    """(log, meter) for a job: its log file, and a StageMeter when the rule has a `metrics` output."""
    with stage_log(sm.log[0] if sm.log else None) as log:
        metrics = getattr(sm.output, "metrics", None)
        if metrics is None:
            yield log, None
            return
        outputs = [str(f) for f in sm.output if str(f) != str(metrics)]
        with StageMeter(stage_name(sm.rule), metrics, outputs) as meter:
            meter.record(threads=getattr(sm, "threads", 1))  # its cores: the planner's time factors count sharing
            yield log, meter


def training_config(sm: Any, role: str) -> dict:
    """The config a training stage reads, rebuilt from what its rule declares: the role's section, the
    output-affecting engine switches, seed and device in params; the runtime-only switches in resources."""
    from .config.resolve import engine_section

    return {role: getattr(sm.params, role), "engine": engine_section(sm.params.engine, sm.resources),
            "seed": sm.params.seed, "hardware": {"device": sm.params.device, "profile": sm.params.profile}}
