# Snakemake adapter: distil the student from the cache images and the consolidated teacher outputs
# (under torchrun when engine.ddp_processes > 1; one torchrun per node, started by srun, when engine.nodes > 1).
from pathlib import Path

from pixelpipe.core.io import read_json
from pixelpipe.core.logs import stage_log
from pixelpipe.core.measure import StageMeter, path_bytes
from pixelpipe.workflow_job import training_config
from pixelpipe.train.ddp_launch import run_stage

sm = snakemake  # noqa: F821 (injected by Snakemake)


def model_line(role: str, config_path: str) -> str:
    """A model's test accuracy, size and training time from its config.json: the teacher's is a declared input, the
    student's this job's output. Nothing else in results/ is read: the reports of later rules there (deploy,
    evaluation) would be an earlier run's."""
    m = read_json(config_path).get("metrics", {})
    accuracy = f"{m['test_accuracy']:.4f}" if m.get("test_accuracy") is not None else "-"
    extra = [f"{m['parameters']:,} parameters"] if m.get("parameters") else []
    extra += [f"trained in {m['train_wall_s']:.0f} s"] if m.get("train_wall_s") is not None else []
    return f"  {role:24s} test accuracy {accuracy}" + (f"  ({', '.join(extra)})" if extra else "")


outputs = [sm.output.model, sm.output.config, sm.output.metrics_csv]
cfg = training_config(sm, "student")
with stage_log(sm.log[0]) as log, StageMeter("train_student", sm.output.metrics, outputs) as meter:
    meter.record(threads=sm.threads)  # the cores it asked for: the planner's time factors count sharing
    result, summary = run_stage(
        "student", dict(cfg=cfg, cache_root=Path(sm.input.cache[0]).parents[1],
                        dataset_dir=Path(sm.input.dataset).parent, teacher_dir=Path(sm.input.teacher[0]).parent,
                        labels_path=Path(sm.input.labels), out_dir=Path(sm.output.model).parent,
                        ckpt_dir=Path(sm.params.checkpoints), threads=sm.threads,
                        profile_dir=Path(sm.params.profile_dir)),
        processes=cfg["engine"]["ddp_processes"], nodes=cfg["engine"]["nodes"], log=log, log_path=sm.log[0],
    )
    meter.record(samples=result.samples, components=result.components, resolved=result.resolved, **summary,
                 loss_curve=result.loss_curve, checkpoint_bytes=path_bytes([sm.params.checkpoints]))
    teacher_config = next(f for f in sm.input.teacher if f.endswith("config.json"))
    log("pixelpipe results:\n" + model_line("teacher", teacher_config) + "\n" + model_line("student", sm.output.config))
