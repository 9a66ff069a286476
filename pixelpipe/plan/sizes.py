"""Bytes of every artifact the workflow writes, from the writers' own formats and structures.

Exact arithmetic for npy/npz/safetensors (headers included) and the ONNX float data; JSON side files are
sized by writing a stand-in with the real structure; parquet (before the corpus exists) and the ONNX graph
bytes are fitted estimates.
"""

from __future__ import annotations

import io
import json
import math
import os
from typing import Any

import numpy as np

from ..model.encoder import EncoderConfig
from .shapes import model_tensors, param_shapes

# Parquet of the built-in corpus, for the disk preflight's estimate only (the plan proper writes the exact
# tables to memory): bytes per character (UTF-8 of 19 scripts, snappy), per row, per file. Least-squares
# fit over the six parquet files of the tiny and default configs (residuals < 2 %).
PARQUET_BYTES_PER_CHAR = 1.020
PARQUET_ROW_BYTES = 20.8
PARQUET_FILE_BYTES = 1635
# results/baseline/metrics.json: fixed keys and a dozen floats (an estimate; the file is ~200 bytes)
BASELINE_METRICS_BYTES = 200


# ---- exact file sizes ------------------------------------------------------------------------
def npy_header_bytes(shape: tuple[int, ...], dtype: Any) -> int:
    """Header bytes np.save writes for an array of `shape` and `dtype` (format 1.0, 64-byte aligned)."""
    buf = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.tell()


def npy_bytes(shape: tuple[int, ...], dtype: Any) -> int:
    return npy_header_bytes(shape, dtype) + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def npz_bytes(fields: dict[str, tuple[tuple[int, ...], Any]]) -> int:
    """Size of an uncompressed np.savez of arrays with these shapes/dtypes.

    The zip framing does not depend on the data, so it is measured once on
    zero-row arrays written to memory, then the real npy headers and data are added.
    """
    empty = {k: np.empty((0, *shape[1:]), dtype) for k, (shape, dtype) in fields.items()}
    buf = io.BytesIO()
    np.savez(buf, **empty)
    framing = buf.tell() - sum(npy_header_bytes(a.shape, a.dtype) for a in empty.values())
    return framing + sum(npy_bytes(shape, dtype) for shape, dtype in fields.values())


_ST_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "uint8": "U8", "int64": "I64", "bool": "BOOL"}


def safetensors_bytes(tensors: dict[str, tuple[tuple[int, ...], str, int]]) -> int:
    """Size of a safetensors file: 8-byte length, JSON header padded to 8, raw data.

    `tensors` maps name -> (shape, dtype name, itemsize).
    """
    header, offset = {}, 0
    for name in sorted(tensors):
        shape, dtype, itemsize = tensors[name]
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
        header[name] = {"dtype": _ST_DTYPES.get(dtype, dtype.upper()), "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    n = len(json.dumps(header, separators=(",", ":")))
    return 8 + n + (-n % 8) + offset


# ---- ONNX file sizes ----------------------------------------------------------------------------
# The exported graph computes logits and sketches only, so children_proj and checksum_planes are
# dropped, and the exporter folds capsules.q(queries) into one [K, D] constant. The recursion's
# shared weights are stored once (export.dedupe_initializers) and node stack traces are stripped.
ONNX_DEAD = ("children_proj.", "checksum_planes", "capsules.q.")
ONNX_SCALARS = 4  # float scalars the exporter adds (softmax scale, GELU constants), counted in the files
# Graph bytes besides the float data and metadata: nodes, value_info, int64 shape constants, initializer
# headers, Q/DQ nodes and activation scales. Least-squares fit of (fixed, per block, per block call) over
# exports and static QDQ quantizations (64 calibration images) of 7 glyph-stem encoder shapes with random,
# all-distinct weights (dim 16-64, depth 1-2, 2-12 block calls, mixer ratio 1-4; torch 2.13, onnxruntime
# 1.32): residuals within 0.2 % of the file, fp32 and int8. Rerun: python bench/onnx_size_fit.py
ONNX_GRAPH = {"fp32": (21_433, 2_704, 4_288), "int8": (20_547, 256, 7_949)}


def _pb_bytes(n: int) -> int:
    """Bytes of a length-delimited protobuf field holding `n` bytes (tag + varint length + payload)."""
    return 1 + max(1, math.ceil(n.bit_length() / 7)) + n


def onnx_bytes(enc: EncoderConfig, metadata: dict[str, str]) -> dict[str, int]:
    """Predicted sizes of the exported fp32 ONNX file and of its per-channel static QDQ int8 form.

    fp32: 4 bytes per live float + metadata + graph. int8 (onnxruntime quantize_static, per channel):
    each Conv/MatMul/Gemm weight as int8 plus an fp32 scale and an int8 zero point per output channel;
    the Conv and Gemm biases become int32 with a scale and an int32 zero point per channel; everything
    else stays fp32; the Q/DQ nodes and their activation scales are in the graph term.
    """
    from ..deploy.onnxmodel import INPUT_DOC

    live = {k: s for k, (s, *_) in model_tensors(enc).items() if not k.startswith(ONNX_DEAD)}
    floats = sum(int(np.prod(s)) for s in live.values()) + enc.num_capsules * enc.dim + ONNX_SCALARS
    weights = [s for k, s in live.items() if k.endswith(".weight") and len(s) >= 2]
    w = sum(int(np.prod(s)) for s in weights)
    channels = sum(s[0] for s in weights)
    int32_bias = enc.dim + enc.mixer_hidden + enc.num_classes  # the stem and mixer convolutions and the head (Gemm)
    meta = sum(_pb_bytes(_pb_bytes(len(k.encode())) + _pb_bytes(len(v.encode()))) for k, v in metadata.items())
    meta += _pb_bytes(len(("pixelpipe student; input " + INPUT_DOC).encode()))
    calls = enc.depth * enc.H_cycles * (enc.L_cycles + 1)

    def graph(kind: str) -> int:
        fixed, per_block, per_call = ONNX_GRAPH[kind]
        return int(fixed + per_block * enc.depth + per_call * calls)

    return {"fp32": 4 * floats + meta + graph("fp32"),
            "int8": w + 5 * channels + 4 * (floats - w) + 8 * int32_bias + meta + graph("int8"),
            "floats": floats, "int8_weights": w, "metadata": meta}


# ---- the workflow's JSON, CSV and checkpoint files ---------------------------------------------
def json_len(obj: Any) -> int:
    """Bytes of `obj` as write_json writes it (indent 2, trailing newline)."""
    return len(json.dumps(obj, indent=2) + "\n")


def render_manifest_bytes(cfg: dict, labels: list[int], ids: list[str], n_shards: int, full: np.ndarray,
                          atlas: dict[str, Any]) -> int:
    """A split's cache manifest, as render.split_manifest builds it (checksums and throughput stand-ins)."""
    from ..data.render import RenderSettings, split_manifest

    files = [f"shard-{s:05d}.npy" for s in range(n_shards)]
    manifest = split_manifest(RenderSettings.from_section(cfg["render"]), cfg["render"]["shard_size"], files,
                              ["0" * 64] * n_shards, labels, ids, full, atlas, images_per_s=12345.6)
    return json_len(manifest)


def _model_config(cfg: dict, role: str, enc: EncoderConfig, labels: int, atlas: dict[str, Any]) -> dict[str, Any]:
    """A stand-in for results/{role}/config.json with the real structure (labels and floats of typical length)."""
    from ..data.render import RenderSettings

    extra = {"teacher": {"test_accuracy": 0.123456789, "sha256": "0" * 64}} if role == "student" else {}
    resolved = {"engine": {k: v for k, v in cfg["engine"].items()}, "train": dict(cfg[role]["train"]),
                "micro_batch": 64, "grad_accum_steps": 1, "oom_fallbacks": 0, "steps_per_epoch": 100,
                "total_steps": 100}
    metrics = {k: 0.123456789012345 for k in ("test_accuracy", "test_loss", "final_val_accuracy", "train_wall_s")}
    return {"encoder": enc.to_dict(), "labels": ["xx"] * labels,
            "render": RenderSettings.from_section(cfg["render"]).to_dict(), "atlas": atlas,
            "text_length": {"min_chars": 15, "max_chars": 90}, **extra,
            "role": role, "device": "cpu", "hardware_profile": "cpu", "resolved": resolved,
            "metrics": {**metrics, "train_samples": 10000, "parameters": 100000}, "weights_sha256": "0" * 64}


def model_config_bytes(cfg: dict, role: str, enc: EncoderConfig, labels: int, atlas: dict[str, Any]) -> int:
    """results/{role}/config.json."""
    return json_len(_model_config(cfg, role, enc, labels, atlas))


def onnx_metadata(cfg: dict, enc: EncoderConfig, labels: int, atlas: dict[str, Any]) -> dict[str, str]:
    """The metadata entries the exporter stores in the student's ONNX file."""
    from ..deploy.onnxmodel import metadata_entries

    return metadata_entries(_model_config(cfg, "student", enc, labels, atlas))


# Op types onnxruntime's profiler reports for the optimized fp32 / int8 student (fused kernels included),
# counted in the tiny config's deploy.json; they only size the report's op_profile tables.
DEPLOY_PROFILED_OPS = (21, 23)


def deploy_report_bytes(cfg: dict, enc: EncoderConfig, fp32: int, int8: int, n_test: int) -> dict[str, int]:
    """deploy.json and deploy.md of a stand-in report with the real structure and numbers of typical length."""
    import torch

    from ..deploy.benchmark import FORMS, cpu_info, goal_check, render_markdown

    dcfg = cfg["deploy_benchmark"]
    x = 1.2345678901234567  # 17 significant digits, like most measured floats
    bs = list(dcfg["batch_sizes"])
    stats = {"median_ms": x, "p25_ms": x, "p75_ms": x, "min_ms": x, "max_ms": x, "repeats": dcfg["repeats"],
             "throughput_per_s": 1234.5678901234567}
    prof = {"kernel_ms_per_run": x}
    report = {"cpu": cpu_info(), "threads": dcfg["threads"] or os.cpu_count(), "load_average_before": [1.2345, 1.2345, 1.2345],
              "load_average_after": [1.2345, 1.2345, 1.2345], "versions": {"torch": torch.__version__, "onnxruntime": "1.32.0"},
              "encoder": enc.to_dict(), "batch_sizes": bs, "warmup": dcfg["warmup"], "repeats": dcfg["repeats"],
              "latency": {f: {str(b): stats for b in bs} for f in FORMS},
              "speedup": {str(b): {k: x for k in ("int8_vs_onnx_fp32", "int8_vs_torch_fp32", "onnx_fp32_vs_torch_fp32")}
                          for b in bs},
              "op_profile": {"batch": max(bs), **{f: {**prof, "share": {f"Op{i:02d}xxxx": x / 10 for i in range(n)}}
                                                   for f, n in zip(("onnx_fp32", "onnx_int8"), DEPLOY_PROFILED_OPS)}},
              "size_bytes": {"torch_fp32": safetensors_bytes(model_tensors(enc)), "onnx_fp32": fp32, "onnx_int8": int8},
              "accuracy": {f: {"accuracy": x / 10, "samples": n_test} for f in FORMS},
              "accuracy_drop_points_int8_vs_onnx_fp32": 0.0}
    report["goal"] = goal_check(report)
    return {"deploy.json (estimate)": json_len(report), "deploy.md (estimate)": len(render_markdown(report).encode())}


def metrics_csv_bytes(epochs: float) -> int:
    """A training job's metrics.csv: header and rows of typical length, two rows per epoch and one more (estimate)."""
    rows = math.ceil(epochs) * 2 + 1
    return 46 + rows * 75


def checkpoint_bytes(enc: EncoderConfig, extra_tensors: dict[str, tuple], epochs: float) -> int:
    """One training checkpoint: model, objective and AdamW state plus the RNG state (safetensors) and its JSON."""
    import torch

    tensors = {f"model.{k}": v for k, v in model_tensors(enc).items()}
    tensors.update({f"objective.{k}": v for k, v in extra_tensors.items()})
    shapes = param_shapes(enc, trained_only=True) + [v[0] for v in extra_tensors.values()]
    for i, s in enumerate(shapes):
        tensors[f"optimizer.{i}.exp_avg"] = (s, "float32", 4)
        tensors[f"optimizer.{i}.exp_avg_sq"] = (s, "float32", 4)
        tensors[f"optimizer.{i}.step"] = ((), "float32", 4)
    tensors["rng.torch"] = ((torch.get_rng_state().numel(),), "uint8", 1)
    # step-N.json (indent 2): fixed keys, one line per param index, one history row per epoch;
    # fitted on the tiny config's teacher and student checkpoints
    json_part = 1230 + 14 * (len(param_shapes(enc)) + len(extra_tensors)) + 240 * math.ceil(epochs)
    return safetensors_bytes(tensors) + json_part


run_fingerprint_placeholder = "0" * 16  # train.run.run_fingerprint: 16 hex digits
