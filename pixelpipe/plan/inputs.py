"""What every stage's prediction reads, derived once: the config as typed settings (`PlanSettings`, built at the
planner's entry), the corpus facts, the run's charset and atlas, the splits' text lengths and cache statistics, the
render geometry, the encoders and the throughput figure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.settings import HardwareSettings
from ..data.corpus import CorpusSettings, shard_count
from ..data.corpusfile import SPLITS
from ..data.render import RenderSettings
from ..deploy.quantize import QuantizeSettings
from ..evaluate.sets import EvaluateSettings
from ..model.encoder import EncoderConfig
from ..train.baseline import BaselineSettings
from ..train.settings import EngineSettings, RoleSettings, StudentSettings, TeacherSettings
from .corpusfacts import CorpusFacts, corpus_facts
from .lengths import LengthStats
from .sizes import npy_bytes
from .walltime import sustained_gflops


@dataclass(frozen=True)
class BenchmarkPlan:
    """The `deploy_benchmark` keys the planner sizes the deploy report with (the rule reads them one by one)."""

    batch_sizes: tuple[int, ...]
    warmup: int
    repeats: int
    threads: int  # 0 = every core

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> "BenchmarkPlan":
        return cls(tuple(section["batch_sizes"]), section["warmup"], section["repeats"], section["threads"])


@dataclass(frozen=True)
class PlanSettings:
    """The config as the planner reads it, built once at its entry (`from_config`, called by `plan_workflow`, which
    `check_disk` and the command line call): each section as the settings class its stage reads it with, and
    the few keys the rules read one by one. Nothing below the entry reads the config itself."""

    seed: int
    hardware: HardwareSettings
    corpus: CorpusSettings
    render: RenderSettings
    shard_size: int  # render.shard_size: how rows are grouped into files (not a pixel: not in RenderSettings)
    engine: EngineSettings  # as configured: precision 'auto' until a device resolves it
    teacher: TeacherSettings
    student: StudentSettings
    baseline: BaselineSettings
    encode_batch_size: int
    encode_splits: tuple[str, ...]
    quantize: QuantizeSettings
    deploy_benchmark: BenchmarkPlan
    evaluate: EvaluateSettings
    cpu_gflops: float  # report.cpu_gflops
    gpu_tflops: float | None  # report.gpu_tflops (None: the profile's figure)
    time_factors_file: str | None

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "PlanSettings":
        """From a resolved config (pixelpipe.config.resolve)."""
        render, encode, report = cfg["render"], cfg["encode"], cfg["report"]
        return cls(seed=cfg["seed"], hardware=HardwareSettings.from_section(cfg["hardware"]),
                   corpus=CorpusSettings.from_section(cfg["corpus"]), render=RenderSettings.from_section(render),
                   shard_size=render["shard_size"], engine=EngineSettings.from_section(cfg["engine"]),
                   teacher=TeacherSettings.from_config(cfg), student=StudentSettings.from_config(cfg),
                   baseline=BaselineSettings.from_section(cfg["baseline"]), encode_batch_size=encode["batch_size"],
                   encode_splits=tuple(encode["splits"]), quantize=QuantizeSettings.from_section(cfg["quantize"]),
                   deploy_benchmark=BenchmarkPlan.from_section(cfg["deploy_benchmark"]),
                   evaluate=EvaluateSettings.from_section(cfg["evaluate"]), cpu_gflops=report["cpu_gflops"],
                   gpu_tflops=report["gpu_tflops"], time_factors_file=cfg["time_factors"]["file"])

    @property
    def cuda(self) -> bool:
        """Whether the run trains on a GPU (any hardware profile but cpu)."""
        return self.hardware.profile != "cpu"

    def encoder(self, role: RoleSettings, num_classes: int) -> EncoderConfig:
        """The EncoderConfig training builds for `role` (train.run: the role's model over the render settings)."""
        return role.model.encoder(self.render.to_dict(), num_classes)


def split_stats(facts: CorpusFacts, split: str, cells: int) -> Any:
    """The render job's SplitStats for `split` (what its manifest reports), from the corpus facts."""
    from ..data.render import SplitStats

    tally = facts.texts[split]
    stats = SplitStats(len(facts.charset))
    index = {c: i for i, c in enumerate(facts.charset)}
    for cluster, n in tally.glyphs.items():
        stats.glyph_counts[index[cluster]] += int(round(n))
    full = np.round(tally.lengths).astype(np.int64)
    kept = np.minimum(np.arange(len(full)), cells)
    stats.rows = int(full.sum())
    stats.truncated = int(full[cells + 1 :].sum())
    stats.characters = int((kept * full).sum())
    present = np.flatnonzero(full)
    stats.longest = int(present[-1]) if len(present) else 0
    stats.shortest = int(kept[present[0]]) if len(present) else None
    return stats


@dataclass(frozen=True)
class PlanInputs:
    """What every stage's prediction reads, derived once from the plan settings and the corpus facts."""

    settings: PlanSettings
    facts: CorpusFacts
    sizes: dict[str, int]  # rows per split after bad rows
    planned: dict[str, int]  # the planned split sizes: the DAG's shard files follow these
    stats: dict[str, Any]  # per split: data.render.SplitStats as the render job will count them
    lengths: dict[str, LengthStats]  # per split: clusters per text, truncated to the layout
    atlas: dict[str, Any]  # the run's atlas (every split's and every model's), as to_dict writes it
    row_dtype: np.dtype  # one cache row: glyph ids, label, length
    shard_size: int
    capacity: int
    pixels: int
    classes: int
    teacher: EncoderConfig
    student: EncoderConfig
    gflops: float
    cuda: bool
    precision: str

    @property
    def glyphs(self) -> int:
        return len(self.facts.charset)

    def train_rows(self, role: RoleSettings) -> int:
        """The train rows a role reads: all of them, or `rows_per_language` of each language at most (all of them
        again for a student with a transfer set: the rest are read without their label)."""
        cap, distill = role.train.rows_per_language, getattr(role, "distill", None)
        if cap is None or (distill is not None and distill.transfer):
            return self.sizes["train"]
        tally = self.facts.texts["train"]
        share = sum(min(n, cap) for n in tally.per_label.values()) / max(tally.rows, 1)
        return int(round(self.sizes["train"] * share))

    def shard_rows(self, split: str) -> list[int]:
        """Rows of each cache shard of `split`: full shards, then what is left, then empty ones."""
        n = self.sizes[split]
        return [min(self.shard_size, max(0, n - s * self.shard_size))
                for s in range(shard_count(self.planned[split], self.shard_size))]

    def shard_file_bytes(self, split: str) -> list[int]:
        """Bytes of each cache shard file of `split` (structured glyph rows, npy)."""
        return [npy_bytes((m,), self.row_dtype) for m in self.shard_rows(split)]

    @property
    def cache_bytes(self) -> int:
        return sum(sum(self.shard_file_bytes(split)) for split in SPLITS)


def plan_inputs(settings: PlanSettings, exact: bool = True) -> PlanInputs:
    """Corpus facts, atlas, lengths, geometry, encoders and throughput figures the stage predictions share."""
    from ..data.atlas import GlyphAtlas
    from ..data.corpus import planned_split_sizes
    from ..data.render import shard_dtype

    facts = corpus_facts(settings.corpus, settings.render, settings.seed, exact)
    render = settings.render
    atlas = GlyphAtlas.from_clusters(facts.charset, render.fonts, render.font_size, render.cell_height,
                                     render.cell_width)
    classes, cuda = facts.num_classes, settings.cuda
    return PlanInputs(
        settings=settings, facts=facts, sizes=facts.sizes, planned=planned_split_sizes(settings.corpus.to_section()),
        stats={split: split_stats(facts, split, render.cells) for split in SPLITS},
        lengths={split: LengthStats.from_histogram(facts.texts[split].lengths, render.cells) for split in SPLITS},
        atlas=atlas.to_dict(), row_dtype=shard_dtype(render.cells, len(facts.charset)),
        shard_size=settings.shard_size, capacity=render.cells, pixels=int(np.prod(render.shape)),
        classes=classes, teacher=settings.encoder(settings.teacher, classes),
        student=settings.encoder(settings.student, classes),
        gflops=sustained_gflops(settings.cpu_gflops, settings.gpu_tflops, cuda, settings.hardware.profile), cuda=cuda,
        precision=settings.engine.precision if cuda else "fp32")
