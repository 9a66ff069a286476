"""Host RAM and GPU memory models: the fitted constants and the analytic model of a training step
and an inference forward.

Host RAM is a fitted fixed term per process type (HOST_BASELINE, HOST_RUNTIME) plus analytic terms;
the comments below say how each constant was measured. The activation model counts, tensor by tensor,
what autograd saves in model/encoder.py; the batch-size finder can ask `predict_train_memory` before trying
a batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.encoder import EncoderConfig
from .shapes import param_shapes

# ---- fitted constants (host RAM, bytes) -------------------------------------------------
# Measured on the 2-core CPU dev machine (torch 2.13 CPU, Python 3.11) as `baseline_host_bytes`
# (anonymous RSS when StageMeter starts, after the stage script's imports) in results/metrics/*.json
# of the tiny config. Anonymous memory, not RSS: file-backed library pages vary with the page cache
# (see measure.anon_rss). Stages that do not need torch no longer import it (StageMeter imports it lazily).
HOST_BASELINE = {
    "corpus": 72_300_000,  # pandas + pyarrow + the sources and charset modules
    "render": 38_090_000,  # pyarrow + numpy + PIL + fontTools (no pandas)
    "torch": 170_200_000,  # train_teacher / encode / train_student: torch + numpy + safetensors + the model code
    "consolidate": 22_050_000,  # numpy
    "export": 166_250_000,  # export_onnx: torch + numpy + the model code + the fold (onnx and onnxscript load lazily)
    "deploy": 153_730_000,  # deploy_benchmark: torch + numpy + the model code (onnxruntime loads lazily)
    "quantize": 22_040_000,  # numpy; onnx and onnxruntime load lazily (counted in the runtime term)
    "baseline": 197_400_000,  # torch + pandas + pyarrow
}
# What a stage adds over its baseline beyond the analytic terms below, measured as
# peak_host - baseline - analytic terms on the tiny config (where the analytic terms are ~0), per-row
# and per-sample terms fitted between the tiny and the default config and the corpus-only runs named below;
# anonymous memory only:
HOST_RUNTIME = {
    # corpus: fitted on corpus-only runs of 7 configs (faker 380 / 40,000 / 60,000 rows, real 3,800 / 38,000 /
    # 174,541 rows, real 174,541 + faker 15,459, user CSVs of 400 / 30,388 rows); residuals within 3.2 %
    "corpus": 10_800_000,  # pyarrow writers, the charset, labels (the user CSV of 400 rows)
    # the shipped sources and the drawn rows: refitted on the current stage's measurements of the 19-language
    # (76,000 rows, 190,090 rows read) and the every-language default (222,000 rows, 794,687 read), where the
    # earlier per-row-read term (699 bytes, fitted on two sources) predicted 709 MiB for 320 measured. Sampled at
    # 5 ms in-process, the peak does not grow with the rows read (111 and 19 languages alike: ~110 MB besides
    # ~840 bytes a drawn row); it is lower for corpora of a few sources or languages (2 languages, 3,000 rows:
    # +24 % predicted)
    "corpus_sources": 76_900_000,  # reading the sources one language's row group at a time: what stays allocated
    "corpus_row": 803,  # per drawn real row (picked from the sources, then the chunk written)
    "corpus_user_row": 1_547,  # per row of a user CSV (its parsed lines, the frame, the chunk written)
    "corpus_faker": 20_800_000,  # Faker and its 19 locale providers
    "corpus_faker_row": 1_440,  # per Faker row alive (one chunk written while the next is generated)
    "baseline_row": 400,  # per row of the three parquet frames the baseline reads (id, text, source, origin, label)
    # render: runtime and per-character term solved from the tiny and the default run's train render jobs (after
    # iter_chunks stopped pre-buffering; <= 4 shards). A job writing several shards creeps higher: RENDER_CREEP
    "render": 7_300_000,  # fonts (Unifont: 2 MB of bitmaps in one byte string; 12 MB as a dict of hex strings), the atlas, pyarrow's reader
    "render_text": 1_190,  # per text of a shard: the Python str read, its normalized copy, list and arrow buffers
    "render_per_cell": 8,  # per layout cell of a shard: int32 layout, uint16 glyph ids, the valid mask (analytic)
    "render_per_char": 40.5,  # per character of a shard: the vectorized code point lookup's arrays
    "loader_worker": 22_000_000,  # USS of one forked DataLoader worker (pages it copies-on-write)
    "baseline": 68_800_000,  # autograd, the sparse gradient, its coalescing buffers, the optimizers (see below)
    "train": 78_000_000,  # autograd engine, intra-op thread pool, oneDNN kernels, optimizer on first step
    "encode": 4_000_000,  # inference-mode kernels, the read-ahead thread
    "consolidate": 0,
    # deploy stages: the runtime term and ORT_ARENA_FACTOR solved together from the tiny, the 19-language and the
    # every-language default run (three equations, three unknowns per stage: in-sample, zero residual; the
    # benchmark's two unknowns fitted by least squares, residuals within 7 MiB)
    # onnx + onnxscript + torch.export/dynamo tracing + one onnxruntime session (the parity check)
    "export_onnx": 151_700_000,
    # onnx + onnxruntime + its quantization tooling (pre-processing with ONNX shape inference only, calibration
    # and two accuracy sessions)
    "quantize_onnx": 30_900_000,
    # onnxruntime, three forms' sessions and their profiled copies, thread pools
    "deploy_benchmark": 27_300_000,
    # evaluate: pandas + pyarrow (the held-out sources), matplotlib (the plot), the fonts, the held-out sets and
    # their perturbed copies; and per glyph of the run's atlas, what the four glyph-path scorers (teacher, student,
    # two Predictors) build for it (atlas cells, glyph tables and keys, lookups; 984 / 1,242 / 12,322 glyphs in the
    # tiny, 19-language and every-language runs). Both fitted by least squares on those three runs (peak_host -
    # the analytic terms; residuals within 10 MiB); the runtime alone, fitted on the tiny run, missed the
    # every-language run by -20 %
    "evaluate": 129_700_000,
    "evaluate_glyph": 20_150,
    # one py3langid identifier (its model and numpy arrays) when the optional benchmark dependency is installed;
    # evaluate loads two (the tiny run with and without it: 513 and 358 MiB, 2.0 x 81 MB)
    "evaluate_py3langid": 81_000_000,
}
# A render job writing several shards keeps part of the earlier shards' buffers (glibc's free lists; -23 % at 9 and
# 84 shards in bench/growth.py, docs/benchmarks.md): `per_doubling` of one shard's terms for each doubling of the
# shards it writes, at most `cap`. Fitted on the train jobs of the 19-language default (4 shards: 0.39 of the shard
# terms over the one-shard model), the previous every-language default (11 shards: 0.50; its 2-shard val and test
# jobs 0.03-0.07) and the current one (22 shards: 0.78 and 0.88 on two runs), sampled every 5 ms.
RENDER_CREEP = {"per_doubling": 0.17, "cap": 0.8}
# Copies of the fp32 ONNX model a stage holds at its peak besides the analytic terms (export: the exported
# program, the ModelProto, its serialized bytes, the session; quantize: the fp32, pre-processed and
# calibration-augmented protos and sessions). Fitted on ONE larger student (dim 256, depth 2, 1.9 M
# parameters, 6.5 MB ONNX) as (its peak - the tiny peak - the other terms' growth) / the ONNX growth, on the
# previous (image-input) export; kept for the folded export (they count copies of the file, whatever its graph:
# 9 and 20 MB of the default run's export and quantize peaks), not re-checked beyond that.
ONNX_MODEL_COPIES = {"export_onnx": 2.45, "quantize_onnx": 4.25}
# On CPU, a training job grows by more than the saved activations: forward temporaries, gradient buffers in
# backward, and blocks glibc keeps in its arenas. Batches trimmed to their longest text change every tensor's
# size from step to step, and glibc's free lists fragment: in isolation, one default-teacher step at a fixed 96
# characters grows the process by 182 MiB (1.75x activations + workspace), 150 steps of random lengths up to 96
# by 324 MiB. Fitted per core type on the default run (in-sample, 948 teacher / 1,422 student steps):
# (peak - baseline - runtime - weights, gradients, optimizer state) / (activations + backward workspace) at the
# longest text's tokens; tiny: the same within 3 % of the job.
CPU_TRAIN_TRANSIENT = {"recursive": 3.05, "none": 4.14}
# Inference keeps no saved tensors, only the live temporaries of about one core call (the mixer's n-gram
# features stay alive until the head pools them) and what glibc keeps of them: CPU_INFER_FACTOR times what one
# core call and the layers around it would save for backward. recursive: fitted on the default teacher encoding
# two 16,384-row shards of the default run in isolation, longest batch first (core.order.longest_first: 0.73 and
# 0.83; shortest first, glibc kept 2-3x more, 0.8-2.6 from job to job); none: one inference forward of the
# default student in isolation (batch 256, 97 tokens, 124 MiB).
CPU_INFER_FACTOR = {"recursive": 0.8, "none": 1.35}
# onnxruntime's arena keeps the peak of every session's activations (and batches trimmed to different lengths
# fragment it); per deploy stage, the arenas' bytes as multiples of what one forward of the folded graph computes
# at the largest batch: (its glyph path, StudentOnnx.onnx_forward; the n-gram rows it gathers,
# StudentOnnx.onnx_ngrams), solved with the runtime term above (export: the parity session; quantize: range
# reading and two accuracy sessions; deploy benchmark: fp32 and int8 sessions, their profiled copies and the batch
# sweep, whose glyph path the torch forward term already covers). The first fit, on the glyph path alone, missed
# the every-language student (a narrow glyph path, the same n-gram table) by -34 to -44 %.
ORT_ARENA_FACTOR = {"export_onnx": (0.719, 2.89), "quantize_onnx": (0.305, 4.97), "deploy_benchmark": (0.0, 8.03)}
# The n-gram baseline's ids: the int64 array they are hashed into, its copy into a tensor and the array's growth
# slack, as bytes per n-gram, solved with HOST_RUNTIME["baseline"] from the tiny and the default run (485 MiB)
# beside HOST_RUNTIME["baseline_row"] (the frames' five columns as Python objects, ~400 bytes a row; not fitted).
BASELINE_BYTES_PER_NGRAM = 11.5
# CUDA caching allocator: reserved / allocated at the peak (block rounding, fragmentation).
CUDA_RESERVED_OVERHEAD = 1.10


# ---- memory of one training step and one inference forward ----------------------------------------
def _tokens(cfg: EncoderConfig, tokens: float | None) -> float:
    """Tokens a (trimmed) batch computes: `tokens`, or the whole layout."""
    return float(cfg.num_tokens if tokens is None else tokens)


def _block_bytes(cfg: EncoderConfig, n: float, a: int) -> float:
    """One transformer block: norm1 input x and its output, qkv (3D, kept by attention), the attention output
    (laid out so that proj reads it without a copy), norm2 input and output, MLP hidden before and after GELU,
    the LayerNorm statistics, the attention's logsumexp and its float copy of the mask."""
    d, hidden = cfg.dim, int(cfg.dim * cfg.mlp_ratio)
    stats = 2 * 4 * n + 4 * cfg.heads * n
    return n * (2 * d * 4 + 6 * d * a + 2 * hidden * a) + 2 * stats + n * 4


def _pooled_bytes(n: float, features: int, a: int) -> float:
    """masked_mean (its float mask) and masked_max (the inverted bool mask and the masked copy amax keeps)."""
    return n * 4 + n + n * features * a


def activation_bytes_per_sample(cfg: EncoderConfig, act_bytes: int = 4, activation_checkpointing: bool = False,
                                grad_free_cycles: bool = False, tokens: float | None = None,
                                images: bool = False) -> dict[str, int]:
    """Bytes autograd saves for backward per sample of a batch computing `tokens` tokens, by model part.

    Counted tensor by tensor from model/encoder.py (glyph path: the stem is applied to the atlas and gathered, so
    per sample only the two gathers' int64 indices are kept; `images`: the pixel path under augmentation, which
    keeps the padded image the stem convolution reads). The residual stream and LayerNorm inputs stay fp32 under
    autocast (4 bytes); matmul inputs/outputs take `act_bytes` (2 under bf16/fp16 autocast, 4 in fp32). Every
    position-mixing op multiplies by a float copy of the mask (4 bytes per token, kept by the multiply).
    """
    n, d, k, m = _tokens(cfg, tokens), cfg.dim, cfg.num_capsules, cfg.mixer_hidden
    a = act_bytes
    if images:
        width = (n / max(cfg.lines, 1)) * cfg.cell_width
        pixels = cfg.channels * cfg.image_height * width
        embed = pixels * 4 + (pixels * a if a != 4 else 0)
    else:
        embed = 2 * n * 8  # the gathers' indices (left and right half of each pair)
    embed += n * 4  # place(): the float mask
    if m:  # local mixing: masked input (after LayerNorm when recursive), conv output (GELU input), the GELU
        # output's contiguous copy for proj, the float masks of the input and the output
        embed += n * d * a + 2 * n * m * a + 2 * n * 4
        if cfg.recursive:
            embed += n * d * 4 + 2 * 4 * n
    recursion = 0.0
    if cfg.recursive:
        core_call = cfg.depth * _block_bytes(cfg, n, a) + n * d * 4 + 2 * 4 * n
        calls = cfg.H_cycles * (cfg.L_cycles + 1)
        grad_calls = (cfg.L_cycles + 1) if grad_free_cycles else calls
        # with checkpointing only each core call's input is kept; one call's activations live again in recomputation
        recursion = grad_calls * n * d * 4 + core_call if activation_checkpointing else grad_calls * core_call
    # norm_kv input, statistics and output, k and v, the attention's float mask; the K capsules' small tensors
    capsules = n * d * 4 + 2 * 4 * n + n * d * a + n * 2 * d * a + n * 4 + k * d * 4 * 8 + k * 2 * d * a * 2
    head = cfg.head_features * 4 + cfg.head_features * a  # head_norm input and output
    head += _pooled_bytes(n, m, a) if m else 0
    head += _pooled_bytes(n, d, a) if cfg.recursive else 0
    return {"embed": int(embed), "recursion": int(recursion), "capsules": int(capsules), "head": int(head)}


def predict_train_memory(encoder_cfg: EncoderConfig, micro_batch: int, precision: str = "fp32",
                         activation_checkpointing: bool = False, grad_free_cycles: bool = False,
                         extra_params: int = 0, device: str = "cuda", tokens: float | None = None,
                         images: bool = False) -> dict[str, Any]:
    """Peak memory of one training step of `encoder_cfg` at `micro_batch` whose batch computes `tokens` tokens
    (default: the whole layout; the planner passes the tokens of the batch holding the longest text), by component.

    The batch-size finder can solve `total = budget` for the batch: everything but
    `activations` is fixed, and activations are `per_sample_activation_bytes * micro_batch`.
    """
    params = sum(int(np.prod(s)) for s in param_shapes(encoder_cfg)) + extra_params
    trained = sum(int(np.prod(s)) for s in param_shapes(encoder_cfg, trained_only=True)) + extra_params
    a = 2 if precision in ("bf16", "fp16") and device == "cuda" else 4
    acts = activation_bytes_per_sample(encoder_cfg, a, activation_checkpointing, grad_free_cycles, tokens, images)
    per_sample = sum(acts.values())
    n, d = _tokens(encoder_cfg, tokens), encoder_cfg.dim
    widest = max(3 * d if encoder_cfg.recursive else d, int(d * encoder_cfg.mlp_ratio) if encoder_cfg.recursive else 0,
                 encoder_cfg.mixer_hidden)
    out = {
        "weights": 4 * params,
        "gradients": 4 * trained,
        "optimizer_state": 8 * trained,  # AdamW exp_avg + exp_avg_sq, fp32 (none for params no loss reaches)
        "amp_weight_copies": 2 * params if a == 2 else 0,  # autocast's per-forward low-precision weight cache
        "activations": {k: v * micro_batch for k, v in acts.items()},
        # backward holds the incoming and outgoing gradient of the widest tensor besides the saved ones
        "backward_workspace": int(2 * n * widest * 4 * micro_batch),
        # the loader's glyph rows (int64), their trimmed and masked copies; the float images under augmentation
        "input_buffers": int(micro_batch * encoder_cfg.cells * 8 * 3
                             + (micro_batch * encoder_cfg.channels * encoder_cfg.image_height * encoder_cfg.image_width
                                * 4 * 3 if images else 0)),
    }
    out["per_sample_activation_bytes"] = per_sample
    total = (out["weights"] + out["gradients"] + out["optimizer_state"] + out["amp_weight_copies"]
             + sum(out["activations"].values()) + out["backward_workspace"] + out["input_buffers"])
    if device == "cuda":
        overhead = int(total * (CUDA_RESERVED_OVERHEAD - 1))
    else:
        transient = CPU_TRAIN_TRANSIENT[encoder_cfg.core]
        overhead = int((sum(out["activations"].values()) + out["backward_workspace"]) * (transient - 1))
    out.update(allocated_peak=total, allocator_overhead=overhead, reserved_peak=total + overhead, parameters=params,
               trained_parameters=trained, tokens=n)
    return out


def predict_inference_memory(encoder_cfg: EncoderConfig, batch: int, precision: str = "fp32",
                             device: str = "cuda", tokens: float | None = None) -> int:
    """Peak bytes of one inference forward at `tokens` tokens: weights plus the live temporaries, CPU_INFER_FACTOR
    times what one core call (and the layers around it) would keep for backward."""
    params = sum(int(np.prod(s)) for s in param_shapes(encoder_cfg))
    a = 2 if precision in ("bf16", "fp16") and device == "cuda" else 4
    one_call = EncoderConfig(**{**encoder_cfg.to_dict(), "H_cycles": 1, "L_cycles": 0})
    per_sample = sum(activation_bytes_per_sample(one_call, a, tokens=tokens).values())
    live = batch * CPU_INFER_FACTOR[encoder_cfg.core] * per_sample
    return int(4 * params + live)
