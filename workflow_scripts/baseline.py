# Snakemake adapter: train and test the character n-gram baseline on the corpus splits.
import torch

from pixelpipe.core.io import read_json, write_json
from pixelpipe.workflow_job import stage
from pixelpipe.train.baseline import BaselineSettings, first_rows, save_baseline, train_baseline

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    settings = BaselineSettings.from_section(sm.params.baseline)
    torch.set_num_threads(sm.threads)
    frames = {split: first_rows(sm.input[split], settings.max_rows) for split in ("train", "val", "test")}
    model, result = train_baseline({s: f["text"].tolist() for s, f in frames.items()},
                                   {s: f["label"].to_numpy() for s, f in frames.items()},
                                   num_classes=len(read_json(sm.input.labels)["labels"]), buckets=settings.buckets,
                                   epochs=settings.epochs, lr=settings.lr, batch_size=settings.batch_size,
                                   seed=sm.params.seed, log=log)
    save_baseline(model, sm.output.model)
    write_json(sm.output.json, result)
    meter.record(samples=len(frames["train"]) * settings.epochs, **result)
