"""Random character windows of glyph-id rows, on the device, for training on mixed lengths.

A short phrase is only in distribution if training saw short texts. A text
is its glyph ids in reading order, so a window of `m` characters starting at
character `a` is a gather of ids `a .. a+m-1` to the front of the row, the
rest blank: no re-rendering, the same for one line or several. `trim` then
drops the columns no text of the batch reaches (the model masks past each
text's end, so the result does not depend on the padding).
"""

from __future__ import annotations

import torch


def random_windows(glyphs: torch.Tensor, lengths: torch.Tensor, gen: torch.Generator, prob: float, min_chars: int,
                   rows: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(glyphs, lengths): each text becomes, with probability `prob`, a random window of it.

    Window lengths are uniform between `min_chars` (or the text's length, if
    shorter) and the text's length; starts are uniform over the text. `rows` =
    (first, total): these rows are rows first.. of a batch of `total` (one DDP
    rank's slice); the draws are made for the whole batch and sliced, so the
    ranks together window exactly as one process would.
    """
    b, total = glyphs.shape
    dev = glyphs.device
    first, whole = rows or (0, b)
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
    picked = glyphs.gather(1, src) * (j[None] < m[:, None]).to(glyphs.dtype)
    return picked, m


def trim(glyphs: torch.Tensor, lengths: torch.Tensor, line_chars: int, lines: int) -> torch.Tensor:
    """The columns of `glyphs` some text reaches: up to the longest length (single line), or whole lines."""
    longest = int(lengths.max()) if lengths.numel() else 1
    if lines > 1:
        longest = -(-longest // line_chars) * line_chars
    return glyphs[:, : max(1, min(longest, glyphs.shape[1]))]
