"""A batch on its way into the model (device, trimming, the encoder's inputs), and scoring a model on a split.

Training, evaluation, calibration and the batch-size finder share these, so every path feeds the model alike.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from ..core import distributed
from ..core.batching import length_batches
from ..core.device import autocast_context, halve_on_oom
from ..core.distributed import Dist
from ..data.windows import trim


def collate_fn_of(dataset: Dataset) -> Callable | None:
    """The dataset's own collate function (a cache dataset fetches whole batches), also through a Subset."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return getattr(dataset, "collate_fn", None)


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The batch's tensors on `device` (asynchronous from pinned memory); other values as they are."""
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


def model_inputs(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(inputs, lengths, glyphs) the encoder takes: images when the batch carries them (augmentation), with the
    glyph ids they were assembled from (the n-gram tables hash those), else glyph ids alone."""
    if "image" in batch:
        return batch["image"], batch["length"], batch["glyphs"]
    return batch["glyphs"], batch["length"], None


def trimmed(batch: dict[str, torch.Tensor], line_chars: int, lines: int) -> dict[str, torch.Tensor]:
    """The batch without the glyph columns no text reaches (the model masks them anyway); images pass as they are."""
    if "glyphs" not in batch:
        return batch
    return {**batch, "glyphs": trim(batch["glyphs"], batch["length"], line_chars, lines)}


def scoring_loader(dataset: Dataset, batch_size: int, rank: int = 0, world: int = 1,
                   num_workers: int = 0) -> DataLoader:
    """Scoring batches (`core.batching.length_batches`): by length when the dataset knows its lengths (batches
    trimmed, no compute on padding; no score depends on the order), else as stored; `rank`'s share of them."""
    lengths = dataset.lengths() if hasattr(dataset, "lengths") else None
    if lengths is None:
        lengths = np.zeros(len(dataset), np.int64)  # all equal: longest first keeps the stored order
    batches = [b.tolist() for b in length_batches(lengths, batch_size, rank, world)]
    return DataLoader(dataset, batch_sampler=batches, num_workers=num_workers, collate_fn=collate_fn_of(dataset))


@torch.inference_mode()
def evaluate(
    model: nn.Module,
    dataset: Dataset,
    device: torch.device,
    precision: str = "fp32",
    batch_size: int = 256,
    num_workers: int = 0,
    dist: Dist | None = None,
) -> dict[str, float]:
    """Accuracy and cross-entropy of `model` on `dataset`: split over the ranks when there are several, the
    batch halved on out-of-memory (each rank retries alone; the only collective comes after)."""
    model.eval()
    d = dist or Dist()
    cfg = getattr(model, "_orig_mod", model).cfg

    def run(bs: int) -> tuple[int, float, int]:
        correct, loss_sum, n = 0, 0.0, 0
        for batch in scoring_loader(dataset, bs, d.rank, d.world, num_workers):
            batch = trimmed(to_device(batch, device), cfg.line_chars, cfg.lines)
            labels = batch["label"]
            with autocast_context(device, precision):
                logits = model(*model_inputs(batch))["logits"].float()
            loss_sum += nn.functional.cross_entropy(logits, labels, reduction="sum").item()
            correct += (logits.argmax(-1) == labels).sum().item()
            n += labels.numel()
        return correct, loss_sum, n

    correct, loss_sum, n = distributed.sum_across(list(halve_on_oom(run, batch_size, "evaluate")), d, device)
    n = int(n)
    return {"accuracy": correct / max(1, n), "loss": loss_sum / max(1, n), "samples": n}
