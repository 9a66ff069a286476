"""A text baseline: hashed character 1-3-grams and one linear layer, trained on the same split.

The pixel models are judged against it: it reads the text itself, so it is
what a pixel model could reach if rendering lost nothing. Each text is
normalized as the renderer normalizes it (atlas.normalize), padded with one
space on each side, and every character n-gram is hashed (CRC-32, stable
across processes) into one of `buckets` rows of an EmbeddingBag whose mean is
the class logits.
"""

from __future__ import annotations

import array
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..config.settings import Section
from ..data.atlas import normalize

if TYPE_CHECKING:
    import pandas as pd

ORDERS = (1, 2, 3)


@dataclass(frozen=True)
class BaselineSettings(Section):
    """The `baseline:` section: the hash table's size, the training recipe and how many train rows it reads."""

    SECTION = "baseline"

    buckets: int
    epochs: int
    lr: float
    batch_size: int
    max_rows: int


def ngram_ids(texts: Sequence[str], buckets: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat bucket ids, offsets) of every 1-3-gram of every text, for nn.EmbeddingBag."""
    ids = array.array("q")  # 8 bytes per id, not a Python int object each
    offsets = array.array("q")
    for text in texts:
        offsets.append(len(ids))
        padded = f" {normalize(text)} "
        for n in ORDERS:
            ids.extend(zlib.crc32(padded[i : i + n].encode("utf-8")) % buckets for i in range(len(padded) - n + 1))
    return (torch.from_numpy(np.frombuffer(ids, dtype=np.int64).copy()),
            torch.from_numpy(np.frombuffer(offsets, dtype=np.int64).copy()))


class NgramClassifier(nn.Module):
    def __init__(self, buckets: int, num_classes: int) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(buckets, num_classes, mode="mean", sparse=True)  # a batch touches few rows
        self.bias = nn.Parameter(torch.zeros(num_classes))
        nn.init.zeros_(self.bag.weight)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(ids, offsets) + self.bias


def _batches(ids: torch.Tensor, offsets: torch.Tensor, order: torch.Tensor, batch: int):
    ends = torch.cat([offsets[1:], torch.tensor([len(ids)])])
    for i in range(0, len(order), batch):
        rows = order[i : i + batch]
        parts = [ids[offsets[r] : ends[r]] for r in rows.tolist()]
        lens = torch.tensor([len(p) for p in parts])
        yield rows, torch.cat(parts), torch.cumsum(lens, 0) - lens


@torch.no_grad()
def accuracy(model: NgramClassifier, ids: torch.Tensor, offsets: torch.Tensor, labels: np.ndarray) -> float:
    if len(labels) == 0:
        return float("nan")
    pred = model(ids, offsets).argmax(-1).numpy()
    return float((pred == labels).mean())


def first_rows(path: str | Path, limit: int) -> "pd.DataFrame":
    """The first `limit` rows (text, label) of a corpus split, read batch by batch (never the whole file)."""
    import pandas as pd
    import pyarrow.parquet as pq

    frames, n = [], 0
    for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=65536, columns=["text", "label"]):
        frames.append(batch.to_pandas().iloc[: limit - n])
        n += len(frames[-1])
        if n >= limit:
            break
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"text": [], "label": []})


def save_baseline(model: NgramClassifier, path: str | Path) -> None:
    """The trained n-gram model as safetensors (the evaluation scores it on held-out text)."""
    from safetensors.torch import save_file

    from ..core.io import atomic_path

    with atomic_path(path, suffix=".safetensors") as tmp:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))


def load_baseline(path: str | Path) -> NgramClassifier:
    from safetensors.torch import load_file

    state = load_file(str(path))
    buckets, classes = state["bag.weight"].shape
    model = NgramClassifier(buckets, classes)
    model.load_state_dict(state)
    return model.eval()


@torch.no_grad()
def predict(model: NgramClassifier, texts: Sequence[str]) -> np.ndarray:
    """Class ids of `texts`."""
    ids, offsets = ngram_ids(texts, model.bag.num_embeddings)
    return model(ids, offsets).argmax(-1).numpy()


def train_baseline(texts: dict[str, Sequence[str]], labels: dict[str, np.ndarray], num_classes: int,
                   buckets: int, epochs: int, lr: float, batch_size: int, seed: int,
                   log: Callable[[str], Any] = print) -> tuple[NgramClassifier, dict[str, Any]]:
    """Train on `texts["train"]`; return the model and `{split}_accuracy` / `{split}_samples` for every other split
    given (val and test in the pipeline), train_s and the sizes used."""
    torch.manual_seed(seed)
    feats = {split: ngram_ids(texts[split], buckets) for split in texts}
    model = NgramClassifier(buckets, num_classes)
    opts = [torch.optim.SparseAdam([model.bag.weight], lr=lr), torch.optim.Adam([model.bias], lr=lr)]
    y = torch.tensor(np.asarray(labels["train"]), dtype=torch.int64)
    ids, offsets = feats["train"]
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    for epoch in range(epochs):
        total, n = 0.0, 0
        for rows, bids, boffs in _batches(ids, offsets, torch.randperm(len(y), generator=gen), batch_size):
            loss = F.cross_entropy(model(bids, boffs), y[rows])
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            for opt in opts:
                opt.step()
            total, n = total + loss.item() * len(rows), n + len(rows)
        log(f"baseline: epoch {epoch + 1}/{epochs} train loss {total / max(1, n):.4f}")
    train_s = time.perf_counter() - t0
    out = {"train_s": train_s, "buckets": buckets, "epochs": epochs, "parameters": sum(p.numel() for p in model.parameters())}
    for split in (s for s in texts if s != "train"):
        out[f"{split}_accuracy"] = accuracy(model, *feats[split], np.asarray(labels[split]))
        out[f"{split}_samples"] = len(labels[split])
    log(f"baseline: val accuracy {out['val_accuracy']:.4f}, test accuracy {out['test_accuracy']:.4f} ({train_s:.1f} s)")
    return model, out
