"""Random character windows: contiguous runs of a text's glyph ids, moved to the front; trimming."""

import torch

from pixelpipe.data.windows import random_windows, trim


def texts(lengths: list[int], cells: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """Glyph k of text b is 10 * (k + 1) + b (blank, 0, past the text)."""
    glyphs = torch.zeros(len(lengths), cells, dtype=torch.long)
    for b, n in enumerate(lengths):
        glyphs[b, :n] = 10 * (torch.arange(n) + 1) + b
    return glyphs, torch.tensor(lengths)


def test_windows_are_contiguous_runs_moved_to_the_front():
    glyphs, lengths = texts([10, 7, 3, 1])
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        out, m = random_windows(glyphs, lengths, gen, prob=1.0, min_chars=2)
        for b, n in enumerate(lengths.tolist()):
            values = [int(v) for v in out[b] if v]
            assert len(values) == int(m[b]) and min(2, n) <= len(values) <= n
            start = (values[0] - b) // 10 - 1
            assert values == [10 * (start + k + 1) + b for k in range(len(values))]  # a contiguous run
            assert (out[b, len(values) :] == 0).all()  # the rest is blank


def test_no_windows_is_the_identity_and_the_generator_decides():
    glyphs, lengths = texts([10, 7])
    same, n = random_windows(glyphs, lengths, torch.Generator().manual_seed(1), 0.0, 2)
    assert torch.equal(same, glyphs) and torch.equal(n, lengths)
    a = random_windows(glyphs, lengths, torch.Generator().manual_seed(3), 1.0, 2)
    b = random_windows(glyphs, lengths, torch.Generator().manual_seed(3), 1.0, 2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_trim_keeps_what_the_longest_text_reaches():
    glyphs, lengths = texts([3, 5, 1])
    assert trim(glyphs, lengths, line_chars=10, lines=1).shape == (3, 5)
    glyphs, lengths = texts([3, 6, 1], cells=8)  # 2 lines of 4: whole lines only
    assert trim(glyphs, lengths, line_chars=4, lines=2).shape == (3, 8)
    assert trim(glyphs[:1], lengths[:1], line_chars=4, lines=2).shape == (1, 4)
