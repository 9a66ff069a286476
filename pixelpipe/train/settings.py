"""What a training run is told (the `engine:` and `{role}` config sections) and what it reports back.

A training stage's entry function (`run.train_teacher`, `run.train_student`) turns the config into one
`TeacherSettings` or `StudentSettings` (`from_config`) and hands only that down: no function below it reads the
raw config. Kept apart from the Trainer so that launchers and reports can read these without importing the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from ..config.settings import CheckpointSettings, HardwareSettings, Section, check_keys
from ..core.hardware import DeviceInfo, resolve_precision

if TYPE_CHECKING:
    from ..model.encoder import EncoderConfig

AUTO = "auto"  # `{role}.train.batch_size: auto`: searched for at the start of training (run.resolve_batch_size)


@dataclass
class EngineSettings(Section):
    """The `engine:` config section (defaults: the schema); `for_device` resolves it for one device."""

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

    def for_device(self, info: DeviceInfo) -> "EngineSettings":
        """A copy resolved for the device: precision 'auto' becomes the device's, and no pinned memory on CPU."""
        return dataclasses.replace(self, precision=resolve_precision(self.precision, info),
                                   pin_memory=False if info.kind == "cpu" else self.pin_memory)


@dataclass
class TrainSettings(Section):
    """A `{role}.train` section. `batch_size` is a number, or 'auto' as configured until `run.resolve_batch_size`
    settles it (`with_batch_size`): the Trainer takes only a resolved one."""

    SECTION = "train"

    epochs: float
    batch_size: int | Literal["auto"]
    lr: float
    weight_decay: float
    warmup_fraction: float
    grad_clip: float
    label_smoothing: float
    rows_per_language: int | None
    window_prob: float
    window_min_chars: int
    window_words: float
    augment: list[str]
    augment_prob: float
    calibrate: bool

    @property
    def batch_size_auto(self) -> bool:
        """Whether the batch size is still to be searched for."""
        return self.batch_size == AUTO

    def with_batch_size(self, batch_size: int) -> "TrainSettings":
        """A copy with the batch size resolved to `batch_size`."""
        return dataclasses.replace(self, batch_size=int(batch_size))


@dataclass
class DistillSettings(Section):
    """The `student.distill` section: the temperature and the weights of the three loss terms."""

    SECTION = "student.distill"

    temperature: float
    ce_weight: float
    kl_weight: float
    sketch_weight: float
    transfer: bool


@dataclass(frozen=True)
class ModelSettings:
    """A `{role}.model` section, checked against `EncoderConfig`'s keys when the role's settings are built. The
    encoder itself also needs the render settings its images are drawn with and the number of labels, which only
    the run's cache and labels know: `encoder` builds it then."""

    SECTION = "{role}.model"

    section: dict[str, Any]

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> Self:
        from ..model.encoder import EncoderConfig

        check_keys(section, EncoderConfig.section_keys(), "'model' for EncoderConfig")
        return cls(dict(section))

    def to_section(self) -> dict[str, Any]:
        return dict(self.section)

    def encoder(self, render: Mapping[str, Any], num_classes: int) -> EncoderConfig:
        """The encoder for images drawn with the `render` settings, with `num_classes` outputs."""
        from ..model.encoder import EncoderConfig

        return EncoderConfig.from_section(self.section, render, num_classes)


@dataclass(frozen=True)
class RoleSettings:
    """Everything a training stage reads from the config, built once at its entry (`from_config`): the
    `{role}` section's parts (`PARTS`), the engine as configured (precision may be 'auto' and batch_size 'auto'
    until the stage resolves them for its device and data), the hardware section and the seed."""

    ROLE: ClassVar[str] = "?"
    # the model predict ships (the student): only it needs the short texts' own temperatures (calibrate.py)
    DEPLOYED: ClassVar[bool] = False
    PARTS: ClassVar[dict[str, type]] = {"model": ModelSettings, "train": TrainSettings,
                                        "checkpoint": CheckpointSettings}

    model: ModelSettings
    train: TrainSettings
    checkpoint: CheckpointSettings
    engine: EngineSettings
    hardware: HardwareSettings
    seed: int

    @property
    def role(self) -> str:
        return self.ROLE

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Self:
        """From a resolved config, or the slice a training rule declares (`workflow_job.training_config`): the
        `{role}` section must hold exactly `PARTS`, each part exactly its class's keys."""
        section = cfg[cls.ROLE]
        check_keys(section, list(cls.PARTS), f"'{cls.ROLE}' for {cls.__name__}")
        parts = {name: reader.from_section(section[name]) for name, reader in cls.PARTS.items()}
        return cls(**parts, engine=EngineSettings.from_section(cfg["engine"]),
                   hardware=HardwareSettings.from_section(cfg["hardware"]), seed=cfg["seed"])

    def role_section(self) -> dict[str, Any]:
        """The `{role}` section as configured (the run fingerprint hashes it)."""
        return {name: getattr(self, name).to_section() for name in self.PARTS}


@dataclass(frozen=True)
class TeacherSettings(RoleSettings):
    """The teacher stage's settings: the `teacher` section, engine, hardware and seed."""

    ROLE: ClassVar[str] = "teacher"


@dataclass(frozen=True)
class StudentSettings(RoleSettings):
    """The student stage's settings: those of any role plus the `student.distill` objective."""

    ROLE: ClassVar[str] = "student"
    DEPLOYED: ClassVar[bool] = True
    PARTS: ClassVar[dict[str, type]] = {**RoleSettings.PARTS, "distill": DistillSettings}

    distill: DistillSettings


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
