#!/usr/bin/env python
"""Ship GNU Unifont's BMP glyph bitmaps with pixelpipe, once: pixelpipe/data/fonts/.

Fetches the Debian package `unifont` (apt-get download), copies its `unifont.hex` (one glyph per visible code point
of the Basic Multilingual Plane, 8x16 or 16x16 pixels) xz-compressed, `plane00-combining.txt` (where each combining
mark sits against the glyph before it), and its licence: Debian's copyright file
(GPL-2+), the GNU font embedding exception and the dual licensing under the SIL Open Font License 1.1 that
upstream's README and NEWS (package unifont-bin) state for the glyphs since 13.0.04. Nothing here runs at workflow
time.

    python tools/prepare_fonts.py --work /tmp/prep --out pixelpipe/data/fonts
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = "15.0.01"


def fetch(package: str, work: Path) -> tuple[Path, str]:
    """apt-get download one package (once) and unpack it; (root, version)."""
    debs = work / "deb"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob(f"{package}_*.deb")):
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True, capture_output=True)
    deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
    version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True,
                             text=True).stdout.strip()
    root = work / "x" / package
    if not root.exists():
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root, version


def licence_notes(bin_root: Path) -> str:
    """The font licence paragraphs of upstream's README (embedding exception) and NEWS (OFL since 13.0.04)."""
    readme = gzip.open(bin_root / "usr/share/doc/unifont-bin/README.gz", "rt").read()
    news = gzip.open(bin_root / "usr/share/doc/unifont-bin/NEWS.gz", "rt").read()
    exception = re.search(r"The license for the compiled fonts.*?FontException\" for more details\.", readme, re.S)
    ofl = re.search(r"2020-11-21: Release 13\.0\.04\n.*?with the GNU Font Embedding Exception\.", news, re.S)
    if not exception or not ofl:
        sys.exit("prepare_fonts: the licence paragraphs moved in unifont-bin's README/NEWS; check them by hand")
    return (f"GNU Unifont {VERSION} glyphs (Debian package unifont), shipped as unifont-{VERSION}.hex.xz.\n\n"
            f"From upstream's README (Debian package unifont-bin, /usr/share/doc/unifont-bin/README.gz):\n\n"
            f"{exception.group(0)}\n\nFrom upstream's NEWS (/usr/share/doc/unifont-bin/NEWS.gz):\n\n{ofl.group(0)}\n\n"
            "Debian's copyright file (unifont.copyright) states GPL-2+ (text: GPL-2). pixelpipe copies glyph "
            "bitmaps into its glyph atlas (16-pixel-wide glyphs squeezed to the cell width), which models and ONNX "
            "files carry. That is embedding portions of the font; the squeezed cells are a modified version, which the "
            "GPL allows and to which pixelpipe extends the exception, as it permits.\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="pixelpipe/data/fonts")
    args = parser.parse_args(argv)
    root, version = fetch("unifont", args.work)
    bin_root, _ = fetch("unifont-bin", args.work)
    assert version.split(":")[-1].startswith(VERSION), f"unifont {version} is not {VERSION}: update VERSION"
    args.out.mkdir(parents=True, exist_ok=True)
    raw = (root / "usr/share/unifont/unifont.hex").read_bytes()
    # A 4 MiB dictionary, not preset 9's 64 MiB: the file is 3.8 MB, and xz allocates the whole dictionary to
    # decompress, which was most of predict's peak memory (77 MB for the first unseen character; now 14 MB).
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 1 << 22}]
    (args.out / f"unifont-{VERSION}.hex.xz").write_bytes(lzma.compress(raw, filters=filters))
    shutil.copy(root / "usr/share/unifont/plane00-combining.txt", args.out / f"unifont-{VERSION}-combining.txt")
    shutil.copy(root / "usr/share/doc/unifont/copyright", args.out / "unifont.copyright")
    shutil.copy("/usr/share/common-licenses/GPL-2", args.out / "GPL-2")
    (args.out / "UNIFONT-LICENSE").write_text(licence_notes(bin_root))
    glyphs = raw.count(b"\n")
    print(f"unifont {version}: {glyphs} glyphs, sha256 {hashlib.sha256(raw).hexdigest()}")


if __name__ == "__main__":
    main()
