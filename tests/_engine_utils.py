"""Tiny models, data and settings shared by the engine tests (CPU, seconds)."""

from __future__ import annotations

import os

import torch
from torch.utils.data import Dataset

from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder
from pixelpipe.train.distill import ClassificationObjective
from pixelpipe.train.engine import Trainer
from pixelpipe.train.settings import EngineSettings, TrainSettings
from tests._config_utils import section

# The tests' models are tiny: one thread avoids spin-wait oversubscription on a shared, busy CPU.
torch.set_num_threads(1)

# one line of 4 cells of 16 x 8 (16 x 32 images)
TINY = dict(channels=1, cell_height=16, cell_width=8, lines=1, line_chars=4, core="recursive", stem="pair", activation="gelu", mixer_kernel=3,
            mixer_ratio=2.0, positions=False, dim=16, depth=1, heads=2, mlp_ratio=1.0, H_cycles=2, L_cycles=2,
            num_capsules=2, num_classes=3, num_children=4, checksum_bits=32)


def encoder_config(**overrides) -> EncoderConfig:
    return EncoderConfig(**{**TINY, **overrides})


GLYPHS = 8  # the toy atlas: glyph 0 is the blank, 1..7 random ink


def toy_atlas(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + seed)
    cells = torch.randint(0, 256, (GLYPHS, 16, 8), generator=g, dtype=torch.uint8)
    cells[0] = 0
    return cells


class ToyImages(Dataset):
    """Deterministic glyph rows whose label is visible in them (glyph 5 + label at the label's position),
    so training moves; `image` is the row rendered with the toy atlas (the pixel path)."""

    def __init__(self, n: int = 64, seed: int = 0, with_pid: bool = False):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.glyphs = torch.randint(1, 5, (n, 4), generator=g)
        self.glyphs[torch.arange(n), self.labels] = 5 + self.labels
        self.with_pid = with_pid

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        item = {"glyphs": self.glyphs[i], "label": self.labels[i], "length": torch.tensor(4), "index": i}
        if self.with_pid:
            item["pid"] = torch.tensor(os.getpid())
        return item


def tiny_model(seed: int = 0, **overrides) -> TRMVisionEncoder:
    torch.manual_seed(seed)
    return TRMVisionEncoder(encoder_config(**overrides), toy_atlas())


def train_settings(batch_size: int = 8, epochs: float = 1.0, **kw) -> TrainSettings:
    base = dict(epochs=epochs, batch_size=batch_size, lr=3e-3, weight_decay=0.05, warmup_fraction=0.1, grad_clip=1.0,
                label_smoothing=0.0, rows_per_language=None, window_prob=0.0, window_min_chars=1, window_words=0.0,
                augment=[], augment_prob=0.5, calibrate=False)
    return TrainSettings.from_section({**base, **kw})


def engine_settings(**kw) -> EngineSettings:
    """The schema's engine defaults on CPU (fp32), without progress bars, with overrides."""
    return EngineSettings.from_section(section("engine", precision="fp32", progress=False, **kw))


def make_trainer(data: Dataset, batch_size: int = 8, epochs: float = 1.0, seed: int = 0, objective=None,
                 engine: EngineSettings | None = None, train: dict | None = None, **kw) -> Trainer:
    """A tiny CPU Trainer; with a ckpt_dir it keeps the schema's checkpoint policy unless `kw` sets its own."""
    kw = {**section("student.checkpoint"), **kw}
    return Trainer(tiny_model(seed), objective or ClassificationObjective(), data, None,
                   train_settings(batch_size, epochs, **(train or {})), engine or engine_settings(),
                   torch.device("cpu"), seed=seed, log=lambda m: None, **kw)


def state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
