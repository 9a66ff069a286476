"""Batched augmentation on the device the batch already lives on.

Per-sample CPU transforms in DataLoader workers cost more than the model on a
fast GPU; here one affine warp, one blur, one noise and one contrast op cover
the whole batch. The generator makes it reproducible (exact resume).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def augment_batch(
    images: torch.Tensor,
    gen: torch.Generator,
    max_shift: float = 0.04,
    max_scale: float = 0.05,
    max_rotate_deg: float = 2.0,
    blur_prob: float = 0.3,
    noise_std: float = 0.04,
    contrast: float = 0.2,
) -> torch.Tensor:
    """uint8 or float [B,C,H,W] in -> float [B,C,H,W] in [0,1] out."""
    x = images.float().div(255.0) if images.dtype == torch.uint8 else images.float()
    b, c, h, w = x.shape
    dev = x.device

    def u(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, device=dev)

    angle = (u(b) * 2 - 1) * max_rotate_deg * torch.pi / 180
    scale = 1 + (u(b) * 2 - 1) * max_scale
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    shift = (u(b, 2) * 2 - 1) * max_shift * 2
    theta = torch.stack([torch.stack([cos, -sin * h / w, shift[:, 0]], 1),
                         torch.stack([sin * w / h, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)

    kernel = torch.tensor([1.0, 2.0, 1.0], device=dev)
    kernel = (kernel[:, None] * kernel[None, :] / 16).expand(c, 1, 3, 3)
    blurred = F.conv2d(x, kernel, padding=1, groups=c)
    use_blur = (u(b) < blur_prob).view(b, 1, 1, 1)
    x = torch.where(use_blur, blurred, x)

    factor = (1 + (u(b) * 2 - 1) * contrast).view(b, 1, 1, 1)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * factor + mean
    x = x + torch.randn(x.shape, generator=gen, device=dev) * noise_std
    return x.clamp_(0, 1).contiguous(memory_format=torch.channels_last if images.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format)
