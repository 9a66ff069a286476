"""The training engine shared by teacher and student.

One loop you can read top to bottom: mixed precision, torch.compile, gradient
accumulation, activation checkpointing, channels_last, TF32, a tuned
DataLoader, on-device augmentation, out-of-memory fallback, checkpoint
rotation and exact resume, an optional profiler, per-component timing and a
progress bar, and data parallelism over torchrun's processes (DDP). What is
trained is decided by an `Objective`: a module that turns (model, batch) into
a loss.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler, Subset
from tqdm.auto import tqdm

from ..config.settings import Section
from ..core import distributed
from ..core.distributed import Dist
from ..core.order import longest_first
from ..core.hardware import DeviceInfo, resolve_precision
from ..core.timing import ComponentTimer
from ..data.augment import augment_batch, images_from_glyphs
from ..data.cache import StepBatch
from ..data.windows import pick_views, random_windows, trim
from ..model import checkpoint as ckpt
from .optim import LazyAdamW, dense_grad_params

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
# fp16: consecutive non-finite steps the GradScaler may skip (halving its scale each time) before training stops.
MAX_SKIPPED_STEPS = 25


class NonFiniteLossError(RuntimeError):
    """The loss or the weights went NaN/inf: training stops before anything is saved."""


@dataclass
class EngineSettings(Section):
    """The `engine:` config section, resolved for one device (defaults: the schema)."""

    SECTION = "engine"

    precision: str
    compile: str
    grad_accum_steps: int
    activation_checkpointing: bool
    grad_free_cycles: bool
    channels_last: bool
    tf32: bool
    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int
    augment: bool
    memory_target: float
    memory_margin: float
    profiler: bool
    progress: bool
    threads: int
    ddp_processes: int
    nodes: int
    loss_every_steps: int
    length_grouping: int

    @classmethod
    def from_config(cls, engine_cfg: dict, info: DeviceInfo) -> "EngineSettings":
        """`from_section`, then resolved for the device (precision 'auto', no pinned memory on CPU)."""
        s = cls.from_section(engine_cfg)
        s.precision = resolve_precision(s.precision, info)
        if info.kind == "cpu":
            s.pin_memory = False
        return s


@dataclass
class TrainSettings(Section):
    """A `{role}.train` section (batch_size resolved to a number)."""

    SECTION = "train"

    epochs: float
    batch_size: int
    lr: float
    weight_decay: float
    warmup_fraction: float
    grad_clip: float
    label_smoothing: float
    window_prob: float
    window_min_chars: int
    augment: list[str]
    augment_prob: float
    calibrate: bool


@dataclass
class TrainResult:
    history: list[dict] = field(default_factory=list)
    resolved: dict = field(default_factory=dict)
    components: dict = field(default_factory=dict)
    steps: int = 0
    samples: int = 0
    wall_s: float = 0.0
    loss_curve: list[list[float]] = field(default_factory=list)  # [step, global mean loss] readings


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


def epoch_order(n: int, seed: int, epoch: int, lengths: np.ndarray | None = None, batch_size: int = 1,
                group: int = 0) -> np.ndarray:
    """The shuffled sample order of one epoch; depends only on (seed, epoch) (and the lengths when grouping).

    With `group` > 0 and `lengths`, texts of similar length share batches: the shuffled order is cut into
    chunks of `group` batches, each chunk sorted by length and cut into batches, and the batches shuffled.
    A batch is trimmed to its longest text, so this spends the step on characters, not padding; every
    sample is still seen once per epoch, in an order set by (seed, epoch).
    """
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(n, generator=g).numpy()
    if not group or lengths is None or batch_size < 2:
        return order
    chunk = group * batch_size
    sorted_chunks = [c[np.argsort(lengths[c], kind="stable")] for c in np.split(order, range(chunk, n, chunk))]
    grouped = np.concatenate(sorted_chunks)
    full = (n // batch_size) * batch_size
    batches = grouped[:full].reshape(-1, batch_size)[torch.randperm(full // batch_size, generator=g).numpy()]
    return np.concatenate([batches.reshape(-1), grouped[full:]])


class StepBatchSampler(Sampler[list[int]]):
    """Micro-batches for every remaining optimizer step, across epochs, from a settable position.

    One DataLoader iterates this sampler for the whole run, so persistent workers
    really persist across epochs (a sampler per epoch would mean a loader per
    epoch, and new workers each time). Step s of epoch e always covers the
    samples order_e[s*B : (s+1)*B] (B = effective batch), split into `accum`
    micro-batches, so a resumed run, or one whose micro-batch an out-of-memory
    fallback halved, sees exactly the samples an uninterrupted run sees.
    `set_position` (then `iter(loader)` again) moves it; with persistent
    workers the loader re-reads the sampler without restarting them.

    With `world` processes (DDP) this is DistributedSampler's contract without
    its padding: rank r takes the r-th of `world` equal slices of every global
    micro-batch, so the ranks together see exactly the samples one process
    sees, the global batch stays `batch_size`, and the order is still a
    function of (seed, epoch) only, which keeps resume exact at any world size.
    """

    def __init__(self, n: int, batch_size: int, steps_per_epoch: int, total_steps: int, seed: int,
                 rank: int = 0, world: int = 1, lengths: np.ndarray | None = None, group: int = 0):
        self.n, self.batch_size, self.steps_per_epoch = n, batch_size, steps_per_epoch
        self.total_steps, self.seed, self.rank, self.world = total_steps, seed, rank, world
        self.lengths, self.group = lengths, group
        self.start_step, self.micro = 0, batch_size

    def set_position(self, step: int, micro_batch: int) -> None:
        if self.batch_size % micro_batch:
            raise ValueError(f"micro-batch {micro_batch} does not divide the batch {self.batch_size}")
        if micro_batch % self.world:
            raise ValueError(f"micro-batch {micro_batch} does not split over {self.world} processes")
        self.start_step, self.micro = step, micro_batch

    def __iter__(self) -> Iterator[list[int]]:
        step, micro, accum = self.start_step, self.micro, self.batch_size // self.micro
        share = micro // self.world
        while step < self.total_steps:
            epoch, in_epoch = divmod(step, self.steps_per_epoch)
            order = epoch_order(self.n, self.seed, epoch, self.lengths, self.batch_size, self.group)
            for s in range(in_epoch, self.steps_per_epoch):
                if step >= self.total_steps:
                    return
                base = s * self.batch_size
                for m in range(accum):
                    start = base + m * micro + self.rank * share
                    yield StepBatch(order[start : start + share].tolist(), step)
                step += 1

    def __len__(self) -> int:
        return (self.total_steps - self.start_step) * (self.batch_size // self.micro)


def split_batch(batch_size: int, accum: int, world: int, desc: str) -> int:
    """The global micro-batch (batch / accumulation steps), checked to split evenly over the ranks."""
    if batch_size % accum:
        raise ValueError(f"{desc}: batch_size {batch_size} is not divisible by grad_accum_steps {accum}")
    micro = batch_size // accum
    if micro % world:
        raise ValueError(f"{desc}: the micro-batch {micro} (batch_size / engine.grad_accum_steps) does not "
                         f"split over {world} processes (engine.ddp_processes)")
    return micro


def schedule(n: int, batch_size: int, epochs: float) -> tuple[int, int]:
    """Optimizer steps per epoch and in all: whole batches only, at least one step (the planner uses it too)."""
    steps_per_epoch = n // batch_size
    return steps_per_epoch, max(1, round(epochs * steps_per_epoch))


def is_oom(err: BaseException) -> bool:
    """CUDA's out-of-memory error, and on CPU a MemoryError or torch's failed allocation."""
    text = str(err).lower()
    return (isinstance(err, (torch.cuda.OutOfMemoryError, MemoryError)) or "out of memory" in text
            or "can't allocate memory" in text)


T = TypeVar("T")


def halve_on_oom(run: Callable[[int], T], batch_size: int, what: str, log: Callable[[str], None] = print) -> T:
    """`run(batch_size)`, halving the batch and starting over after each out-of-memory error (evaluation, encoding).

    The retry happens outside the `except` block, so the failed attempt's tensors are freed first.
    """
    while True:
        try:
            return run(batch_size)
        except (RuntimeError, MemoryError) as err:
            if not is_oom(err) or batch_size <= 1:
                raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        batch_size //= 2
        log(f"{what}: out of memory; retrying with batch size {batch_size}")


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), which can be fewer than the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def intra_op_threads(engine_threads: int, processes: int, job_threads: int | None) -> int | None:
    """torch threads for one process: engine.threads is the job's, so each DDP rank takes its share;
    0 keeps the job's own count (`job_threads`, already a rank's share under DDP)."""
    return (engine_threads // max(1, processes) or 1) if engine_threads else job_threads


def configure_backends(tf32: bool, threads: int | None = None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    if threads:
        # More intra-op threads than cores only spin-wait (Snakemake may grant a rule more threads than cores).
        torch.set_num_threads(max(1, min(threads, available_cores())))


def autocast_context(device: torch.device, precision: str):
    if device.type != "cuda" or precision == "fp32":
        return torch.autocast(device_type=device.type, enabled=False)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type="cuda", dtype=dtype)


def compile_model(model: nn.Module, mode: str, grad_accum_steps: int,
                  log: Callable[[str], None]) -> tuple[nn.Module, str]:
    """torch.compile, refusing CUDA-graph modes under accumulation; returns (module, mode actually used).

    CUDA graphs replay static buffers, so gradients accumulated over several
    replays of a captured backward are overwritten; the fallback keeps the
    same autotuning without graphs and says so in the log.
    """
    if mode == "none":
        return model, "none"
    if grad_accum_steps > 1 and mode in CUDA_GRAPH_MODES:
        fallback = "max-autotune-no-cudagraphs" if mode == "max-autotune" else "default"
        msg = f"compile mode '{mode}' uses CUDA graphs, which gradient accumulation breaks; using '{fallback}'"
        warnings.warn(msg)
        log("WARNING: " + msg)
        mode = fallback
    return torch.compile(model, mode=mode), mode


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
    def f(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return f


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


def collate_fn_of(dataset: Dataset) -> Callable | None:
    """The dataset's own collate function (a cache dataset fetches whole batches), also through a Subset."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return getattr(dataset, "collate_fn", None)


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
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


def by_length(dataset: Dataset) -> np.ndarray:
    """Row order for scoring: by length when the dataset knows its lengths (batches trimmed, no compute on
    padding; accuracy does not depend on the order), else as stored."""
    lengths = dataset.lengths() if hasattr(dataset, "lengths") else None
    return longest_first(lengths) if lengths is not None else np.arange(len(dataset))


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
    order = by_length(dataset)
    if d.enabled:
        order = order[d.rank :: d.world]
    dataset = Subset(dataset, order.tolist())

    def run(bs: int) -> tuple[int, float, int]:
        loader = DataLoader(dataset, batch_size=bs, shuffle=False, num_workers=num_workers,
                            collate_fn=collate_fn_of(dataset))
        correct, loss_sum, n = 0, 0.0, 0
        cfg = getattr(model, "_orig_mod", model).cfg
        for batch in loader:
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


class Trainer:
    """Runs `objective` over `train_set` with the engine's switches; resumable from `ckpt_dir`.

    Under torchrun every rank builds the same Trainer; `dist` (default: the process group's view)
    splits each batch over the ranks, and rank 0 alone writes checkpoints and logs.
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
        keep_last: int = 3,
        every_steps: int = 100,
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
        self.optimizer = LazyAdamW(param_groups([model, objective], train.weight_decay), lr=train.lr, betas=(0.9, 0.95))
        n = len(train_set)
        if n < train.batch_size:
            raise ValueError(f"{desc}: train split has {n} samples, fewer than batch_size {train.batch_size}")
        self.steps_per_epoch, self.total_steps = schedule(n, train.batch_size, train.epochs)
        warmup = max(1, int(train.warmup_fraction * self.total_steps))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(self.total_steps, warmup))
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
                batch["glyphs"], batch["length"], gen, self.train.window_prob, self.train.window_min_chars, rows=rows)
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
