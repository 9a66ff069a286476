"""AdamW for the dense weights and lazy Adam for the rows of the n-gram tables, as one optimizer.

A batch touches a few thousand of an n-gram table's million rows. Dense
AdamW would move every row every step (its moments decay even where the
gradient is zero): on a CPU that costs more than the whole forward pass. The
tables therefore return sparse gradients, and their rows are updated the way
torch.optim.SparseAdam does it (moments and weights of the touched rows
only, no weight decay). Keeping both in one Optimizer leaves everything that
handles "the optimizer" alone: the LR schedule, gradient scaling, checkpoints
(the state has AdamW's keys for every parameter) and the batch-size finder.

Tried and not used: row-wise Adagrad for the tables (one accumulator per
row; each touched row read and written once) halves the optimizer's time
and drops the tables' optimizer state, and matched SparseAdam on the
19-language teacher, but cost the 111-language student 1.15 points of
held-out accuracy (91.13 vs 92.28 %, same teacher; docs/benchmarks.md).

The recipe around it lives here too (which weights decay, the warm-up and
cosine schedule), so the planner can size the optimizer state without the
Trainer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn


class LazyAdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay) for dense gradients; SparseAdam's lazy row update for sparse ones."""

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"invalid LazyAdamW hyper-parameters lr={lr} betas={betas} eps={eps} wd={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    def _state(self, p: torch.Tensor) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102 (torch's signature)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._state(p)
                state["step"] += 1
                t = float(state["step"])
                bias1, bias2 = 1 - beta1**t, 1 - beta2**t
                if p.grad.is_sparse:
                    _sparse_update(p, p.grad, state, lr, beta1, beta2, eps, bias1, bias2)
                else:
                    _dense_update(p, p.grad, state, lr, beta1, beta2, eps, wd, bias1, bias2)
        return loss


def _dense_update(p: torch.Tensor, grad: torch.Tensor, state: dict, lr: float, beta1: float, beta2: float, eps: float,
                  wd: float, bias1: float, bias2: float) -> None:
    if wd:
        p.mul_(1 - lr * wd)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m.lerp_(grad, 1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
    p.addcdiv_(m, denom, value=-lr / bias1)


def _sparse_update(p: torch.Tensor, grad: torch.Tensor, state: dict, lr: float, beta1: float, beta2: float,
                   eps: float, bias1: float, bias2: float) -> None:
    """Adam on the rows the gradient holds (torch.optim.SparseAdam's update; a row's moments move only when
    the row is touched)."""
    rows, values = _distinct_rows(grad)
    if rows.numel() == 0:
        return
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m_rows = m.index_select(0, rows).lerp_(values, 1 - beta1)
    v_rows = v.index_select(0, rows).mul_(beta2).addcmul_(values, values, value=1 - beta2)
    m.index_copy_(0, rows, m_rows)
    v.index_copy_(0, rows, v_rows)
    # the rows are stored: reuse their buffers in place (the rows are unique, so a copy back beats index_add_)
    step = m_rows.div_(v_rows.sqrt_().mul_(1 / math.sqrt(bias2)).add_(eps))
    p.index_copy_(0, rows, p.index_select(0, rows).add_(step, alpha=-lr / bias1))


def _distinct_rows(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, values) of a sparse row gradient, each row once: as it comes when its rows are already distinct and
    in order (model.ngrams gathers each row once), else coalesced (sorting and summing every entry)."""
    rows = grad._indices()[0]
    if rows.numel() > 1 and not bool((rows[1:] > rows[:-1]).all()):
        grad = grad.coalesce()
        rows = grad.indices()[0]
    return rows, grad._values()


def dense_grad_params(params: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """The parameters whose gradient is dense (gradient clipping's norm is taken over these)."""
    return [p for p in params if p.grad is None or not p.grad.is_sparse]


NO_DECAY = ("pos_embed", "queries", "ngrams.table")  # matrices that are embeddings, not maps


def sparse_tables(model: nn.Module, device: torch.device) -> None:
    """Embedding tables take sparse gradients on CPU (a lazy row update instead of a pass over every row);
    on CUDA dense ones (NCCL cannot all-reduce sparse tensors, and a dense pass is cheap on a GPU)."""
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            m.sparse = device.type == "cpu"


def param_groups(modules: list[nn.Module], weight_decay: float) -> list[dict]:
    """Decay matrices and conv kernels only (nanoGPT's rule): not norms, biases or embeddings (positions, capsule
    queries, the n-gram tables)."""
    decay, no_decay = [], []
    for m in modules:
        for name, p in m.named_parameters():
            if not p.requires_grad:
                continue
            (decay if p.dim() >= 2 and not any(k in name for k in NO_DECAY) else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_lambda(total_steps: int, warmup_steps: int) -> Callable[[int], float]:
    """Linear warm-up over `warmup_steps`, then cosine decay to 0 at `total_steps` (a LambdaLR factor)."""
    def f(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return f


def make_optimizer(modules: list[nn.Module], lr: float, weight_decay: float, warmup_fraction: float,
                   total_steps: int) -> tuple[LazyAdamW, torch.optim.lr_scheduler.LambdaLR]:
    """The training recipe: LazyAdamW (betas 0.9, 0.95) over `param_groups`, and its warm-up + cosine schedule."""
    optimizer = LazyAdamW(param_groups(modules, weight_decay), lr=lr, betas=(0.9, 0.95))
    warmup = max(1, int(warmup_fraction * total_steps))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total_steps, warmup))
