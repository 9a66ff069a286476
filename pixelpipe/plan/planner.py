"""The resource planner: what every stage will need, from the config and corpus size alone.

Before anything runs, it predicts per stage the peak host RAM, the bytes
written to disk, the peak GPU memory of training (when the device is CUDA)
and the wall time where a throughput figure is known. StageMeter stores the
prediction beside the measurement, the report compares them, the disk
preflight in rules/common.smk refuses a run whose disk peak does not fit, and
the batch-size finder can ask `predict_train_memory` before trying a batch.

Disk is exact arithmetic (npy/npz/safetensors headers included); JSON/CSV
side files and parquet are estimates. Host RAM is a calibrated fixed term per
process type plus analytic terms; see HOST_* below for how each was measured.
`python -m pixelpipe.plan --config config.yaml` prints the plan as a table.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import math
import os
import shutil
import sys
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.fmt import fmt_bytes
from ..data.corpus import shard_count
from ..data.fonts import load_face
from ..model.encoder import EncoderConfig, flops_per_sample

SPLITS = ("train", "val", "test")

MB = 1 << 20

# ---- calibration constants (host RAM, bytes) -------------------------------------------------
# Measured on the 2-core CPU dev machine (torch 2.13 CPU, Python 3.11) as `baseline_host_bytes`
# (anonymous RSS when StageMeter starts, after the stage script's imports) in results/metrics/*.json
# of the tiny config. Anonymous memory, not RSS: file-backed library pages vary with the page cache
# (see measure.anon_rss). Stages that do not need torch no longer import it (StageMeter imports it lazily).
HOST_BASELINE = {
    "corpus": 58_800_000,  # pandas + pyarrow
    "render": 72_100_000,  # pandas + pyarrow + numpy + PIL + matplotlib's font paths + fontTools
    "torch": 168_400_000,  # train_teacher / encode / train_student: torch + numpy + safetensors + the model code
    "consolidate": 21_900_000,  # numpy
    # export_onnx / deploy_benchmark: torch + numpy + the model code (onnx, onnxscript, onnxruntime load lazily)
    "deploy": 153_000_000,
    "quantize": 22_200_000,  # numpy; onnx and onnxruntime load lazily (counted in the runtime term)
    "baseline": 197_400_000,  # torch + pandas + pyarrow
}
# What a stage adds over its baseline beyond the analytic terms below, measured as
# peak_host - baseline - analytic terms on the tiny config (where the analytic terms are ~0), per-row
# and per-sample terms fitted between the tiny and the default config; anonymous memory only:
HOST_RUNTIME = {
    "corpus": 43_600_000,  # Faker and its 19 locale providers, pyarrow write buffers
    "corpus_row": 2_500,  # per corpus row (DataFrame, texts, bad-row checks): (default - tiny) / (17100 - 380) rows
    "render": 10_500_000,  # fonts, the atlas, PIL
    "render_text": 80,  # Python str overhead per text (object header, hash, length)
    # vectorized code point lookup (uint32 code points, int32 cells, int64 rows/positions) and the gather's
    # index arrays: fitted between two default runs, whose render/train peaks differed by 68 MiB (218 and
    # 286 MiB for the same work: glibc arenas and garbage-collection timing)
    "render_per_char": 55,
    "loader_worker": 22_000_000,  # USS of one forked DataLoader worker (pages it copies-on-write)
    "baseline": 80_000_000,  # autograd, the sparse gradient and its coalescing buffers, the optimizers
    "train": 78_000_000,  # autograd engine, intra-op thread pool, oneDNN kernels, optimizer on first step
    "encode": 4_000_000,  # inference-mode kernels, the read-ahead thread
    "consolidate": 0,
    # deploy stages: one tiny run
    # onnx + onnxscript + torch.export/dynamo tracing + one onnxruntime session (the parity check)
    "export_onnx": 168_600_000,
    # onnx + onnxruntime + its quantization tooling (pre-processing, calibration and two accuracy sessions)
    "quantize_onnx": 194_000_000,
    # onnxruntime, three forms' sessions and their profiled copies, thread pools
    "deploy_benchmark": 45_600_000,
}
# Copies of the fp32 ONNX model a stage holds at its peak besides the analytic terms (export: the exported
# program, the ModelProto, its serialized bytes, the session; quantize: the fp32, pre-processed and
# calibration-augmented protos and sessions). Fitted on ONE larger student (dim 256, depth 2, 1.9 M
# parameters, 6.5 MB ONNX) as (its peak - the tiny peak - the other terms' growth) / the ONNX growth: an
# estimate for large students, not checked beyond that one shape.
ONNX_MODEL_COPIES = {"export_onnx": 2.45, "quantize_onnx": 4.25}
# On CPU, RSS grows by more than the saved activations: forward temporaries, gradient buffers in backward
# and blocks glibc keeps in its arenas. Measured RSS growth per sample of a training step of the default
# teacher (batch 32/64/128, 2 threads) over the predicted activations + workspace: 1.42/1.42/1.31.
CPU_TRAIN_TRANSIENT = 1.38
# Inference holds no saved tensors, only the live temporaries of one block (the local mixer's 4 x D hidden
# layer included) and what glibc keeps of them: fitted on the default run's four encode jobs (pair stem,
# D=64, 96 tokens) as 2.3x one core call's activation bytes (residuals -8 % to +12 %).
CPU_INFER_FACTOR = 2.3
# onnxruntime's arena keeps the peak of every session's activations; per deploy stage, the arenas' bytes as
# multiples of one torch forward at the same batch, fitted on the default run (export: the parity session;
# quantize: calibration and two accuracy sessions; deploy benchmark: fp32 and int8 sessions, their
# profiled copies and the batch-size sweep). In-sample fits of one run each.
ORT_ARENA_FACTOR = {"export_onnx": 2.07, "quantize_onnx": 1.51, "deploy_benchmark": 4.25}
# The n-gram baseline's ids: int64 ids, the per-text Python lists they are hashed from and the copy into a
# tensor, fitted between two default runs (peaks 396 and 458 MiB) as bytes per n-gram (8: the ids alone).
BASELINE_BYTES_PER_NGRAM = 30
# CUDA caching allocator: reserved / allocated at the peak (block rounding, fragmentation).
CUDA_RESERVED_OVERHEAD = 1.10
# Parquet of the built-in corpus, for the disk preflight's estimate only (the plan proper writes the exact
# tables to memory): bytes per character (UTF-8 of 19 scripts, snappy), per row, per file. Least-squares
# fit over the six parquet files of the tiny and default configs (residuals < 2 %).
PARQUET_BYTES_PER_CHAR = 1.020
PARQUET_ROW_BYTES = 20.8
PARQUET_FILE_BYTES = 1635
# results/baseline/metrics.json: fixed keys and a dozen floats (an estimate; the file is ~200 bytes)
BASELINE_METRICS_BYTES = 200
# Seconds a torch stage spends before and after its work (imports, model load, saving).
STAGE_STARTUP_S = 3.0


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


def _meta_model(cfg: EncoderConfig):
    """TRMVisionEncoder(cfg) on the meta device (no memory), built once per shape: the model code is
    the one source of its parameter shapes."""
    return _meta_model_cached(tuple(sorted(cfg.to_dict().items())))


@functools.lru_cache(maxsize=16)
def _meta_model_cached(items: tuple):
    import torch

    from ..model.encoder import TRMVisionEncoder

    with torch.device("meta"):
        return TRMVisionEncoder(EncoderConfig(**dict(items)))


def model_tensors(cfg: EncoderConfig) -> dict[str, tuple[tuple[int, ...], str, int]]:
    """state_dict names and shapes of TRMVisionEncoder(cfg)."""
    return {k: (tuple(v.shape), str(v.dtype).removeprefix("torch."), v.element_size())
            for k, v in _meta_model(cfg).state_dict().items()}


# Parameters no loss reaches: the teacher trains on logits, the student on logits and sketches, so
# children_proj gets no gradient, and AdamW creates no state for it (measured in the checkpoints).
UNTRAINED_PARAMS = ("children_proj.",)


def param_shapes(cfg: EncoderConfig, trained_only: bool = False) -> list[tuple[int, ...]]:
    """Trainable parameter shapes in the order the engine's param_groups lists them."""
    from ..train.engine import param_groups

    model = _meta_model(cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    return [tuple(p.shape) for g in param_groups([model], 0.0) for p in g["params"]
            if not (trained_only and names[id(p)].startswith(UNTRAINED_PARAMS))]


# ---- memory of one training step ---------------------------------------------------------------
def activation_bytes_per_sample(cfg: EncoderConfig, act_bytes: int = 4, activation_checkpointing: bool = False,
                                grad_free_cycles: bool = False) -> dict[str, int]:
    """Bytes autograd saves for backward per sample, by model part.

    Counted tensor by tensor from model/encoder.py: the residual stream and LayerNorm inputs stay fp32 under
    autocast (4 bytes); matmul inputs/outputs take `act_bytes` (2 under bf16/fp16 autocast, 4 in fp32).
    Per block: norm1 input x, its normalised output, qkv (3D, kept by attention), attention output,
    its contiguous copy for proj, norm2 input, its output, MLP hidden pre/post GELU; plus the stack's
    final norm input and per-row LayerNorm/softmax statistics.
    """
    n, d, k = cfg.num_tokens, cfg.dim, cfg.num_capsules
    hidden = int(d * cfg.mlp_ratio)
    a = act_bytes
    stats = 2 * 4 * n + 4 * cfg.heads * n  # LayerNorm mean/rstd + attention logsumexp
    block = n * (2 * d * 4 + 7 * d * a + 2 * hidden * a) + 2 * stats
    core_call = cfg.depth * block + n * d * 4 + 2 * 4 * n
    calls = cfg.H_cycles * (cfg.L_cycles + 1)
    grad_calls = (cfg.L_cycles + 1) if grad_free_cycles else calls
    if activation_checkpointing:
        # only each core call's input is kept; one call's activations live again during recomputation
        recursion = grad_calls * n * d * 4 + core_call
    else:
        recursion = grad_calls * core_call
    pixels = cfg.channels * cfg.image_height * (cfg.image_width + cfg.stem_kernel[1] - cfg.cell_width)
    embed = pixels * 4 + (pixels * a if a != 4 else 0)  # the (padded) image the stem convolution keeps
    m = cfg.mixer_hidden
    if m:  # local mixing: LayerNorm input and output, the convolution's output (GELU input) and the GELU output
        embed += n * d * 4 + n * d * a + 2 * n * m * a + 2 * 4 * n
    capsules = n * d * 4 + n * d * a + n * 2 * d * a + k * d * 4 * 8 + k * 2 * d * a * 2
    head = 2 * cfg.head_features * 4 + cfg.head_features * a
    return {"embed": embed, "recursion": recursion, "capsules": capsules, "head": head}


def predict_train_memory(encoder_cfg: EncoderConfig, micro_batch: int, precision: str = "fp32",
                         activation_checkpointing: bool = False, grad_free_cycles: bool = False,
                         extra_params: int = 0, device: str = "cuda") -> dict[str, Any]:
    """Peak memory of one training step of `encoder_cfg` at `micro_batch`, by component (bytes).

    The batch-size finder can solve `total = budget` for the batch: everything but
    `activations` is fixed, and activations are `per_sample_activation_bytes * micro_batch`.
    """
    params = sum(int(np.prod(s)) for s in param_shapes(encoder_cfg)) + extra_params
    trained = sum(int(np.prod(s)) for s in param_shapes(encoder_cfg, trained_only=True)) + extra_params
    a = 2 if precision in ("bf16", "fp16") and device == "cuda" else 4
    acts = activation_bytes_per_sample(encoder_cfg, a, activation_checkpointing, grad_free_cycles)
    per_sample = sum(acts.values())
    n, d = encoder_cfg.num_tokens, encoder_cfg.dim
    hidden = int(d * encoder_cfg.mlp_ratio)
    out = {
        "weights": 4 * params,
        "gradients": 4 * trained,
        "optimizer_state": 8 * trained,  # AdamW exp_avg + exp_avg_sq, fp32 (none for params no loss reaches)
        "amp_weight_copies": 2 * params if a == 2 else 0,  # autocast's per-forward low-precision weight cache
        "activations": {k: v * micro_batch for k, v in acts.items()},
        # backward holds the incoming and outgoing gradient of the widest tensor besides the saved ones
        "backward_workspace": 2 * n * max(3 * d, hidden) * 4 * micro_batch,
        "input_buffers": micro_batch * encoder_cfg.channels * encoder_cfg.image_height * encoder_cfg.image_width * 5,
    }
    out["per_sample_activation_bytes"] = per_sample
    total = (out["weights"] + out["gradients"] + out["optimizer_state"] + out["amp_weight_copies"]
             + sum(out["activations"].values()) + out["backward_workspace"] + out["input_buffers"])
    if device == "cuda":
        overhead = int(total * (CUDA_RESERVED_OVERHEAD - 1))
    else:
        overhead = int((sum(out["activations"].values()) + out["backward_workspace"]) * (CPU_TRAIN_TRANSIENT - 1))
    out["allocated_peak"] = total
    out["allocator_overhead"] = overhead
    out["reserved_peak"] = total + overhead
    out["parameters"] = params
    out["trained_parameters"] = trained
    return out


def predict_inference_memory(encoder_cfg: EncoderConfig, batch: int, precision: str = "fp32",
                             device: str = "cuda") -> int:
    """Peak bytes of one inference forward: weights plus the live temporaries of about one core call."""
    params = sum(int(np.prod(s)) for s in param_shapes(encoder_cfg))
    a = 2 if precision in ("bf16", "fp16") and device == "cuda" else 4
    one_call = activation_bytes_per_sample(EncoderConfig(**{**encoder_cfg.to_dict(), "H_cycles": 1, "L_cycles": 0}), a)
    live = batch * CPU_INFER_FACTOR * one_call["recursion"]
    return int(4 * params + live)


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


# ---- the plan ---------------------------------------------------------------------------------
@dataclass
class StagePlan:
    rule: str
    name: str
    peak_host_bytes: int
    disk_written_bytes: int
    wall_s: float | None = None
    peak_gpu_allocated_bytes: int | None = None
    peak_gpu_reserved_bytes: int | None = None
    checkpoint_bytes: int | None = None
    samples: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.rule}/{self.name}"

    def prediction(self) -> dict[str, Any]:
        """The `predicted` block StageMeter stores beside the measurement."""
        d = {k: v for k, v in asdict(self).items() if v is not None and k not in ("rule", "name")}
        d["source"] = "pixelpipe.plan (analytic, before the stage ran)"
        return d


def encoder_for(cfg: dict, role: str, num_classes: int) -> EncoderConfig:
    from ..train.run import encoder_config

    return encoder_config(cfg[role]["model"], cfg["render"], num_classes)


def _json_len(obj: Any) -> int:
    return len(json.dumps(obj, indent=2) + "\n")


@dataclass
class CorpusFacts:
    """What the corpus rule will write, computed the same way: rows per split after bad rows, class ids,
    and per split the texts, labels and ids the renderer lays out (so cache manifests and the atlas
    are sized exactly, not estimated)."""

    splits: dict[str, tuple[list[str], list[int], list[str]]]
    num_classes: int
    corpus_bytes: dict[str, int]  # what the corpus rule writes: parquet per split and labels.json

    @property
    def sizes(self) -> dict[str, int]:
        return {split: len(texts) for split, (texts, _, _) in self.splits.items()}


def corpus_facts(cfg: dict) -> CorpusFacts:
    """Generate the built-in corpus or read the user's (deterministic, ~2 s for the default) and drop bad rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..core.io import json_text
    from ..data.corpus import bad_row_counts, class_ids, corpus_rows, find_bad_rows, labels_info, split_table

    df, locales, _ = corpus_rows(cfg["corpus"], cfg["seed"])
    bad = find_bad_rows(df, cfg["render"]["fonts"])
    df = df.drop(index=bad.index)
    ids = class_ids(df["label"])
    splits, disk = {}, {}
    for split in SPLITS:
        part = df[df["split"] == split]
        splits[split] = (part["text"].tolist(), [ids[l] for l in part["label"]], part["id"].tolist())
        sink = pa.BufferOutputStream()
        pq.write_table(split_table(part, ids), sink)  # the exact bytes, written to memory
        disk[f"{split}.parquet"] = sink.getvalue().size
    info = labels_info(ids, locales, bad_row_counts(bad), {s: len(t) for s, (t, _, _) in splits.items()})
    disk["labels.json"] = len(json_text(info).encode())
    return CorpusFacts(splits, max(1, len(ids)), disk)


# Distinct characters of the built-in corpus (measured: 485 at the default 17,100 rows, 363 at 380); the
# disk preflight, which answers before the corpus exists, assumes this many for any corpus.
ESTIMATED_GLYPHS = 485


def estimated_corpus_facts(cfg: dict) -> CorpusFacts:
    """Corpus facts without generating or reading the corpus, for the disk preflight: the planned split
    sizes, texts of the built-in corpus's longest length, ESTIMATED_GLYPHS distinct characters."""
    from ..data.corpus import planned_split_sizes

    fonts = cfg["render"]["fonts"]
    drawable = sorted(set().union(*(load_face(f).codepoints for f in fonts)))
    glyphs = "".join(chr(c) for c in drawable if chr(c).isprintable() and not chr(c).isspace()
                     and unicodedata.category(chr(c))[0] in "LNP")[:ESTIMATED_GLYPHS]
    length = cfg["corpus"]["max_chars"]
    splits = {}
    for split, n in planned_split_sizes(cfg["corpus"]).items():
        texts = [(glyphs * (1 + length // len(glyphs)))[:length]] * n
        if split == "train" and n:
            texts[0] = glyphs  # every glyph once: the atlas gets them all
        splits[split] = (texts, [0] * n, [f"row-{i:06d}" for i in range(n)])
    classes = 19 if cfg["corpus"]["path"] is None else 100
    disk = {f"{split}.parquet": int(PARQUET_FILE_BYTES + len(texts) * (length * PARQUET_BYTES_PER_CHAR + PARQUET_ROW_BYTES))
            for split, (texts, _, _) in splits.items()}
    disk["labels.json"] = 200 + 30 * classes
    return CorpusFacts(splits, classes, disk)


def _split_layouts(cfg: dict, facts: CorpusFacts) -> dict[str, tuple[np.ndarray, dict[str, Any]]]:
    """Per split: (characters per text before truncation, the split's atlas), as render_split computes them."""
    from ..data.render import Renderer, RenderSettings

    settings = RenderSettings.from_section(cfg["render"])
    out = {}
    for split, (texts, _, _) in facts.splits.items():
        renderer = Renderer(settings)
        _, full = renderer.layout(texts)
        out[split] = (full, renderer.atlas.to_dict())
    return out


def _render_manifest_bytes(cfg: dict, facts: CorpusFacts, split: int, n_shards: int, full: np.ndarray,
                           atlas: dict[str, Any]) -> int:
    from ..data.render import RenderSettings, split_manifest

    _, labels, ids = facts.splits[split]
    files = [f"shard-{s:05d}.npy" for s in range(n_shards)]
    manifest = split_manifest(RenderSettings.from_section(cfg["render"]), cfg["render"]["shard_size"], files,
                              ["0" * 64] * n_shards, labels, ids, full, atlas, images_per_s=12345.6)
    return _json_len(manifest)


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


def _model_config_bytes(cfg: dict, role: str, enc: EncoderConfig, labels: int, atlas: dict[str, Any]) -> int:
    return _json_len(_model_config(cfg, role, enc, labels, atlas))


def _onnx_metadata(cfg: dict, enc: EncoderConfig, labels: int, atlas: dict[str, Any]) -> dict[str, str]:
    from ..deploy.onnxmodel import metadata_entries

    return metadata_entries(_model_config(cfg, "student", enc, labels, atlas))


# Op types onnxruntime's profiler reports for the optimized fp32 / int8 student (fused kernels included),
# counted in the tiny config's deploy.json; they only size the report's op_profile tables.
DEPLOY_PROFILED_OPS = (21, 23)


def _deploy_report_bytes(cfg: dict, enc: EncoderConfig, fp32: int, int8: int, n_test: int) -> dict[str, int]:
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
    return {"deploy.json (estimate)": _json_len(report), "deploy.md (estimate)": len(render_markdown(report).encode())}


def _metrics_csv_bytes(epochs: float) -> int:
    rows = math.ceil(epochs) * 2 + 1
    return 46 + rows * 75


def _checkpoint_bytes(enc: EncoderConfig, extra_tensors: dict[str, tuple], epochs: float) -> int:
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


def _train_steps(n_train: int, tcfg: dict) -> tuple[int, int]:
    """Batch and optimizer steps as engine.schedule counts them (an `auto` batch is planned at 64)."""
    from ..train.engine import schedule

    bs = tcfg["batch_size"] if tcfg["batch_size"] != "auto" else 64
    return bs, schedule(max(n_train, bs), bs, tcfg["epochs"])[1]


@dataclass(frozen=True)
class PlanInputs:
    """What every stage's prediction reads, derived once from the config and the corpus facts."""

    cfg: dict
    facts: CorpusFacts
    sizes: dict[str, int]  # rows per split after bad rows
    planned: dict[str, int]  # the planned split sizes: the DAG's shard files follow these
    layouts: dict[str, tuple[np.ndarray, dict[str, Any]]]
    atlas: dict[str, Any]
    shard_size: int
    geometry: tuple[int, ...]
    capacity: int
    pixels: int
    classes: int
    teacher: EncoderConfig
    student: EncoderConfig
    report: dict
    gflops: float | None
    cuda: bool
    precision: str
    chars: dict[str, int]  # characters per split

    def shard_file_bytes(self, split: str) -> list[int]:
        """Bytes of each cache shard file of `split` (uint8 images, npy)."""
        n = self.sizes[split]
        return [npy_bytes((min(self.shard_size, max(0, n - s * self.shard_size)), *self.geometry), np.uint8)
                for s in range(shard_count(self.planned[split], self.shard_size))]

    @property
    def cache_bytes(self) -> int:
        return sum(sum(self.shard_file_bytes(split)) for split in SPLITS)


def plan_inputs(cfg: dict, exact: bool = True) -> PlanInputs:
    """Corpus facts, layouts, geometry, encoders and throughput figures the stage predictions share."""
    from ..data.corpus import planned_split_sizes
    from ..data.render import RenderSettings

    facts = corpus_facts(cfg) if exact else estimated_corpus_facts(cfg)
    layouts = _split_layouts(cfg, facts)
    settings = RenderSettings.from_section(cfg["render"])
    classes = facts.num_classes
    report = cfg.get("report", {})
    gflops = report.get("cpu_gflops")
    cuda = cfg["hardware"]["profile"] != "cpu"
    if cuda:
        tflops = report.get("gpu_tflops")
        gflops = tflops * 1000 if tflops else None
    return PlanInputs(
        cfg=cfg, facts=facts, sizes=facts.sizes, planned=planned_split_sizes(cfg["corpus"]), layouts=layouts,
        atlas=layouts["train"][1], shard_size=cfg["render"]["shard_size"], geometry=settings.shape,
        capacity=settings.cells, pixels=int(np.prod(settings.shape)), classes=classes,
        teacher=encoder_for(cfg, "teacher", classes), student=encoder_for(cfg, "student", classes),
        report=report, gflops=gflops, cuda=cuda, precision=cfg["engine"]["precision"] if cuda else "fp32",
        chars={split: sum(map(len, texts)) for split, (texts, _, _) in facts.splits.items()})


def predict_corpus(inp: PlanInputs) -> StagePlan:
    n_all = sum(inp.sizes.values())
    return StagePlan("corpus", "all", HOST_BASELINE["corpus"] + HOST_RUNTIME["corpus"] + n_all * HOST_RUNTIME["corpus_row"],
                     sum(inp.facts.corpus_bytes.values()), samples=n_all, detail={"disk": inp.facts.corpus_bytes})


def predict_baseline(inp: PlanInputs) -> StagePlan:
    """The n-gram baseline: ids of every 1-3-gram of every text (int64), the bag's weights with their
    gradient and Adam's two moments, one batch's bags."""
    bcfg = inp.cfg["baseline"]
    ngrams = sum(3 * (inp.chars[split] + len(texts)) for split, (texts, _, _) in inp.facts.splits.items())
    host = {"baseline": HOST_BASELINE["baseline"], "runtime": HOST_RUNTIME["baseline"], "n-gram ids": BASELINE_BYTES_PER_NGRAM * ngrams,
            "weights, gradient, Adam moments": 4 * 4 * bcfg["buckets"] * inp.classes}
    return StagePlan("baseline", "baseline", int(sum(host.values())), BASELINE_METRICS_BYTES,
                     samples=inp.sizes["train"] * bcfg["epochs"], detail={"host": host})


def predict_render(inp: PlanInputs) -> list[StagePlan]:
    """One render job per split: its cache shards and manifest."""
    stages = []
    for split in SPLITS:
        n = inp.sizes[split]
        shard_files = inp.shard_file_bytes(split)
        full, split_atlas = inp.layouts[split]
        manifest = _render_manifest_bytes(inp.cfg, inp.facts, split, len(shard_files), full, split_atlas)
        disk = sum(shard_files) + manifest
        host = {"baseline": HOST_BASELINE["render"], "runtime": HOST_RUNTIME["render"],
                "code point table": 0x110000 * 4, "cell indices": n * inp.capacity * 4,
                "texts (original + normalized)": 2 * n * HOST_RUNTIME["render_text"] + 2 * inp.chars[split] * 2,
                "vectorized lookup": inp.chars[split] * HOST_RUNTIME["render_per_char"],
                "shard images (one gather)": min(n, inp.shard_size) * inp.pixels}
        stages.append(StagePlan("render", split, int(sum(host.values())), disk, samples=n,
                                detail={"host": host, "disk": {"shards": sum(shard_files), "manifest": manifest}}))
    return stages


def _train_host(inp: PlanInputs, mem_cpu: dict[str, Any], eval_batch: int, enc: EncoderConfig) -> dict[str, int]:
    """Host RAM of a training job by part; on CUDA the training state lives on the GPU and the host
    holds the loader and the maps."""
    engine = inp.cfg["engine"]
    host = {"baseline": HOST_BASELINE["torch"], "runtime": HOST_RUNTIME["train"],
            "weights+grads+optimizer": mem_cpu["weights"] + mem_cpu["gradients"] + mem_cpu["optimizer_state"],
            "activations": sum(mem_cpu["activations"].values()) + mem_cpu["backward_workspace"]
            + mem_cpu["allocator_overhead"],
            "loader workers (USS)": engine["num_workers"] * HOST_RUNTIME["loader_worker"]}
    if inp.cuda:
        host["weights+grads+optimizer"] = mem_cpu["weights"]
        host["activations"] = 0
    host["eval forward"] = 0 if inp.cuda else max(0, predict_inference_memory(enc, eval_batch, device="cpu")
                                                  - mem_cpu["weights"] - host["activations"])
    return {k: int(v) for k, v in host.items()}


def _predict_train(inp: PlanInputs, role: str, enc: EncoderConfig, extra_tensors: dict, extra_host: dict,
                   keep: int, every: int) -> tuple[StagePlan, int]:
    """A train_<role> job and the bytes of one of its checkpoints."""
    cfg, engine = inp.cfg, inp.cfg["engine"]
    tcfg = cfg[role]["train"]
    bs, steps = _train_steps(inp.sizes["train"], tcfg)
    micro = bs // engine["grad_accum_steps"]
    extra_params = sum(int(np.prod(v[0])) for v in extra_tensors.values())
    mem_cpu = predict_train_memory(enc, micro, "fp32", engine["activation_checkpointing"],
                                   engine["grad_free_cycles"], extra_params, device="cpu")
    host = _train_host(inp, mem_cpu, max(64, micro), enc)
    # Memory-mapped data is page cache (file-backed, reclaimable), not memory the job allocates:
    # reported beside the prediction, not added to it (measure.anon_rss does not count it either).
    page_cache = {"cache pages (mmap, all splits)": inp.cache_bytes, **extra_host}
    model_file = safetensors_bytes(model_tensors(enc))
    cfg_json = _model_config_bytes(cfg, role, enc, inp.classes, inp.atlas)
    csv = _metrics_csv_bytes(tcfg["epochs"])
    ckpt = _checkpoint_bytes(enc, extra_tensors, tcfg["epochs"])
    flops = flops_per_sample(enc)
    samples = steps * bs
    wall = None
    if inp.gflops:
        evals = inp.sizes["val"] * math.ceil(tcfg["epochs"]) + inp.sizes["test"]
        wall = STAGE_STARTUP_S + (3 * flops * samples + flops * evals) / (inp.gflops * 1e9)
    saves = len({s for s in range(every, steps, every)} | {steps})  # Trainer: every `every` steps, and at the end
    left = min(keep, saves) * ckpt + len(run_fingerprint_placeholder) + 1  # + the RUN marker
    sp = StagePlan(f"train_{role}", role, sum(host.values()), model_file + cfg_json + csv, wall_s=wall, samples=samples,
                   checkpoint_bytes=left,
                   detail={"host": host, "page_cache (not in host)": page_cache,
                           "disk": {"model.safetensors": model_file, "config.json (estimate)": cfg_json,
                                    "metrics.csv (estimate)": csv, "checkpoint (each)": ckpt},
                           "train_memory": mem_cpu, "steps": steps, "batch_size": bs, "flops_per_sample": flops})
    if inp.cuda:
        g = predict_train_memory(enc, micro, inp.precision, engine["activation_checkpointing"],
                                 engine["grad_free_cycles"], extra_params, device="cuda")
        sp.peak_gpu_allocated_bytes, sp.peak_gpu_reserved_bytes = g["allocated_peak"], g["reserved_peak"]
        sp.detail["train_memory"] = g
    return sp, ckpt


def predict_train_teacher(inp: PlanInputs) -> tuple[StagePlan, int]:
    """The teacher's checkpoint policy is train.run.train_teacher's."""
    from ..train.run import TEACHER_EVERY_STEPS, TEACHER_KEEP_LAST

    return _predict_train(inp, "teacher", inp.teacher, {}, {}, keep=TEACHER_KEEP_LAST, every=TEACHER_EVERY_STEPS)


def predict_train_student(inp: PlanInputs) -> tuple[StagePlan, int]:
    """The student: an adapter from student to teacher width; teacher logits+sketches memory-mapped."""
    teacher, student = inp.teacher, inp.student
    adapter = {"adapter.weight": ((teacher.dim, student.dim), "float32", 4), "adapter.bias": ((teacher.dim,), "float32", 4)}
    teacher_maps = inp.sizes["train"] * (inp.classes * 4 + teacher.num_capsules * teacher.dim * 2)
    ck = inp.cfg["student"]["checkpoint"]
    return _predict_train(inp, "student", student, adapter, {"teacher outputs (mmap)": teacher_maps},
                          keep=ck["keep_last"], every=ck["every_steps"])


def _encoded_fields(inp: PlanInputs, n: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    """The teacher outputs for `n` samples (an encoded shard, a dataset split), as encode writes them."""
    from ..train.encode import encoded_fields

    return encoded_fields(inp.teacher, n)


def predict_encode(inp: PlanInputs, split: str) -> list[StagePlan]:
    """One encode job per cache shard of `split`."""
    teacher, shard_size = inp.teacher, inp.shard_size
    out_per_sample = sum(int(np.prod(s[1:])) * np.dtype(t).itemsize for s, t in _encoded_fields(inp, 1).values())
    teacher_params = sum(int(np.prod(s)) for s in param_shapes(teacher))
    eb = inp.cfg["encode"]["batch_size"]
    n = inp.sizes[split]
    stages = []
    for s in range(shard_count(inp.planned[split], shard_size)):
        m = min(shard_size, max(0, n - s * shard_size))
        disk = npz_bytes(_encoded_fields(inp, m))
        live = predict_inference_memory(teacher, min(eb, max(m, 1)), inp.precision, "cuda" if inp.cuda else "cpu")
        host = {"baseline": HOST_BASELINE["torch"], "runtime": HOST_RUNTIME["encode"],
                "teacher weights": 4 * teacher_params, "output buffers": m * out_per_sample,
                "batch forward": 0 if inp.cuda else live - 4 * teacher_params}  # shard pages: page cache
        wall = STAGE_STARTUP_S + m * flops_per_sample(teacher) / (inp.gflops * 1e9) if inp.gflops else None
        sp = StagePlan("encode", f"{split}-{s:05d}", int(sum(host.values())), disk, wall_s=wall, samples=m,
                       detail={"host": host})
        if inp.cuda:
            sp.peak_gpu_allocated_bytes = int(live)
            sp.peak_gpu_reserved_bytes = int(live * CUDA_RESERVED_OVERHEAD)
        stages.append(sp)
    return stages


def predict_consolidate(inp: PlanInputs, split: str) -> StagePlan:
    """The consolidate job of `split`: one memory-mappable array per field plus the manifest."""
    n, shard_size = inp.sizes[split], inp.shard_size
    n_sh = shard_count(inp.planned[split], shard_size)
    fields = _encoded_fields(inp, n)
    arrays = sum(npy_bytes(shape, dt) for shape, dt in fields.values())
    manifest = _json_len({"format": "pixelpipe.dataset/1", "count": n,
                          "shards": [f"results/encoded/{split}/shard-{s:05d}.npz" for s in range(n_sh)],
                          "shard_counts": [shard_size] * n_sh,
                          "fields": {f: {"file": f"{f}.npy", "shape": list(shape), "dtype": np.dtype(dt).name,
                                         "sha256": "0" * 64} for f, (shape, dt) in fields.items()}})
    biggest_field = max(int(np.prod(shape[1:])) * np.dtype(dt).itemsize for shape, dt in _encoded_fields(inp, 1).values())
    host = {"baseline": HOST_BASELINE["consolidate"], "runtime": HOST_RUNTIME["consolidate"],
            "one field of one shard": min(n, shard_size) * biggest_field}  # written memmap pages: page cache
    return StagePlan("consolidate", split, int(sum(host.values())), arrays + manifest, samples=n,
                     detail={"host": host, "disk": {"arrays": arrays, "manifest (estimate)": manifest}})


@dataclass(frozen=True)
class StudentOnnx:
    """The exported student's parameter count and predicted ONNX sizes, shared by the deploy stages."""

    enc: EncoderConfig
    params: int
    sizes: dict[str, int]

    @property
    def fp32(self) -> int:
        return self.sizes["fp32"]

    @property
    def int8(self) -> int:
        return self.sizes["int8"]

    def forward(self, batch: int) -> int:
        """Live temporaries of an inference forward (torch or onnxruntime)."""
        return max(0, predict_inference_memory(self.enc, max(1, batch), device="cpu") - 4 * self.params)


def student_onnx(inp: PlanInputs) -> StudentOnnx:
    student = inp.student
    params = sum(int(np.prod(v[0])) for v in model_tensors(student).values())
    return StudentOnnx(student, params, onnx_bytes(student, _onnx_metadata(inp.cfg, student, inp.classes, inp.atlas)))


def predict_export_onnx(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    """ONNX fp32 export, with the parity check on the first val shard."""
    n_parity = min(inp.shard_size, inp.sizes["val"])
    host = {"baseline": HOST_BASELINE["deploy"], "runtime": HOST_RUNTIME["export_onnx"], "torch weights": 4 * onnx.params,
            "model copies": ONNX_MODEL_COPIES["export_onnx"] * onnx.fp32, "val shard": n_parity * inp.pixels,
            "parity batch": onnx.forward(min(256, n_parity)) + min(256, n_parity) * inp.pixels * 4,
            "onnxruntime arena": ORT_ARENA_FACTOR["export_onnx"] * onnx.forward(min(256, n_parity))}
    host = {k: int(v) for k, v in host.items()}
    return StagePlan("export_onnx", "student", sum(host.values()), onnx.fp32, samples=n_parity,
                     detail={"host": host, "disk": {"student.onnx (estimate)": onnx.fp32}, "onnx": onnx.sizes})


def predict_quantize_onnx(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    qcfg = inp.cfg["quantize"]
    calib = min(qcfg["calibration_samples"], inp.sizes["train"]) if qcfg["method"] == "static" else 0
    batch = max(min(64, calib), min(256, inp.sizes["test"]))  # calibration batches of 64, accuracy batches of 256
    host = {"baseline": HOST_BASELINE["quantize"], "runtime": HOST_RUNTIME["quantize_onnx"],
            "model copies": ONNX_MODEL_COPIES["quantize_onnx"] * onnx.fp32 + onnx.int8,
            "largest batch forward": onnx.forward(batch) + batch * inp.pixels * 4,
            "onnxruntime arenas": ORT_ARENA_FACTOR["quantize_onnx"] * onnx.forward(batch)}
    host = {k: int(v) for k, v in host.items()}
    return StagePlan("quantize_onnx", "student", sum(host.values()), onnx.int8, samples=calib,
                     detail={"host": host, "disk": {"student.int8.onnx (estimate)": onnx.int8}})


def predict_deploy_benchmark(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    dcfg = inp.cfg["deploy_benchmark"]
    n_test = inp.sizes["test"]
    batch = max(max(dcfg["batch_sizes"]), min(256, n_test))  # timing batches, accuracy batches of 256
    host = {"baseline": HOST_BASELINE["deploy"], "runtime": HOST_RUNTIME["deploy_benchmark"],
            "models (torch, ONNX fp32, int8)": 4 * onnx.params + onnx.fp32 + onnx.int8, "test images": n_test * inp.pixels,
            "largest batch forward": onnx.forward(batch) + batch * inp.pixels * 4,
            "onnxruntime arenas": ORT_ARENA_FACTOR["deploy_benchmark"] * onnx.forward(batch)}
    host = {k: int(v) for k, v in host.items()}
    reports = _deploy_report_bytes(inp.cfg, inp.student, onnx.fp32, onnx.int8, n_test)
    return StagePlan("deploy_benchmark", "student", sum(host.values()), sum(reports.values()),
                     detail={"host": host, "disk": reports})


def _disk_totals(inp: PlanInputs, stages: list[StagePlan], teacher: tuple[StagePlan, int], encoded_peak: int,
                 student: tuple[StagePlan, int], onnx: StudentOnnx) -> dict[str, int]:
    """Disk per artifact group at its peak; `stages` ends with the three deploy stages."""
    keep_last = inp.cfg["student"]["checkpoint"]["keep_last"]
    return {
        "corpus": stages[0].disk_written_bytes,
        "cache": sum(s.disk_written_bytes for s in stages if s.rule == "render"),
        "teacher": teacher[0].disk_written_bytes + teacher[1],
        "encoded shards (temp, at their peak)": encoded_peak,
        "consolidated dataset": sum(s.disk_written_bytes for s in stages if s.rule == "consolidate"),
        # keep_last checkpoints, plus the new one written before rotation deletes the oldest
        "student checkpoints (peak)": (keep_last + 1) * student[1],
        "student": student[0].disk_written_bytes,
        "deploy (ONNX fp32 + int8, reports)": sum(s.disk_written_bytes for s in stages[-3:]),
        # quantize_onnx's temporaries: the pre-processed fp32 model and the int8 file before it is accepted
        "ONNX temporaries (quantize)": onnx.fp32 + onnx.int8,
    }


def plan_workflow(cfg: dict, exact: bool = True) -> dict[str, Any]:
    """Every stage's prediction plus the disk totals; `cfg` is a resolved config.

    exact: generate (or read) the corpus as the corpus rule will, so split sizes, cache manifests and the
    atlas are what the stages will write; otherwise estimate them (the disk preflight, before any job).
    """
    inp = plan_inputs(cfg, exact)
    stages = [predict_corpus(inp), predict_baseline(inp), *predict_render(inp)]
    teacher = predict_train_teacher(inp)
    stages.append(teacher[0])
    encoded_peak = 0
    for split in cfg["encode"]["splits"]:  # encode (one job per shard), then consolidate (one per split)
        encode = predict_encode(inp, split)
        encoded_peak += sum(s.disk_written_bytes for s in encode)
        stages += [*encode, predict_consolidate(inp, split)]
    student = predict_train_student(inp)
    onnx = student_onnx(inp)
    stages += [student[0], predict_export_onnx(inp, onnx), predict_quantize_onnx(inp, onnx),
               predict_deploy_benchmark(inp, onnx)]
    disk_totals = _disk_totals(inp, stages, teacher, encoded_peak, student, onnx)
    # Encoded shards are deleted split by split as each consolidates; counting them all next to
    # every dataset makes this an upper bound on the DAG's disk peak, whatever the job order.
    disk_peak = sum(disk_totals.values())
    report = inp.report
    return {"stages": [dict(rule=s.rule, name=s.name, key=s.key, **s.prediction()) for s in stages],
            "disk": disk_totals, "disk_peak_bytes": disk_peak,
            "disk_final_bytes": disk_peak - disk_totals["encoded shards (temp, at their peak)"]
            - disk_totals["student checkpoints (peak)"] + cfg["student"]["checkpoint"]["keep_last"] * student[1]
            - disk_totals["ONNX temporaries (quantize)"],
            "device": "cuda" if inp.cuda else "cpu", "precision": inp.precision,
            "calibration": {"host_baseline": HOST_BASELINE, "host_runtime": HOST_RUNTIME,
                            "cpu_infer_factor": CPU_INFER_FACTOR, "onnxruntime_arena_factor": ORT_ARENA_FACTOR,
                            "baseline_bytes_per_ngram": BASELINE_BYTES_PER_NGRAM,
                            "cpu_gflops": report.get("cpu_gflops"), "gpu_tflops": report.get("gpu_tflops")}}


# ---- disk preflight -----------------------------------------------------------------------------
class DiskSpaceError(RuntimeError):
    """The predicted disk peak does not fit the free space of the results filesystem."""


FREE_BYTES_ENV = "PIXELPIPE_FREE_BYTES"


def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes where `path` will live ($PIXELPIPE_FREE_BYTES overrides, for tests)."""
    if os.environ.get(FREE_BYTES_ENV):
        return int(float(os.environ[FREE_BYTES_ENV]))
    p = Path(path).resolve()
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def check_disk(cfg: dict, results_dir: str | os.PathLike = "results", free: int | None = None) -> dict[str, int]:
    """Raise DiskSpaceError if the plan's disk peak exceeds the free space; return both numbers.

    Uses the estimated plan (no corpus generated or read): it must answer before the first job.
    """
    plan = plan_workflow(cfg, exact=False)
    need = plan["disk_peak_bytes"]
    if Path(results_dir).exists():  # what is already there is counted in the peak: do not ask for it twice
        from ..core.measure import path_bytes

        need = max(0, need - path_bytes([results_dir]))
    have = free if free is not None else free_bytes(results_dir)
    if need > have:
        raise DiskSpaceError(
            f"predicted disk peak {fmt_bytes(need)} ({need} bytes) exceeds the {fmt_bytes(have)} ({have} bytes) free "
            f"on the filesystem of '{results_dir}'; free space, shrink corpus.num_samples / render size, or point "
            f"results elsewhere ({FREE_BYTES_ENV} overrides the free-space figure)")
    return {"need": need, "free": have}


def format_plan(plan: dict) -> str:
    """The plan as a Markdown table (what `python -m pixelpipe.plan` prints)."""
    gpu = any(s.get("peak_gpu_allocated_bytes") for s in plan["stages"])
    head = ["stage", "samples", "peak host RAM", "disk written", "time"] + (["peak GPU alloc", "peak GPU reserved"] if gpu else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in plan["stages"]:
        row = [s["key"], str(s.get("samples", "")), fmt_bytes(s["peak_host_bytes"]), fmt_bytes(s["disk_written_bytes"]),
               f"{s['wall_s']:.1f} s" if s.get("wall_s") else "-"]
        if gpu:
            row += [fmt_bytes(s.get("peak_gpu_allocated_bytes")), fmt_bytes(s.get("peak_gpu_reserved_bytes"))]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| disk | bytes |", "|---|---|"]
    lines += [f"| {k} | {fmt_bytes(v)} |" for k, v in plan["disk"].items()]
    lines.append(f"| **peak (upper bound)** | **{fmt_bytes(plan['disk_peak_bytes'])}** |")
    lines.append(f"| after the run | {fmt_bytes(plan['disk_final_bytes'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from ..config.resolve import ConfigError, load_config

    ap = argparse.ArgumentParser(prog="python -m pixelpipe.plan", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="config YAML (default: schema defaults)")
    ap.add_argument("--json", action="store_true", help="print the full plan as JSON")
    ap.add_argument("--results", default="results", help="results directory for the disk check")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        print(f"pixelpipe: {err}", file=sys.stderr)
        return 2
    plan = plan_workflow(cfg)
    print(json.dumps(plan, indent=2, default=str) if args.json else format_plan(plan))
    try:
        check_disk(cfg, args.results)
    except DiskSpaceError as err:
        print(f"WARNING: {err}", file=sys.stderr)
        return 1
    return 0
