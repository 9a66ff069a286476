"""Random character windows: contiguous runs of a text's cells, moved to the front, on one line or several."""

import torch

from pixelpipe.data.windows import cells_view, from_cells, random_windows

GEOM = (2, 3, 2, 5)  # cells of 2 x 3 pixels, 2 lines of 5 cells


def texts_as_images(lengths: list[int]) -> torch.Tensor:
    """Cell k of text b is filled with the value 10 * (k + 1) + b (blank past the text)."""
    ch, cw, lines, line_chars = GEOM
    cells = torch.zeros(len(lengths), lines * line_chars, 1, ch, cw, dtype=torch.uint8)
    for b, n in enumerate(lengths):
        for k in range(n):
            cells[b, k] = 10 * (k + 1) + b
    return from_cells(cells, lines, line_chars)


def test_cells_view_round_trips():
    x = torch.arange(2 * 1 * 4 * 15, dtype=torch.float32).reshape(2, 1, 4, 15)
    assert torch.equal(from_cells(cells_view(x, *GEOM), 2, 5), x)


def test_windows_are_contiguous_runs_moved_to_the_front():
    lengths = [10, 7, 3, 1]
    images = texts_as_images(lengths)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        out = random_windows(images, torch.tensor(lengths), GEOM, gen, prob=1.0, min_chars=2)
        cells = cells_view(out, *GEOM)[:, :, 0, 0, 0]
        for b, n in enumerate(lengths):
            values = [int(v) for v in cells[b] if v]
            m = len(values)
            assert min(2, n) <= m <= n
            start = (values[0] - b) // 10 - 1
            assert values == [10 * (start + k + 1) + b for k in range(m)]  # a contiguous run of the text
            assert (cells[b, m:] == 0).all()  # the rest is blank


def test_no_windows_is_the_identity_and_the_generator_decides():
    images, lengths = texts_as_images([10, 7]), torch.tensor([10, 7])
    assert torch.equal(random_windows(images, lengths, GEOM, torch.Generator().manual_seed(1), 0.0, 2), images)
    a = random_windows(images, lengths, GEOM, torch.Generator().manual_seed(3), 1.0, 2)
    b = random_windows(images, lengths, GEOM, torch.Generator().manual_seed(3), 1.0, 2)
    assert torch.equal(a, b)
