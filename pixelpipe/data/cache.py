"""Read a split's glyph cache (shards + manifest written by render.render_split).

Training, encoding, evaluation and calibration all read the same shards, so
random access goes through memory maps opened lazily per process: nothing is
loaded up front, no array spans the whole split, and DataLoader workers
(forked or spawned) each open their own maps. A batch is fetched whole
(`__getitems__`): one fancy-index per shard touched, not one call per row.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..core import io
from .atlas import GlyphAtlas
from .render import RenderSettings, row_dtype, verify_shards


class StepBatch(list):
    """A batch's row indices plus the optimizer step they are drawn for (per-step augmentation seeds)."""

    def __init__(self, indices: Sequence[int], step: int) -> None:
        super().__init__(indices)
        self.step = step


class CacheSplit:
    """One split's cache directory: manifest.json plus shard-XXXXX.npy files of glyph rows."""

    def __init__(self, split_dir: str | os.PathLike, verify: bool = True) -> None:
        self.split_dir = Path(split_dir)
        self.manifest: dict[str, Any] = io.read_json(self.split_dir / "manifest.json")
        shards = self.manifest["shards"]
        self.shard_paths = [self.split_dir / s["file"] for s in shards]
        self.shard_counts = [int(s["count"]) for s in shards]
        self.offsets = np.cumsum([0] + self.shard_counts)
        self.settings = RenderSettings.from_section(self.render_settings)
        self.row_dtype = row_dtype(self.settings.cells, self.manifest["glyph_dtype"])
        self._maps: dict[int, np.ndarray] = {}
        self._atlas: GlyphAtlas | None = None
        self._pid = os.getpid()
        if verify:
            self.verify()

    @property
    def render_settings(self) -> dict[str, Any]:
        return self.manifest["render"]

    @property
    def atlas(self) -> GlyphAtlas:
        """The split's glyph atlas (glyph id = index), decoded once."""
        if self._atlas is None:
            s = self.settings
            self._atlas = GlyphAtlas.from_dict(self.manifest["atlas"], s.fonts, s.font_size)
        return self._atlas

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def verify(self, indices: Sequence[int] | None = None) -> None:
        """Raise io.IntegrityError naming the first shard (all, or those at `indices`) the manifest does not vouch for."""
        files = None if indices is None else [self.manifest["shards"][i]["file"] for i in indices]
        verify_shards(self.split_dir, files)

    def shard(self, s: int) -> np.ndarray:
        """Shard `s` as a read-only structured memmap [N] (glyphs, label, length), opened once per process."""
        if self._pid != os.getpid():  # forked: do not share the parent's maps
            self._maps, self._pid = {}, os.getpid()
        if s not in self._maps:
            if self.shard_counts[s] == 0:  # numpy cannot memory-map a zero-length array
                self._maps[s] = np.load(self.shard_paths[s])
            else:
                self._maps[s] = np.load(self.shard_paths[s], mmap_mode="r")
            got = self._maps[s]
            if got.shape != (self.shard_counts[s],) or got.dtype != self.row_dtype:
                raise ValueError(f"cache shard {self.shard_paths[s]} holds {got.shape} {got.dtype}, manifest says "
                                 f"({self.shard_counts[s]},) {self.row_dtype}")
        return self._maps[s]

    def rows(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """The rows at `indices` (in that order) as one structured array."""
        idx = np.asarray(indices, dtype=np.int64)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"index out of range for {n} rows in {self.split_dir}")
        idx %= max(n, 1)
        shard_of = np.searchsorted(self.offsets, idx, side="right") - 1
        out = np.empty(len(idx), self.row_dtype)
        for s in np.unique(shard_of):
            sel = np.flatnonzero(shard_of == s)
            out[sel] = self.shard(int(s))[idx[sel] - self.offsets[s]]
        return out

    def iter_shards(self) -> Iterator[tuple[int, np.ndarray]]:
        """(shard index, rows) per shard, empty shards included."""
        for s in range(len(self.shard_paths)):
            yield s, self.shard(s)

    def images(self, rows: np.ndarray) -> np.ndarray:
        """uint8 [N, C, H, W] images of `rows`, assembled from the atlas (one gather)."""
        from .render import Renderer

        return Renderer(self.settings, self.atlas).images(np.asarray(rows["glyphs"], np.int64))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"] = {}  # maps are per process; reopen after unpickling
        return state


def rows_per_label(split: CacheSplit, cap: int, seed: int) -> np.ndarray:
    """At most `cap` rows of each label, drawn by a permutation fixed by `seed` (a user's file may be in any order:
    by source, by label), returned in split order: a balanced share of a split whose languages hold unequal amounts
    of text."""
    labels = np.concatenate([np.asarray(rows["label"]) for _, rows in split.iter_shards()] or [np.zeros(0, np.int64)])
    order = np.random.default_rng(seed).permutation(len(labels))
    order = order[np.argsort(labels[order], kind="stable")]
    rank = np.arange(len(labels)) - np.searchsorted(labels[order], labels[order], side="left")
    return np.sort(order[rank < cap])


# Rewrites a batch's rows before they become tensors (text augmentation); gets the rows and the step.
RowTransform = Callable[[np.ndarray, int | None, Sequence[int]], np.ndarray]


class CacheDataset(Dataset):
    """Glyph ids, labels and lengths of a cached split, plus row-aligned extra arrays such as teacher outputs.

    `__getitems__` returns a whole batch as a dict of tensors (glyphs int64 [B, cells]); the loader
    passes it through unchanged (`collate_fn`).
    """

    def __init__(self, split_dir: str | os.PathLike, extra: Mapping[str, Any] | None = None,
                 verify: bool = True, transform: RowTransform | None = None,
                 subset: np.ndarray | None = None) -> None:
        self.split = CacheSplit(split_dir, verify=verify)
        self.extra = dict(extra or {})
        self.transform = transform
        self.subset = None if subset is None else np.asarray(subset, np.int64)  # dataset index -> split row
        for name, arr in self.extra.items():
            if len(arr) != len(self.split):
                raise ValueError(f"extra array {name!r} has {len(arr)} rows, cache {split_dir} has {len(self.split)}")

    def __len__(self) -> int:
        return len(self.split) if self.subset is None else len(self.subset)

    def lengths(self) -> np.ndarray:
        """Every row's length (int32, 4 bytes a row), shard by shard: what length grouping sorts by."""
        every = np.concatenate([np.asarray(rows["length"]) for _, rows in self.split.iter_shards()] or [np.zeros(0)])
        return every if self.subset is None else every[self.subset]

    def __getitems__(self, indices: Sequence[int]) -> dict[str, Any]:
        step = getattr(indices, "step", None)
        if self.subset is not None:
            indices = self.subset[np.asarray(indices, dtype=np.int64)].tolist()
        rows = self.split.rows(indices)
        if self.transform is not None:
            rows = self.transform(rows, step, indices)
        batch: dict[str, Any] = {
            "glyphs": torch.from_numpy(rows["glyphs"].astype(np.int64)),
            "label": torch.from_numpy(rows["label"].astype(np.int64)),
            "length": torch.from_numpy(rows["length"].astype(np.int64)),
            "index": torch.as_tensor(np.asarray(indices, dtype=np.int64)),
        }
        order = np.asarray(indices, dtype=np.int64)
        for name, arr in self.extra.items():
            batch[name] = torch.from_numpy(np.ascontiguousarray(_take(arr, order)))
        return batch

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[0] for k, v in self.__getitems__([i]).items()}

    @staticmethod
    def collate_fn(batch: dict[str, Any]) -> dict[str, Any]:
        """A batch from `__getitems__` is already collated."""
        return batch


def _take(arr: Any, order: np.ndarray) -> np.ndarray:
    """arr[order] for a memmap, reading sorted positions (sequential pages), in `order`'s order."""
    sort = np.argsort(order, kind="stable")
    out = np.asarray(arr[order[sort]])
    inv = np.empty_like(sort)
    inv[sort] = np.arange(len(sort))
    return out[inv]


def atlas_tensor(split: CacheSplit) -> torch.Tensor:
    """The split's atlas cells as a uint8 tensor [G, cell_height, cell_width] (what models index glyph ids into)."""
    return torch.from_numpy(np.ascontiguousarray(split.atlas.cells))
