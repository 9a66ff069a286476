"""Export the student to ONNX with torch's dynamo exporter and prove the file computes what torch does.

What is exported is the folded student (pixelpipe.deploy.fold): glyph ids and
lengths in, logits out, rendering and the stem (and for `core: none` the n-gram
convolution) folded into one per-glyph table, so no pixel is drawn and no
token past a text's end is computed. `torch.onnx.export(..., dynamo=True)`
(torch.export + onnxscript) is the exporter PyTorch now defaults to. The batch
and token axes are dynamic, so one file serves one short text or a large
batch. The table is both an initializer and a graph input (an overridable
initializer), so predict can pass a table extended with characters it folded
on the fly. The export is not trusted until onnxruntime reproduces the torch
student's logits (the unfolded model, on its glyph path) on real validation
rows: a largest-absolute-difference tolerance plus a cap on the share of
samples whose predicted label changes.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..core import io
from ..model.checkpoint import atlas_cells, load_model
from ..model.encoder import TRMVisionEncoder
from . import onnxmodel
from .fold import deployed_flops, folded_module, key_table

MIN_OPSET = 18


class ParityError(RuntimeError):
    """The ONNX model does not compute what the torch student computes."""


@dataclass
class ParityReport:
    samples: int
    max_abs_logits: float
    label_mismatches: int
    mismatch_fraction: float
    atol: float
    max_label_mismatch: float
    deployed_mflops_per_text: float | None = None

    @property
    def ok(self) -> bool:
        """NaN anywhere (a NaN difference, NaN weights in both models) fails: NaN <= atol is False."""
        return bool(self.max_abs_logits <= self.atol and self.mismatch_fraction <= self.max_label_mismatch)

    def describe(self) -> str:
        return (f"max |onnx - torch| on logits {self.max_abs_logits:.3g} (tolerance {self.atol:g}); "
                f"predicted labels differ on {self.label_mismatches}/"
                f"{self.samples} samples ({100 * self.mismatch_fraction:.3f} %, allowed "
                f"{100 * self.max_label_mismatch:.3f} %)")


def dedupe_initializers(model: Any) -> int:
    """Point identical initializers at one copy; returns how many were dropped.

    The recursion reuses one block several times, and the exporter folds a
    transposed copy of its weights per call site, so the file would carry the
    shared weights once per recursion step.
    """
    import hashlib

    graph = model.graph
    keep: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    for t in list(graph.initializer):
        if not t.raw_data or t.name == onnxmodel.SPAN_SUM_NAME:  # quantize finds the span sum by its name
            continue
        key = (t.data_type, tuple(t.dims), hashlib.sha256(t.raw_data).hexdigest())
        if key in keep:
            rename[t.name] = keep[key]
        else:
            keep[key] = t.name
    if not rename:
        return 0
    kept = [t for t in graph.initializer if t.name not in rename]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    graph_inputs = {i.name for i in graph.input}
    kept_vi = [v for v in graph.value_info if v.name not in rename or v.name in graph_inputs]
    del graph.value_info[:]
    graph.value_info.extend(kept_vi)
    return len(rename)


def input_default(proto: Any, name: str, value: np.ndarray) -> None:
    """`value` as the default of the graph input `name` (an initializer of the input's name: an overridable
    initializer), so the file classifies on its own and predict may pass an extended table (glyph_table,
    glyph_keys)."""
    from onnx import numpy_helper

    if name not in {i.name for i in proto.graph.input}:
        raise ValueError(f"exported graph has no input named {name!r}")
    proto.graph.initializer.append(numpy_helper.from_array(value, name))


def _export_program(module: torch.nn.Module, model: TRMVisionEncoder, table: np.ndarray, keys: np.ndarray | None,
                    spans: int, opset: int) -> Any:
    cfg = model.cfg
    if cfg.lines > 1:
        tokens = torch.export.Dim("lines", min=1, max=cfg.lines) * cfg.line_chars
        example_t = 2 * cfg.line_chars  # a size of 1 would be specialized
    else:
        tokens, example_t = torch.export.Dim("tokens", min=1, max=cfg.cells), min(cfg.cells, 8)
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    rows = torch.export.Dim("glyphs", min=2, max=1 << 22) * spans  # a table of any atlas size, span-major
    glyphs = torch.randint(1, 3, (2, example_t), dtype=torch.int64)
    lengths = torch.full((2,), example_t, dtype=torch.int64)
    args = (glyphs, lengths, torch.from_numpy(table))
    names = [*onnxmodel.INPUT_NAMES, onnxmodel.TABLE_NAME]
    shapes: dict[str, Any] = {"glyphs": {0: batch, 1: tokens}, "lengths": {0: batch}, "glyph_table": {0: rows}}
    if keys is not None:  # n-gram tables: each glyph's pixel keys, one row per glyph like the table's
        args += (torch.from_numpy(keys),)
        names.append(onnxmodel.KEYS_NAME)
        shapes["glyph_keys"] = {0: torch.export.Dim("key_rows", min=2, max=1 << 22)}
    with torch.no_grad():
        return torch.onnx.export(module, args, dynamo=True, opset_version=opset, input_names=names,
                                 output_names=[onnxmodel.OUTPUT_NAME], optimize=True, dynamic_shapes=shapes,
                                 custom_translation_table={torch.ops.aten.floor_divide.default: _nonnegative_floordiv})


def _nonnegative_floordiv(self: Any, other: Any) -> Any:
    """aten.floor_divide as one ONNX Div (which truncates). The deployed modules' one tensor floor division is the
    n-gram bucket of a non-negative hash by a power of two (model/ngrams.py), where truncating is flooring; the
    exporter's own translation corrects the sign in 7 more nodes that every batch pays (the parity check at
    export compares the result with torch)."""
    from onnxscript import opset18 as op

    return op.Div(self, other)


def export_student(model: TRMVisionEncoder, config: dict[str, Any], out_path: str | os.PathLike,
                   opset: int = MIN_OPSET, log: Callable[[str], Any] = print) -> Path:
    """Write the folded `model` as a single-file ONNX model (dynamic batch and tokens), checked, metadata embedded."""
    import onnx

    if opset < MIN_OPSET:
        raise ValueError(f"export.opset must be >= {MIN_OPSET}, got {opset}")
    out_path = Path(out_path)
    cells = atlas_cells(config).numpy()
    module, fold, table = folded_module(model.eval(), cells)
    keys = key_table(model, cells)
    spans = module.spans
    proto = _export_program(module, model, table, keys, spans, opset).model_proto
    for node in proto.graph.node:  # exporter debug info (stack traces with local paths): most of the bytes
        del node.metadata_props[:]
    dedupe_initializers(proto)  # the recursion reuses its blocks: one copy of their weights
    input_default(proto, onnxmodel.TABLE_NAME, table)
    if keys is not None:
        input_default(proto, onnxmodel.KEYS_NAME, keys)
    onnxmodel.set_metadata(proto, onnxmodel.metadata_entries(config, onnxmodel.fold_metadata(
        model.cfg.deploy_form, spans, fold.matrix, fold.offset, model.cfg.ngram_orders)))
    proto.doc_string = "pixelpipe student (folded); inputs " + onnxmodel.INPUT_DOC
    onnx.checker.check_model(proto, full_check=True)
    got = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    if got < MIN_OPSET:
        raise ValueError(f"exporter wrote opset {got}, need >= {MIN_OPSET}")
    with io.atomic_path(out_path, suffix=".onnx") as tmp:
        onnx.save(proto, str(tmp))  # small models: one self-contained file, no external data
    log(f"exported {out_path} ({model.cfg.deploy_form} form: {spans} spans x {len(cells) + 1} glyph rows x "
        f"{table.shape[1]}; opset {got}, {out_path.stat().st_size:,} bytes)")
    return out_path


def check_parity(session: Any, model: TRMVisionEncoder, rows: np.ndarray, atol: float,
                 max_label_mismatch: float, batch_size: int = 256) -> ParityReport:
    """Compare onnxruntime (folded, deployed inputs) and the torch student (glyph path) on the same cache rows."""
    model.eval()
    cfg = model.cfg
    n = len(rows)
    d_logits, mismatches = 0.0, 0
    for i in range(0, n, batch_size):
        block = rows[i : i + batch_size]
        feeds = onnxmodel.deployed_batch(block["glyphs"], block["length"], cfg.lines, cfg.line_chars)
        o_logits = onnxmodel.run_logits(session, feeds)
        glyphs = torch.from_numpy(np.asarray(block["glyphs"][:, : feeds["glyphs"].shape[1]], np.int64))
        with torch.inference_mode():
            t_logits = model(glyphs, torch.from_numpy(feeds["lengths"]))["logits"].numpy()
        # np.maximum, not max(): max(0.0, nan) is 0.0, and a NaN must fail the check
        d_logits = float(np.maximum(d_logits, np.abs(o_logits - t_logits).max()))
        mismatches += int((o_logits.argmax(1) != t_logits.argmax(1)).sum())
    return ParityReport(n, d_logits, mismatches, mismatches / n if n else 0.0, atol, max_label_mismatch)


def export_and_verify(student_dir: str | os.PathLike, out_path: str | os.PathLike, val_rows: np.ndarray,
                      opset: int, atol: float, max_label_mismatch: float,
                      threads: int | None = None, log: Callable[[str], Any] = print) -> ParityReport:
    """Export the student in `student_dir`, check parity on `val_rows`; write `out_path` only if it passes."""
    model, config = load_model(student_dir)
    if len(val_rows) == 0:
        raise ValueError("parity check needs at least one validation row; the val shard is empty")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export-") as tmp:
        tmp_model = Path(tmp) / out_path.name
        export_student(model, config, tmp_model, opset, log)
        session = onnxmodel.open_session(tmp_model, threads)
        report = check_parity(session, model, val_rows, atol, max_label_mismatch)
        log("parity: " + report.describe())
        if not report.ok:
            raise ParityError(f"ONNX export of {student_dir} failed the parity check: {report.describe()}")
        io.publish(tmp_model, out_path)
    report.deployed_mflops_per_text = deployed_flops(model, float(config.get("metrics", {}).get("mean_chars") or
                                                                  model.cfg.cells)) / 1e6
    return report
