"""Hardware profiles (pixelpipe/config/profiles.yaml) resolve to valid configs, and precision follows the card,
not is_bf16_supported()."""

from __future__ import annotations

import pytest
import torch

from pixelpipe.config.profiles import PROFILES_PATH, load_profile, load_profiles
from pixelpipe.config.resolve import SCHEMA_PATH, load_schema, resolve_config
from pixelpipe.core.hardware import (
    DeviceInfo,
    auto_profile,
    native_bf16,
    resolve_precision,
)
from pixelpipe.train.settings import EngineSettings

GiB = 2**30
T4 = DeviceInfo("cuda", "Tesla T4", 15 * GiB, (7, 5))
A10G = DeviceInfo("cuda", "NVIDIA A10G", 23 * GiB, (8, 6))
A100_40 = DeviceInfo("cuda", "NVIDIA A100-SXM4-40GB", 40 * GiB, (8, 0))
H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 80 * GiB, (9, 0))
CPU = DeviceInfo("cpu", "cpu", 16 * GiB, None)
REFERENCE_TEACHER = load_profile("h100")["teacher"]["model"]


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
    engine = EngineSettings.from_section(cfg["engine"]).for_device(CPU)
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
    t4 = EngineSettings.from_section(resolve_config({"hardware": {"profile": "t4"}})["engine"]).for_device(T4)
    assert t4.precision == "fp16" and t4.pin_memory


def _leaf_keys(values: dict, node: dict, root: dict, prefix: str = "") -> list[tuple[str, dict | None]]:
    """(dotted key, its schema node or None where the schema lacks it) of every value a profile sets."""
    out = []
    for key, value in values.items():
        sub = node.get("properties", {}).get(key)
        if sub is not None and "$ref" in sub:
            sub = {**root["definitions"][sub["$ref"].split("/")[-1]], **sub}
        if sub is not None and isinstance(value, dict) and "properties" in sub and key != "splits":
            out += _leaf_keys(value, sub, root, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", sub))
    return out


def test_profiles_are_data_beside_the_schema_one_per_schema_choice():
    assert PROFILES_PATH.parent == SCHEMA_PATH.parent  # both ship in pixelpipe/config (package-data *.yaml)
    choices = load_schema()["properties"]["hardware"]["properties"]["profile"]["enum"]
    assert list(load_profiles()) == [c for c in choices if c != "auto"]


def test_every_profile_key_exists_in_the_schema():
    schema = load_schema()
    for name, profile in load_profiles().items():
        for key, node in _leaf_keys(profile, schema, schema):
            assert node is not None, f"profile {name} sets {key}, which the schema lacks"


def test_loaded_profiles_are_fresh_copies():
    """YAML aliases share one object between profiles: a caller changing its copy must not change another's."""
    first = load_profiles()
    first["t4"]["teacher"]["model"]["dim"] = 1
    first["cpu"]["teacher"]["train"]["augment"].append("typos")
    assert load_profile("a10g")["teacher"]["model"]["dim"] == 768
    assert load_profile("cpu")["student"]["train"]["augment"] == ["case", "no_diacritics", "lookalikes"]


# Values the profiles gave when they were Python dicts in core/hardware.py (before profiles.yaml), pinned so that
# moving them, or the YAML anchors sharing them between profiles, changes no resolved config (the cpu values since
# changed on purpose: every language by default, checkpoints every 1000 / 500 steps, a teacher that reads more,
# both models reading twice as often at batch 256).
PINNED = {
    "cpu": {"corpus.languages": None,
            "corpus.num_samples": 480000, "corpus.splits": {"train": 0.91, "val": 0.045, "test": 0.045},
            "render.lines": 1, "render.line_chars": 96, "teacher.train.epochs": 2,
            "teacher.model.core": "none", "teacher.model.dim": 32, "teacher.model.activation": "relu",
            "teacher.model.ngram_orders": 5, "teacher.model.ngram_bits": 19, "teacher.model.ngram_dim": 128,
            "student.model.ngram_orders": 4, "student.model.ngram_bits": 17, "student.model.ngram_dim": 64,
            "teacher.train.lr": 0.004, "student.train.epochs": 2.6, "student.train.batch_size": 256, "student.model.dim": 16,
            "student.train.augment": ["case", "no_diacritics", "lookalikes"], "student.checkpoint.every_steps": 500,
            "teacher.checkpoint.keep_last": 1, "teacher.checkpoint.every_steps": 2000,
            "teacher.train.batch_size": 256, "teacher.train.rows_per_language": None,
            "student.train.rows_per_language": 3400,
            "engine.precision": "auto", "engine.num_workers": 0, "encode.batch_size": 256},
    "t4": {"engine.precision": "fp16", "engine.activation_checkpointing": True, "engine.compile": "none",
           "teacher.train.batch_size": "auto", "student.train.batch_size": "auto", "engine.num_workers": 6},
    "a10g": {"engine.precision": "bf16", "engine.activation_checkpointing": False, "engine.tf32": True,
             "teacher.train.batch_size": "auto", "engine.prefetch_factor": 4},
    "h100": {"engine.precision": "bf16", "teacher.train.batch_size": 256, "student.train.batch_size": 512,
             "student.checkpoint.every_steps": 500, "student.checkpoint.keep_last": 3, "encode.batch_size": 512,
             "corpus.num_samples": 200000, "corpus.languages": None, "render.lines": 4, "render.line_chars": 104,
             "teacher.model.dim": 768, "teacher.model.L_cycles": 3, "teacher.model.num_capsules": 12,
             "teacher.model.ngram_bits": 20, "teacher.train.lr": 0.0005, "student.model.dim": 192,
             "student.train.lr": 0.001, "engine.channels_last": True, "engine.pin_memory": True},
}


@pytest.mark.parametrize("profile", sorted(PINNED))
def test_profiles_resolve_to_the_values_they_always_had(profile):
    cfg = resolve_config({"hardware": {"profile": profile}})
    for key, value in PINNED[profile].items():
        section = cfg
        for part in key.split("."):
            section = section[part]
        assert section == value and type(section) is type(value), f"{profile}: {key} = {section!r}, was {value!r}"


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
