"""Stream encoded shards into one memory-mappable .npy per field.

The output arrays are preallocated with `open_memmap` and filled one shard
and one field at a time, so peak memory is one field of one shard, whatever
the dataset size. Files appear under their final names only when complete;
`manifest.json` is written last.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .io import read_json, sha256_file, verify_file, write_json


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


def consolidate(shard_paths: Sequence[str | Path], out_dir: str | Path, fields: Sequence[str] | None = None) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    headers = [npz_headers(p) for p in shard_paths]
    if not headers:
        raise ValueError("no encoded shards to consolidate")
    fields = list(fields or headers[0].keys())
    counts = [h[fields[0]][0][0] for h in headers]
    total = int(sum(counts))
    for p, h in zip(shard_paths, headers):
        for f in fields:
            if f not in h:
                raise ValueError(f"{p}: field '{f}' missing")
            if h[f][0][1:] != headers[0][f][0][1:] or h[f][1] != headers[0][f][1]:
                raise ValueError(f"{p}: field '{f}' has shape {h[f][0]} {h[f][1]}, expected [*, {headers[0][f][0][1:]}] {headers[0][f][1]}")

    tmp_paths = {f: out_dir / f".{f}.npy.tmp" for f in fields}
    arrays = {f: np.lib.format.open_memmap(tmp_paths[f], mode="w+", dtype=headers[0][f][1],
                                           shape=(total, *headers[0][f][0][1:])) for f in fields}
    offset = 0
    for path, count in zip(shard_paths, counts):
        with np.load(path) as npz:
            for f in fields:
                if count:
                    arrays[f][offset : offset + count] = npz[f]
        offset += count
    manifest = {"format": "pixelpipe.dataset/1", "count": total, "shards": [str(p) for p in shard_paths],
                "shard_counts": [int(c) for c in counts], "fields": {}}
    for f, arr in arrays.items():
        arr.flush()
        del arr
        final = out_dir / f"{f}.npy"
        os.replace(tmp_paths[f], final)
        manifest["fields"][f] = {"file": final.name, "shape": [total, *headers[0][f][0][1:]],
                                 "dtype": str(headers[0][f][1]), "sha256": sha256_file(final)}
    arrays.clear()
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
