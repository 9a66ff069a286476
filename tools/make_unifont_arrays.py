"""Write pixelpipe/data/fonts/unifont-15.0.01.npz: the shipped Unifont .hex file's bitmaps as numpy arrays.

Decompressing and parsing the .hex (57,086 lines) took 70 ms of every predict command that draws a character its
model's atlas lacks; the arrays load in 10 ms. They are the same bytes (code points, a start per code point, the
bitmaps; tests/test_render.py checks them against a fresh parse) under the .hex file's licence
(pixelpipe/data/fonts/UNIFONT-LICENSE). Rerun after tools/prepare_fonts.py ships another Unifont:

    python -m tools.make_unifont_arrays
"""

from __future__ import annotations

import numpy as np

from pixelpipe.data.fonts import BITMAP_FONTS, FONT_DIR, arrays_path, parse_hex


def main() -> None:
    for name, stem in BITMAP_FONTS.items():
        cps, starts, bitmaps = parse_hex(FONT_DIR / f"{stem}.hex.xz")
        np.savez_compressed(arrays_path(name), cps=cps.astype(np.int32), starts=starts.astype(np.int32),
                            bitmaps=bitmaps)
        print(f"{arrays_path(name)}: {len(cps):,} glyphs, {arrays_path(name).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
