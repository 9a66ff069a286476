# Snakemake adapter: train and test the character n-gram baseline on the corpus splits.
import torch

from pixelpipe.core.io import read_json, write_json
from pixelpipe.workflow_job import stage
from pixelpipe.train.baseline import first_rows, save_baseline, train_baseline

sm = snakemake  # noqa: F821 (injected by Snakemake)
cfg = sm.params.baseline
with stage(sm) as (log, meter):
    torch.set_num_threads(sm.threads)
    frames = {split: first_rows(sm.input[split], cfg["max_rows"]) for split in ("train", "val", "test")}
    model, result = train_baseline({s: f["text"].tolist() for s, f in frames.items()},
                            {s: f["label"].to_numpy() for s, f in frames.items()},
                            num_classes=len(read_json(sm.input.labels)["labels"]), buckets=cfg["buckets"],
                            epochs=cfg["epochs"], lr=cfg["lr"], batch_size=cfg["batch_size"], seed=sm.params.seed,
                            log=log)
    save_baseline(model, sm.output.model)
    write_json(sm.output.json, result)
    meter.record(samples=len(frames["train"]) * cfg["epochs"], **result)
