# Snakemake adapter: distil the student from the cache images and the consolidated teacher outputs.
from pathlib import Path

from pixelpipe.logs import stage_log
from pixelpipe.measure import StageMeter, path_bytes
from pixelpipe.summary import accuracy_summary
from pixelpipe.train import train_student

sm = snakemake  # noqa: F821 (injected by Snakemake)
outputs = [sm.output.model, sm.output.config, sm.output.metrics_csv]
with stage_log(sm.log[0]) as log, StageMeter("train_student", sm.output.metrics, outputs) as meter:
    result, summary = train_student(
        sm.config, Path(sm.input.cache[0]).parents[1], Path(sm.input.dataset).parent,
        Path(sm.input.teacher[0]).parent, Path(sm.input.labels), Path(sm.output.model).parent,
        Path(sm.params.checkpoints), threads=sm.threads, log=log,
        profile_dir=Path("results/profile/student"),
    )
    meter.record(samples=result.samples, components=result.components, resolved=result.resolved, **summary,
                 checkpoint_bytes=path_bytes([sm.params.checkpoints]))
    log(accuracy_summary("results"))
