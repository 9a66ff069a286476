"""What a training run is told (the `engine:` and `{role}.train` config sections) and what it reports back.

Kept apart from the Trainer so that launchers and reports can read these without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.settings import Section
from ..core.hardware import DeviceInfo, resolve_precision


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
    """What `Trainer.fit` returns (and ddp_launch carries back from rank 0)."""

    history: list[dict] = field(default_factory=list)
    resolved: dict = field(default_factory=dict)
    components: dict = field(default_factory=dict)
    steps: int = 0
    samples: int = 0
    wall_s: float = 0.0
    loss_curve: list[list[float]] = field(default_factory=list)  # [step, global mean loss] readings
