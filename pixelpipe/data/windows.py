"""Character windows of glyph-id rows, on the device, for training on mixed lengths.

A short phrase is only in distribution if training saw short texts. A text
is its glyph ids in reading order, so a window of `m` characters starting at
character `a` is a gather of ids `a .. a+m-1` to the front of the row, the
rest blank: no re-rendering, the same for one line or several. `trim` then
drops the columns no text of the batch reaches (the model masks past each
text's end, so the result does not depend on the padding). Windows are
drawn afresh each step (`random_windows`), or are the fixed views the frozen
teacher encoded (`view_windows`, `pick_views`), so the student's target for a
window is the teacher's reading of that window, not of the whole text.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.batching import trimmed_width

WORD_REACH = 8  # characters a window's end may move to reach a word boundary


def random_windows(glyphs: torch.Tensor, lengths: torch.Tensor, gen: torch.Generator, prob: float, min_chars: int,
                   rows: tuple[int, int] | None = None, word_prob: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(glyphs, lengths): each text becomes, with probability `prob`, a random window of it.

    Window lengths are uniform between `min_chars` (or the text's length, if
    shorter) and the text's length; starts are uniform over the text. With
    probability `word_prob` a window's ends then move to the nearest word
    boundaries (`snap_to_words`): what people send is whole words, and a
    window cut mid-word starts and ends in letter sequences no real text has
    at its edges. `rows` = (first, total): these rows are rows first.. of a
    batch of `total` (one DDP rank's slice); the draws are made for the whole
    batch and sliced, so the ranks together window exactly as one process
    would.
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
    if word_prob > 0:
        words = use & (draw() < word_prob) if word_prob < 1 else use
        snapped, sm = snap_to_words(glyphs, n, start, m)
        start, m = torch.where(words, snapped, start), torch.where(words, sm, m)
    return take_windows(glyphs, start, m)


def snap_to_words(glyphs: torch.Tensor, n: torch.Tensor, start: torch.Tensor, m: torch.Tensor,
                  reach: int = WORD_REACH) -> tuple[torch.Tensor, torch.Tensor]:
    """(start, length) of each window with its start moved to the nearest word start and its end to the nearest word
    end, each only where one lies within `reach` characters (a text written without spaces keeps its cut). Spaces
    are glyph id 0 inside a text (layout makes every run of whitespace one space, none at the ends)."""
    b, total = glyphs.shape
    dev = glyphs.device
    j = torch.arange(total + 1, device=dev)
    inside = j[None, :total] < n[:, None]
    space = (glyphs == 0) & inside
    before = torch.cat([torch.ones(b, 1, dtype=torch.bool, device=dev), space[:, :-1]], 1)
    word_start = inside & ~space & before  # position of a word's first character
    after = torch.cat([space, torch.zeros(b, 1, dtype=torch.bool, device=dev)], 1)
    word_end = (j[None] == n[:, None]) | (after & (j[None] > 0))  # exclusive end of a word: a space or the text's end
    s = _nearest(word_start, start, reach)
    e = _nearest(word_end, start + m, reach)
    e = torch.where(e > s, e, start + m)
    s = torch.where(e > s, s, start)
    return s, e - s


def _nearest(marks: torch.Tensor, at: torch.Tensor, reach: int) -> torch.Tensor:
    """For each row, the marked position nearest `at` (the earlier on a tie) if within `reach`, else `at`."""
    pos = torch.arange(marks.shape[1], device=marks.device).expand_as(marks)
    big = marks.shape[1] + reach + 1
    prev = torch.where(marks, pos, torch.full_like(pos, -big)).cummax(1).values
    nxt = torch.where(marks, pos, torch.full_like(pos, 2 * big)).flip(1).cummin(1).values.flip(1)
    i = at.long().clamp(0, marks.shape[1] - 1)[:, None]
    p, q = prev.gather(1, i)[:, 0], nxt.gather(1, i)[:, 0]
    best = torch.where(at - p <= q - at, p, q)
    return torch.where((best - at).abs() <= reach, best, at.long())


def sized_windows(glyphs: torch.Tensor, lengths: torch.Tensor, gen: torch.Generator, lo: int,
                  hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(glyphs, lengths): a window of each text, its length uniform in lo..hi characters (the text's length where that
    is shorter) and its start uniform over the text: the short texts users send, cut from longer ones."""
    n = lengths.to(glyphs.device).long().clamp(1, glyphs.shape[1])
    top = torch.clamp(n, max=hi)
    low = torch.clamp(n, max=lo)
    u = torch.rand(len(n), generator=gen, device=glyphs.device)
    m = torch.minimum(low + (u * (top - low + 1)).long(), top)
    start = (torch.rand(len(n), generator=gen, device=glyphs.device) * (n - m + 1)).long().clamp(max=n - m)
    return take_windows(glyphs, start, m)


def take_windows(glyphs: torch.Tensor, start: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(glyphs, lengths): characters start .. start + m - 1 of each row moved to its front, blank after."""
    total = glyphs.shape[1]
    j = torch.arange(total, device=glyphs.device)
    src = (start[:, None].long() + j[None]).clamp(max=total - 1)
    return glyphs.gather(1, src) * (j[None] < m[:, None]).to(glyphs.dtype), m.long()


def view_windows(lengths: np.ndarray, views: int, min_chars: int, seed: int, key: int) -> np.ndarray:
    """int16 [N, views - 1, 2]: (start, length) of the fixed windows the teacher encodes besides each whole text,
    drawn like `random_windows` (lengths uniform from `min_chars`, or the text's length if shorter, to the text's
    length; starts uniform), from (seed, key) alone (key: the shard's)."""
    rng = np.random.default_rng([seed, key, 0x71E3])
    n = np.maximum(np.asarray(lengths, np.int64), 1)[:, None]
    shortest = np.minimum(n, min_chars)
    m = np.minimum(shortest + (rng.random((len(n), views - 1)) * (n - shortest + 1)).astype(np.int64), n)
    start = np.minimum((rng.random((len(n), views - 1)) * (n - m + 1)).astype(np.int64), n - m)
    return np.stack([start, m], -1).astype(np.int16)


def pick_views(batch: dict[str, torch.Tensor], gen: torch.Generator, rows: tuple[int, int] | None = None) -> None:
    """Each row becomes one of its encoded views, drawn uniformly: the whole text, or one of the fixed windows the
    teacher encoded (`view_windows`), with the teacher's logits for that view as its target (in place). A window
    that a training rewrite made longer than the text is cut to it."""
    glyphs, lengths, windows = batch["glyphs"], batch["length"], batch["view_windows"].long()
    b = glyphs.shape[0]
    first, whole = rows or (0, b)
    views = windows.shape[1] + 1
    v = (torch.rand(whole, generator=gen, device=glyphs.device)[first : first + b] * views).long().clamp(max=views - 1)
    chosen = windows[torch.arange(b, device=glyphs.device), (v - 1).clamp(min=0)]
    n = lengths.long()
    start = torch.where(v > 0, chosen[:, 0].clamp(max=n - 1), torch.zeros_like(n))
    m = torch.where(v > 0, torch.minimum(chosen[:, 1], n - start), n)
    batch["glyphs"], batch["length"] = take_windows(glyphs, start, m)
    target = batch["view_logits"][torch.arange(b, device=glyphs.device), (v - 1).clamp(min=0)].to(torch.float32)
    batch["teacher_logits"] = torch.where((v > 0)[:, None], target, batch["teacher_logits"].float())


def trim(glyphs: torch.Tensor, lengths: torch.Tensor, line_chars: int, lines: int) -> torch.Tensor:
    """The columns of `glyphs` some text reaches: up to the longest length (single line), or whole lines."""
    longest = int(lengths.max()) if lengths.numel() else 0
    return glyphs[:, : trimmed_width(longest, line_chars, lines, glyphs.shape[1])]
