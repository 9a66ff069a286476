"""Hardware profiles resolve to valid configs, and precision follows the card, not is_bf16_supported()."""

from __future__ import annotations

import pytest
import torch

from pixelpipe.config.resolve import resolve_config
from pixelpipe.core.hardware import (
    PROFILES,
    REFERENCE_TEACHER,
    DeviceInfo,
    auto_profile,
    native_bf16,
    resolve_precision,
)
from pixelpipe.train.engine import EngineSettings

GiB = 2**30
T4 = DeviceInfo("cuda", "Tesla T4", 15 * GiB, (7, 5))
A10G = DeviceInfo("cuda", "NVIDIA A10G", 23 * GiB, (8, 6))
A100_40 = DeviceInfo("cuda", "NVIDIA A100-SXM4-40GB", 40 * GiB, (8, 0))
H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 80 * GiB, (9, 0))
CPU = DeviceInfo("cpu", "cpu", 16 * GiB, None)


@pytest.mark.parametrize("profile", ["cpu", "t4", "a10g", "h100", "auto"])
def test_each_profile_resolves_to_a_valid_config(profile, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # 'auto' must mean this CPU machine
    cfg = resolve_config({"hardware": {"profile": profile}})
    chosen = cfg["hardware"]["profile"]
    assert chosen == ("cpu" if profile == "auto" else profile)
    teacher = cfg["teacher"]["model"]
    if chosen == "cpu":
        assert teacher["dim"] < 768 and cfg["render"]["lines"] == 1
    else:
        assert {k: teacher[k] for k in REFERENCE_TEACHER} == REFERENCE_TEACHER
        assert (cfg["render"]["lines"], cfg["render"]["line_chars"]) == (4, 104)  # 416 characters for 150-400
        assert cfg["engine"]["pin_memory"] and cfg["engine"]["num_workers"] > 0
    engine = EngineSettings.from_config(cfg["engine"], CPU)
    assert engine.precision == "fp32" and not engine.pin_memory  # any profile still runs on a CPU


def test_user_keys_beat_the_profile():
    cfg = resolve_config({"hardware": {"profile": "h100"}, "engine": {"compile": "none"},
                          "teacher": {"train": {"batch_size": 32}}})
    assert cfg["engine"]["compile"] == "none" and cfg["engine"]["precision"] == "bf16"
    assert cfg["teacher"]["train"]["batch_size"] == 32 and cfg["teacher"]["train"]["epochs"] == 3


def test_t4_profile_uses_fp16_checkpointing_and_auto_batch():
    cfg = resolve_config({"hardware": {"profile": "t4"}})
    assert cfg["engine"]["precision"] == "fp16" and cfg["engine"]["activation_checkpointing"]
    assert cfg["teacher"]["train"]["batch_size"] == "auto"


@pytest.mark.parametrize("info,profile", [(T4, "t4"), (A10G, "a10g"), (A100_40, "a10g"), (H100, "h100"), (CPU, "cpu")])
def test_auto_profile_by_capability_and_memory(info, profile):
    assert auto_profile(info) == profile


def test_precision_follows_compute_capability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # what a T4 reports
    assert not native_bf16(T4) and native_bf16(A10G) and native_bf16(H100)
    assert resolve_precision("auto", T4) == "fp16"
    assert resolve_precision("bf16", T4) == "fp16"
    assert resolve_precision("auto", H100) == "bf16"
    assert resolve_precision("fp16", H100) == "fp16"
    assert resolve_precision("bf16", CPU) == "fp32"
    t4 = EngineSettings.from_config(resolve_config({"hardware": {"profile": "t4"}})["engine"], T4)
    assert t4.precision == "fp16" and t4.pin_memory


def test_every_profile_key_exists_in_the_schema():
    from pixelpipe.config.resolve import load_schema

    props = load_schema()["properties"]
    for name, profile in PROFILES.items():
        for section, values in profile.items():
            sub = props[section]["properties"]
            for key in values:
                assert key in sub, f"profile {name}: {section}.{key}"


def test_probe_device_asks_for_the_gpu_torch_would_use(tmp_path, monkeypatch):
    """nvidia-smi lists every GPU; torch only CUDA_VISIBLE_DEVICES: the probe follows torch."""
    from pixelpipe.core.hardware import probe_device

    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$2" = 1 ] && echo "NVIDIA H100 80GB HBM3, 81559, 9.0" || echo "Tesla T4, 15360, 7.5"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert probe_device("auto").name.startswith("NVIDIA H100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert probe_device("auto").kind == "cpu"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert probe_device("auto").name == "Tesla T4"
