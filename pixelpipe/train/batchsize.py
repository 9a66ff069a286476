"""`batch_size: auto`: the largest micro-batch that fits a share of device memory.

Instead of Lightning's grow-until-it-crashes search, the cost is measured:
peak memory of a real forward + backward at two small micro-batch sizes gives
a fixed cost and a per-sample slope (activations are linear in the batch),
the budget (engine.memory_target of GPU memory, or of available RAM on CPU)
then predicts the largest micro-batch, a few real steps at that size confirm
it (backing off and re-fitting if it does not fit), and engine.memory_margin
takes a last safety slice off. The effective batch is micro x grad_accum_steps.

Memory is measured where it is actually spent:
  * CUDA: `torch.cuda.max_memory_allocated` after resetting the peak;
  * CPU: growth of the process's peak resident set (VmHWM, reset through
    /proc/self/clear_refs; a sampling thread where that is unavailable).
The optimizer's state (AdamW: two fp32 moments per parameter) is not yet
allocated when the finder runs, so it is added to every measurement.
"""

from __future__ import annotations

import gc
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from ..core.device import autocast_context, is_oom
from ..core.measure import release_freed_heap
from ..data.augment import augment_batch, images_from_glyphs
from .scoring import to_device
from .settings import EngineSettings

CPU_MAX_BATCH = 1024  # on CPU larger batches buy no throughput and cost optimizer steps on small corpora
PROBE_SIZES = (4, 16)  # large enough that activation growth stands out of allocator noise on CPU
MAX_CONFIRM_TRIES = 8

Measure = Callable[[int], int]  # micro-batch -> peak bytes (may raise an out-of-memory error)


@dataclass
class BatchSizeResult:
    batch_size: int  # effective batch: micro_batch x grad_accum_steps
    micro_batch: int
    grad_accum_steps: int
    budget_bytes: int
    fixed_bytes: float
    per_sample_bytes: float
    predicted_micro: int  # from the linear fit, before capping, confirmation and margin
    confirmed_micro: int  # largest size a real step confirmed
    confirmed_peak_bytes: int | None
    capped_by: str | None  # "max_batch", "cpu_cap" or None
    probes: list[list[int]] = field(default_factory=list)  # [micro, peak bytes] per measurement
    seconds: float = 0.0
    device: str = "cpu"

    def to_dict(self) -> dict:
        return asdict(self)


# ---- measuring one real step ------------------------------------------------------------------


def optimizer_state_bytes(modules: list[nn.Module]) -> int:
    """AdamW keeps exp_avg and exp_avg_sq in the parameter dtype for every trainable parameter."""
    return sum(2 * p.numel() * p.element_size() for m in modules for p in m.parameters() if p.requires_grad)


def _run_steps(model: nn.Module, objective: nn.Module, batch: dict, engine: EngineSettings,
               device: torch.device, steps: int) -> None:
    for i in range(steps):
        b = to_device(batch, device)
        if engine.augment:  # what the engine does: images assembled on the device, then augmented
            c = model.cfg
            images = images_from_glyphs(b["glyphs"], model.atlas, c.lines, c.channels)
            b["image"] = augment_batch(images, torch.Generator(device=device).manual_seed(i))
        with autocast_context(device, engine.precision):
            loss, _ = objective(model, b)
        loss.backward()
        del loss, b
    for m in (model, objective):
        for p in m.parameters():
            p.grad = None


_HWM = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field_name: str) -> int:
    m = re.search(rf"{field_name}:\s+(\d+) kB", _HWM.read_text())
    return int(m.group(1)) * 1024 if m else 0


def _reset_peak_rss() -> bool:
    """Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def cpu_peak_growth(fn: Callable[[], None]) -> int:
    """Bytes the peak resident set grows above the current one while `fn` runs."""
    gc.collect()
    release_freed_heap()  # an earlier, larger step's leftovers must not hide this step's growth
    if _HWM.exists() and _reset_peak_rss():
        before = _status_bytes("VmRSS")
        fn()
        return max(0, _status_bytes("VmHWM") - before)
    from ..core.measure import RSSSampler

    sampler = RSSSampler(interval=0.001)
    sampler.start()
    fn()
    return max(0, sampler.stop() - sampler.baseline)


def make_measure(model: nn.Module, objective: nn.Module, sample_batch: Callable[[int], dict],
                 engine: EngineSettings, device: torch.device, steps: int = 1) -> Measure:
    """The real measurement: peak bytes of `steps` forward+backward passes at a micro-batch, plus optimizer state."""
    opt_bytes = optimizer_state_bytes([model, objective])

    def measure(micro: int) -> int:
        batch = sample_batch(micro)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            _run_steps(model, objective, batch, engine, device, steps)
            torch.cuda.synchronize(device)
            peak = torch.cuda.max_memory_allocated(device)
        else:
            peak = cpu_peak_growth(lambda: _run_steps(model, objective, batch, engine, device, steps))
        return int(peak + opt_bytes)

    return measure


def default_budget(engine: EngineSettings, device: torch.device) -> int:
    """memory_target of the GPU (less what other processes hold), or of the RAM available now on CPU."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        others = max(0, total - free - torch.cuda.memory_reserved(device))
        return int(engine.memory_target * total - others)
    import psutil

    return int(engine.memory_target * psutil.virtual_memory().available)


# ---- the search -------------------------------------------------------------------------------


def _fits(measure: Measure, micro: int, budget: int, probes: list[list[int]]) -> tuple[bool, int | None]:
    try:
        peak = measure(micro)
    except (RuntimeError, MemoryError) as err:
        if not is_oom(err):
            raise
        probes.append([micro, -1])
        return False, None
    probes.append([micro, peak])
    return peak <= budget, peak


def _round_down(micro: int) -> int:
    """Multiples of 8 from 64 up (tensor-core friendly, at most 11 % lost); exact below."""
    return micro - micro % 8 if micro >= 64 else max(1, micro)


def _linear_fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    (b1, m1), (b2, m2) = points
    slope = (m2 - m1) / (b2 - b1)
    return m1 - slope * b1, slope


def _predict(fixed: float, slope: float, budget: int, cap: int) -> int:
    if slope <= 0:  # cost too small to see: the cap decides
        return cap
    return max(0, math.floor((budget - fixed) / slope))


def _micro_cap(engine: EngineSettings, device: torch.device, max_batch: int | None,
               cpu_cap: int) -> tuple[int, str | None]:
    """The largest micro-batch allowed before memory is asked, and what set it."""
    accum = engine.grad_accum_steps
    cap, capped_by = 1 << 30, None
    if max_batch is not None:
        cap, capped_by = max(1, max_batch // accum), "max_batch"
    if device.type == "cpu" and cpu_cap // accum < cap:
        cap, capped_by = max(1, cpu_cap // accum), "cpu_cap"
    return cap, capped_by


@dataclass
class _ModelState:
    """What the finder changes on the model and the RNGs, to put back however it ends."""

    was_training: bool
    flags: tuple[bool, bool]  # activation_checkpointing, grad_free_cycles
    rng: torch.Tensor
    cuda_rng: torch.Tensor | None

    @classmethod
    def save(cls, model: nn.Module, device: torch.device, real_steps: bool) -> "_ModelState":
        flags = (getattr(model, "activation_checkpointing", False), getattr(model, "grad_free_cycles", False))
        cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" and real_steps else None
        return cls(model.training, flags, torch.get_rng_state(), cuda_rng)

    def restore(self, model: nn.Module, objective: nn.Module, device: torch.device) -> None:
        for m in (model, objective):
            for p in m.parameters():
                p.grad = None
        model.train(self.was_training)
        model.activation_checkpointing, model.grad_free_cycles = self.flags
        torch.set_rng_state(self.rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, device)
            torch.cuda.empty_cache()


def _real_measures(model: nn.Module, objective: nn.Module, sample_batch: Callable[[int], dict],
                   engine: EngineSettings, device: torch.device, confirm_steps: int,
                   warmup: int) -> tuple[Measure, Measure]:
    """One-step probe and multi-step confirm measures on the model set up as the engine will train it."""
    model.to(device)
    objective.to(device)
    model.activation_checkpointing = engine.activation_checkpointing
    model.grad_free_cycles = engine.grad_free_cycles
    if engine.channels_last:
        model.to(memory_format=torch.channels_last)
    model.train()
    real = make_measure(model, objective, sample_batch, engine, device, steps=1)
    confirm = make_measure(model, objective, sample_batch, engine, device, steps=confirm_steps)
    real(warmup)  # warm-up: lazy inits and allocator pools must not count as per-sample cost
    return real, confirm


def _probe(measure: Measure, probe_sizes: tuple[int, int], cap: int, budget: int,
           probes: list[list[int]]) -> list[tuple[int, int]]:
    """(micro, peak) at the probe sizes that fit; raises if not even the smallest does."""
    points: list[tuple[int, int]] = []
    for size in sorted({min(x, cap) for x in probe_sizes}):
        ok, peak = _fits(measure, size, budget, probes)
        if not ok:
            break
        points.append((size, peak))
    if not points:
        raise RuntimeError(f"batch size finder: micro-batch {probes[0][0]} does not fit the budget of "
                           f"{budget / 2**20:.0f} MiB (peak {probes[0][1] / 2**20:.0f} MiB; -1 = out of memory)")
    return points


def _solve(points: list[tuple[int, int]], budget: int, cap: int) -> tuple[float, float, int, int]:
    """Fixed cost, per-sample slope, the predicted micro-batch and the first size to confirm."""
    if len(points) == 2:
        fixed, slope = _linear_fit(points)
    else:  # one probe, or the larger one did not fit: charge everything to the samples (conservative)
        fixed, slope = 0.0, points[0][1] / points[0][0]
    predicted = _predict(fixed, slope, budget, cap)
    micro = max(points[-1][0], min(predicted, cap))
    return fixed, slope, predicted, micro


def _confirm(measure: Measure, micro: int, known: tuple[int, int], budget: int,
             probes: list[list[int]]) -> tuple[int, int, bool]:
    """Largest micro-batch real steps confirm, its peak, and whether any try missed.

    A miss brackets the answer between the largest size known to fit and the smallest known not to;
    the next guess interpolates the measured peaks between them (a secant of a convex cost stays on
    the safe side) or bisects after a real OOM error.
    """
    lo, lo_peak = known
    hi: int | None = None
    hi_peak: int | None = None
    for _ in range(MAX_CONFIRM_TRIES):
        if micro <= lo:
            break
        ok, peak = _fits(measure, micro, budget, probes)
        if ok:
            lo, lo_peak = micro, peak
            if hi is None:  # the prediction itself fits: the line was right
                break
        else:
            hi, hi_peak = micro, peak
        if hi_peak is not None and hi_peak > lo_peak:
            guess = lo + (budget - lo_peak) * (hi - lo) / (hi_peak - lo_peak)
        else:
            guess = (lo + hi) / 2
        nxt = _round_down(int(min(guess, hi - 1)))
        if nxt <= lo or hi - lo <= max(1, lo // 20):  # bracket within 5 %
            break
        micro = nxt
    return lo, lo_peak, hi is not None


def find_batch_size(
    model: nn.Module,
    objective: nn.Module,
    sample_batch: Callable[[int], dict],
    engine: EngineSettings,
    device: torch.device,
    max_batch: int | None = None,
    log: Callable[[str], None] = print,
    *,
    measure: Measure | None = None,
    budget_bytes: int | None = None,
    probe_sizes: tuple[int, int] = PROBE_SIZES,
    confirm_steps: int = 2,
    cpu_cap: int = CPU_MAX_BATCH,
) -> BatchSizeResult:
    """Largest effective batch whose micro-batch fits `budget_bytes` (default: engine.memory_target).

    `measure` and `budget_bytes` can be injected (tests, planners); by default
    real steps of `model`/`objective` on `sample_batch(micro)` are measured with
    the engine's switches (precision, activation checkpointing, grad-free cycles,
    channels_last, augmentation) applied, since they change memory. The model's
    weights, mode and the RNG state are left as they were.
    """
    t0 = time.perf_counter()
    accum = engine.grad_accum_steps
    cap, capped_by = _micro_cap(engine, device, max_batch, cpu_cap)
    budget = int(budget_bytes if budget_bytes is not None else default_budget(engine, device))
    state = _ModelState.save(model, device, real_steps=measure is None)
    if measure is None:
        real, confirm = _real_measures(model, objective, sample_batch, engine, device, confirm_steps,
                                       warmup=min(probe_sizes[0], cap))
    else:
        real = confirm = measure
    probes: list[list[int]] = []
    try:
        points = _probe(real, probe_sizes, cap, budget, probes)
        fixed, slope, predicted, micro = _solve(points, budget, cap)
        if micro < cap:
            micro, capped_by = _round_down(micro), None
        confirmed, confirmed_peak, missed = _confirm(confirm, micro, points[-1], budget, probes)
        if missed:
            capped_by = None
        final = confirmed if capped_by else _round_down(max(1, math.floor(confirmed * (1 - engine.memory_margin))))
    finally:
        state.restore(model, objective, device)
    result = BatchSizeResult(
        batch_size=final * accum, micro_batch=final, grad_accum_steps=accum, budget_bytes=budget,
        fixed_bytes=fixed, per_sample_bytes=slope, predicted_micro=predicted, confirmed_micro=confirmed,
        confirmed_peak_bytes=confirmed_peak, capped_by=capped_by, probes=probes,
        seconds=time.perf_counter() - t0, device=device.type,
    )
    log(f"batch size auto: budget {budget / 2**20:.0f} MiB, fixed {fixed / 2**20:.1f} MiB + "
        f"{slope / 2**20:.3f} MiB/sample -> predicted micro {predicted}, confirmed {confirmed}"
        f"{f' (capped by {capped_by})' if capped_by else ''}, after {engine.memory_margin:.0%} margin {final}; "
        f"effective batch {result.batch_size} (x{accum} accumulation) in {result.seconds:.1f}s")
    return result


__all__ = ["BatchSizeResult", "find_batch_size", "make_measure", "default_budget", "CPU_MAX_BATCH"]
