"""The encoder's building blocks, each a plain torch module over tokens [B, N, D] and their mask [B, N]: the
transformer block and the stack the recursion reuses, the capsule pooling, the local (n-gram) mixer.

pixelpipe.model.encoder assembles them into TRMVisionEncoder (what each computes there: its docstring).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}  # the local mixer's activation (`{role}.model.activation`)


class Block(nn.Module):
    """Pre-norm transformer block (self-attention over a text's own tokens + MLP)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask[:, None, None, :])
        x = x + self.proj(attn.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class RecursiveCore(nn.Module):
    """The shared block stack that every recursion step reuses."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, depth: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x)


class CapsulePool(nn.Module):
    """K learned queries attend to a text's tokens; each query becomes one capsule."""

    def __init__(self, dim: int, heads: int, num_capsules: int):
        super().__init__()
        self.heads = heads
        self.queries = nn.Parameter(torch.randn(num_capsules, dim) * 0.02)
        self.norm_kv = nn.LayerNorm(dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.q = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.norm_mlp = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = tokens.shape
        h = self.heads
        k, v = self.kv(self.norm_kv(tokens)).reshape(b, n, 2, h, d // h).permute(2, 0, 3, 1, 4)
        q = self.q(self.queries).reshape(1, -1, h, d // h).transpose(1, 2).expand(b, -1, -1, -1)
        caps = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        caps = self.queries + self.proj(caps.transpose(1, 2).reshape(b, -1, d))
        return caps + self.mlp(self.norm_mlp(caps))


class LocalMixer(nn.Module):
    """Mixing between neighbouring tokens: (LayerNorm,) a 1-D convolution over `kernel` tokens into a
    wider hidden layer (a bank of character n-gram detectors), GELU (or ReLU), and a projection back, added
    to the tokens. Returns the tokens and the hidden features (the head pools them). Without the
    norm (`core: none`) the convolution is linear in the pixels, which is what export folds."""

    def __init__(self, dim: int, kernel: int, hidden: int, norm: bool = True, activation: str = "gelu"):
        super().__init__()
        self.act = ACTIVATIONS[activation]
        self.norm = nn.LayerNorm(dim) if norm else None
        self.conv = nn.Conv1d(dim, hidden, kernel, padding=kernel // 2)
        self.proj = nn.Linear(hidden, dim)

    def features(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The n-gram features [B, N, hidden]; past a text's end the convolution reads zeros."""
        m = mask.unsqueeze(-1).to(x.dtype)
        inp = self.norm(x) * m if self.norm is not None else x * m
        return self.act(self.conv(inp.transpose(1, 2)).transpose(1, 2))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.features(x, mask)
        return (x + self.proj(h)) * mask.unsqueeze(-1).to(x.dtype), h
