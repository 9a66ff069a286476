"""Temperature scaling: a model's probabilities made to mean what they say, folded into its head.

A classifier trained with cross-entropy is over-confident on text unlike its
training rows (short phrases, other sources): "0.999" is right less often
than that. One temperature T, fitted by minimizing the negative
log-likelihood on the validation split (Guo et al. 2017, "On Calibration of
Modern Neural Networks"), divides the logits; it never changes which label
wins. The split is read twice, whole texts and one random window of each
(what short real text looks like), and T is folded into the head's weights,
so the saved model, its ONNX export and predict all give calibrated
probabilities with no extra operation. Expected calibration error (ECE) says
how far confidence and accuracy are apart, before and after.

Short text needs more: a 4-character "Ciao" carries far less evidence than
the val texts, yet one temperature lets the model answer it at 0.998. So
after T, one more temperature per length bin (LENGTH_EDGES) is fitted on val
windows cut to lengths in that bin, and recorded (`by_length`) for predict
to divide by (core/reliability.py LengthTemperatures); whole texts of 40 and
more characters keep T alone. Those windows are of val texts rewritten as
training rewrites them (train.augment, every text): val rows come from the
training sources' own catalogs, and a short piece of them is easier for the
model than a short text from anywhere else; fitted on them as they are, the
deployed model answered held-out texts under 20 characters over-confidently
(mean confidence 1.6-1.7 points above its accuracy, docs/engine.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from ..core.device import autocast_context
from ..core.reliability import expected_calibration_error
from ..data.windows import random_windows, sized_windows
from .scoring import model_inputs, scoring_loader, to_device, trimmed


@dataclass
class Calibration:
    """What temperature scaling found on the validation split (texts and windows)."""

    temperature: float
    samples: int
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float
    by_length: dict | None = None  # {"edges": [...], "temperatures": [...], "ece_before": [...], "ece_after": [...]}

    def to_dict(self) -> dict:
        return asdict(self)


@torch.inference_mode()
def collect_logits(model: nn.Module, dataset: Dataset, device: torch.device, precision: str, batch_size: int,
                   window_min_chars: int | None = None, seed: int = 0,
                   sized: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits [N, C] float32 on the CPU, labels [N]) of a split, each text whole, or as one random window of at
    least `window_min_chars` characters when that is given, or of `sized` = (lo, hi) characters (the same windows
    for the same seed)."""
    model.eval()
    cfg = getattr(model, "_orig_mod", model).cfg
    gen = torch.Generator(device=device).manual_seed(seed)
    logits, labels = [], []
    for batch in scoring_loader(dataset, batch_size):
        batch = to_device(batch, device)
        if sized is not None:
            batch["glyphs"], batch["length"] = sized_windows(batch["glyphs"], batch["length"], gen, *sized)
        elif window_min_chars is not None:
            batch["glyphs"], batch["length"] = random_windows(batch["glyphs"], batch["length"], gen, 1.0,
                                                              window_min_chars)
        batch = trimmed(batch, cfg.line_chars, cfg.lines)
        with autocast_context(device, precision):
            logits.append(model(*model_inputs(batch))["logits"].float().cpu())
        labels.append(batch["label"].cpu())
    return torch.cat(logits), torch.cat(labels)


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, max_steps: int = 50) -> float:
    """The T > 0 minimizing cross-entropy(logits / T, labels): Newton's method on b = 1 / T, where the loss is
    convex (its second derivative is the variance of the logits under softmax(b * logits)).

    Two [N, C] buffers, reused at every step, and no autograd: LBFGS over the whole logits allocated and freed
    several N x C temporaries at each of its evaluations, and glibc kept them (the 111-language student's
    calibration grew its process by ~300 MiB, more than its training did)."""
    z = logits.detach().float()
    y = labels.long().reshape(-1, 1)
    z_true = z.gather(1, y).squeeze(1).double()
    z2, p = z * z, torch.empty_like(z)

    def loss_and_moments(b: float) -> tuple[float, float, float]:
        torch.mul(z, b, out=p)
        top = p.amax(1, keepdim=True)
        p.sub_(top).exp_()
        total = p.sum(1, keepdim=True)
        p.div_(total)  # softmax(b * z), in place
        lse = (top + total.log()).squeeze(1).double()
        mean = torch.bmm(p.unsqueeze(1), z.unsqueeze(2)).flatten().double()  # E[z] per row
        second = torch.bmm(p.unsqueeze(1), z2.unsqueeze(2)).flatten().double()  # E[z^2] per row
        return (float((lse - b * z_true).mean()), float((mean - z_true).mean()),
                float((second - mean * mean).clamp_min(0).mean()))

    b = 1.0
    loss, grad, curv = loss_and_moments(b)
    for _ in range(max_steps):
        step = grad / max(curv, 1e-12)
        while True:  # a Newton step, halved until the loss does not rise (and b stays positive)
            nb = b - step
            if nb > 0:
                nloss, ngrad, ncurv = loss_and_moments(nb)
                if nloss <= loss + 1e-12:
                    break
            step /= 2
            if abs(step) < 1e-9:
                return float(min(max(1.0 / b, 0.05), 20.0))
        converged = abs(nb - b) < 1e-7 * max(1.0, b)
        b, loss, grad, curv = nb, nloss, ngrad, ncurv
        if converged:
            break
    return float(min(max(1.0 / b, 0.05), 20.0))


def fold_temperature(model: nn.Module, temperature: float) -> None:
    """Divide the head's weights and bias by T: the model now outputs logits / T."""
    head = getattr(model, "_orig_mod", model).head
    with torch.no_grad():
        head.weight.div_(temperature)
        if head.bias is not None:
            head.bias.div_(temperature)


LENGTH_EDGES = (1, 5, 10, 15, 20, 30)  # bins 1-4, 5-9, 10-14, 15-19, 20-29, 30-39 characters; 40+ keeps T alone
LONGEST = 40


def fit_length_temperatures(model: nn.Module, val_set: Dataset, device: torch.device, precision: str,
                            batch_size: int, seed: int) -> dict:
    """One temperature per length bin, fitted on val windows of that bin's lengths (logits already divided by T)."""
    his = [*LENGTH_EDGES[1:], LONGEST]
    temps, before, after = [], [], []
    for k, (lo, hi) in enumerate(zip(LENGTH_EDGES, his)):
        logits, labels = collect_logits(model, val_set, device, precision, batch_size, seed=seed + 1 + k,
                                        sized=(lo, hi - 1))
        t = fit_temperature(logits, labels)
        y = labels.numpy()
        temps.append(t)
        before.append(expected_calibration_error(F.softmax(logits, -1).numpy(), y))
        after.append(expected_calibration_error(F.softmax(logits / t, -1).numpy(), y))
    return {"edges": list(LENGTH_EDGES) + [LONGEST], "temperatures": temps + [1.0], "ece_before": before,
            "ece_after": after}


def calibrate(model: nn.Module, val_set: Dataset, device: torch.device, precision: str, batch_size: int,
              window_min_chars: int, seed: int, by_length: Dataset | None = None) -> Calibration:
    """Fit T on the validation split (whole texts and one window each) and fold it into the model's head;
    `by_length`: the texts (val's, as the deployed model's rewrites them: `length_calibration_set`) to fit one
    temperature per length bin on as well (six more passes; predict applies them, so only the deployed model needs
    them: the every-language teacher spent 25 s calibrating, most of it on these)."""
    whole = collect_logits(model, val_set, device, precision, batch_size)
    windows = collect_logits(model, val_set, device, precision, batch_size, window_min_chars, seed)
    logits, labels = torch.cat([whole[0], windows[0]]), torch.cat([whole[1], windows[1]])
    t = fit_temperature(logits, labels)
    fold_temperature(model, t)
    by_length = (fit_length_temperatures(model, by_length, device, precision, batch_size, seed)
                 if by_length is not None else None)
    y = labels.numpy()
    before, after = F.softmax(logits, -1).numpy(), F.softmax(logits / t, -1).numpy()
    return Calibration(temperature=t, samples=len(y), nll_before=float(F.cross_entropy(logits, labels)),
                       nll_after=float(F.cross_entropy(logits / t, labels)),
                       ece_before=expected_calibration_error(before, y), ece_after=expected_calibration_error(after, y),
                       by_length=by_length)
