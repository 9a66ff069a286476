"""Host RAM and GPU memory models: the calibration constants and the analytic model of a training step
and an inference forward.

Host RAM is a calibrated fixed term per process type (HOST_BASELINE, HOST_RUNTIME) plus analytic terms;
the comments below say how each constant was measured. The activation model counts, tensor by tensor,
what autograd saves in model/encoder.py; the batch-size finder can ask `predict_train_memory` before trying
a batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.encoder import EncoderConfig
from .shapes import param_shapes

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


# ---- memory of one training step and one inference forward ----------------------------------------
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
