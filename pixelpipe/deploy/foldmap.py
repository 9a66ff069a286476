"""How a glyph's pixels become its row of the deployed table (torch-free: predict folds unseen characters).

See pixelpipe.deploy.fold for why a row is a linear function of the glyph's cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD = 0  # deployed glyph id of "no glyph": past a text's end
BLANK = 1  # deployed glyph id of the blank cell (atlas id 0, the space): the `pair` stem's lead before each line


@dataclass
class FoldMap:
    """Table row of a glyph = its cell's pixels (floats in [0, 1], flattened ch x cw) @ matrix + offset."""

    matrix: np.ndarray  # float32 [ch * cw, width]
    offset: np.ndarray  # float32 [width]

    def rows(self, cells: np.ndarray) -> np.ndarray:
        """Rows for uint8 cells [N, ch, cw] (as the atlas stores them)."""
        pixels = cells.reshape(len(cells), -1).astype(np.float32) * np.float32(1 / 255)
        return (pixels @ self.matrix + self.offset).astype(np.float32)

    def table(self, cells: np.ndarray) -> np.ndarray:
        """The whole deployed table for atlas cells [G, ch, cw]: the PAD row, then one row per glyph."""
        return np.concatenate([np.zeros((1, self.matrix.shape[1]), np.float32), self.rows(cells)])
