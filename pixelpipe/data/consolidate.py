"""Stream encoded shards into one memory-mappable .npy per field.

Each field's file is written with ordinary buffered appends, one shard and
one field at a time, so peak memory is one field of one shard, whatever the
dataset size; the workflow deletes each shard once it is copied, so peak disk
is the consolidated dataset plus one shard. Buffered writes fail with an OSError when the disk fills (a
write through a memory map would end the process with SIGBUS), the free
space is checked before anything is written, and the files appear under their
final names only when complete (temporaries are removed on any failure);
`manifest.json` is written last.
"""

from __future__ import annotations

import contextlib
import hashlib
import io as _io
import shutil
import zipfile
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..core.io import IntegrityError, atomic_path, read_json, verify_file, write_json


@contextlib.contextmanager
def _reading(path: str | Path) -> Iterator[None]:
    """Name the encoded shard when reading it fails (zip CRC, truncation): zipfile's errors do not."""
    try:
        yield
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as err:
        raise IntegrityError(f"encoded shard {path} is damaged ({err}); delete it and rerun: Snakemake "
                             "encodes it again") from None


def npz_headers(path: str | Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shapes and dtypes of the arrays in an uncompressed .npz, read from headers only."""
    headers = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            with zf.open(name) as f:
                major, _ = np.lib.format.read_magic(f)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(f)
                headers[name.removesuffix(".npy")] = (shape, dtype)
    return headers


def _npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The .npy header np.save writes for an array of `shape` and `dtype`."""
    buf = _io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                               "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue()


def check_free_space(out_dir: Path, needed: int) -> None:
    """OSError naming the directory unless `needed` bytes fit on its filesystem."""
    free = shutil.disk_usage(out_dir).free
    if needed > free:
        raise OSError(f"consolidate: {out_dir} needs {needed:,} bytes but its filesystem has {free:,} free; "
                      "free some space (or move results/) and rerun")


def _check_shards(shard_paths: Sequence[str | Path], headers: list[dict], fields: list[str]) -> None:
    for p, h in zip(shard_paths, headers):
        for f in fields:
            if f not in h:
                raise ValueError(f"{p}: field '{f}' missing")
            if h[f][0][1:] != headers[0][f][0][1:] or h[f][1] != headers[0][f][1]:
                raise ValueError(f"{p}: field '{f}' has shape {h[f][0]} {h[f][1]}, expected [*, {headers[0][f][0][1:]}] {headers[0][f][1]}")


def consolidate(shard_paths: Sequence[str | Path], out_dir: str | Path, fields: Sequence[str] | None = None,
                delete_shards: bool = False) -> dict:
    """Append every shard's fields to one .npy per field; with `delete_shards`, each shard is removed once its
    data is written, so the disk holds the consolidated copy plus one shard at most, never both whole (the
    shards are Snakemake temp() files: a failed run re-encodes the missing ones)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    headers = []
    for p in shard_paths:
        with _reading(p):
            headers.append(npz_headers(p))
    if not headers:
        raise ValueError("no encoded shards to consolidate")
    fields = list(fields or headers[0].keys())
    _check_shards(shard_paths, headers, fields)
    counts = [h[fields[0]][0][0] for h in headers]
    total = int(sum(counts))
    shapes = {f: (total, *headers[0][f][0][1:]) for f in fields}
    dtypes = {f: np.dtype(headers[0][f][1]) for f in fields}
    head = {f: _npy_header(shapes[f], dtypes[f]) for f in fields}
    row_bytes = sum(int(np.prod(shapes[f][1:])) * dtypes[f].itemsize for f in fields)
    # deleting as it goes, the disk grows by one shard at most; keeping them, by the whole dataset
    grows = max(counts) * row_bytes if delete_shards else total * row_bytes
    check_free_space(out_dir, sum(len(head[f]) for f in fields) + grows)

    hashes = {f: hashlib.sha256(head[f]) for f in fields}
    with contextlib.ExitStack() as stack:  # every temporary is removed if anything below fails
        tmp = {f: stack.enter_context(atomic_path(out_dir / f"{f}.npy", suffix=".npy")) for f in fields}
        files = {f: stack.enter_context(open(tmp[f], "wb")) for f in fields}
        for f in fields:
            files[f].write(head[f])
        for path in shard_paths:
            with _reading(path):
                npz = np.load(path)
            with npz:
                for f in fields:
                    with _reading(path):  # zip checks each member's CRC-32 as it is read
                        block = np.ascontiguousarray(npz[f], dtype=dtypes[f]).reshape(-1).view(np.uint8)  # no copy
                    files[f].write(block.data)
                    hashes[f].update(block.data)
            if delete_shards:
                for f in fields:
                    files[f].flush()
                Path(path).unlink()
        for f in fields:
            files[f].close()  # flushed here: a full disk raises now, before any rename
    manifest = {"format": "pixelpipe.dataset/1", "count": total, "shards": [str(p) for p in shard_paths],
                "shard_counts": [int(c) for c in counts], "fields": {}}
    for f in fields:
        manifest["fields"][f] = {"file": f"{f}.npy", "shape": list(shapes[f]), "dtype": str(dtypes[f]),
                                 "sha256": hashes[f].hexdigest()}
    write_json(out_dir / "manifest.json", manifest)
    return manifest


def open_dataset(dataset_dir: str | Path, verify: bool = True) -> dict[str, np.ndarray]:
    """Memory-map every field of a consolidated dataset, checking shapes and (unless told not to) sha256."""
    dataset_dir = Path(dataset_dir)
    manifest = read_json(dataset_dir / "manifest.json")
    arrays = {}
    for name, info in manifest["fields"].items():
        path = dataset_dir / info["file"]
        if verify:
            verify_file(path, info.get("sha256"), str(dataset_dir / "manifest.json"), "consolidate")
        arr = np.load(path, mmap_mode="r")
        if list(arr.shape) != info["shape"] or str(arr.dtype) != info["dtype"]:
            raise ValueError(f"{path}: shape {arr.shape} {arr.dtype} does not match manifest {info['shape']} {info['dtype']}")
        arrays[name] = arr
    return arrays
