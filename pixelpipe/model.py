"""TRMVisionEncoder: a recursive vision transformer with capsule pooling.

One small stack of transformer blocks is applied recursively, as in Tiny
Recursive Models: `H_cycles` outer steps, each refining a latent `z` `L_cycles`
times and then the answer state `y`. Weight sharing keeps the parameter count
small while the recursion buys depth. K learned queries pool the answer tokens
into K capsules, from which come the outputs the rest of the pipeline stores:
sketches [K, D], children [K, 4, D], 32-bit checksums [K, 32] and class logits.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function
from torch.utils.checkpoint import checkpoint


@dataclass
class EncoderConfig:
    image_height: int = 32
    image_width: int = 128
    channels: int = 1
    patch_size: int = 8
    dim: int = 64
    depth: int = 1
    heads: int = 4
    mlp_ratio: float = 2.0
    H_cycles: int = 2
    L_cycles: int = 2
    num_capsules: int = 4
    num_children: int = 4
    checksum_bits: int = 32
    num_classes: int = 19

    @classmethod
    def from_dict(cls, d: dict) -> "EncoderConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown encoder config keys: {sorted(unknown)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def num_patches(self) -> int:
        return (self.image_height // self.patch_size) * (self.image_width // self.patch_size)

    def validate(self) -> None:
        if self.image_height % self.patch_size or self.image_width % self.patch_size:
            raise ValueError(
                f"image size {self.image_height}x{self.image_width} is not a multiple of patch_size {self.patch_size}"
            )
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")


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


class TRMVisionEncoder(nn.Module):
    """Images in, capsule outputs and class logits out (see module docstring)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.patch_embed = nn.Conv2d(cfg.channels, cfg.dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.pos_embed = nn.Parameter(torch.randn(1, cfg.num_patches, cfg.dim) * 0.02)
        self.z_init = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.core = RecursiveCore(cfg)
        self.capsules = CapsulePool(cfg)
        self.sketch_norm = nn.LayerNorm(cfg.dim)
        self.children_proj = nn.Linear(cfg.dim, cfg.num_children * cfg.dim)
        self.head_norm = nn.LayerNorm(cfg.num_capsules * cfg.dim)
        self.head = nn.Linear(cfg.num_capsules * cfg.dim, cfg.num_classes)
        # A fixed random hyperplane per checksum bit: the checksum is a locality-sensitive
        # hash of the sketch, so similar capsules share most bits and the code needs no training.
        g = torch.Generator().manual_seed(0x5EED)
        self.register_buffer("checksum_planes", torch.randn(cfg.dim, cfg.checksum_bits, generator=g), persistent=True)
        # Training-time switches set by the engine; they do not change the computed function.
        self.activation_checkpointing = False
        self.grad_free_cycles = False
        self.apply(_init_weights)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        if images.dtype == torch.uint8:
            images = images.float().div(255.0)
        x = self.patch_embed(images)  # [B, D, H/p, W/p]
        return x.flatten(2).transpose(1, 2) + self.pos_embed

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

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        with record_function("encoder.embed"):
            x = self.embed(images)
        with record_function("encoder.recursion"):
            y = self.recurse(x)
        with record_function("encoder.capsules"):
            caps = self.capsules(y)
            sketches = self.sketch_norm(caps)
            b, k, d = caps.shape
            children = self.children_proj(caps).reshape(b, k, self.cfg.num_children, d)
            checksum_logits = sketches @ self.checksum_planes.to(sketches.dtype)
        with record_function("encoder.head"):
            logits = self.head(self.head_norm(sketches.reshape(b, k * d)))
        return {"logits": logits, "sketches": sketches, "children": children, "checksum_logits": checksum_logits}


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
    n, d = cfg.num_patches, cfg.dim
    hidden = int(d * cfg.mlp_ratio)
    block = 2 * n * (3 * d * d + d * d + 2 * d * hidden) + 2 * 2 * n * n * d  # linears + attention
    core_calls = cfg.H_cycles * (cfg.L_cycles + 1)
    embed = 2 * n * d * cfg.channels * cfg.patch_size**2
    k = cfg.num_capsules
    caps = 2 * (n * 2 * d * d + k * d * d * 2 + 2 * k * n * d + k * 4 * d * d) + 2 * k * d * cfg.num_children * d
    head = 2 * k * d * cfg.num_classes
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
