"""Random character windows: contiguous runs of a text's glyph ids, moved to the front; trimming."""

import torch

from pixelpipe.data.windows import random_windows, snap_to_words, trim


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


def ids(text: str, cells: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    """A text as glyph ids (the space is id 0, as in the atlas), blank after."""
    row = [0 if c == " " else ord(c) for c in text]
    return torch.tensor([row + [0] * (cells - len(row))]), torch.tensor([len(text)])


def read(glyphs: torch.Tensor, m: torch.Tensor) -> str:
    return "".join(" " if v == 0 else chr(v) for v in glyphs[0, : int(m[0])].tolist())


def test_word_windows_move_their_ends_to_the_nearest_word_boundaries():
    text = "ab cde fghij kl mnopqrstuvwxyzabc"
    glyphs, n = ids(text)
    cases = {(1, 5): "ab cde",  # "b cde": the start moves back one character to the word's first
             (4, 6): "cde fghij",  # "de fgh": both ends move out to whole words
             (13, 10): "kl",  # "kl mnopqrs": the end goes back to "kl"'s end (8 characters), not on to the next (10)
             (20, 5): "mnopqrstuvwxyzabc",  # "qrstu": inside a long word, the boundaries within 8 characters
             (0, 2): "ab"}  # a whole word stays
    for (start, m), want in cases.items():
        s, k = snap_to_words(glyphs, n, torch.tensor([start]), torch.tensor([m]))
        assert text[int(s) : int(s + k)] == want, (start, m)
    glyphs, n = ids("一二三四五六七八九十" * 4, 48)  # no spaces: a cut far from the text's ends stays
    s, k = snap_to_words(glyphs, n, torch.tensor([12]), torch.tensor([5]))
    assert (int(s), int(k)) == (12, 5)


def test_word_windows_hold_whole_words_and_word_prob_zero_changes_nothing():
    text = "the quick brown fox jumps over the lazy dog"
    glyphs, n = ids(text, 48)
    words = set(text.split())
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        out, m = random_windows(glyphs, n, gen, prob=1.0, min_chars=5, word_prob=1.0)
        assert set(read(out, m).split()) <= words  # no piece of a word at either end
    plain = random_windows(glyphs, n, torch.Generator().manual_seed(3), 1.0, 5)
    zero = random_windows(glyphs, n, torch.Generator().manual_seed(3), 1.0, 5, word_prob=0.0)
    assert torch.equal(plain[0], zero[0]) and torch.equal(plain[1], zero[1])
