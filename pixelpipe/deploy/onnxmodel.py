"""The deployed student as an ONNX file: its input contract, its metadata, its sessions.

Everything here is torch-free on purpose: `pixelpipe.predict` and the
benchmark import it on machines that only have onnxruntime. The ONNX file
carries the student's config.json (labels, render settings, the glyph atlas,
encoder shape) in `metadata_props`, so the file alone is enough to render and
classify text exactly as training did.

Input contract: `images` float32 [B, C, H, W] in [0, 1] (uint8 cache pixels
/ 255, ink 1.0 on 0.0); outputs `logits` [B, num_classes] and `sketches`
[B, K, D]. Float input keeps the uint8 -> float conversion out of the graph,
so static quantization sees the patch-embedding convolution's real input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

FORMAT = "pixelpipe.onnx/1"
META_FORMAT = "pixelpipe.format"
META_CONFIG = "pixelpipe.config"
META_INPUT = "pixelpipe.input"
INPUT_NAME = "images"
OUTPUT_NAMES = ("logits", "sketches")
INPUT_DOC = "float32 [batch, channels, height, width] in [0, 1]: uint8 pixels / 255, ink 1.0 on background 0.0"


class ModelFileError(ValueError):
    """A model file that is missing, not ONNX, or not a pixelpipe export; the message names the file."""


def to_input(images_u8: np.ndarray) -> np.ndarray:
    """uint8 [B, C, H, W] cache/render pixels -> the float32 [0, 1] tensor the ONNX model takes."""
    if images_u8.dtype != np.uint8:
        raise TypeError(f"expected uint8 images, got {images_u8.dtype}")
    return images_u8.astype(np.float32) * np.float32(1.0 / 255.0)


def metadata_entries(student_config: dict[str, Any]) -> dict[str, str]:
    """The metadata_props an exported model carries (all values are strings, as ONNX requires)."""
    return {META_FORMAT: FORMAT, META_CONFIG: json.dumps(student_config, sort_keys=True), META_INPUT: INPUT_DOC}


def set_metadata(model: Any, entries: dict[str, str]) -> None:
    """Replace (not duplicate) the given keys in an onnx.ModelProto's metadata_props."""
    keep = [(p.key, p.value) for p in model.metadata_props if p.key not in entries]
    del model.metadata_props[:]
    for key, value in [*keep, *entries.items()]:
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value


def copy_metadata(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Carry pixelpipe metadata from one ONNX file into another in place (quantizers drop it)."""
    import onnx

    from ..core import io

    entries = {p.key: p.value for p in onnx.load(str(src), load_external_data=False).metadata_props
               if p.key.startswith("pixelpipe.")}
    model = onnx.load(str(dst))
    set_metadata(model, entries)
    with io.atomic_path(dst, suffix=".onnx") as tmp:
        onnx.save(model, str(tmp))


def verify_onnx(path: str | os.PathLike, metrics_path: str | os.PathLike, rule: str) -> None:
    """Check an ONNX file against the sha256 its rule recorded in its metrics JSON (results/metrics/{rule}/...)."""
    from ..core import io

    io.verify_file(path, io.read_json(metrics_path).get("onnx_sha256"), str(metrics_path), rule)


def _session_options(threads: int | None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
    so.log_severity_level = 3  # warnings from the optimizer are noise for users of predict
    return so


def open_session(path: str | os.PathLike, threads: int | None = None):
    """An onnxruntime CPU session for a pixelpipe ONNX file, with one-line errors for bad files."""
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file not found: {path}")
    try:
        session = ort.InferenceSession(str(path), _session_options(threads), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types with multi-line messages
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelFileError(f"{path} is not a loadable ONNX model ({first[:200]})") from None
    return session


def read_metadata(session_or_path: Any) -> dict[str, Any]:
    """{'config': student config dict} from a session or file; ModelFileError names what is wrong."""
    session = open_session(session_or_path) if isinstance(session_or_path, (str, os.PathLike)) else session_or_path
    props = session.get_modelmeta().custom_metadata_map
    where = getattr(session, "_model_path", None) or "the model"
    if props.get(META_FORMAT) != FORMAT or META_CONFIG not in props:
        raise ModelFileError(f"{where} has no pixelpipe metadata ({META_FORMAT}={FORMAT}); "
                             "export it with `snakemake export_onnx` / pixelpipe.deploy.export")
    try:
        config = json.loads(props[META_CONFIG])
    except json.JSONDecodeError as e:
        raise ModelFileError(f"{where}: metadata {META_CONFIG} is not valid JSON ({e})") from None
    for key in ("labels", "render", "atlas", "encoder"):
        if key not in config:
            raise ModelFileError(f"{where}: metadata {META_CONFIG} lacks '{key}'")
    labels, classes = config["labels"], session.get_outputs()[0].shape[-1]
    if not isinstance(labels, list) or not labels or (isinstance(classes, int) and len(labels) != classes):
        raise ModelFileError(f"{where}: metadata has {len(labels) if isinstance(labels, list) else 'no'} labels but the "
                             f"model outputs {classes} logits")
    return {"config": config}


def run_logits(session: Any, images_u8: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Logits [N, classes] for uint8 images, in batches."""
    outs = [session.run([OUTPUT_NAMES[0]], {INPUT_NAME: to_input(images_u8[i : i + batch_size])})[0]
            for i in range(0, len(images_u8), batch_size)]
    return np.concatenate(outs) if outs else np.zeros((0, 0), np.float32)


def iter_cache_split(split_dir: str | os.PathLike) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(images uint8 [N, C, H, W], labels [N]) per shard of a cache split (verified first), without torch."""
    from ..data.render import verify_shards

    split_dir = Path(split_dir)
    manifest = verify_shards(split_dir)
    for entry in manifest["shards"]:
        if entry["count"]:
            yield np.load(split_dir / entry["file"], mmap_mode="r"), np.asarray(entry["labels"], dtype=np.int64)


def accuracy(session: Any, split_dir: str | os.PathLike, batch_size: int = 256) -> dict[str, float]:
    """Top-1 accuracy of an ONNX session over a whole cache split."""
    correct = total = 0
    for images, labels in iter_cache_split(split_dir):
        pred = run_logits(session, np.asarray(images), batch_size).argmax(1)
        correct += int((pred == labels).sum())
        total += len(labels)
    return {"accuracy": correct / total if total else float("nan"), "samples": total}


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)

