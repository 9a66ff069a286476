"""Tiny models, data and settings shared by the engine tests (CPU, seconds)."""

from __future__ import annotations

import os

import torch
from torch.utils.data import Dataset

from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder
from pixelpipe.train.distill import ClassificationObjective
from pixelpipe.train.engine import EngineSettings, Trainer, TrainSettings
from tests._config_utils import section

# The tests' models are tiny: one thread avoids spin-wait oversubscription on a shared, busy CPU.
torch.set_num_threads(1)

# 16 x 32 images: one line of 4 cells of 16 x 8
TINY = dict(channels=1, cell_height=16, cell_width=8, lines=1, line_chars=4, stem="pair", mixer_kernel=3,
            mixer_ratio=2.0, positions=False, dim=16, depth=1, heads=2, mlp_ratio=1.0, H_cycles=2, L_cycles=2,
            num_capsules=2, num_classes=3, num_children=4, checksum_bits=32)


def encoder_config(**overrides) -> EncoderConfig:
    return EncoderConfig(**{**TINY, **overrides})


class ToyImages(Dataset):
    """Deterministic uint8 images whose label is visible in the pixels (so training moves)."""

    def __init__(self, n: int = 64, seed: int = 0, with_pid: bool = False):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.images = torch.randint(0, 60, (n, 1, 16, 32), generator=g, dtype=torch.uint8)
        for i, y in enumerate(self.labels.tolist()):
            self.images[i, :, :, y * 10 : y * 10 + 8] += 150
        self.with_pid = with_pid

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        item = {"image": self.images[i], "label": self.labels[i], "length": torch.tensor(4), "index": i}
        if self.with_pid:
            item["pid"] = torch.tensor(os.getpid())
        return item


def tiny_model(seed: int = 0, **overrides) -> TRMVisionEncoder:
    torch.manual_seed(seed)
    return TRMVisionEncoder(encoder_config(**overrides))


def train_settings(batch_size: int = 8, epochs: float = 1.0, **kw) -> TrainSettings:
    base = dict(epochs=epochs, batch_size=batch_size, lr=3e-3, weight_decay=0.05, warmup_fraction=0.1, grad_clip=1.0,
                label_smoothing=0.0, window_prob=0.0, window_min_chars=1)
    return TrainSettings.from_section({**base, **kw})


def engine_settings(**kw) -> EngineSettings:
    """The schema's engine defaults on CPU (fp32), without progress bars, with overrides."""
    return EngineSettings.from_section(section("engine", precision="fp32", progress=False, **kw))


def make_trainer(data: Dataset, batch_size: int = 8, epochs: float = 1.0, seed: int = 0, objective=None,
                 engine: EngineSettings | None = None, train: dict | None = None, **kw) -> Trainer:
    return Trainer(tiny_model(seed), objective or ClassificationObjective(), data, None,
                   train_settings(batch_size, epochs, **(train or {})), engine or engine_settings(),
                   torch.device("cpu"), seed=seed, log=lambda m: None, **kw)


def state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
