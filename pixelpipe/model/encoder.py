"""TRMVisionEncoder: a recursive vision transformer with capsule pooling, over glyph-aligned tokens.

The stem turns the rendered cells into one token per character (a
convolution with a stride of one cell; with the `pair` stem each token sees
a character and the next, so every bigram is a token) and mixes neighbouring
tokens with a 1-D convolution (character n-grams). One small stack of
transformer blocks is applied recursively, as in Tiny Recursive Models:
`H_cycles` outer steps, each refining a latent `z` `L_cycles` times and then
the answer state `y`. K learned queries pool the answer tokens into K
capsules, from which come the outputs the rest of the pipeline stores:
sketches [K, D], children [K, 4, D], 32-bit checksums [K, 32]. The class
logits come from the capsules plus the mean and max over the answer tokens
and over the stem's local features: what a text's language is made of is a
bag of local n-grams wherever they stand, which attention pooling over K
queries alone recovers slowly (docs/benchmarks.md, "Why the TRM trailed a
plain conv net").
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function
from torch.utils.checkpoint import checkpoint

from ..config.settings import CellGrid, check_keys

STEMS = ("pair", "cell")
NUM_CHILDREN = 4  # children per capsule (fixed by the architecture, not configured)
CHECKSUM_BITS = 32  # bits of each capsule's checksum code
# EncoderConfig fields that are not `{role}.model` keys: image geometry (render), classes (corpus), fixed heads.
NOT_MODEL_KEYS = ("channels", "cell_height", "cell_width", "lines", "line_chars", "num_classes", "num_children",
                  "checksum_bits")


@dataclass
class EncoderConfig(CellGrid):
    """The encoder's shape. Geometry comes from the render settings, the rest from `{role}.model`."""

    channels: int
    cell_height: int
    cell_width: int
    lines: int
    line_chars: int
    stem: str
    mixer_kernel: int
    mixer_ratio: float
    positions: bool
    dim: int
    depth: int
    heads: int
    mlp_ratio: float
    H_cycles: int
    L_cycles: int
    num_capsules: int
    num_classes: int
    num_children: int
    checksum_bits: int

    @classmethod
    def section_keys(cls) -> list[str]:
        """The `{role}.model` keys: every field but the geometry, the classes and the fixed output heads."""
        return [f.name for f in fields(cls) if f.name not in NOT_MODEL_KEYS]

    @classmethod
    def from_section(cls, model: Mapping[str, Any], render: Mapping[str, Any], num_classes: int) -> "EncoderConfig":
        """The encoder for a complete `{role}.model` section and the render settings its images are drawn with."""
        check_keys(model, cls.section_keys(), "'model' for EncoderConfig")
        return cls(channels=render["channels"], cell_height=render["cell_height"], cell_width=render["cell_width"],
                   lines=render["lines"], line_chars=render["line_chars"], num_classes=num_classes,
                   num_children=NUM_CHILDREN, checksum_bits=CHECKSUM_BITS, **model)

    @classmethod
    def from_dict(cls, d: dict) -> "EncoderConfig":
        """A saved encoder config (a model's config.json): exactly the fields."""
        check_keys(d, [f.name for f in fields(cls)], "'encoder' of a saved model")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def num_tokens(self) -> int:
        """One token per cell: a character (stem `cell`) or a character and the next (stem `pair`)."""
        return self.cells

    @property
    def stem_kernel(self) -> tuple[int, int]:
        return (self.cell_height, (2 if self.stem == "pair" else 1) * self.cell_width)

    def validate(self) -> None:
        if self.stem not in STEMS:
            raise ValueError(f"stem must be one of {STEMS}, got {self.stem!r}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.mixer_kernel < 0 or (self.mixer_kernel and self.mixer_kernel % 2 == 0):
            raise ValueError(f"mixer_kernel must be 0 (off) or odd, got {self.mixer_kernel}")

    @property
    def mixer_hidden(self) -> int:
        """Width of the stem's local features (0 without local mixing)."""
        return int(self.dim * self.mixer_ratio) if self.mixer_kernel else 0

    @property
    def head_features(self) -> int:
        """Capsules (K x D), mean and max of the answer tokens (2 D), mean and max of the local features."""
        return self.num_capsules * self.dim + 2 * self.dim + 2 * self.mixer_hidden


class Block(nn.Module):
    """Pre-norm transformer block (self-attention + MLP)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(attn.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class RecursiveCore(nn.Module):
    """The shared block stack that every recursion step reuses."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg.dim, cfg.heads, cfg.mlp_ratio) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


class CapsulePool(nn.Module):
    """K learned queries attend to the tokens; each query becomes one capsule."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.heads = cfg.heads
        self.queries = nn.Parameter(torch.randn(cfg.num_capsules, cfg.dim) * 0.02)
        self.norm_kv = nn.LayerNorm(cfg.dim)
        self.kv = nn.Linear(cfg.dim, 2 * cfg.dim)
        self.q = nn.Linear(cfg.dim, cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.norm_mlp = nn.LayerNorm(cfg.dim)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, 2 * cfg.dim), nn.GELU(), nn.Linear(2 * cfg.dim, cfg.dim))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, n, d = tokens.shape
        h = self.heads
        k, v = self.kv(self.norm_kv(tokens)).reshape(b, n, 2, h, d // h).permute(2, 0, 3, 1, 4)
        q = self.q(self.queries).reshape(1, -1, h, d // h).transpose(1, 2).expand(b, -1, -1, -1)
        caps = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, -1, d)
        caps = self.queries + self.proj(caps)
        return caps + self.mlp(self.norm_mlp(caps))


class LocalMixer(nn.Module):
    """Mixing between neighbouring tokens: LayerNorm, a 1-D convolution over `kernel` tokens into a
    wider hidden layer (a bank of character n-gram detectors), GELU, and a projection back, added
    to the tokens. Returns the tokens and the hidden features (the head pools them)."""

    def __init__(self, dim: int, kernel: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Conv1d(dim, hidden, kernel, padding=kernel // 2)
        self.proj = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.gelu(self.conv(self.norm(x).transpose(1, 2)).transpose(1, 2))
        return x + self.proj(h), h


class CharStem(nn.Module):
    """Cells to tokens, one per cell: a convolution with a stride of one cell whose kernel spans
    one cell (`cell`) or a cell and the next (`pair`: every bigram is one token), then optional
    local mixing. The image is padded by one blank cell on the right so the last character
    starts a pair too."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.pad = cfg.stem_kernel[1] - cfg.cell_width
        self.proj = nn.Conv2d(cfg.channels, cfg.dim, kernel_size=cfg.stem_kernel, stride=(cfg.cell_height, cfg.cell_width))
        self.mixer = LocalMixer(cfg.dim, cfg.mixer_kernel, cfg.mixer_hidden) if cfg.mixer_kernel else None

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(tokens [B, lines * line_chars, D], local features [B, N, hidden] or None)."""
        if self.pad:
            images = F.pad(images, (0, self.pad))
        x = self.proj(images).flatten(2).transpose(1, 2)
        return self.mixer(x) if self.mixer is not None else (x, None)


class TRMVisionEncoder(nn.Module):
    """Images in, capsule outputs and class logits out (see module docstring)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.stem = CharStem(cfg)
        self.pos_embed = nn.Parameter(torch.randn(1, cfg.num_tokens, cfg.dim) * 0.02) if cfg.positions else None
        self.z_init = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.core = RecursiveCore(cfg)
        self.capsules = CapsulePool(cfg)
        self.sketch_norm = nn.LayerNorm(cfg.dim)
        self.children_proj = nn.Linear(cfg.dim, cfg.num_children * cfg.dim)
        self.head_norm = nn.LayerNorm(cfg.head_features)
        self.head = nn.Linear(cfg.head_features, cfg.num_classes)
        # A fixed random hyperplane per checksum bit: the checksum is a locality-sensitive
        # hash of the sketch, so similar capsules share most bits and the code needs no training.
        g = torch.Generator().manual_seed(0x5EED)
        self.register_buffer("checksum_planes", torch.randn(cfg.dim, cfg.checksum_bits, generator=g), persistent=True)
        # Training-time switches set by the engine; they do not change the computed function.
        self.activation_checkpointing = False
        self.grad_free_cycles = False
        self.apply(_init_weights)

    def embed(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(tokens, with learned positions if configured; the stem's local features or None)."""
        if images.dtype == torch.uint8:
            images = images.float().div(255.0)
        x, local = self.stem(images)
        return (x + self.pos_embed if self.pos_embed is not None else x), local

    def _core(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(self.core, x, use_reentrant=False)
        return self.core(x)

    def recurse(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        z = self.z_init.expand_as(x)
        for h in range(self.cfg.H_cycles):
            last = h == self.cfg.H_cycles - 1
            # TRM trick: earlier cycles only move the state; gradients flow through the last one,
            # which bounds training memory to one cycle's activations.
            ctx = torch.no_grad() if (self.grad_free_cycles and not last and self.training) else contextlib.nullcontext()
            with ctx:
                for _ in range(self.cfg.L_cycles):
                    z = self._core(z + y + x)
                y = self._core(y + z)
        return y

    def head_input(self, sketches: torch.Tensor, y: torch.Tensor, local: torch.Tensor | None) -> torch.Tensor:
        """[B, head_features]: the capsules' sketches, mean and max of the answer tokens and of the local features."""
        pooled = [sketches.flatten(1), y.mean(1), token_max(y)]
        if local is not None:
            pooled += [local.mean(1), token_max(local)]
        return torch.cat(pooled, dim=-1)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        with record_function("encoder.embed"):
            x, local = self.embed(images)
        with record_function("encoder.recursion"):
            y = self.recurse(x)
        with record_function("encoder.capsules"):
            caps = self.capsules(y)
            sketches = self.sketch_norm(caps)
            b, k, d = caps.shape
            children = self.children_proj(caps).reshape(b, k, self.cfg.num_children, d)
            checksum_logits = sketches @ self.checksum_planes.to(sketches.dtype)
        with record_function("encoder.head"):
            logits = self.head(self.head_norm(self.head_input(sketches, y, local)))
        return {"logits": logits, "sketches": sketches, "children": children, "checksum_logits": checksum_logits}


def token_max(x: torch.Tensor) -> torch.Tensor:
    """Max over the token axis of [B, N, C] as a max-pool: it exports as ONNX MaxPool, which onnxruntime's
    quantization tooling infers shapes for (ReduceMax with axes as an input, opset 18, it does not)."""
    return F.max_pool1d(x.transpose(1, 2), x.shape[1]).squeeze(-1)


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def checksum_bits(checksum_logits: torch.Tensor) -> torch.Tensor:
    """32 sign bits per capsule as a bool tensor [..., 32]."""
    return checksum_logits > 0


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def flops_per_sample(cfg: EncoderConfig) -> float:
    """Approximate forward FLOPs for one image (2 per multiply-add), for MFU and the planner."""
    n, d = cfg.num_tokens, cfg.dim
    hidden = int(d * cfg.mlp_ratio)
    block = 2 * n * (3 * d * d + d * d + 2 * d * hidden) + 2 * 2 * n * n * d  # linears + attention
    core_calls = cfg.H_cycles * (cfg.L_cycles + 1)
    kh, kw = cfg.stem_kernel
    embed = 2 * n * d * cfg.channels * kh * kw
    if cfg.mixer_kernel:
        embed += 2 * n * cfg.mixer_hidden * d * (cfg.mixer_kernel + 1)  # n-gram convolution + projection back
    k = cfg.num_capsules
    caps = 2 * (n * 2 * d * d + k * d * d * 2 + 2 * k * n * d + k * 4 * d * d) + 2 * k * d * cfg.num_children * d
    head = 2 * cfg.head_features * cfg.num_classes
    return float(embed + core_calls * cfg.depth * block + caps + head)


def init_seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


__all__ = [
    "EncoderConfig",
    "TRMVisionEncoder",
    "checksum_bits",
    "count_parameters",
    "flops_per_sample",
    "init_seed_everything",
]
