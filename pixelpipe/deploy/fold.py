"""Fold rendering and the first linear layers into per-glyph tables: the deployed model takes glyph ids.

Rendering copies a glyph's fixed cell into the image and the stem is a
convolution moving one cell at a time, so a token is a linear function of
its glyphs' pixels: token_t = W_left · cell(g_t) + W_right · cell(g_t+1) + b.
Computed once per glyph, that is a table lookup (`stem_table`): no pixels
drawn and no convolution at inference, the same numbers.

For `core: none` the n-gram convolution after the stem is linear too (no
norm in between), so it folds as well (`ngram_table`): the convolution's
pre-activation at position t is a sum of one table row per glyph it covers,
pre_t = sum_o T_o[g_t+o] + c, over the k + 1 glyphs a kernel of k pair
tokens reads. The deployed student is then a gather, a GELU or ReLU, masked mean
and max pooling and one linear layer.

Deployed glyph ids are atlas ids + 1; id 0 (PAD) has a zero row and marks
positions past a text's end, which carries the model's masking (a masked
token contributes nothing, bias included). A table row is a linear function
of the glyph's pixels (`FoldMap`: row = pixels @ matrix + offset), so a
character the atlas lacks is drawn and folded on the fly (predict), and any
image's cells can be folded the same way (the pixel path, `--image`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..model.encoder import TRMVisionEncoder, masked_max, masked_mean, token_mask
from .foldmap import BLANK, PAD, FoldMap
from .onnxmodel import SPAN_SUM_NAME as SPAN_SUM


def _stem_parts(model: TRMVisionEncoder) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The stem's kernel halves as matrices [D, ch * cw] (left, and right for `pair`) and its bias [D]."""
    cw = model.cfg.cell_width
    w = model.stem.proj.weight.detach().float().sum(1)  # [D, ch, kw]: gray channels replicated
    halves = [w[:, :, i * cw : (i + 1) * cw].reshape(w.shape[0], -1) for i in range(w.shape[-1] // cw)]
    return halves, model.stem.proj.bias.detach().float()


def stem_fold(model: TRMVisionEncoder) -> FoldMap:
    """Rows [left + bias | right] of width D per stem half: token_t = row[g_t][left] + row[g_t+1][right]."""
    halves, bias = _stem_parts(model)
    matrix = torch.cat([h.T for h in halves], dim=1)
    offset = torch.cat([bias] + [torch.zeros_like(bias)] * (len(halves) - 1))
    return FoldMap(matrix.numpy().astype(np.float32), offset.numpy().astype(np.float32))


def ngram_fold(model: TRMVisionEncoder) -> tuple[FoldMap, np.ndarray]:
    """(rows [T_-r | ... | T_r(+1)] of width H each, the convolution's bias c): see the module docstring.

    With taps C_j (j = -r..r) and stem halves L (+ bias b), R: T_o = C_o (L x + b) + C_(o-1) R x."""
    halves, bias = _stem_parts(model)
    conv = model.mixer.conv
    taps = conv.weight.detach().float()  # [H, D, k]: out[t] = sum_m taps[..., m] x[t + m - r]
    r = taps.shape[-1] // 2
    blocks, offsets = [], []
    for o in range(-r, r + len(halves)):
        m = torch.zeros(taps.shape[0], halves[0].shape[1])
        off = torch.zeros(taps.shape[0])
        for i, half in enumerate(halves):  # glyph t+o is the i-th cell of the pair token at t+o-i
            j = o - i
            if -r <= j <= r:
                m += taps[:, :, j + r] @ half
                off += taps[:, :, j + r] @ bias if i == 0 else 0
        blocks.append(m.T)
        offsets.append(off)
    fold = FoldMap(torch.cat(blocks, 1).numpy().astype(np.float32), torch.cat(offsets).numpy().astype(np.float32))
    return fold, conv.bias.detach().float().numpy()


ACTIVATION_FLOPS = {"gelu": 8, "relu": 1}  # per element (an erf-based GELU; a max), as the encoder's FLOPs count


def deployed_flops(model: TRMVisionEncoder, tokens: float) -> float:
    """FLOPs per text of `tokens` characters in the deployed (folded) form: the table rows summed (one product
    with the span-sum matrix, `span_sum`: 2 S W^2 a token), the activation, the pooling and the head for `ngram`;
    for `stem` the model's own count without the stem's pixels, its spans summed the same way."""
    from ..model.encoder import flops_per_sample

    cfg = model.cfg
    n = tokens + cfg.lead
    kh, kw = cfg.stem_kernel
    halves = kw // cfg.cell_width  # the cells a stem token reads: the stem form's spans
    if cfg.deploy_form == "ngram":
        h = cfg.mixer_hidden
        spans = cfg.mixer_kernel - 1 + halves  # the glyphs a kernel of pair or cell tokens reads (ngram_fold)
        per_token = 2 * spans * h * h + h * (ACTIVATION_FLOPS[cfg.activation] + 2)
        return float(n * per_token + 2 * cfg.head_features * cfg.num_classes)
    return flops_per_sample(cfg, tokens) - 2 * tokens * cfg.dim * cfg.channels * kh * kw + n * 2 * halves * cfg.dim ** 2


def table_rows(ngrams: nn.Module | None, glyphs: torch.Tensor, lengths: torch.Tensor,
               glyph_keys: torch.Tensor | None) -> torch.Tensor | None:
    """The mean n-gram table row of deployed glyph ids [B, T] (None for a model without tables): their keys are
    rows of `glyph_keys` [G + 1, N] (row 0, PAD, zero like the blank's), hashed as in training."""
    if ngrams is None:
        return None
    if glyph_keys is None:
        raise ValueError("a model with n-gram tables needs its glyph_keys input")
    return ngrams.pooled_gathered(glyph_keys[glyphs], lengths)


def key_table(model: TRMVisionEncoder, cells: np.ndarray) -> np.ndarray | None:
    """The deployed `glyph_keys` table [G + 1, N] over atlas cells (row 0: PAD), or None without n-gram tables."""
    if model.ngrams is None:
        return None
    from ..data.glyphkeys import cell_keys

    return np.concatenate([np.zeros((1, model.cfg.ngram_orders), np.int64), cell_keys(cells, model.cfg.ngram_orders)])


def _span_rows(ids: torch.Tensor, table: torch.Tensor, spans: int) -> torch.Tensor:
    """Gather the span-major table (row s * (G + 1) + g) at ids [..., S] (the glyph each span reads): [..., S, W]."""
    rows_per_span = table.shape[0] // spans
    return F.embedding(ids + torch.arange(spans, device=ids.device) * rows_per_span, table)


def span_sum_matrix(spans: int, width: int) -> torch.Tensor:
    """[spans * width, width]: the spans' rows side by side times this sums them (stacked identities)."""
    return torch.eye(width).repeat(spans, 1)


def span_sum(ids: torch.Tensor, table: torch.Tensor, spans: int, matrix: torch.Tensor) -> torch.Tensor:
    """Sum of the span-major table's rows at ids [..., S]: [..., W], as one product with `matrix`
    (span_sum_matrix), which onnxruntime runs 1.6x faster than a sum over the span axis (ReduceSum) and into whose
    rows quantize folds an int8 table's column scales (quantize.int8_glyph_table)."""
    rows = _span_rows(ids, table, spans)
    return torch.matmul(rows.flatten(-2), matrix)


class FoldedNgramStudent(nn.Module):
    """core none, folded: (deployed glyph ids [B, T], lengths [B], span-major table [S * (G + 1), H]) -> logits.
    One gather of [B, T, S] indices and one product summing the spans: no strided slicing of wide rows."""

    def __init__(self, model: TRMVisionEncoder, conv_bias: np.ndarray, spans: int) -> None:
        super().__init__()
        self.conv_bias = nn.Parameter(torch.from_numpy(conv_bias), requires_grad=False)
        self.spans = spans
        self.register_buffer(SPAN_SUM, span_sum_matrix(spans, len(conv_bias)))  # exported as SPAN_SUM
        self.left, self.lead = model.cfg.mixer_kernel // 2, model.cfg.lead
        self.relu = model.cfg.activation == "relu"
        self.head_norm, self.head = model.head_norm, model.head
        self.ngrams = model.ngrams

    def forward(self, glyphs: torch.Tensor, lengths: torch.Tensor, glyph_table: torch.Tensor,
                glyph_keys: torch.Tensor | None = None) -> torch.Tensor:
        table = table_rows(self.ngrams, glyphs, lengths, glyph_keys)
        glyphs = F.pad(glyphs, (self.lead, 0), value=BLANK)
        t = glyphs.shape[1]
        padded = F.pad(glyphs, (self.left, self.spans - 1 - self.left), value=PAD)
        ids = torch.stack([padded[:, s : s + t] for s in range(self.spans)], dim=-1)  # glyph t + s - left per span
        pre = span_sum(ids, glyph_table, self.spans, getattr(self, SPAN_SUM)) + self.conv_bias
        mask = token_mask(lengths, 1, t - self.lead, self.lead)
        if self.relu:  # past the end: a large negative pre-activation, so ReLU gives 0, which no max or sum minds
            h = F.relu(pre + (~mask).unsqueeze(-1).to(pre.dtype) * -1e4)
            pooled = [h.sum(1) / mask.sum(1, keepdim=True).to(h.dtype), h.amax(1)]
        else:
            h = F.gelu(pre)
            pooled = [masked_mean(h, mask), masked_max(h, mask)]
        return self.head(self.head_norm(torch.cat(pooled + ([table] if table is not None else []), dim=-1)))


class FoldedStemEncoder(nn.Module):
    """Any core, stem folded: (deployed glyph ids [B, T] (whole lines), lengths [B], span-major table
    [S * (G + 1), D]) -> logits. The right half of a pair reads the next cell of the same line (PAD at its end)."""

    def __init__(self, model: TRMVisionEncoder, spans: int) -> None:
        super().__init__()
        self.model, self.spans = model, spans
        self.register_buffer(SPAN_SUM, span_sum_matrix(spans, model.cfg.dim))  # exported as SPAN_SUM

    def forward(self, glyphs: torch.Tensor, lengths: torch.Tensor, glyph_table: torch.Tensor,
                glyph_keys: torch.Tensor | None = None) -> torch.Tensor:
        table = table_rows(self.model.ngrams, glyphs, lengths, glyph_keys)
        b, t = glyphs.shape
        cfg = self.model.cfg
        width = cfg.line_chars if cfg.lines > 1 else t
        rows = F.pad(glyphs.reshape(b, -1, width), (cfg.lead, 0), value=BLANK)
        ids = [rows] + ([F.pad(rows[..., 1:], (0, 1), value=PAD)] if self.spans > 1 else [])
        x = span_sum(torch.stack(ids, dim=-1), glyph_table, self.spans, getattr(self, SPAN_SUM))
        x, mask = self.model.place(x.reshape(b, -1, cfg.dim), token_mask(lengths, t // width, width, cfg.lead))
        return self.model.forward_tokens(x, mask, table)["logits"]


def folded_module(model: TRMVisionEncoder, cells: np.ndarray) -> tuple[nn.Module, FoldMap, np.ndarray]:
    """(the deployable module for `model`, the fold that extends its table, the span-major table over atlas
    cells (uint8 [G, ch, cw])): the module takes the table as its third input."""
    model = model.eval()
    if model.cfg.deploy_form == "ngram":
        fold, conv_bias = ngram_fold(model)
        module: nn.Module = FoldedNgramStudent(model, conv_bias, fold.spans(len(conv_bias)))
        return module.eval(), fold, fold.span_table(cells, len(conv_bias))
    fold = stem_fold(model)
    return FoldedStemEncoder(model, fold.spans(model.cfg.dim)).eval(), fold, fold.span_table(cells, model.cfg.dim)
