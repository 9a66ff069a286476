"""The device a run uses: detection (torch, or nvidia-smi while the workflow parses), the profile `auto` picks
for it, and the precision it can run.

The profiles themselves (which defaults pay on each card) are data: pixelpipe/config/profiles.yaml.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


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
