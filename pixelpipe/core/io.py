"""Atomic file writes and checksums shared by every stage.

A stage killed half-way must never leave a file that looks finished, so every
artifact is written under a temporary name in the same directory, flushed to
disk and renamed (then the directory is flushed, so the rename survives a power
loss too). Readers check the sha256 a manifest recorded (`verify_file`), so a
file damaged after it was written is never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np


class IntegrityError(ValueError):
    """An artifact whose bytes differ from what its manifest recorded; the message names the file and the fix."""


def _create_temp(path: Path, suffix: str) -> Path:
    """A new empty file beside `path`, created with the usual umask-based mode (mkstemp's would be 0600)."""
    while True:
        tmp = path.parent / f".{path.name}.{os.urandom(4).hex()}.tmp{suffix}"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's (or a directory's) data and metadata to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp_path: str | os.PathLike, path: str | os.PathLike) -> None:
    """Durably give a finished temporary file its final name: flush it, rename it, flush the directory."""
    fsync_path(tmp_path)
    os.replace(tmp_path, path)
    fsync_path(Path(path).parent)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success flush it, rename it over `path` and flush the directory.

    The temporary file is removed on any failure, so only complete files ever carry their final name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _create_temp(path, suffix)
    try:
        yield tmp_path
        publish(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def json_text(obj: Any) -> str:
    """The text write_json writes (the planner sizes JSON artifacts with it)."""
    return json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(obj))


def read_json(path: str | os.PathLike) -> Any:
    """Parsed JSON; a damaged file raises IntegrityError naming it (not a bare JSONDecodeError)."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise IntegrityError(f"{path} is not valid JSON ({err}); delete it and rerun the rule that writes it") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    with atomic_path(path, suffix=".npy") as tmp:
        np.save(tmp, array, allow_pickle=False)


def sha256(data: bytes = b"") -> Any:
    """A SHA-256 hash object, CPython's own where it has one: importing hashlib (or secrets, hmac) maps OpenSSL's
    libcrypto, 3.4 MiB of a predict command's peak memory, which needs a hash only for the atlas's checksum."""
    try:
        from _sha2 import sha256 as new  # CPython 3.12+
    except ImportError:
        try:
            from _sha256 import sha256 as new  # CPython 3.11
        except ImportError:
            from hashlib import sha256 as new
    return new(data)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    import hashlib  # OpenSSL's: faster on the shards than CPython's own (sha256 above)

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


# (path, sha256, size, mtime) of files this process already verified: a stage that opens the same split
# twice (a dataset per split, plus the split itself for its settings) hashes it once. Files modified less
# than RACY_NS before they were hashed are not remembered: a change within the filesystem's timestamp
# granularity would keep the same mtime (git's "racy" entries).
_VERIFIED: set[tuple[str, str, int, int]] = set()
RACY_NS = 2_000_000_000


def verify_file(path: str | os.PathLike, sha256: str | None, source: str, rerun: str | None) -> None:
    """Raise IntegrityError unless `path` exists and hashes to `sha256` (as recorded in `source`).

    `rerun` is the Snakemake rule that rebuilds the file; the message says how to run it.
    """
    path = Path(path)
    fix = f"rebuild it: snakemake --forcerun {rerun}" if rerun else "it cannot be used"
    if not path.is_file():
        raise IntegrityError(f"{path} is missing (listed in {source}); {fix}")
    if not sha256:
        raise IntegrityError(f"{source} records no sha256 for {path}; {fix}")
    st = path.stat()
    key = (str(path.resolve()), sha256, st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return
    hashed_at = time.time_ns()
    if sha256_file(path) != sha256:
        raise IntegrityError(f"{path} is corrupt: its sha256 differs from the one in {source}; {fix}")
    if hashed_at - st.st_mtime_ns > RACY_NS:
        _VERIFIED.add(key)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
