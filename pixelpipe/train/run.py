"""The teacher and student training stages: build, train, evaluate, save.

Both stages run the same `engine.Trainer`; they differ only in the model size
and the objective (labels for the teacher; labels + teacher logits + teacher
sketches for the student). Under torchrun every rank runs the same stage
function; rank 0 alone writes the model, metrics and checkpoints.

The config stops at the two entry functions, `train_teacher` and `train_student`: each turns it into its
role's settings once (`train.settings.TeacherSettings`, `StudentSettings`), and every function below takes those
typed settings, never the config. (`encoder_config` is the way in for scripts that read a config themselves, as
in bench/.)
"""

from __future__ import annotations

import csv
import hashlib
import io as _io
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import pixelpipe

from ..config.resolve import output_affecting
from ..core import distributed
from ..core.device import configure_backends, intra_op_threads
from ..core.hardware import DeviceInfo, detect_device
from ..core.io import read_json, sha256_file, write_text
from ..core.measure import release_freed_heap
from ..data.cache import CacheDataset, CacheSplit, atlas_tensor, rows_per_label
from ..data.consolidate import open_dataset
from ..data.encoded import VIEW_FIELDS
from ..data.scripts import known_scripts
from ..data.text_augment import TextAugmenter
from ..model.checkpoint import list_checkpoints, load_model, rotate_checkpoints, save_model
from ..model.encoder import EncoderConfig, TRMVisionEncoder, count_parameters, flops_per_sample, init_seed_everything
from .calibrate import calibrate, fold_temperature
from .distill import ClassificationObjective, DistillationObjective
from .engine import Trainer
from .parts import PartTimer
from .scoring import evaluate
from .settings import EngineSettings, RoleSettings, StudentSettings, TeacherSettings, TrainResult, TrainSettings

METRIC_COLUMNS = ("epoch", "step", "split", "loss", "accuracy", "lr", "samples_per_s")


def encoder_config(model_cfg: Mapping[str, Any], render_settings: Mapping[str, Any],
                   num_classes: int) -> EncoderConfig:
    """The encoder for a raw `{role}.model` section, for scripts that read a config themselves (bench/). Training
    builds it from its settings (`ModelSettings.encoder`)."""
    return EncoderConfig.from_section(model_cfg, render_settings, num_classes)


def trained_text_length(train: TrainSettings, manifest: dict) -> dict:
    """The text lengths training saw, so predict warns only about inputs truly outside them.

    min_chars: the shortest training window (or the shortest training text, without windows);
    max_chars: what the layout holds (longer texts are truncated, in training as in predict).
    """
    shortest = manifest["shortest_clusters"]
    if train.window_prob > 0:
        shortest = min(shortest, train.window_min_chars)
    cells = manifest["render"]["lines"] * manifest["render"]["line_chars"]
    return {"min_chars": int(shortest), "max_chars": int(min(manifest["longest_clusters"], cells))}


def model_extras(train: TrainSettings, labels: list[str], train_split: CacheSplit) -> dict:
    """What a model's config.json carries besides the encoder: labels, rendering, the atlas, text lengths, which
    glyphs the training texts contain (predict's notice about characters training never saw) and the scripts of
    their letters (a text with none of them gets no language)."""
    counts = train_split.manifest["glyph_counts"]
    trained = [i for i, c in enumerate(counts) if c > 0]
    clusters = train_split.atlas.clusters
    return {"labels": labels, "render": train_split.render_settings, "atlas": train_split.manifest["atlas"],
            "text_length": trained_text_length(train, train_split.manifest),
            "trained_glyphs": trained, "scripts": known_scripts(clusters[i] for i in trained)}


def augmenter(train: TrainSettings, split: CacheSplit, labels: list[str], seed: int,
              prob: float | None = None) -> TextAugmenter | None:
    """The texts' rewriter for `{role}.train.augment` (None when no kind is listed), rewriting a share `prob` of
    them (train.augment_prob unless given)."""
    if not train.augment:
        return None
    return TextAugmenter(split.atlas, split.settings, train.augment, train.augment_prob if prob is None else prob,
                         labels, seed)


def read_rows(train: TrainSettings, split: CacheSplit, seed: int) -> np.ndarray | None:
    """The train rows a role reads (None: all of them), `{role}.train.rows_per_language` of each language."""
    return None if train.rows_per_language is None else rows_per_label(split, train.rows_per_language, seed)


def length_calibration_set(val: CacheDataset, train: TrainSettings, labels: list[str], seed: int) -> CacheDataset:
    """The val split with every text rewritten by one of train.augment's kinds (as it is, without them): the texts
    the deployed model's per-length temperatures are fitted on (calibrate.py says why). The split `val` read is
    already verified."""
    return CacheDataset(val.split.split_dir, verify=False, transform=augmenter(train, val.split, labels, seed + 1, 1.0))


@dataclass(frozen=True)
class StageDevice:
    """Where this process trains: the device found, its torch device (this rank's GPU under DDP) and the engine
    settings resolved for it."""

    info: DeviceInfo
    device: torch.device
    engine: EngineSettings


@dataclass(frozen=True)
class Splits:
    """The datasets a stage trains on (`train`, augmented), selects on (`val`) and reports (`test`)."""

    train: CacheDataset
    val: CacheDataset
    test: CacheDataset


def setup_device(role: RoleSettings, threads: int | None) -> StageDevice:
    """Find the device of `hardware.device`, resolve the engine for it and set torch's backends and threads."""
    info = detect_device(role.hardware.device)
    engine = role.engine.for_device(info)
    configure_backends(engine.tf32, intra_op_threads(engine.threads, engine.ddp_processes, threads))
    d = distributed.current()
    device = torch.device("cuda", d.local_rank) if info.kind == "cuda" and d.enabled else torch.device(info.kind)
    return StageDevice(info, device, engine)


def metrics_rows(history: list[dict], test: dict | None) -> list[dict]:
    rows = []
    for h in history:
        rows.append({"epoch": h["epoch"], "step": h["step"], "split": "train", "loss": h.get("train_loss"),
                     "lr": h.get("lr"), "samples_per_s": h.get("samples_per_s")})
        if "val_accuracy" in h:
            rows.append({"epoch": h["epoch"], "step": h["step"], "split": "val", "loss": h["val_loss"],
                         "accuracy": h["val_accuracy"]})
    if test is not None:
        last = history[-1] if history else {"epoch": 0, "step": 0}
        rows.append({"epoch": last["epoch"], "step": last["step"], "split": "test", "loss": test["loss"],
                     "accuracy": test["accuracy"]})
    return rows


def write_metrics_csv(path: Path, rows: list[dict]) -> None:
    buf = _io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=METRIC_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buf.getvalue())


def checkpoint_batch_size(ckpt_dir: Path | None) -> int | None:
    """The effective batch the newest readable checkpoint was trained with (resume must keep it)."""
    for _, path in reversed(list_checkpoints(ckpt_dir) if ckpt_dir else []):
        try:
            meta = read_json(path)
            return int(meta.get("batch_size", meta["micro_batch"] * meta["accum"]))
        except (ValueError, KeyError):  # damaged: resume skips it too
            continue
    return None


def resolve_batch_size(train: TrainSettings, model: TRMVisionEncoder, objective, sample_batch: Callable[[int], dict],
                       engine: EngineSettings, device: torch.device, n_train: int, log: Callable[[str], None],
                       ckpt_dir: Path | None = None) -> tuple[int, dict | None]:
    """(effective batch size, finder report or None). 'auto' searches, unless a checkpoint fixes it.

    Under DDP rank 0 searches for one process (on CPU within its share of the RAM the ranks share), the
    others take its answer, and the global batch is that times the number of processes.
    """
    if not train.batch_size_auto:
        return int(train.batch_size), None
    resumed = checkpoint_batch_size(ckpt_dir)
    if resumed is not None:
        log(f"batch size auto: resuming, so keeping the checkpoint's batch size {resumed}")
        return resumed, {"from_checkpoint": True, "batch_size": resumed}
    from .batchsize import default_budget, find_batch_size

    d = distributed.current()
    found = None
    if d.main:
        budget = default_budget(engine, device) // (d.world if device.type == "cpu" else 1)
        found = find_batch_size(model, objective, sample_batch, engine, device, log=log, budget_bytes=budget,
                                max_batch=max(1, n_train // 4 // d.world)).to_dict()
    found = distributed.broadcast(found, d)
    return found["batch_size"] * d.world, {**found, "processes": d.world}


def run_fingerprint(params: dict) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def source_hash() -> str:
    """sha256 of the package's source and the torch version: the code that decides what training computes.

    The whole package rather than a hand-kept list of modules, so no edit that changes results
    (model, loss, engine, windows, ...) can be missed; editing any module restarts training.
    """
    root = Path(pixelpipe.__file__).resolve().parent
    h = hashlib.sha256(torch.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def training_fingerprint(role: RoleSettings, data_files: list[Path]) -> str:
    """Identity of a training run: its config slice, the bytes it learns from and the code that learns.

    Checkpoints carry it, so a resumed run is always the same run (never another config's, and never
    one from before a fix in the model or the loss).
    """
    return run_fingerprint({role.role: role.role_section(), "engine": output_affecting(role.engine.to_section()),
                            "seed": role.seed, "data": [sha256_file(p) for p in data_files], "code": source_hash()})


def clear_stale_checkpoints(ckpt_dir: Path, fingerprint: str, log: Callable[[str], None]) -> None:
    """Checkpoints of another run (config, data or code) must not be resumed: drop them (rank 0's job under DDP)."""
    if not distributed.current().main:
        return
    marker = ckpt_dir / "RUN"
    if marker.exists() and marker.read_text().strip() != fingerprint:
        removed = rotate_checkpoints(ckpt_dir, 0)
        log(f"checkpoints in {ckpt_dir} belong to another run (config, data or code); removed {len(removed) // 2}")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_text(marker, fingerprint + "\n")


def calibrated(model: TRMVisionEncoder, val_set, train: TrainSettings, engine: EngineSettings, device: torch.device,
               seed: int, micro: int, log: Callable[[str], None], by_length: CacheDataset | None = None) -> dict | None:
    """Temperature scaling on the val split, folded into the head (train.calibrate); rank 0 fits, every rank folds
    its temperature, so the processes keep identical weights. `by_length`: the texts to fit the short texts'
    temperatures on too (the deployed model's: `length_calibration_set`)."""
    if not train.calibrate or val_set is None or not len(val_set):
        return None
    d = distributed.current()
    found = None
    if d.main:
        found = calibrate(model, val_set, device, engine.precision, max(64, micro), train.window_min_chars,
                          seed, by_length).to_dict()
        release_freed_heap()  # rewriting val for the length temperatures left ~90 MB of freed pages held
    found = distributed.broadcast(found, d)
    if not d.main:
        fold_temperature(model, found["temperature"])
    log(f"calibration: temperature {found['temperature']:.3f}; val NLL {found['nll_before']:.4f} -> "
        f"{found['nll_after']:.4f}, ECE {100 * found['ece_before']:.2f} -> {100 * found['ece_after']:.2f} % "
        f"({found['samples']} texts and windows)")
    if found.get("by_length"):
        b = found["by_length"]
        log("calibration by length (from characters: temperature): "
            + ", ".join(f"{e}: {t:.2f}" for e, t in zip(b["edges"], b["temperatures"])))
    return found


def _fit(role: RoleSettings, model: TRMVisionEncoder, objective, sets: Splits, stage: StageDevice,
         ckpt_dir: Path | None, profile_dir: Path | None,
         log: Callable[[str], None]) -> tuple[Trainer, TrainResult, dict]:
    """Resolve the batch size, train, time the model's parts: (trainer, result, forward parts)."""
    engine, device = stage.engine, stage.device

    def sample_batch(b: int) -> dict:
        """b real training samples (cycling through the split when it is smaller than b)."""
        return sets.train.__getitems__([i % len(sets.train) for i in range(b)])

    batch_size, search = resolve_batch_size(role.train, model, objective, sample_batch, engine, device,
                                            len(sets.train), log, ckpt_dir)
    ck = role.checkpoint
    trainer = Trainer(model, objective, sets.train, sets.val, role.train.with_batch_size(batch_size), engine, device,
                      seed=role.seed, ckpt_dir=ckpt_dir, keep_last=ck.keep_last, every_steps=ck.every_steps, log=log,
                      profile_dir=profile_dir, desc=role.role)
    log(f"{role.role}: {count_parameters(model):,} parameters, {len(sets.train)} train samples, batch {batch_size}, "
        f"{trainer.total_steps} steps on {stage.info.name} ({engine.precision})")
    # Module hooks would break torch.compile graphs; under compile use engine.profiler instead.
    parts = PartTimer(model, device) if engine.compile == "none" else None
    result = trainer.fit()
    info = stage.info
    result.resolved.update(hardware_profile=role.hardware.profile, device_name=info.name,
                           device_capability=list(info.capability) if info.capability else None,
                           batch_size_requested=role.train.batch_size, batch_size_search=search)
    return trainer, result, parts.summary() if parts is not None else {}


def _train_and_save(role: RoleSettings, model: TRMVisionEncoder, objective, sets: Splits, stage: StageDevice,
                    out_dir: Path, ckpt_dir: Path | None, profile_dir: Path | None, extra_config: dict,
                    log: Callable[[str], None]) -> tuple[TrainResult, dict]:
    engine, device = stage.engine, stage.device
    trainer, result, forward_parts = _fit(role, model, objective, sets, stage, ckpt_dir, profile_dir, log)
    by_length = length_calibration_set(sets.val, role.train, extra_config["labels"], role.seed) if role.DEPLOYED else None
    calibration = calibrated(model, sets.val, trainer.train, engine, device, role.seed, trainer.micro, log, by_length)
    test = evaluate(model, sets.test, device, engine.precision, batch_size=max(64, trainer.micro), dist=trainer.dist)
    log(f"{role.role}: test accuracy {test['accuracy']:.4f} ({test['samples']} samples)")
    mean_chars = float(sets.train.split.manifest.get("mean_clusters") or model.cfg.cells)
    summary = {"test_accuracy": test["accuracy"], "test_loss": test["loss"],
               "final_val_accuracy": result.history[-1].get("val_accuracy") if result.history else None,
               "train_wall_s": result.wall_s, "train_samples": result.samples, "parameters": count_parameters(model),
               "mflops_per_text": flops_per_sample(model.cfg, mean_chars) / 1e6, "mean_chars": mean_chars,
               "calibration": calibration}
    t_write = time.perf_counter()
    if trainer.dist.main:
        save_model(out_dir, model, {**extra_config, "role": role.role, "device": stage.info.name,
                                    "hardware_profile": role.hardware.profile, "resolved": result.resolved,
                                    "metrics": summary})
        write_metrics_csv(out_dir / "metrics.csv", metrics_rows(result.history, test))
    # writing the outputs, next to the step components (periodic checkpoint saves are in none of them)
    result.components["write"] = {"seconds": time.perf_counter() - t_write, "share": 0.0, "calls": 1}
    return result, {**summary, "forward_parts": forward_parts}


def train_teacher(cfg: dict, cache_root: Path, labels_path: Path, out_dir: Path, threads: int | None = None,
                  log: Callable[[str], None] = print, ckpt_dir: Path | None = None,
                  profile_dir: Path | None = None) -> tuple[TrainResult, dict]:
    """The teacher stage. The raw config stops here: it becomes `TeacherSettings`, and only those go further."""
    role = TeacherSettings.from_config(cfg)
    init_seed_everything(role.seed)
    stage = setup_device(role, threads)
    labels = read_json(labels_path)["labels"]
    train_split = CacheSplit(cache_root / "train")
    model = TRMVisionEncoder(role.model.encoder(train_split.render_settings, len(labels)), atlas_tensor(train_split))
    objective = ClassificationObjective(role.train.label_smoothing)
    if ckpt_dir is not None:
        fingerprint = training_fingerprint(role, [cache_root / "train" / "manifest.json", labels_path])
        clear_stale_checkpoints(ckpt_dir, fingerprint, log)
    distributed.barrier(distributed.current())  # no rank looks for checkpoints before rank 0 cleared stale ones
    train_set = CacheDataset(cache_root / "train", transform=augmenter(role.train, train_split, labels, role.seed),
                             subset=read_rows(role.train, train_split, role.seed))
    sets = Splits(train_set, CacheDataset(cache_root / "val"), CacheDataset(cache_root / "test"))
    return _train_and_save(role, model, objective, sets, stage, out_dir, ckpt_dir, profile_dir,
                           extra_config=model_extras(role.train, labels, train_split), log=log)


def train_student(cfg: dict, cache_root: Path, dataset_dir: Path, teacher_dir: Path, labels_path: Path,
                  out_dir: Path, ckpt_dir: Path, threads: int | None = None, log: Callable[[str], None] = print,
                  profile_dir: Path | None = None) -> tuple[TrainResult, dict]:
    """The student stage. The raw config stops here: it becomes `StudentSettings`, and only those go further."""
    role = StudentSettings.from_config(cfg)
    init_seed_everything(role.seed)
    stage = setup_device(role, threads)
    labels = read_json(labels_path)["labels"]
    teacher_cfg = read_json(teacher_dir / "config.json")
    train_split = CacheSplit(cache_root / "train")
    teacher_out = open_dataset(dataset_dir)
    if len(teacher_out["logits"]) != len(train_split):
        raise ValueError(f"{dataset_dir} has {len(teacher_out['logits'])} rows, the train cache {len(train_split)}")
    model = TRMVisionEncoder(role.model.encoder(train_split.render_settings, len(labels)), atlas_tensor(train_split))
    objective = DistillationObjective(model.cfg.dim, teacher_cfg["encoder"]["dim"], role.distill,
                                      role.train.label_smoothing)
    extra = {"teacher_logits": teacher_out["logits"], "teacher_sketches": teacher_out["sketches"]}
    extra.update({name: teacher_out[name] for name in VIEW_FIELDS if name in teacher_out})  # encode.views > 1
    subset = read_rows(role.train, train_split, role.seed)
    if role.distill.transfer and subset is not None:  # every row; those beyond the share without their label
        extra["labelled"] = np.zeros(len(train_split), bool)
        extra["labelled"][subset], subset = True, None
    train_set = CacheDataset(cache_root / "train", extra=extra,
                             transform=augmenter(role.train, train_split, labels, role.seed), subset=subset)
    fingerprint = training_fingerprint(role, [cache_root / "train" / "manifest.json", labels_path,
                                              dataset_dir / "manifest.json", teacher_dir / "model.safetensors"])
    clear_stale_checkpoints(ckpt_dir, fingerprint, log)
    distributed.barrier(distributed.current())  # no rank looks for checkpoints before rank 0 cleared stale ones
    sets = Splits(train_set, CacheDataset(cache_root / "val"), CacheDataset(cache_root / "test"))
    teacher = {"test_accuracy": teacher_cfg.get("metrics", {}).get("test_accuracy"),
               "sha256": sha256_file(teacher_dir / "model.safetensors")}
    return _train_and_save(role, model, objective, sets, stage, out_dir, ckpt_dir, profile_dir,
                           extra_config={**model_extras(role.train, labels, train_split), "teacher": teacher}, log=log)


def load_teacher(teacher_dir: Path, device: torch.device) -> TRMVisionEncoder:
    model, _ = load_model(teacher_dir, device)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


__all__ = ["train_teacher", "train_student", "load_teacher", "list_checkpoints"]
