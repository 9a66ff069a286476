# Snakemake adapter: train the teacher on the cache shards (under torchrun when engine.ddp_processes > 1;
# one torchrun per node, started by srun, when engine.nodes > 1).
from pathlib import Path

from pixelpipe.core.logs import stage_log
from pixelpipe.core.measure import StageMeter, path_bytes
from pixelpipe.workflow_job import training_config
from pixelpipe.train.ddp_launch import run_stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
outputs = [sm.output.model, sm.output.config, sm.output.metrics_csv]
cfg = training_config(sm, "teacher")
with stage_log(sm.log[0]) as log, StageMeter("train_teacher", sm.output.metrics, outputs) as meter:
    meter.record(threads=sm.threads)  # the cores it asked for: the planner's time factors count sharing
    result, summary = run_stage(
        "teacher", dict(cfg=cfg, cache_root=Path(sm.input.cache[0]).parents[1], labels_path=Path(sm.input.labels),
                        out_dir=Path(sm.output.model).parent, threads=sm.threads, ckpt_dir=Path(sm.params.checkpoints),
                        profile_dir=Path(sm.params.profile_dir)),
        processes=cfg["engine"]["ddp_processes"], nodes=cfg["engine"]["nodes"], log=log, log_path=sm.log[0],
    )
    meter.record(samples=result.samples, components=result.components, resolved=result.resolved, **summary,
                 loss_curve=result.loss_curve, checkpoint_bytes=path_bytes([sm.params.checkpoints]))
