"""Encode one cache shard with the frozen teacher.

Host memory holds one output buffer for the shard and one batch of glyph
rows, read from the memory-mapped shard batch by batch; each batch is
trimmed to its longest text (the teacher masks past each text's end), so no
compute goes to padding.
"""

from __future__ import annotations

import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from tqdm.auto import tqdm

from ..core.batching import length_batches
from ..core.device import autocast_context, halve_on_oom
from ..core.io import atomic_path
from ..core.timing import ComponentTimer
from ..data.encoded import encoded_fields
from ..data.windows import trim, view_windows
from ..model.encoder import TRMVisionEncoder, checksum_bits


def allocate_outputs(n: int, model: TRMVisionEncoder) -> dict[str, np.ndarray]:
    return {name: np.empty(shape, dtype) for name, (shape, dtype) in encoded_fields(model.cfg, n).items()}


Batch = tuple[torch.Tensor, torch.Tensor]  # glyph ids [B, N] (trimmed), lengths [B]


def _read_batches(rows: np.ndarray, batch_size: int, pin: bool, line_chars: int,
                  lines: int) -> Iterator[tuple[np.ndarray, Batch]]:
    """(row positions, batch) in order of length: each batch holds texts of similar length, trimmed to its
    longest (no compute on padding), as (pinned) tensors read one batch ahead on a thread."""
    # positions ascending within a batch: sequential reads of the map
    batches = list(length_batches(rows["length"], batch_size, ascending=True))

    def load(positions: np.ndarray) -> Batch:
        block = rows[positions]
        lengths = torch.from_numpy(block["length"].astype(np.int64))
        glyphs = trim(torch.from_numpy(block["glyphs"].astype(np.int64)), lengths, line_chars, lines)
        return (glyphs.pin_memory(), lengths.pin_memory()) if pin else (glyphs, lengths)

    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(load, batches[0]) if batches else None
        for i, positions in enumerate(batches):
            batch = future.result()
            if i + 1 < len(batches):
                future = pool.submit(load, batches[i + 1])
            yield positions, batch


# One batch's results on their way to the host: (row positions, host tensors, the CUDA event their copies wait on)
Pending = tuple[np.ndarray, dict[str, torch.Tensor], object]


def _forward_to_host(model: TRMVisionEncoder, batch: Batch, device: torch.device, precision: str,
                     t: ComponentTimer) -> tuple[dict[str, torch.Tensor], object]:
    """The teacher's outputs for one batch in their stored dtypes, copied to the host asynchronously on
    CUDA; the returned event (None on CPU) marks when the copies are done."""
    cuda = device.type == "cuda"
    t.start("forward")
    glyphs, lengths = (x.to(device, non_blocking=cuda) for x in batch)
    with autocast_context(device, precision):
        res = model(glyphs, lengths)
    t.start("to_host")
    packed = {
        "sketches": res["sketches"].half(),
        "children": res["children"].half(),
        "checksums": pack_bits(checksum_bits(res["checksum_logits"].float())),
        "logits": res["logits"].float(),
    }
    host = {k: v.to("cpu", non_blocking=cuda) for k, v in packed.items()}
    event = None
    if cuda:
        event = torch.cuda.Event()
        event.record()
    return host, event


def _drain(out: dict[str, np.ndarray], item: Pending) -> None:
    """Wait for one batch's copies (a batch late, so they overlap the next forward) and store them."""
    positions, host, event = item
    if event is not None:
        event.synchronize()
    for name, value in host.items():
        out[name][positions] = value.numpy()


@torch.inference_mode()
def encode_rows(
    model: TRMVisionEncoder,
    rows: np.ndarray,
    device: torch.device,
    precision: str = "fp32",
    batch_size: int = 256,
    progress: bool = True,
    desc: str = "encode",
    timer: ComponentTimer | None = None,
) -> dict[str, np.ndarray]:
    """Teacher outputs for glyph `rows` (a cache shard, may be a memmap) in one preallocated buffer.

    On CUDA the next batch is read and pinned while the current one computes, and results
    come back with asynchronous copies that are waited for one batch later.
    """
    model.eval()
    t = timer or ComponentTimer(device)
    n = len(rows)
    out = allocate_outputs(n, model)
    out["labels"][:] = rows["label"]
    cuda = device.type == "cuda"
    pending: Pending | None = None
    bar = tqdm(total=n, desc=desc, unit="img", disable=not progress, mininterval=1.0)
    batches = _read_batches(rows, batch_size, pin=cuda, line_chars=model.cfg.line_chars, lines=model.cfg.lines)
    try:
        while True:
            t.start("read_h2d")
            item = next(batches, None)
            if item is None:
                break
            positions, batch = item
            host, event = _forward_to_host(model, batch, device, precision, t)
            if pending is not None:
                _drain(out, pending)
            pending = (positions, host, event)
            bar.update(len(positions))
        if pending is not None:
            t.start("to_host")
            _drain(out, pending)
    finally:  # also after out of memory: the read-ahead thread and its pinned batch go before a retry
        t.stop()
        batches.close()
        bar.close()
    return out


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """[..., 8k] bool -> [..., k] uint8, most significant bit first (numpy.packbits order), on device."""
    weights = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8, device=bits.device)
    return (bits.reshape(*bits.shape[:-1], -1, 8).to(torch.uint8) * weights).sum(-1, dtype=torch.uint8)


def windowed_rows(rows: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """A copy of glyph `rows` with each text cut to its window (start, length), blank after it."""
    out = np.array(rows)  # a copy in memory, also of a memmap
    cells = out["glyphs"].shape[1]
    start, m = windows[:, 0].astype(np.int64), windows[:, 1].astype(np.int64)
    src = np.minimum(start[:, None] + np.arange(cells)[None], cells - 1)
    inside = np.arange(cells)[None] < m[:, None]
    out["glyphs"] = np.where(inside, np.take_along_axis(np.asarray(rows["glyphs"]), src, 1), 0)
    out["length"] = m
    return out


def encode_views(model: TRMVisionEncoder, rows: np.ndarray, views: int, min_chars: int, seed: int, key: int,
                 run) -> dict[str, np.ndarray]:
    """The teacher's logits (float16) for `views` - 1 fixed windows of every row, and the windows; `run(rows)`
    encodes rows."""
    windows = view_windows(rows["length"], views, min_chars, seed, key)
    logits = np.empty((len(rows), views - 1, model.cfg.num_classes), np.float16)
    for v in range(views - 1):
        logits[:, v] = run(windowed_rows(rows, windows[:, v]))["logits"]
    return {"view_logits": logits, "view_windows": windows}


def encode_shard(
    model: TRMVisionEncoder,
    rows: np.ndarray,
    name: str,
    out_path: str | Path,
    device: torch.device,
    precision: str = "fp32",
    batch_size: int = 256,
    progress: bool = True,
    views: int = 1,
    window_min_chars: int = 15,
    seed: int = 0,
) -> dict[str, float]:
    """Encode one cache shard's glyph `rows` (CacheSplit.shard, memory-mapped) into an uncompressed `.npz`; with
    `views` > 1 also `views` - 1 fixed windows of each text (drawn from the seed and the shard's `name`)."""
    t0 = time.perf_counter()
    timer = ComponentTimer(device)

    def run(block: np.ndarray, desc: str = name) -> dict[str, np.ndarray]:
        return halve_on_oom(lambda bs: encode_rows(model, block, device, precision, bs, progress, desc=desc,
                                                   timer=timer), batch_size, "encode")

    out = run(rows)
    if views > 1:
        out.update(encode_views(model, rows, views, window_min_chars, seed, zlib.crc32(name.encode()),
                                lambda block: run(block, f"{name} windows")))
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    timer.start("write")
    with atomic_path(out_path, suffix=".npz") as tmp:
        np.savez(tmp, **out)
    timer.stop()
    components = timer.summary()
    return {"samples": len(rows), "encode_s": seconds, "rows_per_s": len(rows) / max(seconds, 1e-9),
            "write_s": components["write"]["seconds"], "components": components}
