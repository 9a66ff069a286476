"""The deployed student as an ONNX file: its input contract, its metadata, its sessions.

Everything here is torch-free on purpose: `pixelpipe.predict` and the
benchmark import it on machines that only have onnxruntime. The ONNX file
carries the student's config.json (labels, render settings, the glyph atlas,
encoder shape) and the fold map (how a glyph's pixels become its table row)
in `metadata_props`, so the file alone is enough to classify text exactly as
training did, including characters the atlas lacks (drawn and folded).

Input contract (pixelpipe.deploy.fold): `glyphs` int64 [B, T], deployed
glyph ids (atlas id + 1; 0 past a text's end; T a whole number of lines
when the layout has several), `lengths` int64 [B] (characters, at most the
layout's capacity), and optionally `glyph_table` float32 [S * (G + 1), W],
the span-major per-glyph table (row s * (G + 1) + g: span s of glyph g),
whose default is the exported atlas's (predict passes an extended table when
it folded unseen characters); in the int8 file the table is int8 with a
float32 scale per column, `glyph_table_scale` [W] (`column_scale`, `int8_columns`).
Output: `logits` [B, C].
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..core.batching import length_batches, trimmed_width

FORMAT = "pixelpipe.onnx/2"
META_FORMAT = "pixelpipe.format"
META_CONFIG = "pixelpipe.config"
META_INPUT = "pixelpipe.input"
META_FOLD = "pixelpipe.fold"
META_FONTS = "pixelpipe.fonts"  # the TrueType faces' coverage (data/fonts.coverage), read by predict without fontTools
META_SCRIPTS = "pixelpipe.glyph_scripts"  # the atlas glyphs' scripts (data/scripts.glyph_script_codes)
INPUT_NAMES = ("glyphs", "lengths")
TABLE_NAME = "glyph_table"
TABLE_SCALE_NAME = "glyph_table_scale"  # an int8 glyph table's column scales (quantize.glyph_table: int8)
KEYS_NAME = "glyph_keys"
SPAN_SUM_NAME = "span_sum"  # the folded modules' [spans * width, width] matrix summing the table's spans (fold.py)
OUTPUT_NAME = "logits"
INPUT_DOC = ("glyphs int64 [batch, tokens]: atlas glyph ids + 1, 0 past each text's end; lengths int64 [batch]; "
             "glyph_table float32 [spans * (glyphs + 1), width], span-major (optional, default: the exported atlas's; "
             "int8 with glyph_table_scale float32 [width], a scale per column, in the int8 file); "
             "with n-gram tables glyph_keys int64 [glyphs + 1, orders], each glyph's pixel keys (optional, likewise)")


class ModelFileError(ValueError):
    """A model file that is missing, not ONNX, or not a pixelpipe export; the message names the file."""


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """A float32 array as JSON: shape and base64 bytes (little-endian)."""
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode("ascii")}


def decode_array(d: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["data"]), dtype="<f4").reshape(d["shape"])


def int8_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, float32 scale per row [R, 1]): symmetric, max |value| / 127; an all-zero row gets scale 1
    (the n-gram table's rows with quantize.table_rows: int8)."""
    scale = column_scale(np.abs(rows).max(axis=1, keepdims=True))  # the same rule, a peak per row
    return np.round(rows / scale).astype(np.int8), scale


def column_scale(peak: np.ndarray) -> np.ndarray:
    """float32 scale per column of an int8 table from each column's largest |value| (`peak`, any shape): peak / 127,
    1 where a column is all zero. One function for the file's glyph table (quantize) and the table predict folds."""
    scale = (np.asarray(peak, np.float32) / 127).astype(np.float32)
    scale[scale == 0] = 1.0
    return scale


def int8_columns(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """int8 rows in units of a scale per column, clipped to +-127: a character drawn after the export may reach
    past the exported glyphs' range in a column, and is read at its edge."""
    return np.clip(np.round(rows / scale), -127, 127).astype(np.int8)


def fold_metadata(form: str, spans: int, matrix: np.ndarray, offset: np.ndarray, orders: int) -> dict[str, Any]:
    """The metadata's fold entry: the deploy form, the spans, the fold map (`encode_array`) and, with n-gram tables,
    the glyph keys' weights [orders, pixels]: predict keys the characters it draws with them instead of drawing them
    again from numpy.random, whose import (with OpenSSL's, through secrets) is 7 MiB of its peak memory."""
    from ..data.glyphkeys import key_weights

    fold = {"form": form, "spans": spans, "matrix": encode_array(matrix), "offset": encode_array(offset)}
    if orders:
        fold["key_weights"] = key_weights(matrix.shape[0], orders).tolist()
    return fold


def metadata_entries(student_config: dict[str, Any], fold: dict[str, Any]) -> dict[str, str]:
    """The metadata_props an exported model carries (all values are strings, as ONNX requires). `fold` holds
    the deploy form and the fold map (matrix, offset) as `encode_array` dicts."""
    from ..data.fonts import coverage
    from ..data.scripts import glyph_script_codes

    return {META_FORMAT: FORMAT, META_CONFIG: json.dumps(student_config, sort_keys=True), META_INPUT: INPUT_DOC,
            META_FOLD: json.dumps(fold), META_FONTS: json.dumps(coverage(student_config["render"]["fonts"])),
            META_SCRIPTS: json.dumps(glyph_script_codes(student_config["atlas"]["clusters"]))}


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


def session_options(threads: int | None, arena: bool = True):
    """`arena=False`: onnxruntime frees each batch's buffers instead of keeping a growing arena (predict: 4-20 MiB
    less peak memory at the same speed, docs/deploy.md), and keeps no memory pattern: a pattern is planned and kept
    for every new set of input shapes, and predict's batches, trimmed to their longest text, come in hundreds
    (the every-language int8 student on 185,590 UI strings: peak 159-161 MiB without, 219-231 with; fp32 178-182
    against 188-200; no slower)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_cpu_mem_arena = arena
    so.enable_mem_pattern = arena
    if threads:
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
    so.log_severity_level = 3  # warnings from the optimizer are noise for users of predict
    return so


def open_session(path: str | os.PathLike, threads: int | None = None, arena: bool = True):
    """An onnxruntime CPU session for a pixelpipe ONNX file, with one-line errors for bad files."""
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file not found: {path}")
    try:
        session = ort.InferenceSession(str(path), session_options(threads, arena), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types with multi-line messages
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelFileError(f"{path} is not a loadable ONNX model ({first[:200]})") from None
    return session


def read_metadata(session_or_path: Any) -> dict[str, Any]:
    """{'config': student config dict, 'fold': {'form', 'spans', 'matrix', 'offset', 'key_weights'}, 'fonts': the
    TrueType faces' coverage ({} in an earlier file), 'scripts': the atlas glyphs' scripts (None in an earlier
    file)} from a session or file; ModelFileError names what is wrong."""
    session = open_session(session_or_path) if isinstance(session_or_path, (str, os.PathLike)) else session_or_path
    props = session.get_modelmeta().custom_metadata_map
    where = getattr(session, "_model_path", None) or "the model"
    if props.get(META_FORMAT) != FORMAT or META_CONFIG not in props or META_FOLD not in props:
        raise ModelFileError(f"{where} has no pixelpipe metadata ({META_FORMAT}={FORMAT}); "
                             "export it with `snakemake export_onnx` / pixelpipe.deploy.export")
    try:
        config, fold = json.loads(props[META_CONFIG]), json.loads(props[META_FOLD])
        fonts = json.loads(props.get(META_FONTS, "{}"))
        scripts = json.loads(props[META_SCRIPTS]) if META_SCRIPTS in props else None
    except json.JSONDecodeError as e:
        raise ModelFileError(f"{where}: pixelpipe metadata is not valid JSON ({e})") from None
    for key in ("labels", "render", "atlas", "encoder"):
        if key not in config:
            raise ModelFileError(f"{where}: metadata {META_CONFIG} lacks '{key}'")
    labels, classes = config["labels"], session.get_outputs()[0].shape[-1]
    if not isinstance(labels, list) or not labels or (isinstance(classes, int) and len(labels) != classes):
        raise ModelFileError(f"{where}: metadata has {len(labels) if isinstance(labels, list) else 'no'} labels but the "
                             f"model outputs {classes} logits")
    return {"config": config, "fold": fold, "fonts": fonts, "scripts": scripts}


def deployed_batch(glyphs: np.ndarray, lengths: np.ndarray, lines: int, line_chars: int) -> dict[str, np.ndarray]:
    """Atlas glyph ids [B, cells] and lengths -> the model's inputs, trimmed to the batch's longest text
    (whole lines when the layout has several): ids + 1, 0 past each text's end."""
    lengths = np.asarray(lengths, np.int64)
    t = trimmed_width(int(lengths.max(initial=0)), line_chars, lines, glyphs.shape[1])
    ids = np.asarray(glyphs[:, :t], np.int64) + 1
    ids[np.arange(t)[None, :] >= lengths[:, None]] = 0
    return {INPUT_NAMES[0]: ids, INPUT_NAMES[1]: lengths}


def run_logits(session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return session.run([OUTPUT_NAME], feeds)[0]


def iter_cache_split(split_dir: str | os.PathLike) -> Iterator[np.ndarray]:
    """The rows of each shard of a cache split (verified first; structured: glyphs, label, length), without torch."""
    from ..data.render import verify_shards

    split_dir = Path(split_dir)
    manifest = verify_shards(split_dir)
    for entry in manifest["shards"]:
        if entry["count"]:
            yield np.load(split_dir / entry["file"], mmap_mode="r")


def split_batches(split_dir: str | os.PathLike, batch_size: int = 256) -> Iterator[tuple[dict, np.ndarray]]:
    """(model inputs, labels) per batch of a cache split, rows sorted by length within each shard (no padding)."""
    from ..core import io

    render = io.read_json(Path(split_dir) / "manifest.json")["render"]
    for rows in iter_cache_split(split_dir):
        for positions in length_batches(rows["length"], batch_size, ascending=True):
            block = rows[positions]
            yield deployed_batch(block["glyphs"], block["length"], render["lines"], render["line_chars"]), \
                np.asarray(block["label"], np.int64)


def accuracy(session: Any, split_dir: str | os.PathLike, batch_size: int = 256) -> dict[str, float]:
    """Top-1 accuracy of an ONNX session over a whole cache split."""
    correct = total = 0
    for feeds, labels in split_batches(split_dir, batch_size):
        correct += int((run_logits(session, feeds).argmax(1) == labels).sum())
        total += len(labels)
    return {"accuracy": correct / total if total else float("nan"), "samples": total}


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of float `logits`, computed in place (returns them): predict's chunk holds one
    [texts, classes] array, not one per step."""
    logits -= logits.max(axis=-1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=-1, keepdims=True)
    return logits
