"""Hardware profiles: what each card can do, and the defaults that pay on it.

A profile only fills keys the user's config leaves out. GPU profiles use the
reference teacher (D=768, 2 layers, H=2, L=3, K=12, 224x224 images, 16x16
patches); `cpu` keeps the small schema defaults so a laptop finishes quickly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

REFERENCE_TEACHER = {"patch_size": 16, "dim": 768, "depth": 2, "heads": 12, "mlp_ratio": 4.0,
                     "H_cycles": 2, "L_cycles": 3, "num_capsules": 12}
GPU_STUDENT = {"patch_size": 16, "dim": 192, "depth": 2, "heads": 3, "mlp_ratio": 4.0,
               "H_cycles": 2, "L_cycles": 2, "num_capsules": 12}
GPU_RENDER = {"height": 224, "width": 224, "font_size_min": 16, "font_size_max": 24, "padding": 8, "workers": 8}
GPU_CORPUS = {"num_samples": 60000, "max_chars": 400, "min_chars": 150}


def _gpu_profile(engine: dict, teacher_batch: object, student_batch: object) -> dict:
    return {
        "corpus": GPU_CORPUS,
        "render": GPU_RENDER,
        "teacher": {"model": REFERENCE_TEACHER, "train": {"batch_size": teacher_batch, "epochs": 10, "lr": 0.0005}},
        "student": {"model": GPU_STUDENT, "train": {"batch_size": student_batch, "epochs": 10, "lr": 0.001},
                    "checkpoint": {"every_steps": 500}},
        "encode": {"batch_size": 512},
        "engine": {"num_workers": 6, "pin_memory": True, "persistent_workers": True, "prefetch_factor": 4,
                   "channels_last": True, "tf32": True, "augment": True, **engine},
    }


# The laptop default: small enough that `snakemake --cores 4 train` finishes in minutes on 2 cores.
CPU_PROFILE = {
    "teacher": {"model": {"patch_size": 8, "dim": 96, "depth": 1, "heads": 4, "H_cycles": 2, "L_cycles": 2,
                          "num_capsules": 4},
                "train": {"batch_size": 32, "lr": 0.001}},
    "student": {"model": {"patch_size": 8, "dim": 64, "depth": 1, "heads": 4, "H_cycles": 1, "L_cycles": 2,
                          "num_capsules": 4},
                "train": {"batch_size": 32, "lr": 0.001, "epochs": 3}},
}

PROFILES: dict[str, dict] = {
    "cpu": CPU_PROFILE,
    # T4: 15 GB, fp16 tensor cores only (no bf16, no TF32); recomputing the recursion buys batch.
    "t4": _gpu_profile({"precision": "fp16", "compile": "default", "activation_checkpointing": True}, "auto", "auto"),
    # A10G: 24 GB Ampere, native bf16 and TF32.
    "a10g": _gpu_profile({"precision": "bf16", "compile": "default"}, "auto", "auto"),
    # H100: 80 GB Hopper; memory is plentiful, so no recomputation.
    "h100": _gpu_profile({"precision": "bf16", "compile": "default"}, 256, 512),
}


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cuda" or "cpu"
    name: str
    total_memory: int  # bytes (host RAM on CPU)
    capability: tuple[int, int] | None


def detect_device(device: str = "auto") -> DeviceInfo:
    import psutil

    if device in ("auto", "cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return DeviceInfo("cuda", props.name, props.total_memory, (props.major, props.minor))
    if device == "cuda":
        raise RuntimeError("hardware.device is 'cuda' but torch sees no CUDA device")
    return DeviceInfo("cpu", "cpu", psutil.virtual_memory().total, None)


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
