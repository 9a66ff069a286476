"""How a glyph's pixels become its row of the deployed table (torch-free: predict folds unseen characters).

See pixelpipe.deploy.fold for why a row is a linear function of the glyph's cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD = 0  # deployed glyph id of "no glyph": past a text's end
BLANK = 1  # deployed glyph id of the blank cell (atlas id 0, the space): the `pair` stem's lead before each line
CHUNK = 1024  # glyphs folded at a time


@dataclass
class FoldMap:
    """Table row of a glyph = its cell's pixels (floats in [0, 1], flattened ch x cw) @ matrix + offset."""

    matrix: np.ndarray  # float32 [ch * cw, width]
    offset: np.ndarray  # float32 [width]

    def rows(self, cells: np.ndarray, pad: int = 0) -> np.ndarray:
        """Rows for uint8 cells [N, ch, cw] (as the atlas stores them), after `pad` zero rows. Folded CHUNK
        glyphs at a time: predict folds a whole atlas (12,000 glyphs with every language) when it meets a new
        character, and its peak memory should hold the table once, not four float temporaries of it."""
        out = np.zeros((pad + len(cells), self.matrix.shape[1]), np.float32)
        for start in range(0, len(cells), CHUNK):
            pixels = cells[start : start + CHUNK].reshape(-1, self.matrix.shape[0]).astype(np.float32)
            pixels *= np.float32(1 / 255)
            rows = out[pad + start : pad + start + len(pixels)]
            np.matmul(pixels, self.matrix, out=rows)
            rows += self.offset
        return out

    def table(self, cells: np.ndarray) -> np.ndarray:
        """Glyph-major rows for atlas cells [G, ch, cw]: the PAD row, then one row per glyph (all spans)."""
        return self.rows(cells, pad=1)

    def spans(self, width: int) -> int:
        """How many spans of `width` a row holds (pair stem halves, or the glyphs an n-gram kernel reads)."""
        return self.matrix.shape[1] // width

    def span_table(self, cells: np.ndarray, width: int) -> np.ndarray:
        """The deployed table: span-major, row s * (G + 1) + g holds span s of glyph g (g = 0 the PAD row)."""
        return span_major(self.table(cells), self.spans(width))


def span_major(table: np.ndarray, spans: int) -> np.ndarray:
    """Glyph-major rows [G + 1, S * W] as the deployed span-major table [S * (G + 1), W]."""
    rows, width = table.shape[0], table.shape[1] // spans
    return np.ascontiguousarray(table.reshape(rows, spans, width).transpose(1, 0, 2).reshape(spans * rows, width))
