"""What every stage's prediction reads, derived once: the corpus facts, the run's charset and atlas, the splits'
text lengths and cache statistics, the render geometry, the encoders and the throughput figure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.corpus import shard_count
from ..data.corpusfile import SPLITS
from ..model.encoder import EncoderConfig
from .corpusfacts import CorpusFacts, corpus_facts
from .lengths import LengthStats
from .sizes import npy_bytes
from .walltime import sustained_gflops


def encoder_for(cfg: dict, role: str, num_classes: int) -> EncoderConfig:
    """The EncoderConfig train.run builds for `role` (teacher or student)."""
    from ..train.run import encoder_config

    return encoder_config(cfg[role]["model"], cfg["render"], num_classes)


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
    """What every stage's prediction reads, derived once from the config and the corpus facts."""

    cfg: dict
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
    report: dict
    gflops: float
    cuda: bool
    precision: str

    @property
    def glyphs(self) -> int:
        return len(self.facts.charset)

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


def plan_inputs(cfg: dict, exact: bool = True) -> PlanInputs:
    """Corpus facts, atlas, lengths, geometry, encoders and throughput figures the stage predictions share."""
    from ..data.atlas import GlyphAtlas
    from ..data.corpus import planned_split_sizes
    from ..data.render import RenderSettings, shard_dtype

    facts = corpus_facts(cfg, exact)
    settings = RenderSettings.from_section(cfg["render"])
    atlas = GlyphAtlas.from_clusters(facts.charset, settings.fonts, settings.font_size, settings.cell_height,
                                     settings.cell_width)
    classes, report = facts.num_classes, cfg.get("report", {})
    cuda = cfg["hardware"]["profile"] != "cpu"
    return PlanInputs(
        cfg=cfg, facts=facts, sizes=facts.sizes, planned=planned_split_sizes(cfg["corpus"]),
        stats={split: split_stats(facts, split, settings.cells) for split in SPLITS},
        lengths={split: LengthStats.from_histogram(facts.texts[split].lengths, settings.cells) for split in SPLITS},
        atlas=atlas.to_dict(), row_dtype=shard_dtype(settings.cells, len(facts.charset)),
        shard_size=cfg["render"]["shard_size"], capacity=settings.cells, pixels=int(np.prod(settings.shape)),
        classes=classes, teacher=encoder_for(cfg, "teacher", classes), student=encoder_for(cfg, "student", classes),
        report=report, gflops=sustained_gflops(report, cuda, cfg["hardware"]["profile"]), cuda=cuda,
        precision=cfg["engine"]["precision"] if cuda else "fp32")
