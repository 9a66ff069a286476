"""Fit the planner's ONNX graph-size constants (pixelpipe.plan.sizes.ONNX_GRAPH) on real exports.

Exports folded students of several shapes (both deploy forms: `ngram` for core none, `stem` for a recursive
core) with random, all-distinct weights through the same functions the rules use (export.export_student,
quantize.quantize_file with static QDQ, activation ranges read on 64 rows of a cache split written here), subtracts what
plan.onnx_bytes counts exactly (float data with the glyph table, int8 weights and their scales, metadata read
back from the file), and least-squares fits the rest, the graph bytes: fixed + per table span (ngram) or
fixed + per block + per block call (stem). Prints the fit and each shape's residual; paste the fit into
ONNX_GRAPH in pixelpipe/plan/sizes.py.

    python bench/onnx_size_fit.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch

from pixelpipe.core import io
from pixelpipe.data.atlas import GlyphAtlas
from pixelpipe.data.render import RenderSettings, SplitStats, shard_dtype, split_manifest
from pixelpipe.deploy.export import export_student
from pixelpipe.deploy.quantize import QuantizeSettings, quantize_file
from pixelpipe.model.encoder import DEPLOY_FORMS, TRMVisionEncoder
from pixelpipe.plan import sizes as plan
from pixelpipe.train.run import encoder_config

RENDER = {"fonts": ["DejaVuSans", "DejaVuSerif", "DejaVuSansMono"], "font_size": 12, "channels": 1,
          "cell_height": 16, "cell_width": 8, "lines": 1}
# (core, stem, dim, depth, heads, H, L, mixer_kernel, mixer_ratio, line_chars, glyphs)
SHAPES = [
    ("none", "pair", 32, 1, 2, 1, 1, 3, 2.0, 32, 200), ("none", "pair", 32, 1, 4, 1, 1, 3, 8.0, 96, 700),
    ("none", "pair", 16, 1, 2, 1, 1, 5, 4.0, 64, 400), ("none", "cell", 24, 1, 2, 1, 1, 3, 4.0, 48, 300),
    ("none", "pair", 48, 1, 4, 1, 1, 7, 2.0, 96, 150), ("none", "cell", 32, 1, 4, 1, 1, 5, 2.0, 96, 500),
    ("recursive", "pair", 16, 1, 2, 1, 1, 3, 2.0, 32, 200), ("recursive", "pair", 32, 1, 2, 1, 1, 3, 2.0, 32, 300),
    ("recursive", "pair", 48, 1, 4, 1, 1, 3, 4.0, 96, 400), ("recursive", "pair", 64, 1, 4, 1, 2, 3, 4.0, 96, 700),
    ("recursive", "pair", 32, 2, 2, 2, 2, 3, 2.0, 48, 250), ("recursive", "cell", 24, 2, 2, 1, 3, 3, 4.0, 64, 350),
    ("recursive", "pair", 48, 1, 4, 2, 1, 3, 1.0, 96, 500),
]
QUANT = QuantizeSettings(method="static", range_samples=64, range_method="minmax", per_channel=True, table_rows="int4",
                         glyph_table="int8",
                         activation_type="uint8", weight_type="int8", op_types=["Conv", "MatMul", "Gemm"],
                         activation_matmuls=False, reduce_range=False, max_accuracy_drop=100.0)


def charset(n: int) -> list[str]:
    """The space and n - 1 letters the fonts draw (Latin, Greek, Cyrillic, ...)."""
    from pixelpipe.data.atlas import undrawable

    letters = (chr(c) for c in range(0x41, 0x2000) if chr(c).isalpha() and not undrawable(chr(c), RENDER["fonts"]))
    return [" "] + [c for _, c in zip(range(n - 1), letters)]


def range_split(tmp: Path, render: dict, glyphs: int) -> Path:
    """A one-shard cache split of 64 random rows with its manifest (what the range reader verifies)."""
    settings = RenderSettings.from_section(render)
    rng = np.random.default_rng(0)
    dtype = shard_dtype(settings.cells, glyphs)
    rows = np.zeros(64, dtype)
    rows["length"] = rng.integers(1, settings.cells + 1, 64)
    inside = np.arange(settings.cells) < rows["length"][:, None]
    rows["glyphs"] = rng.integers(1, glyphs, (64, settings.cells)) * inside
    split = tmp / "train"
    split.mkdir(exist_ok=True)
    io.save_npy(split / "shard-00000.npy", rows)
    stats = SplitStats(glyphs)
    stats.rows = 64
    manifest = split_manifest(settings, 64, ["shard-00000.npy"], [io.sha256_file(split / "shard-00000.npy")], stats,
                              {}, dtype, 1.0)
    io.write_json(split / "manifest.json", manifest)
    return split / "shard-00000.npy"


def export_one(shape: tuple, tmp: Path) -> dict:
    core, stem, dim, depth, heads, h, l, kernel, ratio, line_chars, glyphs = shape
    render = {**RENDER, "line_chars": line_chars}
    model_cfg = {"core": core, "stem": stem, "mixer_kernel": kernel, "mixer_ratio": ratio, "positions": False,
                 "dim": dim, "depth": depth, "heads": heads, "mlp_ratio": 2.0, "H_cycles": h, "L_cycles": l,
                 "num_capsules": 4, "activation": "relu", "ngram_orders": 3, "ngram_bits": 10, "ngram_dim": 16,
                 "ngram_dropout": 0.0}  # n-gram tables as the defaults have them (small: the graph term is the fit)
    enc = encoder_config(model_cfg, render, 19)
    atlas = GlyphAtlas.from_clusters(charset(glyphs), RENDER["fonts"], 12, 16, 8)
    model = TRMVisionEncoder(enc, torch.from_numpy(atlas.cells.copy())).eval()
    with torch.no_grad():
        for p in model.parameters():  # all-distinct weights: nothing the exporter could share
            p.copy_(torch.randn_like(p) * 0.05)
    config = {"encoder": enc.to_dict(), "labels": [f"l{i}" for i in range(19)],
              "render": RenderSettings.from_section(render).to_dict(), "atlas": atlas.to_dict()}
    fp32 = export_student(model, config, tmp / "m.onnx", log=lambda m: None)
    quantize_file(fp32, tmp / "q.onnx", QUANT, [range_split(tmp, render, glyphs)], log=lambda m: None)
    meta = {p.key: p.value for p in onnx.load(str(fp32)).metadata_props}
    pred = plan.onnx_bytes(enc, meta, glyphs, QUANT.table_rows, QUANT.glyph_table)
    return {"shape": shape, "enc": enc, "fp32": fp32.stat().st_size, "int8": (tmp / "q.onnx").stat().st_size,
            "pred": pred}


def fit(rows: list[dict], form: str) -> dict:
    """Least squares of the graph bytes on the form's design; prints residuals in % of the file."""
    def design(enc) -> list[float]:
        if form == "ngram":
            return [1, plan.fold_width(enc) // enc.mixer_hidden]
        return [1, enc.depth, enc.depth * enc.H_cycles * (enc.L_cycles + 1)]

    x = np.array([design(r["enc"]) for r in rows], float)
    out = {}
    for kind in ("fp32", "int8"):
        real = np.array([r[kind] for r in rows], float)
        exact = np.array([r["pred"][kind] - plan.onnx_graph_bytes(r["enc"], kind) for r in rows], float)
        coef, *_ = np.linalg.lstsq(x, real - exact, rcond=None)
        out[kind] = tuple(int(round(c)) for c in coef)
        resid = (x @ coef + exact - real) / real
        print(form, kind, "fit:", out[kind], "residuals %:", np.round(100 * resid, 2).tolist())
    return out


def main() -> None:
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in SHAPES:
            rows.append(export_one(shape, Path(tmp)))
            print(json.dumps({k: rows[-1][k] for k in ("shape", "fp32", "int8")}), flush=True)
    result = {form: fit([r for r in rows if r["enc"].deploy_form == form], form) for form in DEPLOY_FORMS}
    print("ONNX_GRAPH =", json.dumps(result))


if __name__ == "__main__":
    main()
