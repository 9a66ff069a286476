"""Export the student to ONNX with torch's dynamo exporter and prove the file computes what torch does.

`torch.onnx.export(..., dynamo=True)` (torch.export + onnxscript) is the
exporter PyTorch now defaults to; the TorchScript one is deprecated. The batch
axis is dynamic, so one file serves batch 1 (interactive) and large batches.
The export is not trusted until onnxruntime reproduces torch's logits on real
validation images: a largest-absolute-difference tolerance plus a cap on the
share of samples whose predicted label changes.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..core import io
from ..model.checkpoint import load_model
from ..model.encoder import TRMVisionEncoder
from . import onnxmodel

MIN_OPSET = 18


class ParityError(RuntimeError):
    """The ONNX model does not compute what the torch student computes."""


class StudentForExport(nn.Module):
    """float32 images in [0, 1] -> (logits, sketches): the deployed interface (see onnxmodel)."""

    def __init__(self, model: TRMVisionEncoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(images)
        return out["logits"], out["sketches"]


@dataclass
class ParityReport:
    samples: int
    max_abs_logits: float
    max_abs_sketches: float
    label_mismatches: int
    mismatch_fraction: float
    atol: float
    max_label_mismatch: float

    @property
    def ok(self) -> bool:
        """NaN anywhere (a NaN difference, NaN weights in both models) fails: NaN <= atol is False."""
        return bool(self.max_abs_logits <= self.atol and np.isfinite(self.max_abs_sketches)
                    and self.mismatch_fraction <= self.max_label_mismatch)

    def describe(self) -> str:
        return (f"max |onnx - torch| on logits {self.max_abs_logits:.3g} (tolerance {self.atol:g}), "
                f"sketches {self.max_abs_sketches:.3g}; predicted labels differ on {self.label_mismatches}/"
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
        if not t.raw_data:
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


def export_student(model: TRMVisionEncoder, out_path: str | os.PathLike, opset: int = MIN_OPSET,
                   metadata: dict[str, str] | None = None, log: Callable[[str], Any] = print) -> Path:
    """Write `model` as a single-file ONNX model with a dynamic batch axis; checked, metadata embedded."""
    import onnx

    if opset < MIN_OPSET:
        raise ValueError(f"export.opset must be >= {MIN_OPSET}, got {opset}")
    out_path = Path(out_path)
    cfg = model.cfg
    wrapper = StudentForExport(model.eval()).eval()
    example = torch.rand(2, cfg.channels, cfg.image_height, cfg.image_width)
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    with torch.no_grad():
        program = torch.onnx.export(
            wrapper, (example,), dynamo=True, opset_version=opset, input_names=[onnxmodel.INPUT_NAME],
            output_names=list(onnxmodel.OUTPUT_NAMES), dynamic_shapes={"images": {0: batch}}, optimize=True,
        )
    proto = program.model_proto
    for node in proto.graph.node:  # exporter debug info (stack traces with local paths): most of the bytes
        del node.metadata_props[:]
    dropped = dedupe_initializers(proto)
    onnxmodel.set_metadata(proto, metadata or {})
    proto.doc_string = "pixelpipe student; input " + onnxmodel.INPUT_DOC
    onnx.checker.check_model(proto, full_check=True)
    got = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    if got < MIN_OPSET:
        raise ValueError(f"exporter wrote opset {got}, need >= {MIN_OPSET}")
    with io.atomic_path(out_path, suffix=".onnx") as tmp:
        onnx.save(proto, str(tmp))  # small models: one self-contained file, no external data
    log(f"exported {out_path} (opset {got}, {out_path.stat().st_size:,} bytes, {dropped} duplicate initializers shared)")
    return out_path


def check_parity(session: Any, model: TRMVisionEncoder, images_u8: np.ndarray, atol: float,
                 max_label_mismatch: float, batch_size: int = 256) -> ParityReport:
    """Compare onnxruntime and torch on the same uint8 images (fed through the same float conversion)."""
    model.eval()
    n = len(images_u8)
    d_logits = d_sketch = 0.0
    mismatches = 0
    for i in range(0, n, batch_size):
        x = onnxmodel.to_input(np.asarray(images_u8[i : i + batch_size]))
        o_logits, o_sketch = session.run(list(onnxmodel.OUTPUT_NAMES), {onnxmodel.INPUT_NAME: x})
        with torch.inference_mode():
            out = model(torch.from_numpy(x))
        t_logits, t_sketch = out["logits"].numpy(), out["sketches"].numpy()
        # np.maximum, not max(): max(0.0, nan) is 0.0, and a NaN must fail the check
        d_logits = float(np.maximum(d_logits, np.abs(o_logits - t_logits).max()))
        d_sketch = float(np.maximum(d_sketch, np.abs(o_sketch - t_sketch).max()))
        mismatches += int((o_logits.argmax(1) != t_logits.argmax(1)).sum())
    return ParityReport(n, d_logits, d_sketch, mismatches, mismatches / n if n else 0.0, atol, max_label_mismatch)


def export_and_verify(student_dir: str | os.PathLike, out_path: str | os.PathLike, val_images_u8: np.ndarray,
                      opset: int, atol: float, max_label_mismatch: float,
                      threads: int | None = None, log: Callable[[str], Any] = print) -> ParityReport:
    """Export the student in `student_dir`, check parity on `val_images_u8`; write `out_path` only if it passes."""
    model, config = load_model(student_dir)
    if len(val_images_u8) == 0:
        raise ValueError("parity check needs at least one validation image; the val shard is empty")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export-") as tmp:
        tmp_model = Path(tmp) / out_path.name
        export_student(model, tmp_model, opset, onnxmodel.metadata_entries(config), log)
        session = onnxmodel.open_session(tmp_model, threads)
        report = check_parity(session, model, val_images_u8, atol, max_label_mismatch)
        log("parity: " + report.describe())
        if not report.ok:
            raise ParityError(f"ONNX export of {student_dir} failed the parity check: {report.describe()}")
        io.publish(tmp_model, out_path)
    return report
