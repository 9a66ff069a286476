"""What every stage's prediction reads, derived once: the corpus facts, the splits' layouts and atlases,
the render geometry, the encoders and the throughput figure."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.corpus import shard_count
from ..data.fonts import load_face
from ..model.encoder import EncoderConfig
from .sizes import PARQUET_BYTES_PER_CHAR, PARQUET_FILE_BYTES, PARQUET_ROW_BYTES, npy_bytes
from .walltime import sustained_gflops

SPLITS = ("train", "val", "test")


def encoder_for(cfg: dict, role: str, num_classes: int) -> EncoderConfig:
    """The EncoderConfig train.run builds for `role` (teacher or student)."""
    from ..train.run import encoder_config

    return encoder_config(cfg[role]["model"], cfg["render"], num_classes)


@dataclass
class CorpusFacts:
    """What the corpus rule will write, computed the same way: rows per split after bad rows, class ids,
    and per split the texts, labels and ids the renderer lays out (so cache manifests and the atlas
    are sized exactly, not estimated)."""

    splits: dict[str, tuple[list[str], list[int], list[str]]]
    num_classes: int
    corpus_bytes: dict[str, int]  # what the corpus rule writes: parquet per split and labels.json

    @property
    def sizes(self) -> dict[str, int]:
        return {split: len(texts) for split, (texts, _, _) in self.splits.items()}


def corpus_facts(cfg: dict) -> CorpusFacts:
    """Generate the built-in corpus or read the user's (deterministic, ~2 s for the default) and drop bad rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..core.io import json_text
    from ..data.corpus import bad_row_counts, class_ids, corpus_rows, find_bad_rows, labels_info, split_table

    df, locales, _ = corpus_rows(cfg["corpus"], cfg["seed"])
    bad = find_bad_rows(df, cfg["render"]["fonts"])
    df = df.drop(index=bad.index)
    ids = class_ids(df["label"])
    splits, disk = {}, {}
    for split in SPLITS:
        part = df[df["split"] == split]
        splits[split] = (part["text"].tolist(), [ids[l] for l in part["label"]], part["id"].tolist())
        sink = pa.BufferOutputStream()
        pq.write_table(split_table(part, ids), sink)  # the exact bytes, written to memory
        disk[f"{split}.parquet"] = sink.getvalue().size
    info = labels_info(ids, locales, bad_row_counts(bad), {s: len(t) for s, (t, _, _) in splits.items()})
    disk["labels.json"] = len(json_text(info).encode())
    return CorpusFacts(splits, max(1, len(ids)), disk)


# Distinct characters of the built-in corpus (measured: 485 at the default 17,100 rows, 363 at 380); the
# disk preflight, which answers before the corpus exists, assumes this many for any corpus.
ESTIMATED_GLYPHS = 485


def estimated_corpus_facts(cfg: dict) -> CorpusFacts:
    """Corpus facts without generating or reading the corpus, for the disk preflight: the planned split
    sizes, texts of the built-in corpus's longest length, ESTIMATED_GLYPHS distinct characters."""
    from ..data.corpus import planned_split_sizes

    fonts = cfg["render"]["fonts"]
    drawable = sorted(set().union(*(load_face(f).codepoints for f in fonts)))
    glyphs = "".join(chr(c) for c in drawable if chr(c).isprintable() and not chr(c).isspace()
                     and unicodedata.category(chr(c))[0] in "LNP")[:ESTIMATED_GLYPHS]
    length = cfg["corpus"]["max_chars"]
    splits = {}
    for split, n in planned_split_sizes(cfg["corpus"]).items():
        texts = [(glyphs * (1 + length // len(glyphs)))[:length]] * n
        if split == "train" and n:
            texts[0] = glyphs  # every glyph once: the atlas gets them all
        splits[split] = (texts, [0] * n, [f"row-{i:06d}" for i in range(n)])
    classes = 19 if cfg["corpus"]["path"] is None else 100
    disk = {f"{split}.parquet": int(PARQUET_FILE_BYTES + len(texts) * (length * PARQUET_BYTES_PER_CHAR + PARQUET_ROW_BYTES))
            for split, (texts, _, _) in splits.items()}
    disk["labels.json"] = 200 + 30 * classes
    return CorpusFacts(splits, classes, disk)


def _split_layouts(cfg: dict, facts: CorpusFacts) -> dict[str, tuple[np.ndarray, dict[str, Any]]]:
    """Per split: (characters per text before truncation, the split's atlas), as render_split computes them."""
    from ..data.render import Renderer, RenderSettings

    settings = RenderSettings.from_section(cfg["render"])
    out = {}
    for split, (texts, _, _) in facts.splits.items():
        renderer = Renderer(settings)
        _, full = renderer.layout(texts)
        out[split] = (full, renderer.atlas.to_dict())
    return out


@dataclass(frozen=True)
class PlanInputs:
    """What every stage's prediction reads, derived once from the config and the corpus facts."""

    cfg: dict
    facts: CorpusFacts
    sizes: dict[str, int]  # rows per split after bad rows
    planned: dict[str, int]  # the planned split sizes: the DAG's shard files follow these
    layouts: dict[str, tuple[np.ndarray, dict[str, Any]]]
    atlas: dict[str, Any]
    shard_size: int
    geometry: tuple[int, ...]
    capacity: int
    pixels: int
    classes: int
    teacher: EncoderConfig
    student: EncoderConfig
    report: dict
    gflops: float | None
    cuda: bool
    precision: str
    chars: dict[str, int]  # characters per split

    def shard_file_bytes(self, split: str) -> list[int]:
        """Bytes of each cache shard file of `split` (uint8 images, npy)."""
        n = self.sizes[split]
        return [npy_bytes((min(self.shard_size, max(0, n - s * self.shard_size)), *self.geometry), np.uint8)
                for s in range(shard_count(self.planned[split], self.shard_size))]

    @property
    def cache_bytes(self) -> int:
        return sum(sum(self.shard_file_bytes(split)) for split in SPLITS)


def plan_inputs(cfg: dict, exact: bool = True) -> PlanInputs:
    """Corpus facts, layouts, geometry, encoders and throughput figures the stage predictions share."""
    from ..data.corpus import planned_split_sizes
    from ..data.render import RenderSettings

    facts = corpus_facts(cfg) if exact else estimated_corpus_facts(cfg)
    layouts = _split_layouts(cfg, facts)
    settings = RenderSettings.from_section(cfg["render"])
    classes = facts.num_classes
    report = cfg.get("report", {})
    cuda = cfg["hardware"]["profile"] != "cpu"
    gflops = sustained_gflops(report, cuda)
    return PlanInputs(
        cfg=cfg, facts=facts, sizes=facts.sizes, planned=planned_split_sizes(cfg["corpus"]), layouts=layouts,
        atlas=layouts["train"][1], shard_size=cfg["render"]["shard_size"], geometry=settings.shape,
        capacity=settings.cells, pixels=int(np.prod(settings.shape)), classes=classes,
        teacher=encoder_for(cfg, "teacher", classes), student=encoder_for(cfg, "student", classes),
        report=report, gflops=gflops, cuda=cuda, precision=cfg["engine"]["precision"] if cuda else "fp32",
        chars={split: sum(map(len, texts)) for split, (texts, _, _) in facts.splits.items()})
