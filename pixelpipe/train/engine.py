"""The training engine shared by teacher and student.

One loop you can read top to bottom: mixed precision, torch.compile, gradient
accumulation, activation checkpointing, channels_last, TF32, a tuned
DataLoader, on-device augmentation, out-of-memory fallback, checkpoint
rotation and exact resume, an optional profiler, per-component timing and a
progress bar, and data parallelism over torchrun's processes (DDP). What is
trained is decided by an `Objective`: a module that turns (model, batch) into
a loss. Around it: settings.py (what a run is told and returns), sampling.py
(which samples a step sees), optim.py (the optimizer recipe), scoring.py
(batches into the model, evaluate) and core/device.py (autocast, compile, OOM).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler
from tqdm.auto import tqdm

from ..core import distributed
from ..core.device import autocast_context, compile_model, is_oom
from ..core.distributed import Dist
from ..core.timing import ComponentTimer
from ..data.augment import augment_batch, images_from_glyphs
from ..data.windows import pick_views, random_windows
from ..model import checkpoint as ckpt
from .optim import dense_grad_params, make_optimizer, sparse_tables
from .sampling import StepBatchSampler, schedule, split_batch
from .scoring import collate_fn_of, evaluate, to_device, trimmed
from .settings import EngineSettings, TrainResult, TrainSettings

# fp16: consecutive non-finite steps the GradScaler may skip (halving its scale each time) before training stops.
MAX_SKIPPED_STEPS = 25


class NonFiniteLossError(RuntimeError):
    """The loss or the weights went NaN/inf: training stops before anything is saved."""


class Objective(nn.Module):
    """Turns a batch into a loss. Subclasses may own parameters (e.g. an adapter)."""

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError


class ObjectiveStep(nn.Module):
    """Model and objective as one module, so DDP also synchronizes the objective's parameters (the adapter)."""

    def __init__(self, model: nn.Module, objective: Objective):
        super().__init__()
        self.model, self.objective = model, objective

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        return self.objective(self.model, batch)


def wrap_ddp(module: nn.Module, device: torch.device, d: Dist) -> nn.Module:
    """DistributedDataParallel over `module` when there are several processes, else `module` itself.

    The encoder's children projection feeds no training loss (children are encoded, never trained on),
    so DDP must expect parameters without gradients (find_unused_parameters: one graph walk per step).
    """
    if not d.enabled:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, find_unused_parameters=True)


def make_loader(dataset: Dataset, sampler: Sampler, settings: EngineSettings) -> DataLoader:
    """The one training loader: batch sampler in the main process, workers read the memory-mapped shards."""
    workers = settings.num_workers
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_fn_of(dataset),
        num_workers=workers,
        pin_memory=settings.pin_memory,
        persistent_workers=settings.persistent_workers and workers > 0,
        prefetch_factor=settings.prefetch_factor if workers > 0 else None,
    )


class Trainer:
    """Runs `objective` over `train_set` with the engine's switches; resumable from `ckpt_dir`.

    Under torchrun every rank builds the same Trainer; `dist` (default: the process group's view)
    splits each batch over the ranks, and rank 0 alone writes checkpoints and logs. With `ckpt_dir`,
    `keep_last` and `every_steps` must be given: the config's `{role}.checkpoint` is their one default.
    """

    def __init__(
        self,
        model: nn.Module,
        objective: Objective,
        train_set: Dataset,
        val_set: Dataset | None,
        train: TrainSettings,
        engine: EngineSettings,
        device: torch.device,
        seed: int = 0,
        ckpt_dir: str | Path | None = None,
        keep_last: int | None = None,
        every_steps: int | None = None,
        log: Callable[[str], None] = print,
        profile_dir: str | Path | None = None,
        desc: str = "train",
        dist: Dist | None = None,
    ):
        self.dist = dist or distributed.current()
        self.model, self.objective = model.to(device), objective.to(device)
        self.train_set, self.val_set = train_set, val_set
        self.train, self.engine, self.device, self.seed = train, engine, device, seed
        self.ckpt_dir = Path(ckpt_dir) if ckpt_dir else None
        if self.ckpt_dir and (keep_last is None or every_steps is None):
            raise ValueError(f"{desc}: checkpoints need keep_last and every_steps (the config's checkpoint section)")
        self.keep_last, self.every_steps = keep_last, every_steps
        self.log, self.desc = log, desc
        self.profile_dir = Path(profile_dir) if profile_dir else None
        self.accum = engine.grad_accum_steps
        self.micro = split_batch(train.batch_size, self.accum, self.dist.world, desc)
        self.oom_fallbacks = 0

        model.activation_checkpointing = engine.activation_checkpointing
        model.grad_free_cycles = engine.grad_free_cycles
        sparse_tables(model, device)
        if engine.channels_last:
            model.to(memory_format=torch.channels_last)
        self.forward_model, self.compile_mode = compile_model(model, engine.compile, self.accum, log)
        self.step_module = wrap_ddp(ObjectiveStep(self.forward_model, objective), device, self.dist)
        n = len(train_set)
        if n < train.batch_size:
            raise ValueError(f"{desc}: train split has {n} samples, fewer than batch_size {train.batch_size}")
        self.steps_per_epoch, self.total_steps = schedule(n, train.batch_size, train.epochs)
        self.optimizer, self.scheduler = make_optimizer([model, objective], train.lr, train.weight_decay,
                                                        train.warmup_fraction, self.total_steps)
        self.scaler = torch.amp.GradScaler("cuda", enabled=engine.precision == "fp16" and device.type == "cuda")
        self.timer = ComponentTimer(device)
        group = engine.length_grouping if hasattr(train_set, "lengths") else 0
        self.sampler = StepBatchSampler(n, train.batch_size, self.steps_per_epoch, self.total_steps, seed,
                                        self.dist.rank, self.dist.world, train_set.lengths() if group else None, group)
        self.loader: DataLoader | None = None
        self.history: list[dict] = []
        self.loss_curve: list[list[float]] = []
        self.ranks_identical: bool | None = None
        self.step = 0
        self.resumed_from: int | None = None
        # consecutive non-finite steps now and at most so far, counted on the device (no sync per step)
        self._bad_run = torch.zeros((), dtype=torch.int64, device=device)
        self._bad_longest = torch.zeros((), dtype=torch.int64, device=device)

    # ---- checkpoints -------------------------------------------------------------------------
    def _modules(self) -> dict[str, nn.Module]:
        return {"model": self.model, "objective": self.objective}

    def check_finite(self, saving: bool = False) -> None:
        """Raise NonFiniteLossError when the loss went non-finite (and, before a save, when the weights did).

        fp32/bf16 stop at the first non-finite step. fp16 with a GradScaler stops only when the
        scaler skipped MAX_SKIPPED_STEPS steps in a row: a skipped step changes no weight.
        """
        limit = MAX_SKIPPED_STEPS if self.scaler.is_enabled() else 1
        # every rank decides alike (a collective under DDP), so none is left waiting in the next one
        if distributed.max_across(int(self._bad_longest.item()), self.dist, self.device) >= limit:
            raise NonFiniteLossError(f"{self.desc}: the loss is not finite (NaN or inf) at or before step {self.step}; "
                                     f"nothing was saved from this step on. Lower {self.desc}.train.lr (now "
                                     f"{self.train.lr:g}) or check the data")
        if saving:
            params = [p for g in self.optimizer.param_groups for p in g["params"]]
            if not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
                raise NonFiniteLossError(f"{self.desc}: weights are not finite at step {self.step}; nothing was saved. "
                                         f"Lower {self.desc}.train.lr (now {self.train.lr:g}) or check the data")

    def _track_finite(self, losses: list[torch.Tensor]) -> None:
        finite = torch.isfinite(torch.stack(losses).float().mean())
        self._bad_run = (self._bad_run + 1) * (~finite)
        self._bad_longest = torch.maximum(self._bad_longest, self._bad_run)

    def save_checkpoint(self) -> None:
        """Everything a resumed run needs to continue bit-identically; the data position is `step`."""
        self.check_finite(saving=True)
        if not self.ckpt_dir or not self.dist.main:
            return
        meta = {
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "batch_size": self.train.batch_size,
            "micro_batch": self.micro,
            "accum": self.accum,
            "epoch": self.step // self.steps_per_epoch,
            "step_in_epoch": self.step % self.steps_per_epoch,
            "oom_fallbacks": self.oom_fallbacks,
            "history": self.history,
            "loss_curve": self.loss_curve,
        }
        ckpt.save_training_state(self.ckpt_dir, self.step, self._modules(), self.optimizer, meta)
        ckpt.rotate_checkpoints(self.ckpt_dir, self.keep_last)

    def maybe_resume(self) -> bool:
        found = ckpt.load_newest_valid(self.ckpt_dir, self._modules(), self.optimizer, self.log) if self.ckpt_dir else None
        if found is None:
            return False
        step, path, meta = found
        saved_batch = meta.get("batch_size", meta["micro_batch"] * meta["accum"])
        if saved_batch != self.train.batch_size:
            raise ValueError(f"{self.desc}: checkpoint {path} was written with batch_size {saved_batch}, "
                             f"this run has {self.train.batch_size}; remove {self.ckpt_dir} to start over")
        self.scheduler.load_state_dict(meta["scheduler"])
        if meta.get("scaler"):
            self.scaler.load_state_dict(meta["scaler"])
        self.micro, self.accum = meta["micro_batch"], meta["accum"]
        self.oom_fallbacks = meta.get("oom_fallbacks", 0)
        self.history = meta.get("history", [])
        self.loss_curve = meta.get("loss_curve", [])
        self.step = self.resumed_from = step
        self.log(f"{self.desc}: resumed from {path.name} (step {step}/{self.total_steps})")
        return True

    # ---- one optimizer step ------------------------------------------------------------------
    def _micro_step(self, batch: dict[str, torch.Tensor], sync: bool = True) -> tuple[torch.Tensor, dict[str, float]]:
        """Forward and backward of one micro-batch; under DDP gradients are all-reduced only when `sync`."""
        t = self.timer
        t.start("h2d_augment")
        batch = to_device(batch, self.device)
        c = self.model.cfg
        gen = torch.Generator(device=self.device).manual_seed(self.seed * 999_983 + self.step * 131 + t.micro_index)
        # This rank's rows of the draws for the whole micro-batch: the same windows as one process.
        rows = (self.dist.rank * batch["glyphs"].shape[0], self.micro)
        if "view_windows" in batch:  # the teacher's encoded views (encode.views > 1) replace fresh windows
            pick_views(batch, gen, rows)
        elif self.train.window_prob > 0:
            batch["glyphs"], batch["length"] = random_windows(
                batch["glyphs"], batch["length"], gen, self.train.window_prob, self.train.window_min_chars, rows=rows,
                word_prob=self.train.window_words)
        batch = trimmed(batch, c.line_chars, c.lines)
        if self.engine.augment:
            # Per rank (a noise tensor for the whole micro-batch on every rank would cost world x the memory).
            seed = self.seed * 1_000_003 + self.step * 131 + t.micro_index + 7919 * self.dist.rank
            images = images_from_glyphs(batch["glyphs"], self.model.atlas, c.lines, c.channels)
            if self.engine.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            batch["image"] = augment_batch(images, torch.Generator(device=self.device).manual_seed(seed))
        no_sync = self.step_module.no_sync if self.dist.enabled and not sync else contextlib.nullcontext
        with no_sync():
            t.start("forward")
            with autocast_context(self.device, self.engine.precision):
                loss, logs = self.step_module(batch)
            t.start("backward")  # under DDP: with the gradient all-reduce it overlaps
            self.scaler.scale(loss / self.accum).backward()
        t.stop()
        return loss.detach(), logs

    def _optimizer_step(self) -> None:
        self.timer.start("optimizer")
        if self.train.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            # the dense weights' norm: a table's sparse rows are Adam-normalized per row anyway
            params = dense_grad_params(p for g in self.optimizer.param_groups for p in g["params"])
            torch.nn.utils.clip_grad_norm_(params, self.train.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.timer.stop()

    def _on_oom(self) -> None:
        """Halve the micro-batch and double accumulation: same effective batch, less memory.

        An odd micro-batch goes to the largest divisor of the effective batch below its half.

        Called outside the `except` block, so the failed step's activations (held
        by the traceback's frames) are already released when the cache is emptied.
        The step is redone from its first micro-batch; nothing was applied yet.
        """
        self.timer.stop()
        if self.dist.enabled:
            # The other ranks wait in the gradient all-reduce of a step this rank abandoned: no fallback here.
            raise RuntimeError(f"{self.desc}: out of memory in one of {self.dist.world} DDP processes; raise "
                               "engine.grad_accum_steps or lower train.batch_size (no fallback under DDP)")
        if self.micro <= 1:
            raise RuntimeError(f"{self.desc}: out of memory at micro-batch 1, which cannot be halved")
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        # Half, or the largest divisor of the effective batch below half (odd micro-batches).
        batch = self.train.batch_size
        self.micro = max(d for d in range(1, self.micro // 2 + 1) if batch % d == 0)
        self.accum = batch // self.micro
        self.oom_fallbacks += 1
        self.log(f"{self.desc}: out of memory; micro-batch -> {self.micro}, accumulation -> {self.accum} "
                 f"(effective batch {self.micro * self.accum} kept)")

    def _batches(self) -> Iterator[dict]:
        """(Re)start the one loader at the current step; persistent workers survive this."""
        self.sampler.set_position(self.step, self.micro)
        if self.loader is None:
            self.loader = make_loader(self.train_set, self.sampler, self.engine)
        return iter(self.loader)

    def batches(self) -> Iterator[dict]:
        """The micro-batches from the current step on (for driving `train_step` outside `fit`)."""
        return self._batches()

    def train_step(self, batches: Iterator[dict]) -> list[torch.Tensor]:
        """One optimizer step: `accum` micro-batches from `batches` (forward, backward; under DDP the gradients
        are all-reduced on the last one), then the update. The public seam for measuring the real step (the
        benchmark matrix); returns the micro-batch losses, still on the device."""
        losses = []
        for micro_index in range(self.accum):
            self.timer.start("data_wait")
            self.timer.micro_index = micro_index
            loss, _ = self._micro_step(next(batches), sync=micro_index == self.accum - 1)
            losses.append(loss)
        self._optimizer_step()
        self._track_finite(losses)
        return losses

    def _try_train_step(self, batches: Iterator[dict]) -> list[torch.Tensor] | None:
        """`train_step`, or None after an out-of-memory error (fit recovers outside the except block)."""
        try:
            return self.train_step(batches)
        except (RuntimeError, MemoryError) as err:
            if not is_oom(err):
                raise
        return None

    def _read_loss(self, losses: list[torch.Tensor]) -> float:
        """The step's loss over all ranks (a device sync: only every engine.loss_every_steps)."""
        step_loss = distributed.mean_across(torch.stack(losses).float().mean(), self.dist).item()
        self.loss_curve.append([self.step, step_loss])
        return step_loss

    # ---- the loop ----------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        self.maybe_resume()
        t0 = time.perf_counter()
        samples = 0
        bar = tqdm(total=self.total_steps, initial=self.step, desc=self.desc, unit="step",
                   disable=not (self.engine.progress and self.dist.main), mininterval=1.0, dynamic_ncols=True)
        profiler = self._profiler()
        loss_ema = None
        batches = self._batches()
        self.model.train()
        while self.step < self.total_steps:
            losses = self._try_train_step(batches)
            if losses is None:
                self._on_oom()
                batches = self._batches()
                continue
            self.step += 1
            samples += self.micro * self.accum
            in_epoch = self.step % self.steps_per_epoch
            if self.step % self.engine.loss_every_steps == 0 or in_epoch == 0 or self.step == self.total_steps:
                step_loss = self._read_loss(losses)  # the mean over the ranks: NaN on one rank reaches all
                self.check_finite()
                loss_ema = step_loss if loss_ema is None else 0.8 * loss_ema + 0.2 * step_loss
                rate = samples / max(1e-9, time.perf_counter() - t0)
                bar.set_postfix(loss=f"{loss_ema:.3f}", samples_s=f"{rate:.0f}")
            bar.update(1)
            if profiler is not None:
                profiler.step()
            if self.ckpt_dir and self.step % self.every_steps == 0 and self.step < self.total_steps:
                self.save_checkpoint()
            if in_epoch == 0 or self.step == self.total_steps:
                self._end_epoch((self.step - 1) // self.steps_per_epoch, loss_ema, samples, t0)
                self.model.train()
        bar.close()
        return self._finish(profiler, samples, time.perf_counter() - t0)

    def _finish(self, profiler, samples: int, wall: float) -> TrainResult:
        if profiler is not None:
            profiler.stop()
        components = self.timer.summary()
        if profiler is not None:
            from ..core.profiling import write_component_table

            write_component_table(self.profile_dir, components)
        self.save_checkpoint()
        self.ranks_identical = distributed.ranks_identical([self.model, self.objective], self.dist)
        if not self.ranks_identical:
            self.log(f"WARNING: {self.desc}: the {self.dist.world} processes ended with different parameters; "
                     "rank 0's are saved")
        return TrainResult(history=self.history, resolved=self.resolved(), components=components,
                           steps=self.total_steps, samples=samples, wall_s=wall, loss_curve=self.loss_curve)

    def resolved(self) -> dict:
        """Every switch as actually used (after precision resolution, compile fallback, OOM fallbacks)."""
        return {"engine": asdict(self.engine), "train": asdict(self.train), "precision": self.engine.precision,
                "compile_mode": self.compile_mode, "batch_size": self.train.batch_size, "micro_batch": self.micro,
                "grad_accum_steps": self.accum, "oom_fallbacks": self.oom_fallbacks,
                "steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps,
                "resumed_from_step": self.resumed_from, "device": str(self.device),
                "grad_scaler": self.scaler.is_enabled(),
                "ddp": {"processes": self.dist.world, "nodes": self.dist.nodes, "backend": self.dist.backend,
                        "micro_batch_per_process": self.micro // self.dist.world,
                        "ranks_identical": self.ranks_identical}}

    def _end_epoch(self, epoch: int, loss_ema: float | None, samples: int, t0: float) -> None:
        row: dict[str, Any] = {"epoch": epoch + 1, "step": self.step, "train_loss": loss_ema,
                               "lr": self.scheduler.get_last_lr()[0],
                               "samples_per_s": samples / max(1e-9, time.perf_counter() - t0),
                               "elapsed_s": time.perf_counter() - t0, "samples_seen": samples}
        if self.val_set is not None and len(self.val_set):
            ev = evaluate(self.model, self.val_set, self.device, self.engine.precision, max(64, self.micro),
                          dist=self.dist)
            row.update(val_loss=ev["loss"], val_accuracy=ev["accuracy"])
        self.history.append(row)
        msg = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items())
        self.log(f"{self.desc}: {msg}")

    def _profiler(self):
        if not (self.engine.profiler and self.profile_dir and self.dist.main):
            return None
        from ..core.profiling import start_profiler

        return start_profiler(self.profile_dir, self.device, remaining_steps=self.total_steps - self.step)
