"""TRMVisionEncoder: a recursive vision transformer with capsule pooling, over glyph-aligned tokens.

The stem turns the rendered cells into one token per character (a
convolution with a stride of one cell; with the `pair` stem each token sees
a character and the next, so every bigram is a token) and mixes neighbouring
tokens with a 1-D convolution (character n-grams). With `core: recursive`
one small stack of transformer blocks is applied recursively, as in Tiny
Recursive Models: `H_cycles` outer steps, each refining a latent `z`
`L_cycles` times and then the answer state `y`. K learned queries pool the
answer tokens into K capsules, from which come the outputs the rest of the
pipeline stores: sketches [K, D], children [K, 4, D], 32-bit checksums
[K, 32]. The class logits come from the capsules plus the mean and max over
the answer tokens and over the stem's local features: what a text's
language is made of is a bag of local n-grams wherever they stand
(docs/history.md, "Why the TRM trailed a plain conv net").

`core: none` is the deployment student: no recursion and no pre-norm before
the n-gram convolution, and a head that reads only the pooled n-gram
features. Its first two layers are then linear in the pixels, so export
folds rendering, stem and convolution into per-glyph tables
(pixelpipe.deploy.fold); the capsules still exist for distillation.

Two inputs, one function. The stem is linear in the pixels and moves by one
cell, so on a text's glyph ids g it is E_left[g_t] + E_right[g_t+1] + b with
E = W · atlas cells (`tokens_from_glyphs`): the same numbers as the
convolution over the assembled image (`tokens_from_images`), with no image.
Every operation that mixes positions (the n-gram convolution, attention
keys, pooling) sees zeros past a text's length, so the output does not
depend on how much padding a batch carries: batches are trimmed to their
longest text, and prediction computes only each text's own tokens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function
from torch.utils.checkpoint import checkpoint

from ..config.settings import CellGrid, check_keys
from .blocks import ACTIVATIONS, CapsulePool, LocalMixer, RecursiveCore
from .ngrams import GlyphNgrams

STEMS = ("pair", "cell")
CORES = ("recursive", "none")
DEPLOY_FORMS = ("ngram", "stem")  # what the deployed graph folds: stem + n-gram convolution, or the stem alone
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
    core: str
    stem: str
    activation: str
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
    ngram_orders: int = 0  # off unless a `{role}.model` section turns the tables on
    ngram_bits: int = 0
    ngram_dim: int = 0
    ngram_dropout: float = 0.0
    ngram_words: bool = False

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
        """A saved encoder config (a model's config.json): exactly the fields. A model saved before `activation`
        existed used GELU."""
        d = {"activation": "gelu", "ngram_orders": 0, "ngram_bits": 0, "ngram_dim": 0, "ngram_dropout": 0.0,
             "ngram_words": False, **d}
        check_keys(d, [f.name for f in fields(cls)], "'encoder' of a saved model")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def lead(self) -> int:
        """Blank cells before each line: the `pair` stem's first token is (blank, first character), the text's
        start as a bigram (as the n-gram baseline pads with a space), which also lets export fold it exactly."""
        return 1 if self.stem == "pair" else 0

    @property
    def num_tokens(self) -> int:
        """One token per cell (a character, or with `pair` a character and the next) plus the lead per line."""
        return self.lines * (self.line_chars + self.lead)

    @property
    def stem_kernel(self) -> tuple[int, int]:
        return (self.cell_height, (2 if self.stem == "pair" else 1) * self.cell_width)

    @property
    def recursive(self) -> bool:
        return self.core == "recursive"

    @property
    def deploy_form(self) -> str:
        """What export folds into per-glyph tables (pixelpipe.deploy.fold): 'ngram', the stem and the n-gram
        convolution (core none, one line of cells, no learned positions: both layers linear in the pixels and
        the same at every position), else 'stem', the stem alone. One of DEPLOY_FORMS."""
        return "ngram" if not self.recursive and self.lines == 1 and not self.positions else "stem"

    def validate(self) -> None:
        if self.stem not in STEMS:
            raise ValueError(f"stem must be one of {STEMS}, got {self.stem!r}")
        if self.core not in CORES:
            raise ValueError(f"core must be one of {CORES}, got {self.core!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}, got {self.activation!r}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.mixer_kernel < 0 or (self.mixer_kernel and self.mixer_kernel % 2 == 0):
            raise ValueError(f"mixer_kernel must be 0 (off) or odd, got {self.mixer_kernel}")
        if not self.recursive and not self.mixer_kernel:
            raise ValueError("core 'none' reads only the n-gram features: it needs mixer_kernel > 0")
        if self.ngram_orders and not (1 <= self.ngram_bits <= 30 and self.ngram_dim >= 1):
            raise ValueError(f"n-gram tables need 1 <= ngram_bits <= 30 and ngram_dim >= 1, got {self.ngram_bits}, "
                             f"{self.ngram_dim}")
        if self.ngram_words and not 2 <= self.ngram_orders <= 7:
            raise ValueError(f"ngram_words hashes words from bigrams: it needs 2 <= ngram_orders <= 7, got "
                             f"{self.ngram_orders}")

    @property
    def mixer_hidden(self) -> int:
        """Width of the stem's local features (0 without local mixing)."""
        return int(self.dim * self.mixer_ratio) if self.mixer_kernel else 0

    @property
    def head_features(self) -> int:
        """recursive: capsules (K x D), mean and max of the answer tokens (2 D) and of the local features;
        none: mean and max of the local features only (what the folded deployment computes); both: plus the
        mean n-gram table row (ngram_dim) when the tables are on."""
        table = self.ngram_dim if self.ngram_orders else 0
        if not self.recursive:
            return 2 * self.mixer_hidden + table
        return self.num_capsules * self.dim + 2 * self.dim + 2 * self.mixer_hidden + table


def token_mask(lengths: torch.Tensor, lines: int, width: int, lead: int) -> torch.Tensor:
    """bool [B, lines * (width + lead)]: True at the tokens of a text's first `length` cells (in reading order,
    `width` cells per line, `lead` blank tokens before each line, valid when its line holds a character)."""
    j = torch.arange(width + lead, device=lengths.device)
    cell = torch.arange(lines, device=lengths.device)[:, None] * width + j[None, :] - lead
    return cell.reshape(1, -1) < lengths[:, None]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the valid tokens of [B, N, C] (every text has at least one)."""
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp(min=1)


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over the valid tokens of [B, N, C]."""
    return x.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1)


class CharStem(nn.Module):
    """Cells to tokens, one per cell: a convolution with a stride of one cell whose kernel spans
    one cell (`cell`) or a cell and the next (`pair`: every bigram is one token). With `pair` each line
    gets one blank cell before it (the text-start bigram) and one after it (its last character starts a
    pair too)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.pad = cfg.stem_kernel[1] - cfg.cell_width
        self.proj = nn.Conv2d(cfg.channels, cfg.dim, kernel_size=cfg.stem_kernel,
                              stride=(cfg.cell_height, cfg.cell_width))

    def forward(self, inputs: torch.Tensor, cells: torch.Tensor | None = None) -> torch.Tensor:
        """Tokens from images, or from glyph ids and the atlas `cells` (a module call, so hooks see the stem)."""
        return self.tokens_from_images(inputs) if cells is None else self.tokens_from_glyphs(inputs, cells)

    def tokens_from_images(self, images: torch.Tensor) -> torch.Tensor:
        """[B, C, lines * cell_height, n * cell_width] float -> tokens [B, lines * (lead + n), D] (bias included)."""
        if self.pad or self.cfg.lead:
            images = F.pad(images, (self.cfg.lead * self.cfg.cell_width, self.pad))
        return self.proj(images).flatten(2).transpose(1, 2)

    def glyph_tables(self, cells: torch.Tensor) -> list[torch.Tensor]:
        """The stem folded over glyph cells [G, ch, cw] (floats in [0, 1]): one [G, D] table per cell of its
        kernel (left, and right for `pair`), without the bias. A blank cell's rows are exactly zero."""
        cw = self.cfg.cell_width
        w = self.proj.weight.sum(1)  # channels are replicated gray: sum the kernel over them
        return [torch.einsum("ghw,dhw->gd", cells.to(w.dtype), w[:, :, i * cw : (i + 1) * cw])
                for i in range(w.shape[-1] // cw)]

    def line_width(self, cells: int) -> int:
        """Cells per line of a (trimmed) row of `cells` glyphs: the layout's line, or the whole row on one line."""
        return self.cfg.line_chars if self.cfg.lines > 1 else cells

    def tokens_from_glyphs(self, glyphs: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """glyph ids [B, N] in reading order (N a whole number of lines when lines > 1) -> tokens [B, N', D]."""
        b, n = glyphs.shape
        rows = F.pad(glyphs.reshape(b, -1, self.line_width(n)), (self.cfg.lead, 0))  # blank (id 0) before each line
        tables = self.glyph_tables(cells)
        x = tables[0][rows] + self.proj.bias
        if len(tables) > 1:  # the right half of each pair reads the next cell of the same line (blank at its end)
            x = x + tables[1][F.pad(rows[..., 1:], (0, 1))]
        return x.reshape(b, -1, x.shape[-1])

    def mask(self, lengths: torch.Tensor, lines: int, width: int) -> torch.Tensor:
        return token_mask(lengths, lines, width, self.cfg.lead)


class TRMVisionEncoder(nn.Module):
    """Glyph ids (or images) and lengths in, capsule outputs and class logits out (see module docstring)."""

    def __init__(self, cfg: EncoderConfig, atlas: torch.Tensor | None = None):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.stem = CharStem(cfg)
        self.mixer = LocalMixer(cfg.dim, cfg.mixer_kernel, cfg.mixer_hidden, norm=cfg.recursive,
                                activation=cfg.activation) if cfg.mixer_kernel else None
        self.pos_embed = nn.Parameter(torch.randn(1, cfg.num_tokens, cfg.dim) * 0.02) if cfg.positions else None
        self.z_init = nn.Parameter(torch.zeros(1, 1, cfg.dim)) if cfg.recursive else None
        self.core = RecursiveCore(cfg.dim, cfg.heads, cfg.mlp_ratio, cfg.depth) if cfg.recursive else None
        self.capsules = CapsulePool(cfg.dim, cfg.heads, cfg.num_capsules)
        self.sketch_norm = nn.LayerNorm(cfg.dim)
        self.children_proj = nn.Linear(cfg.dim, cfg.num_children * cfg.dim)
        self.ngrams = (GlyphNgrams(cfg.ngram_orders, cfg.ngram_bits, cfg.ngram_dim, cfg.cell_height * cfg.cell_width,
                                   cfg.ngram_dropout, cfg.ngram_words)
                       if cfg.ngram_orders else None)
        self.head_norm = nn.LayerNorm(cfg.head_features)
        self.head = nn.Linear(cfg.head_features, cfg.num_classes)
        # A fixed random hyperplane per checksum bit: the checksum is a locality-sensitive
        # hash of the sketch, so similar capsules share most bits and the code needs no training.
        g = torch.Generator().manual_seed(0x5EED)
        self.register_buffer("checksum_planes", torch.randn(cfg.dim, cfg.checksum_bits, generator=g), persistent=True)
        # The glyph atlas as floats in [0, 1] [G, cell_height, cell_width]: what glyph ids index. Not a weight
        # (the atlas travels in config.json); set by the trainer or the loader, extended for unseen characters.
        self.register_buffer("atlas", torch.zeros(1, cfg.cell_height, cfg.cell_width), persistent=False)
        if atlas is not None:
            self.set_atlas(atlas)
        # Training-time switches set by the engine; they do not change the computed function.
        self.activation_checkpointing = False
        self.grad_free_cycles = False
        self.apply(_init_weights)

    def set_atlas(self, cells: torch.Tensor) -> None:
        """Use `cells` (uint8 [G, ch, cw] as the cache stores them, or floats in [0, 1]) as the glyph atlas."""
        if getattr(self, "ngrams", None) is not None:
            self.ngrams.set_atlas(_uint8_cells(cells))
        cells = cells.float().div(255.0) if cells.dtype == torch.uint8 else cells.float()
        self.atlas = cells.to(self.atlas.device)

    def embed(self, inputs: torch.Tensor, lengths: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens [B, N, D], zero past each text's end; mask [B, N]). `inputs` are glyph ids [B, N] (integer)
        or images [B, C, H, W] (uint8 or floats in [0, 1]; lengths None = up to the last cell with ink)."""
        cfg = self.cfg
        if _is_image(inputs):
            images = _unit_images(inputs)
            x = self.stem(images)
            lines, width = images.shape[2] // cfg.cell_height, images.shape[3] // cfg.cell_width
            if lengths is None:
                lengths = ink_lengths(images, cfg.cell_height, cfg.cell_width)
        else:
            if lengths is None:
                raise ValueError("glyph ids need their lengths")
            cells = torch.arange(inputs.shape[1], device=inputs.device)[None, :] < lengths.to(inputs.device)[:, None]
            x = self.stem(inputs.long() * cells, self.atlas)  # blank past the end, as rendered
            width = self.stem.line_width(inputs.shape[1])
            lines = inputs.shape[1] // width
        return self.place(x, self.stem.mask(lengths.to(x.device), lines, width))

    def place(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stem tokens plus learned positions (if any), zeroed past each text's end."""
        if self.pos_embed is not None:
            x = x + self.pos_embed[:, : x.shape[1]]
        return x * mask.unsqueeze(-1).to(x.dtype), mask

    def _core(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.activation_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(self.core, x, mask, use_reentrant=False)
        return self.core(x, mask)

    def recurse(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.core is None:
            return x
        y = x
        z = self.z_init.expand_as(x)
        for h in range(self.cfg.H_cycles):
            last = h == self.cfg.H_cycles - 1
            # TRM trick: earlier cycles only move the state; gradients flow through the last one,
            # which bounds training memory to one cycle's activations.
            ctx = torch.no_grad() if (self.grad_free_cycles and not last and self.training) else contextlib.nullcontext()
            with ctx:
                for _ in range(self.cfg.L_cycles):
                    z = self._core(z + y + x, mask)
                y = self._core(y + z, mask)
        return y

    def head_input(self, sketches: torch.Tensor, y: torch.Tensor, local: torch.Tensor | None,
                   mask: torch.Tensor, table: torch.Tensor | None = None) -> torch.Tensor:
        """[B, head_features]: see EncoderConfig.head_features."""
        pooled = [masked_mean(local, mask), masked_max(local, mask)] if local is not None else []
        if self.cfg.recursive:
            pooled = [sketches.flatten(1), masked_mean(y, mask), masked_max(y, mask)] + pooled
        if table is not None:
            pooled.append(table.to(pooled[0].dtype) if pooled else table)
        return torch.cat(pooled, dim=-1)

    def logits_from_features(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(self.head_norm(features))

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None,
                glyphs: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """`glyphs`: the glyph ids augmented images were assembled from (their n-grams are hashed from the
        clean cells: noise would change every key)."""
        if lengths is None and _is_image(inputs):
            lengths = ink_lengths(_unit_images(inputs), self.cfg.cell_height, self.cfg.cell_width)
        with record_function("encoder.embed"):
            x, mask = self.embed(inputs, lengths)
        with record_function("encoder.ngrams"):
            table = self.table_features(inputs if glyphs is None else glyphs, lengths)
        return self.forward_tokens(x, mask, table)

    def table_features(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor | None:
        """The mean n-gram table row [B, ngram_dim] (None without tables): keys from the atlas for glyph ids,
        straight from the cells' pixels for images (the same keys for the same pixels)."""
        if self.ngrams is None:
            return None
        lengths = lengths.to(inputs.device)
        if _is_image(inputs):
            cfg = self.cfg
            images = inputs if inputs.dtype == torch.uint8 else (inputs * 255).round()
            b, _, h, w = images.shape
            cells = images[:, 0].reshape(b, h // cfg.cell_height, cfg.cell_height, w // cfg.cell_width, cfg.cell_width)
            cells = cells.permute(0, 1, 3, 2, 4).reshape(b, -1, cfg.cell_height * cfg.cell_width)
            return self.ngrams.from_cells(cells, lengths)
        inside = torch.arange(inputs.shape[1], device=inputs.device)[None, :] < lengths[:, None]
        return self.ngrams.from_glyphs(inputs.long() * inside, lengths)

    def forward_tokens(self, x: torch.Tensor, mask: torch.Tensor,
                       table: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Everything after the stem: local mixing, recursion, capsules, head (export feeds folded tokens here);
        `table` is the pooled n-gram row the head reads beside the token features."""
        with record_function("encoder.embed"):
            x, local = self.mixer(x, mask) if self.mixer is not None else (x, None)
        with record_function("encoder.recursion"):
            y = self.recurse(x, mask)
        with record_function("encoder.capsules"):
            caps = self.capsules(y, mask)
            sketches = self.sketch_norm(caps)
            b, k, d = caps.shape
            children = self.children_proj(caps).reshape(b, k, self.cfg.num_children, d)
            checksum_logits = sketches @ self.checksum_planes.to(sketches.dtype)
        with record_function("encoder.head"):
            logits = self.logits_from_features(self.head_input(sketches, y, local, mask, table))
        return {"logits": logits, "sketches": sketches, "children": children, "checksum_logits": checksum_logits}


def _is_image(inputs: torch.Tensor) -> bool:
    """Images are uint8 or floats; glyph ids are other integers."""
    return inputs.is_floating_point() or inputs.dtype == torch.uint8


def _unit_images(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.float().div(255.0) if inputs.dtype == torch.uint8 else inputs


def _uint8_cells(cells: torch.Tensor) -> "np.ndarray":
    """Atlas cells as uint8 numpy [G, ch, cw] (floats in [0, 1] scaled back): what glyph keys are hashed from."""
    if cells.dtype != torch.uint8:
        cells = (cells.float() * 255).round().clamp(0, 255).to(torch.uint8)
    return cells.detach().cpu().numpy()


def ink_lengths(images: torch.Tensor, cell_height: int, cell_width: int) -> torch.Tensor:
    """Cells up to and including the last one with ink, in reading order: a rendered text's length
    (normalized text never ends in a space, so its last cell has ink)."""
    b, c, h, w = images.shape
    cells = images.reshape(b, c, h // cell_height, cell_height, w // cell_width, cell_width)
    ink = cells.amax(dim=(1, 3, 5)).reshape(b, -1) > 0
    last = torch.where(ink, torch.arange(1, ink.shape[1] + 1, device=images.device), 0).amax(1)
    return last.clamp(min=1)


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


def flops_per_sample(cfg: EncoderConfig, tokens: float | None = None) -> float:
    """Approximate forward FLOPs for one text of `tokens` characters (default: the full layout), 2 per
    multiply-add, as trained (pixels through the stem), for MFU and the planner."""
    n, d = float(tokens if tokens is not None else cfg.num_tokens), cfg.dim
    kh, kw = cfg.stem_kernel
    embed = 2 * n * d * cfg.channels * kh * kw
    if cfg.mixer_kernel:
        embed += 2 * n * cfg.mixer_hidden * d * (cfg.mixer_kernel + 1)  # n-gram convolution + projection back
    k = cfg.num_capsules
    caps = 2 * (n * 2 * d * d + k * d * d * 2 + 2 * k * n * d + k * 4 * d * d) + 2 * k * d * cfg.num_children * d
    head = 2 * cfg.head_features * cfg.num_classes
    core = 0.0
    if cfg.recursive:
        hidden = int(d * cfg.mlp_ratio)
        block = 2 * n * (3 * d * d + d * d + 2 * d * hidden) + 2 * 2 * n * n * d  # linears + attention
        core = cfg.H_cycles * (cfg.L_cycles + 1) * cfg.depth * block
    return float(embed + core + caps + head)


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
    "token_mask",
]
