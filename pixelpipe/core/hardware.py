"""Hardware profiles: what each card can do, and the defaults that pay on it.

A profile only fills keys the user's config leaves out. GPU profiles use the
reference teacher (D=768, 2 layers, H=2, L=3, K=12) on a glyph-aligned layout
sized for their longer texts (4 lines of 104 characters); `cpu` keeps a small
model on one 96-character line so a laptop finishes in minutes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

REFERENCE_TEACHER = {"stem": "pair", "mixer_kernel": 3, "dim": 768, "depth": 2, "heads": 12, "mlp_ratio": 4.0,
                     "H_cycles": 2, "L_cycles": 3, "num_capsules": 12,
                     "ngram_orders": 5, "ngram_bits": 20, "ngram_dim": 128}
GPU_STUDENT = {"stem": "pair", "mixer_kernel": 3, "dim": 192, "depth": 2, "heads": 3, "mlp_ratio": 4.0,
               "H_cycles": 2, "L_cycles": 2, "num_capsules": 12,
               "ngram_orders": 4, "ngram_bits": 17, "ngram_dim": 64}
# Paragraphs up to 416 characters (4 lines x 104 cells, a 64 x 832 image): a GPU reads all of most texts.
GPU_RENDER = {"lines": 4, "line_chars": 104}
AUGMENT = ["case", "no_diacritics", "lookalikes"]  # the text augmentations the held-out ablation kept
GPU_CORPUS = {"num_samples": 200000, "languages": None}  # every language, nearly all the shipped real text


def _gpu_profile(engine: dict, teacher_batch: object, student_batch: object) -> dict:
    return {
        "corpus": GPU_CORPUS,
        "render": GPU_RENDER,
        "teacher": {"model": REFERENCE_TEACHER, "train": {"batch_size": teacher_batch, "epochs": 3, "lr": 0.0005,
                                                      "augment": AUGMENT}},
        "student": {"model": GPU_STUDENT, "train": {"batch_size": student_batch, "epochs": 3, "lr": 0.001,
                                                     "augment": AUGMENT},
                    "checkpoint": {"every_steps": 500}},
        "encode": {"batch_size": 512},
        "engine": {"num_workers": 6, "pin_memory": True, "persistent_workers": True, "prefetch_factor": 4,
                   "channels_last": True, "tf32": True, **engine},
    }


# The laptop default: small enough that `snakemake --cores 4 train` finishes in 10 minutes on 2 cores, so it keeps
# 19 of the corpus's languages (the ones Faker also has: the languages of earlier versions); configs/all-languages.yaml
# trains every language on the CPU, and the GPU profiles do by default. Teacher and student read pixels (core none:
# the per-glyph features of the stem) plus hashed glyph n-gram tables, the teacher's wider and longer (n <= 5,
# 2^19 x 128, 3 epochs), the student's sized for the deployment goals (n <= 4, 2^17 x 64: 169 MB peak RSS predicting);
# both train with the augmentations the held-out ablation kept (docs/benchmarks.md).
CPU_LANGUAGES = ["ar", "az", "cs", "da", "de", "el", "en", "es", "fa", "fr", "he", "hy", "it", "mk", "nl", "pl", "ru",
                 "uk", "vi"]  # fmt: skip
CPU_PROFILE = {
    "corpus": {"languages": CPU_LANGUAGES},
    "teacher": {"model": {"core": "none", "dim": 32, "mixer_ratio": 4.0, "activation": "relu", "heads": 4,
                          "num_capsules": 4, "ngram_orders": 5, "ngram_bits": 19, "ngram_dim": 128},
                "train": {"batch_size": 64, "lr": 0.004, "epochs": 3, "augment": AUGMENT}},
    "student": {"model": {"core": "none", "dim": 32, "mixer_ratio": 4.0, "activation": "relu", "heads": 4,
                          "num_capsules": 4, "ngram_orders": 4, "ngram_bits": 17, "ngram_dim": 64},
                "train": {"batch_size": 64, "lr": 0.004, "epochs": 3, "augment": AUGMENT}},
}

# torch.compile stays off on the GPU profiles: measured on an H100 (docs/benchmarks.md, "On a GPU"), the reference
# teacher with `compile: default` took 58 s for its first step and 40+ s for each next one (batches trimmed to their
# longest text have a new shape nearly every step) and its bf16 loss was NaN by step 10; eager bf16 trained the
# same 231 steps in 50 s at 1,185 samples/s. `engine.compile` still turns it on.
PROFILES: dict[str, dict] = {
    "cpu": CPU_PROFILE,
    # T4: 15 GB, fp16 tensor cores only (no bf16, no TF32); recomputing the recursion buys batch.
    "t4": _gpu_profile({"precision": "fp16", "compile": "none", "activation_checkpointing": True}, "auto", "auto"),
    # A10G: 24 GB Ampere, native bf16 and TF32.
    "a10g": _gpu_profile({"precision": "bf16", "compile": "none"}, "auto", "auto"),
    # H100: 80 GB Hopper; memory is plentiful, so no recomputation.
    "h100": _gpu_profile({"precision": "bf16", "compile": "none"}, 256, 512),
}


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cuda" or "cpu"
    name: str
    total_memory: int  # bytes (host RAM on CPU)
    capability: tuple[int, int] | None


def detect_device(device: str = "auto") -> DeviceInfo:
    """The device a stage runs on, as torch sees it."""
    import psutil
    import torch

    if device in ("auto", "cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return DeviceInfo("cuda", props.name, props.total_memory, (props.major, props.minor))
    if device == "cuda":
        raise RuntimeError("hardware.device is 'cuda' but torch sees no CUDA device")
    return DeviceInfo("cpu", "cpu", psutil.virtual_memory().total, None)


def probe_device(device: str = "auto") -> DeviceInfo:
    """The device for `hardware.profile: auto` when the workflow is parsed, without importing torch.

    nvidia-smi answers for the first GPU torch would use (the first of CUDA_VISIBLE_DEVICES; none when it
    is empty or -1); where it is absent there is no CUDA device to use, and where it cannot report the
    compute capability (old drivers) torch is asked after all.
    """
    import shutil
    import subprocess

    import psutil

    cpu = DeviceInfo("cpu", "cpu", psutil.virtual_memory().total, None)
    # torch sees only CUDA_VISIBLE_DEVICES; nvidia-smi sees every GPU, so ask it for torch's first one
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    first = visible.split(",")[0].strip() if visible is not None else "0"
    if device == "auto" and first in ("", "-1"):
        return cpu
    smi = shutil.which("nvidia-smi") if device in ("auto", "cuda") else None
    if smi is None:
        return detect_device(device) if device == "cuda" else cpu
    try:
        out = subprocess.run([smi, "-i", first, "--query-gpu=name,memory.total,compute_cap",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.splitlines()[0]
        name, mib, cap = (f.strip() for f in out.split(","))
        major, minor = (int(x) for x in cap.split("."))
        return DeviceInfo("cuda", name, int(float(mib)) * 2**20, (major, minor))
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return detect_device(device)


def auto_profile(info: DeviceInfo) -> str:
    """Pick the profile for the detected device by capability and memory."""
    if info.kind == "cpu":
        return "cpu"
    gib = info.total_memory / 2**30
    major = info.capability[0] if info.capability else 0
    if major >= 9 or gib >= 60:
        return "h100"
    if major >= 8:
        return "a10g"
    return "t4"


def native_bf16(info: DeviceInfo) -> bool:
    """bf16 only where tensor cores do it natively (cc >= 8).

    torch.cuda.is_bf16_supported() says True on a T4 because bf16 is emulated there, which is slow.
    """
    return info.kind == "cuda" and info.capability is not None and info.capability[0] >= 8


def resolve_precision(setting: str, info: DeviceInfo) -> str:
    if info.kind == "cpu":
        return "fp32"
    if setting == "auto":
        return "bf16" if native_bf16(info) else "fp16"
    if setting == "bf16" and not native_bf16(info):
        return "fp16"
    return setting
