"""Random character windows of glyph-aligned images, on the device, for training on mixed lengths.

A short phrase is only in distribution if training saw short texts. Since an
image is a text's cells in reading order, a window of `m` characters starting
at character `a` is a gather of cells `a .. a+m-1` to the front of the grid,
the rest blank: no re-rendering, the same for one line or several.
"""

from __future__ import annotations

import torch


def cells_view(images: torch.Tensor, cell_height: int, cell_width: int, lines: int, line_chars: int) -> torch.Tensor:
    """[B, C, H, W] -> [B, lines * line_chars, C, cell_height, cell_width] (cells in reading order)."""
    b, c = images.shape[:2]
    return (images.reshape(b, c, lines, cell_height, line_chars, cell_width).permute(0, 2, 4, 1, 3, 5)
            .reshape(b, lines * line_chars, c, cell_height, cell_width))


def from_cells(cells: torch.Tensor, lines: int, line_chars: int) -> torch.Tensor:
    """Inverse of `cells_view`."""
    b, _, c, ch, cw = cells.shape
    return (cells.reshape(b, lines, line_chars, c, ch, cw).permute(0, 3, 1, 4, 2, 5)
            .reshape(b, c, lines * ch, line_chars * cw))


def random_windows(images: torch.Tensor, lengths: torch.Tensor, geometry: tuple[int, int, int, int],
                   gen: torch.Generator, prob: float, min_chars: int,
                   rows: tuple[int, int] | None = None) -> torch.Tensor:
    """Each text becomes, with probability `prob`, a random window of it.

    Window lengths are uniform between `min_chars` (or the text's length, if
    shorter) and the text's length; starts are uniform over the text. `geometry`
    is (cell_height, cell_width, lines, line_chars). `rows` = (first, total): these
    images are rows first.. of a batch of `total` (one DDP rank's slice); the draws
    are made for the whole batch and sliced, so the ranks together window exactly
    as one process would.
    """
    ch, cw, lines, line_chars = geometry
    b, dev = images.shape[0], images.device
    first, whole = rows or (0, b)
    total = lines * line_chars
    n = lengths.to(dev).long().clamp(1, total)

    def draw() -> torch.Tensor:
        return torch.rand(whole, generator=gen, device=dev)[first : first + b]

    use = draw() < prob
    shortest = torch.clamp(n, max=min_chars)
    m = shortest + (draw() * (n - shortest + 1)).long().clamp(max=n - shortest)
    m = torch.where(use, m, n)
    start = (draw() * (n - m + 1)).long().clamp(max=n - m)
    start = torch.where(use, start, torch.zeros_like(start))
    j = torch.arange(total, device=dev)
    src = (start[:, None] + j[None]).clamp(max=total - 1)
    keep = (j[None] < m[:, None]).to(images.dtype)
    cells = cells_view(images, ch, cw, lines, line_chars)
    picked = cells.gather(1, src[:, :, None, None, None].expand_as(cells)) * keep[:, :, None, None, None]
    return from_cells(picked, lines, line_chars)
