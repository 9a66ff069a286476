"""Batched photometric augmentation on the device the batch already lives on.

Per-sample CPU transforms in DataLoader workers cost more than the model on a
fast GPU; here one blur, one contrast and one noise op cover the whole batch.
Nothing moves a pixel: glyph-aligned images keep every character in its cell,
which is what the model's stem relies on (a shift or a rotation would cut
glyphs across token boundaries). The generator makes it reproducible (exact
resume).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def images_from_glyphs(glyphs: torch.Tensor, atlas: torch.Tensor, lines: int, channels: int = 1) -> torch.Tensor:
    """Images [B, C, lines * ch, (N / lines) * cw] of glyph ids [B, N] (reading order), assembled on the device
    from atlas cells [G, ch, cw] in one gather: what the renderer would draw, for pixel augmentation."""
    b, n = glyphs.shape
    _, ch, cw = atlas.shape
    cells = atlas[glyphs.long()].reshape(b, lines, n // lines, ch, cw)
    gray = cells.permute(0, 1, 3, 2, 4).reshape(b, 1, lines * ch, (n // lines) * cw)
    return gray.expand(b, channels, -1, -1).contiguous() if channels > 1 else gray


def augment_batch(
    images: torch.Tensor,
    gen: torch.Generator,
    blur_prob: float = 0.3,
    noise_std: float = 0.04,
    contrast: float = 0.2,
) -> torch.Tensor:
    """uint8 or float [B,C,H,W] in -> float [B,C,H,W] in [0,1] out, same memory format."""
    x = images.float().div(255.0) if images.dtype == torch.uint8 else images.float()
    b, c, _, _ = x.shape
    dev = x.device

    def u(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, device=dev)

    kernel = torch.tensor([1.0, 2.0, 1.0], device=dev)
    kernel = (kernel[:, None] * kernel[None, :] / 16).expand(c, 1, 3, 3)
    blurred = F.conv2d(x, kernel, padding=1, groups=c)
    use_blur = (u(b) < blur_prob).view(b, 1, 1, 1)
    x = torch.where(use_blur, blurred, x)

    factor = (1 + (u(b) * 2 - 1) * contrast).view(b, 1, 1, 1)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * factor + mean
    x = x + torch.randn(x.shape, generator=gen, device=dev) * noise_std
    fmt = torch.channels_last if images.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format
    return x.clamp_(0, 1).contiguous(memory_format=fmt)
