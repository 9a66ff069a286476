"""Encode one cache shard with the frozen teacher.

Host memory holds one output buffer for the shard and one batch of images;
the images themselves are read from the memory-mapped shard batch by batch.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from .engine import autocast_context
from .io import atomic_path
from .model import TRMVisionEncoder, checksum_bits
from .timing import ComponentTimer

ENCODED_FIELDS = ("sketches", "children", "checksums", "logits", "labels")


def allocate_outputs(n: int, model: TRMVisionEncoder) -> dict[str, np.ndarray]:
    c = model.cfg
    return {
        "sketches": np.empty((n, c.num_capsules, c.dim), np.float16),
        "children": np.empty((n, c.num_capsules, c.num_children, c.dim), np.float16),
        "checksums": np.empty((n, c.num_capsules, c.checksum_bits // 8), np.uint8),
        "logits": np.empty((n, c.num_classes), np.float32),
        "labels": np.empty((n,), np.int64),
    }


@torch.inference_mode()
def encode_images(
    model: TRMVisionEncoder,
    images: np.ndarray,
    labels: np.ndarray,
    device: torch.device,
    precision: str = "fp32",
    batch_size: int = 256,
    progress: bool = True,
    desc: str = "encode",
    timer: ComponentTimer | None = None,
) -> dict[str, np.ndarray]:
    model.eval()
    t = timer or ComponentTimer(device)
    n = len(images)
    out = allocate_outputs(n, model)
    out["labels"][:] = labels
    pin = device.type == "cuda"
    for start in tqdm(range(0, n, batch_size), desc=desc, unit="batch", disable=not progress, mininterval=1.0):
        stop = min(n, start + batch_size)
        t.start("read_h2d")
        batch = torch.from_numpy(np.ascontiguousarray(images[start:stop]))
        if pin:
            batch = batch.pin_memory()
        batch = batch.to(device, non_blocking=True)
        t.start("forward")
        with autocast_context(device, precision):
            res = model(batch)
        t.start("to_host")
        out["sketches"][start:stop] = res["sketches"].half().cpu().numpy()
        out["children"][start:stop] = res["children"].half().cpu().numpy()
        bits = checksum_bits(res["checksum_logits"].float()).cpu().numpy()
        out["checksums"][start:stop] = np.packbits(bits, axis=-1)
        out["logits"][start:stop] = res["logits"].float().cpu().numpy()
    t.stop()
    return out


def encode_shard(
    model: TRMVisionEncoder,
    shard_path: str | Path,
    labels: np.ndarray,
    out_path: str | Path,
    device: torch.device,
    precision: str = "fp32",
    batch_size: int = 256,
    progress: bool = True,
) -> dict[str, float]:
    """Encode `shard_path` (uint8 [N,C,H,W] .npy) into an uncompressed `.npz` at `out_path`."""
    images = np.load(shard_path, mmap_mode="r")
    if len(images) != len(labels):
        raise ValueError(f"{shard_path}: {len(images)} images but {len(labels)} labels in the manifest")
    t0 = time.perf_counter()
    timer = ComponentTimer(device)
    out = encode_images(model, images, labels, device, precision, batch_size, progress, desc=Path(shard_path).name,
                        timer=timer)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    timer.start("write")
    with atomic_path(out_path, suffix=".npz") as tmp:
        np.savez(tmp, **out)
    timer.stop()
    components = timer.summary()
    return {"samples": len(images), "encode_s": seconds, "images_per_s": len(images) / max(seconds, 1e-9),
            "write_s": components["write"]["seconds"], "components": components}
