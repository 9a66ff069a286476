"""Rows are scored in length-sorted, trimmed batches by one helper (core/batching.py), not by copies of it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from pixelpipe.core.batching import length_batches, trimmed_width
from pixelpipe.data.windows import trim
from pixelpipe.deploy.onnxmodel import deployed_batch

PACKAGE = Path(__file__).resolve().parents[1] / "pixelpipe"
HOME = {PACKAGE / "core" / "batching.py", PACKAGE / "core" / "order.py"}
# what a second copy of the loop (its longest-first sort) or of the trim rule would have to write again
COPIES = {
    "a scoring order of its own": re.compile(r"longest_first\(|argsort\(\s*-[^)\n]*length"),
    "the whole-lines trim rule": re.compile(r"//\s*[\w.]*line_chars\)\s*\*\s*[\w.]*line_chars"),
}


def test_no_second_copy_of_the_scoring_loop():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in HOME:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(PACKAGE)}:{n}: {what}: {line.strip()}"
                      for what, pattern in COPIES.items() if pattern.search(line)]
    assert not found, "batch through core.batching (length_batches, trimmed_width) instead:\n" + "\n".join(found)


def test_length_batches_longest_first_in_order_of_equals():
    lengths = np.array([3, 7, 7, 1, 5])
    assert [b.tolist() for b in length_batches(lengths, 2)] == [[1, 2], [4, 0], [3]]
    assert [b.tolist() for b in length_batches(lengths, 2, ascending=True)] == [[1, 2], [0, 4], [3]]
    assert [b.tolist() for b in length_batches(lengths, 10)] == [[1, 2, 4, 0, 3]]
    assert list(length_batches(np.zeros(0, np.int64), 4)) == []
    assert [b.tolist() for b in length_batches(np.zeros(3), 2)] == [[0, 1], [2]]  # unknown lengths: as stored


def test_length_batches_share_the_rows_over_ranks():
    lengths = np.array([3, 7, 7, 1, 5])
    shares = [[b.tolist() for b in length_batches(lengths, 2, rank, 2)] for rank in range(2)]
    assert shares == [[[1, 4], [3]], [[2, 0]]]
    assert sorted(i for share in shares for b in share for i in b) == list(range(5))


@pytest.mark.parametrize("longest, line_chars, lines, cells, width", [
    (5, 10, 1, 10, 5),    # one line: the longest text
    (0, 10, 1, 10, 1),    # never empty
    (12, 10, 1, 10, 10),  # never past the row
    (6, 4, 2, 8, 8),      # several lines: whole lines
    (1, 4, 2, 8, 4),
    (0, 4, 2, 8, 4),
])
def test_trimmed_width(longest, line_chars, lines, cells, width):
    assert trimmed_width(longest, line_chars, lines, cells) == width


def test_torch_and_deployed_batches_trim_alike():
    glyphs = np.arange(1, 25).reshape(3, 8) % 7
    for lengths, line_chars, lines in (([3, 5, 1], 8, 1), ([3, 6, 1], 4, 2), ([1, 2, 1], 4, 2)):
        n = np.array(lengths)
        torch_width = trim(torch.from_numpy(glyphs), torch.from_numpy(n), line_chars, lines).shape[1]
        assert torch_width == deployed_batch(glyphs, n, lines, line_chars)["glyphs"].shape[1] \
            == trimmed_width(max(lengths), line_chars, lines, 8)


def test_length_batches_hold_at_most_max_cells_characters():
    """With `max_cells`, a batch holds at most that many rows x its longest text (at least one row), each row once,
    longest first: long texts come a few at a time, short ones up to `batch_size`."""
    lengths = np.array([96, 3, 50, 96, 8, 0, 20, 1, 2, 30])
    batches = [b.tolist() for b in length_batches(lengths, 4, max_cells=100)]
    assert batches == [[0], [3], [2, 9], [6, 4, 1, 8], [7, 5]]
    assert sorted(sum(batches, [])) == list(range(len(lengths)))
    assert all(len(b) == 1 or len(b) * max(lengths[b].max(), 1) <= 100 for b in batches)
    assert [b.tolist() for b in length_batches(lengths, 4, max_cells=10)][:3] == [[0], [3], [2]]  # one row at least


def test_length_batches_hold_min_rows_past_max_cells():
    """`min_rows` lets the longest texts' batches past `max_cells` (up to `batch_size`): a model call's fixed cost
    is not paid for one or two long texts; shorter texts' batches still fill to `max_cells`."""
    lengths = np.array([96, 3, 50, 96, 8, 0, 20, 1, 2, 30, 96, 90])
    batches = [b.tolist() for b in length_batches(lengths, 4, max_cells=100, min_rows=3)]
    assert batches == [[0, 3, 10], [11, 2, 9], [6, 4, 1, 8], [7, 5]]
    assert sorted(sum(batches, [])) == list(range(len(lengths)))
    assert [len(b) for b in length_batches(lengths, 2, max_cells=100, min_rows=3)][:2] == [2, 2]  # batch_size caps
