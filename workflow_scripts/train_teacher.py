# Snakemake adapter: train the teacher on the cache shards.
from pathlib import Path

from pixelpipe.logs import stage_log
from pixelpipe.measure import StageMeter, path_bytes
from pixelpipe.train import train_teacher

sm = snakemake  # noqa: F821 (injected by Snakemake)
outputs = [sm.output.model, sm.output.config, sm.output.metrics_csv]
with stage_log(sm.log[0]) as log, StageMeter("train_teacher", sm.output.metrics, outputs) as meter:
    result, summary = train_teacher(
        sm.config, Path(sm.input.cache[0]).parents[1], Path(sm.input.labels), Path(sm.output.model).parent,
        threads=sm.threads, log=log, ckpt_dir=Path(sm.params.checkpoints),
        profile_dir=Path("results/profile/teacher"),
    )
    meter.record(samples=result.samples, components=result.components, resolved=result.resolved, **summary,
                 checkpoint_bytes=path_bytes([sm.params.checkpoints]))
