"""The command line; run from the repository root so that `tools` is importable (see the package docstring)."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import __doc__ as PACKAGE_DOC
from .build import SOURCES, build
from .labels import set_work


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.prepare_text",
                                     description=PACKAGE_DOC.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="download/unpack folder (reused when rerun)")
    parser.add_argument("--out", type=Path, required=True, help="pixelpipe/data/text")
    parser.add_argument("--only", nargs="*", choices=sorted(SOURCES), help="re-extract only these sources")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    set_work(args.work.resolve())
    build(args.work.resolve(), args.out, args.only)


if __name__ == "__main__":
    main()
