"""Fit the planner's ONNX graph-size constants (pixelpipe.plan.sizes.ONNX_GRAPH) on real exports.

Exports students of several shapes with random, all-distinct weights through the same functions the
rules use (export.export_student, quantize.quantize_file with static QDQ calibration on random
glyph-like images), subtracts what plan.onnx_bytes counts exactly (float data, int8 weights and their
scales, metadata), and least-squares fits the rest, the graph bytes, as fixed + per block + per block call.
Prints the fit and each shape's residual; paste the fit into ONNX_GRAPH in pixelpipe/plan/sizes.py.

    python bench/onnx_size_fit.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import torch

from pixelpipe.deploy.export import export_student
from pixelpipe.deploy.quantize import QuantizeSettings, quantize_file
from pixelpipe.model.encoder import TRMVisionEncoder
from pixelpipe.plan.sizes import onnx_bytes
from pixelpipe.train.run import encoder_config

RENDER = {"channels": 1, "cell_height": 16, "cell_width": 8, "lines": 1}
SHAPES = [  # (dim, depth, heads, H, L, mixer_ratio, line_chars)
    (16, 1, 2, 1, 1, 2.0, 32), (32, 1, 2, 1, 1, 2.0, 32), (48, 1, 4, 1, 1, 4.0, 96), (64, 1, 4, 1, 2, 4.0, 96),
    (32, 2, 2, 2, 2, 2.0, 48), (24, 2, 2, 1, 3, 4.0, 64), (48, 1, 4, 2, 1, 1.0, 96),
]


def main() -> None:
    torch.manual_seed(0)
    quant = QuantizeSettings(method="static", calibration_samples=64, calibration_method="minmax", per_channel=True,
                             activation_type="uint8", weight_type="int8", op_types=["Conv", "MatMul", "Gemm"],
                             activation_matmuls=False, reduce_range=False, max_accuracy_drop=100.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for dim, depth, heads, h, l, ratio, line_chars in SHAPES:
            model_cfg = {"stem": "pair", "mixer_kernel": 3, "mixer_ratio": ratio, "positions": False, "dim": dim,
                         "depth": depth, "heads": heads, "mlp_ratio": 2.0, "H_cycles": h, "L_cycles": l,
                         "num_capsules": 4}
            enc = encoder_config(model_cfg, {**RENDER, "line_chars": line_chars}, 19)
            model = TRMVisionEncoder(enc).eval()
            with torch.no_grad():
                for p in model.parameters():  # all-distinct weights: nothing the exporter could share
                    p.copy_(torch.randn_like(p) * 0.05)
            meta = {"pixelpipe.format": "pixelpipe.onnx/1", "pixelpipe.config": json.dumps({"x": 1})}
            fp32 = export_student(model, tmp / "m.onnx", metadata=meta, log=lambda m: None)
            images = (np.random.default_rng(0).random((64, 1, enc.image_height, enc.image_width)) < 0.2) * 255
            np.save(tmp / "calib.npy", images.astype(np.uint8))
            quantize_file(fp32, tmp / "q.onnx", quant, [tmp / "calib.npy"], log=lambda m: None)
            pred = onnx_bytes(enc, meta)
            calls = depth * h * (l + 1)
            rows.append({"shape": (dim, depth, heads, h, l, ratio, line_chars), "blocks": depth, "calls": calls,
                         "fp32": fp32.stat().st_size, "int8": (tmp / "q.onnx").stat().st_size, "pred": pred})
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "pred"}), flush=True)
    from pixelpipe.plan import sizes as plan

    design = np.array([[1, r["blocks"], r["calls"]] for r in rows], dtype=float)
    fit = {}
    for kind in ("fp32", "int8"):
        graph_now = np.array([r["pred"][kind] for r in rows]) - np.array(
            [plan.ONNX_GRAPH[kind][0] + plan.ONNX_GRAPH[kind][1] * r["blocks"] + plan.ONNX_GRAPH[kind][2] * r["calls"]
             for r in rows])  # what onnx_bytes counts besides the graph term
        graph = np.array([r[kind] for r in rows]) - graph_now
        coef, *_ = np.linalg.lstsq(design, graph, rcond=None)
        fit[kind] = tuple(int(round(c)) for c in coef)
        resid = (design @ coef + graph_now - np.array([r[kind] for r in rows])) / np.array([r[kind] for r in rows])
        print(kind, "fit (fixed, per block, per call):", fit[kind], "residuals %:", np.round(100 * resid, 2).tolist())
    print("ONNX_GRAPH =", json.dumps(fit))


if __name__ == "__main__":
    main()
