"""Route a stage's output (prints, warnings, tqdm bars) into its Snakemake log file.

A failing stage writes its error and traceback there too: Snakemake's "check log
file(s)" must lead to the cause. A user's mistake (core.cli.UserError: a corpus file the
run cannot use) is the one line that names it, and the job exits 1 without a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Iterator

from .cli import UserError


@contextlib.contextmanager
def stage_log(path: str | Path | None) -> Iterator[Callable[[str], None]]:
    """Redirect stdout/stderr to `path` (if given) and yield a timestamped `log(msg)`."""
    if path is None:
        yield lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", buffering=1) as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        handler = logging.StreamHandler(fh)
        logging.getLogger().addHandler(handler)
        logging.captureWarnings(True)
        try:
            yield lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=fh, flush=True)
        except UserError as err:  # the user's mistake, named in its message: one line, no traceback
            print(f"[{time.strftime('%H:%M:%S')}] ERROR: pixelpipe: {err}", file=fh)
            raise SystemExit(1) from None
        except Exception as err:
            print(f"[{time.strftime('%H:%M:%S')}] ERROR: {type(err).__name__}: {err}", file=fh)
            traceback.print_exc(file=fh)
            raise
        finally:
            logging.getLogger().removeHandler(handler)
