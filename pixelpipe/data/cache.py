"""Read a split's rendered image cache (shards + manifest written by render.render_split).

Training, encoding and calibration all read the same shards, so random access
goes through memory maps opened lazily per process: nothing is loaded up front
and DataLoader workers (forked or spawned) each open their own maps.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..core import io
from .render import image_geometry, verify_shards


class CacheSplit:
    """One split's cache directory: manifest.json plus shard-XXXXX.npy files."""

    def __init__(self, split_dir: str | os.PathLike, verify: bool = True) -> None:
        self.split_dir = Path(split_dir)
        self.manifest: dict[str, Any] = io.read_json(self.split_dir / "manifest.json")
        shards = self.manifest["shards"]
        self.shard_paths = [self.split_dir / s["file"] for s in shards]
        self.shard_counts = [int(s["count"]) for s in shards]
        self.offsets = np.cumsum([0] + self.shard_counts)
        self.labels = np.asarray([l for s in shards for l in s["labels"]], dtype=np.int64)
        self.lengths = np.asarray([n for s in shards for n in s["lengths"]], dtype=np.int64)
        self.ids = [i for s in shards for i in s["ids"]]
        self.image_shape = image_geometry(self.render_settings)
        self._maps: dict[int, np.ndarray] = {}
        self._pid = os.getpid()
        if verify:
            self.verify()

    @property
    def render_settings(self) -> dict[str, Any]:
        return self.manifest["render"]

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def verify(self, indices: Sequence[int] | None = None) -> None:
        """Raise io.IntegrityError naming the first shard (all, or those at `indices`) the manifest does not vouch for."""
        files = None if indices is None else [self.manifest["shards"][i]["file"] for i in indices]
        verify_shards(self.split_dir, files)

    def shard(self, s: int) -> np.ndarray:
        """Shard `s` as a read-only memmap [N, C, H, W], opened once per process."""
        if self._pid != os.getpid():  # forked: do not share the parent's maps
            self._maps, self._pid = {}, os.getpid()
        if s not in self._maps:
            if self.shard_counts[s] == 0:  # numpy cannot memory-map a zero-length array
                self._maps[s] = np.load(self.shard_paths[s])
            else:
                self._maps[s] = np.load(self.shard_paths[s], mmap_mode="r")
            if self._maps[s].shape != (self.shard_counts[s], *self.image_shape):
                raise ValueError(f"cache shard {self.shard_paths[s]} has shape {self._maps[s].shape}, manifest says "
                                 f"{(self.shard_counts[s], *self.image_shape)}")
        return self._maps[s]

    def get(self, i: int) -> np.ndarray:
        """Image i as uint8 [C, H, W]."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for {n} images in {self.split_dir}")
        i %= n
        s = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return np.asarray(self.shard(s)[i - self.offsets[s]])

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        """Images at `indices` as uint8 [B, C, H, W]."""
        out = np.empty((len(indices), *self.image_shape), dtype=np.uint8)
        for j, i in enumerate(indices):
            out[j] = self.get(int(i))
        return out

    def iter_shards(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(shard index, images [N, C, H, W], labels [N]) per shard, empty shards included."""
        for s in range(len(self.shard_paths)):
            yield s, self.shard(s), self.labels[self.offsets[s] : self.offsets[s + 1]]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"] = {}  # maps are per process; reopen after unpickling
        return state


class CacheDataset(Dataset):
    """Cache images (uint8) and labels, plus row-aligned extra arrays such as teacher outputs.

    Images stay uint8 here; conversion to float happens on the device in batches.
    """

    def __init__(self, split_dir: str | os.PathLike, extra: Mapping[str, Any] | None = None,
                 verify: bool = True) -> None:
        self.split = CacheSplit(split_dir, verify=verify)
        self.extra = dict(extra or {})
        for name, arr in self.extra.items():
            if len(arr) != len(self.split):
                raise ValueError(f"extra array {name!r} has {len(arr)} rows, cache {split_dir} has {len(self.split)}")

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item: dict[str, Any] = {
            "image": torch.from_numpy(self.split.get(i).copy()),
            "label": torch.tensor(self.split.labels[i], dtype=torch.int64),
            "length": torch.tensor(self.split.lengths[i], dtype=torch.int64),
            "index": int(i),
        }
        for name, arr in self.extra.items():
            item[name] = torch.from_numpy(np.array(arr[i]))
        return item
