"""Objectives: plain classification for the teacher, distillation for the student."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .engine import Objective
from .scoring import model_inputs
from .settings import DistillSettings


class ClassificationObjective(Objective):
    def __init__(self, label_smoothing: float = 0.0):
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        logits = model(*model_inputs(batch))["logits"]
        loss = F.cross_entropy(logits.float(), batch["label"], label_smoothing=self.label_smoothing)
        return loss, {"ce": loss}


def distillation_loss(
    student_logits: torch.Tensor,
    student_sketches: torch.Tensor,
    teacher_logits: torch.Tensor,
    teacher_sketches: torch.Tensor,
    labels: torch.Tensor,
    adapter: nn.Module,
    temperature: float,
    ce_weight: float,
    kl_weight: float,
    sketch_weight: float,
    label_smoothing: float = 0.0,
    labelled: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """CE on labels + T^2 * KL(teacher_T || student_T) + (1 - cos) between adapted student and teacher sketches.

    The T^2 factor keeps the soft-target gradients on the scale of the hard ones (Hinton et al.).
    The teacher's outputs are those of the whole text, also when the student sees a training
    window of it: as in DINO's multi-crop training (Caron et al. 2021), the student learns to
    infer from a part what the teacher saw in the whole (measured better than distilling full
    texts only: docs/benchmarks.md). Rows where `labelled` is False (student.distill.transfer) add no
    cross-entropy; the mean is over the labelled rows.
    """
    s_logits, t_logits = student_logits.float(), teacher_logits.float()
    if labelled is not None:  # the transfer set's rows: the teacher's soft targets only, no label
        labels = labels.masked_fill(~labelled, -100)
    ce = F.cross_entropy(s_logits, labels, label_smoothing=label_smoothing, reduction="sum") \
        / (labels >= 0).sum().clamp(min=1)
    t = temperature
    kl = F.kl_div(F.log_softmax(s_logits / t, -1), F.log_softmax(t_logits / t, -1), log_target=True,
                  reduction="batchmean") * t * t
    adapted = adapter(student_sketches.float())
    cos = F.cosine_similarity(adapted, teacher_sketches.float(), dim=-1).mean()
    loss = ce_weight * ce + kl_weight * kl + sketch_weight * (1 - cos)
    return loss, {"ce": ce.detach(), "kl": kl.detach(), "sketch_cos": cos.detach()}


class DistillationObjective(Objective):
    """Owns the linear adapter from student sketch width to teacher sketch width."""

    def __init__(self, student_dim: int, teacher_dim: int, settings: DistillSettings, label_smoothing: float):
        super().__init__()
        self.adapter = nn.Linear(student_dim, teacher_dim)
        self.temperature, self.ce_weight, self.kl_weight = settings.temperature, settings.ce_weight, settings.kl_weight
        self.sketch_weight, self.label_smoothing = settings.sketch_weight, label_smoothing

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        out = model(*model_inputs(batch))
        return distillation_loss(out["logits"], out["sketches"], batch["teacher_logits"], batch["teacher_sketches"],
                                 batch["label"], self.adapter, self.temperature, self.ce_weight, self.kl_weight,
                                 self.sketch_weight, self.label_smoothing, batch.get("labelled"))
