"""Models and training state as safetensors + JSON: nothing is ever unpickled.

A model directory holds `model.safetensors` and `config.json`. A training
checkpoint `step-{n}` holds every tensor (model, objective, optimizer state,
CPU and CUDA RNG) in `step-{n}.safetensors` and everything else (scheduler, scaler, data
position, param groups) in `step-{n}.json`. The JSON is written last and
carries the sha256 of the tensors file, so a checkpoint without its JSON is
incomplete (and removed), and one whose tensors were damaged is never loaded:
resume falls back to the newest checkpoint that verifies.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..core.io import IntegrityError, atomic_path, read_json, sha256_file, verify_file, write_json
from .encoder import EncoderConfig, TRMVisionEncoder

_STEP_RE = re.compile(r"^step-(\d+)\.json$")


def _contiguous(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().cpu() for k, v in sd.items()}


def save_model(out_dir: str | Path, model: TRMVisionEncoder, extra: dict[str, Any] | None = None) -> None:
    """Write model.safetensors + config.json (encoder config, the weights' sha256, whatever `extra` describes)."""
    out_dir = Path(out_dir)
    model = getattr(model, "_orig_mod", model)
    with atomic_path(out_dir / "model.safetensors", suffix=".safetensors") as tmp:
        save_file(_contiguous(model.state_dict()), str(tmp))
    write_json(out_dir / "config.json", {"encoder": model.cfg.to_dict(), **(extra or {}),
                                         "weights_sha256": sha256_file(out_dir / "model.safetensors")})


def load_model(model_dir: str | Path, device: str | torch.device = "cpu") -> tuple[TRMVisionEncoder, dict]:
    model_dir = Path(model_dir)
    cfg_path, weights = model_dir / "config.json", model_dir / "model.safetensors"
    for p in (cfg_path, weights):
        if not p.exists():
            raise FileNotFoundError(f"model file missing: {p}")
    config = read_json(cfg_path)
    if "weights_sha256" in config:  # models written before checksums were recorded load unchecked
        verify_file(weights, config["weights_sha256"], str(cfg_path), f"train_{config.get('role', 'student')}")
    model = TRMVisionEncoder(EncoderConfig.from_dict(config["encoder"]), atlas_cells(config))
    model.load_state_dict(load_file(str(weights), device=str(device)))
    return model.to(device), config


def atlas_cells(config: dict) -> torch.Tensor | None:
    """The glyph atlas a saved model's config carries, as uint8 cells [G, ch, cw] (glyph id = index); None without."""
    from ..data.atlas import GlyphAtlas

    if "atlas" not in config:
        return None
    render = config["render"]
    atlas = GlyphAtlas.from_dict(config["atlas"], render["fonts"], render["font_size"])
    return torch.from_numpy(atlas.cells.copy())


def _flatten_optimizer(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for idx, state in sd["state"].items():
        for key, val in state.items():
            if torch.is_tensor(val):
                tensors[f"optimizer.{idx}.{key}"] = val
            else:
                scalars[f"{idx}.{key}"] = val
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict[str, Any]] = {}
    for name, val in tensors.items():
        if name.startswith("optimizer."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = val
    for name, val in meta["scalars"].items():
        idx, key = name.split(".", 1)
        state.setdefault(int(idx), {})[key] = val
    groups = meta["param_groups"]
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    return {"state": state, "param_groups": groups}


def save_training_state(
    ckpt_dir: str | Path,
    step: int,
    modules: dict[str, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
    meta: dict[str, Any],
) -> Path:
    """Write step-{step}.safetensors then step-{step}.json; returns the JSON path."""
    ckpt_dir = Path(ckpt_dir)
    tensors: dict[str, torch.Tensor] = {}
    for prefix, module in modules.items():
        module = getattr(module, "_orig_mod", module)
        for k, v in module.state_dict().items():
            tensors[f"{prefix}.{k}"] = v
    opt_tensors, opt_meta = _flatten_optimizer(optimizer)
    tensors.update(opt_tensors)
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    tensors_path = ckpt_dir / f"step-{step}.safetensors"
    with atomic_path(tensors_path, suffix=".safetensors") as tmp:
        save_file(_contiguous(tensors), str(tmp))
    json_path = ckpt_dir / f"step-{step}.json"
    write_json(json_path, {"step": step, "optimizer": opt_meta, **meta, "safetensors_sha256": sha256_file(tensors_path)})
    return json_path


def load_training_state(
    json_path: str | Path,
    modules: dict[str, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
) -> dict[str, Any]:
    """Restore modules, optimizer and torch RNG in place; return the JSON metadata.

    The tensors are verified against the JSON's sha256 and matched against the modules' keys and
    shapes before anything is copied, so a checkpoint that fails leaves the modules untouched.
    """
    json_path = Path(json_path)
    meta = read_json(json_path)
    tensors_path = json_path.with_suffix(".safetensors")
    verify_file(tensors_path, meta.get("safetensors_sha256"), str(json_path), None)
    tensors = load_file(str(tensors_path))
    subs = {prefix: _module_tensors(tensors, prefix, module, tensors_path) for prefix, module in modules.items()}
    # the optimizer first: its state is the part that can still be rejected, and it holds no module weights
    optimizer.load_state_dict(_unflatten_optimizer(tensors, meta["optimizer"]))
    for prefix, module in modules.items():
        getattr(module, "_orig_mod", module).load_state_dict(subs[prefix])
    torch.set_rng_state(tensors["rng.torch"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    return meta


def _module_tensors(tensors: dict[str, torch.Tensor], prefix: str, module: torch.nn.Module,
                    path: Path) -> dict[str, torch.Tensor]:
    """The state dict of `module` in a checkpoint; IntegrityError unless keys and shapes match exactly."""
    module = getattr(module, "_orig_mod", module)
    sub = {k[len(prefix) + 1 :]: v for k, v in tensors.items() if k.startswith(prefix + ".")}
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in sub.items()}
    if got != want:
        diff = sorted(set(want.items()) ^ set(got.items()))[:3]
        raise IntegrityError(f"{path} does not fit the {prefix} (first differences: {diff})")
    return sub


def load_newest_valid(ckpt_dir: str | Path, modules: dict[str, torch.nn.Module], optimizer: torch.optim.Optimizer,
                      log: Callable[[str], Any] = print) -> tuple[int, Path, dict[str, Any]] | None:
    """Restore the newest checkpoint that verifies: (step, JSON path, metadata), or None when none does.

    Orphans (tensors without JSON, temporaries of a killed write) and checkpoints that fail to load
    (damaged bytes, unreadable JSON, tensors that do not fit) are logged with the reason and removed,
    so they are never tried again; an older complete checkpoint is used instead.
    """
    for path in remove_orphans(ckpt_dir):
        log(f"removed incomplete checkpoint file {path}")
    for step, json_path in reversed(list_checkpoints(ckpt_dir)):
        try:
            return step, json_path, load_training_state(json_path, modules, optimizer)
        except (IntegrityError, SafetensorError, OSError, KeyError, ValueError) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        for p in (json_path, json_path.with_suffix(".safetensors")):
            p.unlink(missing_ok=True)
        log(f"skipped checkpoint {json_path.name} and removed it: {reason}")
    return None


def remove_orphans(ckpt_dir: str | Path) -> list[Path]:
    """Delete `step-*.safetensors` without their JSON and temporaries left by a killed write."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    orphans = [p for p in ckpt_dir.glob("step-*.safetensors") if not p.with_suffix(".json").exists()]
    orphans += list(ckpt_dir.glob(".step-*.tmp*"))
    for p in orphans:
        p.unlink(missing_ok=True)
    return orphans


def list_checkpoints(ckpt_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (JSON present) sorted by step."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.exists():
        return []
    found = []
    for p in ckpt_dir.iterdir():
        m = _STEP_RE.match(p.name)
        if m and p.with_suffix(".safetensors").exists():
            found.append((int(m.group(1)), p))
    return sorted(found)


def rotate_checkpoints(ckpt_dir: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` checkpoints (ModelCheckpoint's save_top_k by recency)."""
    removed = []
    ckpts = list_checkpoints(ckpt_dir)
    for _, json_path in ckpts[: max(0, len(ckpts) - keep_last)]:
        for p in (json_path, json_path.with_suffix(".safetensors")):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
