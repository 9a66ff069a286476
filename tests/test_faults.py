"""Fault injection: every case of docs/reliability.md, at unit level where a full run is not needed.

Each test damages an input or an artifact, or makes a stage fail, and asserts that pixelpipe
refuses with a one-line message naming the file or config key, or recovers, and that no final
artifact is ever wrong.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from pixelpipe.core import io
from pixelpipe.core.logs import stage_log
from pixelpipe.model.checkpoint import list_checkpoints
from tests._config_utils import section


def _flip_byte(path: Path, offset: int = -1) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


# ---- atomic writes -------------------------------------------------------------------------------


def test_atomic_files_get_the_umask_mode_and_no_temporaries_survive(tmp_path):
    old = os.umask(0o022)
    try:
        io.write_json(tmp_path / "a.json", {"x": 1})
        io.save_npy(tmp_path / "b.npy", np.zeros(3))
    finally:
        os.umask(old)
    for name in ("a.json", "b.npy"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644
    with pytest.raises(RuntimeError), io.atomic_path(tmp_path / "c.bin") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed half-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.npy"]


def test_atomic_path_flushes_file_and_directory(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(io, "fsync_path", lambda p: synced.append(Path(p)))
    io.write_text(tmp_path / "t.txt", "x")
    assert synced[0].name.startswith(".t.txt.") and synced[1] == tmp_path


def test_verify_file_names_file_manifest_and_rule(tmp_path):
    path = tmp_path / "shard.npy"
    io.save_npy(path, np.arange(10, dtype=np.uint8))
    sha = io.sha256_file(path)
    io.verify_file(path, sha, "manifest.json", "render_train")
    _flip_byte(path)
    with pytest.raises(io.IntegrityError) as err:
        io.verify_file(path, sha, "manifest.json", "render_train")
    assert str(path) in _one_line(err) and "manifest.json" in str(err.value) and "--forcerun render_train" in str(err.value)
    path.unlink()
    with pytest.raises(io.IntegrityError, match="is missing"):
        io.verify_file(path, sha, "manifest.json", "render_train")


def test_a_file_is_hashed_once_per_process_unless_it_changes(tmp_path, monkeypatch):
    path = tmp_path / "shard.npy"
    io.save_npy(path, np.arange(10, dtype=np.uint8))
    sha, old = io.sha256_file(path), path.stat().st_mtime_ns - 10 * io.RACY_NS
    os.utime(path, ns=(old, old))
    hashed = []
    monkeypatch.setattr(io, "sha256_file", lambda p: hashed.append(p) or sha)
    io.verify_file(path, sha, "m.json", "r")
    io.verify_file(path, sha, "m.json", "r")
    assert len(hashed) == 1
    os.utime(path, ns=(old + 1, old + 1))  # modified: hashed again
    io.verify_file(path, sha, "m.json", "r")
    assert len(hashed) == 2


# ---- stage logs ----------------------------------------------------------------------------------


def test_failed_stage_log_carries_the_traceback(tmp_path):
    log_path = tmp_path / "stage.log"
    with pytest.raises(ZeroDivisionError), stage_log(log_path) as log:
        log("starting")
        raise ZeroDivisionError("division by zero")
    text = log_path.read_text()
    assert "starting" in text and "ERROR: ZeroDivisionError" in text and "Traceback (most recent call last)" in text


# ---- verify on read: cache shards, consolidated arrays, models, ONNX --------------------------------


@pytest.fixture
def cache_split(tmp_path) -> Path:
    """A tiny rendered split `train` (2 shards) in a fresh directory, so each test may damage it."""
    from pixelpipe.data.render import render_split
    from tests.test_render import settings, write_corpus

    d = tmp_path / "cache" / "train"
    corpus, charset = write_corpus(tmp_path / "corpus" / "train.parquet", [f"text {i}" for i in range(5)],
                                   [i % 2 for i in range(5)])
    render_split(corpus, charset, settings(), [d / "shard-00000.npy", d / "shard-00001.npy"], d / "manifest.json",
                 shard_size=3, progress=False)
    return d


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_cache_shard_is_refused_by_every_reader(cache_split, damage):
    from pixelpipe.data.cache import CacheDataset, CacheSplit
    from pixelpipe.deploy.onnxmodel import iter_cache_split
    from pixelpipe.deploy.quantize import CacheRangeReader

    shard = cache_split / "shard-00001.npy"
    if damage == "flip":
        _flip_byte(shard)
    else:
        shard.write_bytes(shard.read_bytes()[:-7])
    readers = [lambda: CacheSplit(cache_split), lambda: CacheDataset(cache_split),  # train_teacher/student
               lambda: CacheSplit(cache_split, verify=False).verify([1]),  # encode (its own shard)
               lambda: list(iter_cache_split(cache_split)),  # quantize / deploy_benchmark accuracy
               lambda: CacheRangeReader([shard], 4).get_next()]  # quantize's activation ranges
    for read in readers:
        with pytest.raises(io.IntegrityError) as err:
            read()
        assert str(shard) in _one_line(err) and "snakemake --forcerun render_train" in str(err.value)
    CacheSplit(cache_split, verify=False).verify([0])  # the intact shard still reads


def test_damaged_dataset_array_is_refused(tmp_path):
    from pixelpipe.data.consolidate import consolidate, open_dataset

    shard = tmp_path / "a.npz"
    np.savez(shard, logits=np.ones((4, 3), np.float32), labels=np.arange(4))
    consolidate([shard], tmp_path / "train")
    open_dataset(tmp_path / "train")
    _flip_byte(tmp_path / "train" / "logits.npy")
    with pytest.raises(io.IntegrityError) as err:
        open_dataset(tmp_path / "train")
    assert "logits.npy" in _one_line(err) and "--forcerun consolidate" in str(err.value)


def test_damaged_model_weights_are_refused(tmp_path):
    from pixelpipe.model.checkpoint import load_model, save_model
    from tests._engine_utils import tiny_model

    save_model(tmp_path / "teacher", tiny_model(), {"role": "teacher", "labels": ["a", "b", "c"]})
    load_model(tmp_path / "teacher")
    _flip_byte(tmp_path / "teacher" / "model.safetensors")
    with pytest.raises(io.IntegrityError) as err:
        load_model(tmp_path / "teacher")
    assert "model.safetensors" in _one_line(err) and "--forcerun train_teacher" in str(err.value)


def test_damaged_manifest_names_the_file(cache_split):
    from pixelpipe.data.cache import CacheSplit

    (cache_split / "manifest.json").write_text('{"shards": [')
    with pytest.raises(io.IntegrityError) as err:
        CacheSplit(cache_split)
    assert "manifest.json is not valid JSON" in _one_line(err)


def test_damaged_onnx_is_refused_against_its_rules_metrics(tmp_path):
    from pixelpipe.deploy.onnxmodel import verify_onnx

    onnx_path, metrics = tmp_path / "student.onnx", tmp_path / "student.json"
    onnx_path.write_bytes(b"\x08\x07" * 100)
    io.write_json(metrics, {"onnx_sha256": io.sha256_file(onnx_path)})
    verify_onnx(onnx_path, metrics, "export_onnx")
    _flip_byte(onnx_path, 10)
    with pytest.raises(io.IntegrityError, match=r"student.onnx is corrupt.*--forcerun export_onnx"):
        verify_onnx(onnx_path, metrics, "export_onnx")


# ---- checkpoints -------------------------------------------------------------------------------------


def _checkpointed_run(ckpt_dir: Path):
    """A finished tiny run with checkpoints at steps 2 and 4 (the final one); returns its trainer."""
    from tests._engine_utils import ToyImages, make_trainer

    trainer = make_trainer(ToyImages(32), batch_size=8, epochs=1, ckpt_dir=ckpt_dir, every_steps=2, keep_last=3)
    trainer.fit()
    assert [s for s, _ in list_checkpoints(ckpt_dir)] == [2, 4]
    return trainer


@pytest.mark.parametrize("damage", ["data byte", "header", "json"])
def test_resume_skips_a_damaged_checkpoint_and_says_why(tmp_path, damage):
    from safetensors.torch import load_file

    from tests._engine_utils import ToyImages, make_trainer

    _checkpointed_run(tmp_path)
    step2 = load_file(str(tmp_path / "step-2.safetensors"))
    if damage == "data byte":
        _flip_byte(tmp_path / "step-4.safetensors")
    elif damage == "header":
        _flip_byte(tmp_path / "step-4.safetensors", 3)
    else:
        (tmp_path / "step-4.json").write_text("{")
    logs: list[str] = []
    resumed = make_trainer(ToyImages(32), batch_size=8, epochs=1, ckpt_dir=tmp_path, every_steps=2, keep_last=3)
    resumed.log = logs.append
    assert resumed.maybe_resume() and resumed.resumed_from == 2
    skipped = [line for line in logs if "skipped checkpoint step-4.json" in line]
    assert skipped and ("corrupt" in skipped[0] or "not valid JSON" in skipped[0]), logs
    assert not (tmp_path / "step-4.safetensors").exists() and not (tmp_path / "step-4.json").exists()
    for k, v in resumed.model.state_dict().items():
        assert torch.equal(v, step2[f"model.{k}"]), k


def test_no_valid_checkpoint_starts_fresh_with_untouched_weights(tmp_path):
    from tests._engine_utils import ToyImages, make_trainer, state

    _checkpointed_run(tmp_path)
    for p in tmp_path.glob("step-*.safetensors"):
        _flip_byte(p)
    fresh = make_trainer(ToyImages(32), batch_size=8, epochs=1, ckpt_dir=tmp_path, every_steps=2)
    before = state(fresh.model)
    assert not fresh.maybe_resume()
    assert all(torch.equal(before[k], v) for k, v in fresh.model.state_dict().items())
    assert not list(tmp_path.glob("step-*"))


def test_orphan_checkpoint_files_are_removed(tmp_path):
    from tests._engine_utils import ToyImages, make_trainer

    _checkpointed_run(tmp_path)
    (tmp_path / "step-4.json").unlink()  # killed between the tensors and the JSON
    (tmp_path / ".step-6.safetensors.1a2b3c4d.tmp.safetensors").write_bytes(b"partial")  # killed mid-write
    logs: list[str] = []
    resumed = make_trainer(ToyImages(32), batch_size=8, epochs=1, ckpt_dir=tmp_path, every_steps=2)
    resumed.log = logs.append
    assert resumed.maybe_resume() and resumed.resumed_from == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-2.json", "step-2.safetensors"]
    assert sum("removed incomplete checkpoint file" in line for line in logs) == 2
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2]


def test_fingerprint_covers_the_source_code(tmp_path, monkeypatch):
    from pixelpipe.train import run as train
    from pixelpipe.train.settings import StudentSettings
    from tests._config_utils import defaults

    role = StudentSettings.from_config(defaults())
    data = tmp_path / "manifest.json"
    data.write_text("{}")
    before = train.training_fingerprint(role, [data])
    monkeypatch.setattr(train, "source_hash", lambda: "a fixed bug in the loss")
    after = train.training_fingerprint(role, [data])
    assert before != after
    ckpt_dir = tmp_path / "ckpt"
    _checkpointed_run(ckpt_dir)
    train.clear_stale_checkpoints(ckpt_dir, before, log=lambda m: None)
    logs: list[str] = []
    train.clear_stale_checkpoints(ckpt_dir, after, log=logs.append)
    assert not list(ckpt_dir.glob("step-*")) and "belong to another run" in logs[0]


# ---- non-finite training, export and quantize gates ----------------------------------------------


def test_diverging_training_stops_before_anything_is_saved(tmp_path):
    from pixelpipe.train.engine import NonFiniteLossError
    from tests._engine_utils import ToyImages, make_trainer

    trainer = make_trainer(ToyImages(64), batch_size=8, epochs=2, ckpt_dir=tmp_path, every_steps=2,
                           train={"lr": 1e30, "grad_clip": 0.0, "warmup_fraction": 0.0})
    with pytest.raises(NonFiniteLossError) as err:
        trainer.fit()
    assert "train.lr" in _one_line(err) and "nothing was saved" in str(err.value)
    from safetensors.torch import load_file

    for path in tmp_path.glob("step-*.safetensors"):  # what was saved before the loss diverged is finite
        assert all(bool(torch.isfinite(t.float()).all()) for t in load_file(str(path)).values()), path


def test_non_finite_weights_are_never_checkpointed(tmp_path):
    from pixelpipe.train.engine import NonFiniteLossError
    from tests._engine_utils import ToyImages, make_trainer

    trainer = make_trainer(ToyImages(16), batch_size=8, ckpt_dir=tmp_path)
    with torch.no_grad():
        next(trainer.model.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteLossError, match="weights are not finite"):
        trainer.save_checkpoint()
    assert not list(tmp_path.iterdir())


def test_fp16_tolerates_the_steps_its_scaler_skips(monkeypatch):
    from pixelpipe.train.engine import MAX_SKIPPED_STEPS, NonFiniteLossError
    from tests._engine_utils import ToyImages, make_trainer

    trainer = make_trainer(ToyImages(16), batch_size=8)
    nan, one = torch.tensor(float("nan")), torch.tensor(1.0)
    trainer._track_finite([nan])
    with pytest.raises(NonFiniteLossError):  # fp32: the first non-finite step stops
        trainer.check_finite()
    monkeypatch.setattr(trainer.scaler, "is_enabled", lambda: True)  # fp16 + GradScaler
    trainer._bad_longest.zero_()
    for losses in ([nan], [nan], [one]) + ([nan],) * (MAX_SKIPPED_STEPS - 1):
        trainer._track_finite(losses)
    trainer.check_finite()  # skipped steps change no weight
    trainer._track_finite([nan])
    with pytest.raises(NonFiniteLossError):
        trainer.check_finite()


class _Session:
    """An onnxruntime stand-in computing its outputs from the deployed inputs, for the parity gate."""

    def __init__(self, outputs_fn):
        self.outputs_fn = outputs_fn

    def run(self, names, feeds):
        return self.outputs_fn(feeds["glyphs"], feeds["lengths"])


@pytest.mark.parametrize("broken", ["onnx outputs NaN", "both NaN (NaN weights)"])
def test_parity_gate_fails_on_nan(broken):
    from pixelpipe.data.render import row_dtype
    from pixelpipe.deploy.export import check_parity
    from tests._engine_utils import GLYPHS, tiny_model

    model = tiny_model().eval()
    if broken.startswith("both"):
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(float("nan"))

    def outputs(glyphs, lengths):  # deployed ids (atlas id + 1, 0 past the end) back to the torch model's glyph path
        with torch.inference_mode():
            logits = model(torch.from_numpy(np.maximum(glyphs - 1, 0)), torch.from_numpy(lengths))["logits"].numpy()
        if broken.startswith("onnx"):
            logits[0, 0] = np.nan
        return [logits]

    rows = np.zeros(3, row_dtype(4, "uint16"))
    rows["glyphs"] = np.random.default_rng(0).integers(1, GLYPHS, (3, 4))
    rows["length"] = [4, 2, 1]
    report = check_parity(_Session(outputs), model, rows, atol=1e-3, max_label_mismatch=1.0)
    assert np.isnan(report.max_abs_logits) and not report.ok


@pytest.mark.parametrize("fp32_acc,int8_acc,samples", [(0.9, float("nan"), 10), (float("nan"), float("nan"), 0)])
def test_int8_gate_fails_on_nan_or_an_empty_test_split(tmp_path, monkeypatch, fp32_acc, int8_acc, samples):
    from pixelpipe.deploy import onnxmodel, quantize

    accs = iter([{"accuracy": fp32_acc, "samples": samples}, {"accuracy": int8_acc, "samples": samples}])
    monkeypatch.setattr(quantize, "quantize_file", lambda src, dst, *a, **k: Path(dst).write_bytes(b"int8") and {})
    monkeypatch.setattr(onnxmodel, "open_session", lambda *a, **k: None)
    monkeypatch.setattr(onnxmodel, "accuracy", lambda *a, **k: next(accs))
    fp32 = tmp_path / "student.onnx"
    fp32.write_bytes(b"fp32")
    out = tmp_path / "student.int8.onnx"
    with pytest.raises(quantize.AccuracyDropError) as err:
        quantize.quantize_and_verify(fp32, out, quantize.QuantizeSettings.from_section(section("quantize")), [], tmp_path / "test")
    assert ("no images" if samples == 0 else "rejected") in _one_line(err)
    assert not out.exists()


# ---- disk full during consolidate ------------------------------------------------------------------


def _encoded_shards(tmp_path: Path, n: int = 2) -> list[Path]:
    paths = []
    for i in range(n):
        paths.append(tmp_path / f"shard-{i:05d}.npz")
        np.savez(paths[-1], logits=np.full((50, 3), i, np.float32), labels=np.arange(50))
    return paths


def test_consolidate_refuses_when_the_disk_cannot_hold_it(tmp_path, monkeypatch):
    import collections
    import shutil

    from pixelpipe.data import consolidate as mod

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**6, 10**6 - 100, 100))
    with pytest.raises(OSError) as err:
        mod.consolidate(_encoded_shards(tmp_path), tmp_path / "out")
    assert str(tmp_path / "out") in _one_line(err) and "free" in str(err.value)
    assert not list((tmp_path / "out").iterdir())


class _FullDisk:
    """A file whose writes fail with ENOSPC after `room` bytes, as on a full filesystem."""

    def __init__(self, path, mode, room=600):
        self.f, self.room = open(path, mode), room  # noqa: SIM115 (closed by close/__exit__, like a file)

    def write(self, data: bytes) -> int:
        import errno

        self.room -= len(data)
        if self.room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(data)

    def close(self) -> None:
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


@pytest.mark.parametrize("failure", ["disk full mid-write", "unreadable shard"])
def test_consolidate_failure_leaves_no_temporaries_and_no_final_files(tmp_path, monkeypatch, failure):
    from pixelpipe.data import consolidate as mod

    shards = _encoded_shards(tmp_path)
    if failure == "disk full mid-write":
        monkeypatch.setattr(mod, "open", _FullDisk, raising=False)
        expected = OSError
    else:
        shards[1].write_bytes(b"not a zip file")
        expected = Exception
    with pytest.raises(expected):
        mod.consolidate(shards, tmp_path / "out")
    assert not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_encoded_shard_is_named_and_nothing_is_written(tmp_path, damage):
    from pixelpipe.data.consolidate import consolidate

    shards = _encoded_shards(tmp_path)
    if damage == "flip":
        _flip_byte(shards[1], 200)  # inside the logits member: zip's CRC-32 catches it
    else:
        shards[1].write_bytes(shards[1].read_bytes()[:-300])
    with pytest.raises(io.IntegrityError) as err:
        consolidate(shards, tmp_path / "out")
    assert str(shards[1]) in _one_line(err) and "damaged" in str(err.value)
    assert not list((tmp_path / "out").iterdir())


def test_consolidate_output_is_what_np_save_writes(tmp_path):
    from pixelpipe.data.consolidate import consolidate, open_dataset

    consolidate(_encoded_shards(tmp_path), tmp_path / "out")
    expected = tmp_path / "logits.npy"
    np.save(expected, np.concatenate([np.full((50, 3), i, np.float32) for i in range(2)]))
    assert (tmp_path / "out" / "logits.npy").read_bytes() == expected.read_bytes()
    assert open_dataset(tmp_path / "out")["labels"].shape == (100,)


# ---- corpus input ------------------------------------------------------------------------------------

FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")


def _corpus_cfg(path: Path, **kw) -> dict:
    return section("corpus", **{"path": str(path), "split_column": "split", **kw})


def _build(cfg: dict, out: Path) -> dict:
    from pixelpipe.data.corpus import build_corpus

    return build_corpus(cfg, FONTS, out, seed=0, log=lambda m: None)


@pytest.mark.parametrize("case,expected", [
    ("missing", "does not exist"), ("empty", "is empty"), ("directory", "is not a file"),
    ("not utf-8", "is not UTF-8"), ("bad parquet", "cannot be read"), ("header only", "has no data rows"),
    ("unsupported", "unsupported type"),
])
def test_unusable_corpus_file_is_one_line_naming_file_and_key(tmp_path, case, expected):
    from pixelpipe.data.corpus import planned_split_sizes
    from pixelpipe.data.corpusfile import CorpusError

    path = tmp_path / {"bad parquet": "c.parquet", "unsupported": "c.txt"}.get(case, "c.csv")
    if case == "empty":
        path.write_bytes(b"")
    elif case == "directory":
        path.mkdir()
    elif case == "not utf-8":
        path.write_bytes("text,label,split\ncaf\xe9,a,train\n".encode("latin-1"))
    elif case == "bad parquet":
        path.write_bytes(b"PAR1 this is not parquet")
    elif case == "header only":
        path.write_text("text,label,split\n")
    elif case == "unsupported":
        path.write_text("x")
    cfg = _corpus_cfg(path, split_column=None)
    for call in (lambda: planned_split_sizes(cfg), lambda: _build(cfg, tmp_path / "out")):
        with pytest.raises(CorpusError) as err:
            call()
        assert str(path) in _one_line(err) and "corpus.path" in str(err.value) and expected in str(err.value)
    assert not (tmp_path / "out" / "labels.json").exists()


CSV_ROWS = ["text,label,split", "hello,en,train", "bonjour,fr,train", '"a, b",en,val,EXTRA', "ciao,it,val",
            "hola,es,test", "hallo,de,test"]
JSONL_ROWS = ['{"text": "hello", "label": "en", "split": "train"}', '{"text": "bonjour", "label": "fr", "split": "train"}',
              '{"text": "oops", "label": "en", "split": "val"', '{"text": "ciao", "label": "it", "split": "val"}',
              '{"text": "hola", "label": "es", "split": "test"}']
BROKEN = {"csv": (CSV_ROWS, "line 4 has 4 fields, the header 3"), "jsonl": (JSONL_ROWS, "line 3 is not valid JSON")}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_broken_lines_are_bad_rows_counted_or_named(tmp_path, fmt):
    from pixelpipe.data.corpus import planned_split_sizes
    from pixelpipe.data.corpusfile import CorpusError

    path = tmp_path / f"c.{fmt}"
    path.write_text("\n".join(BROKEN[fmt][0]) + "\n")
    cfg = _corpus_cfg(path)
    assert sum(planned_split_sizes(cfg).values()) >= 4
    info = _build(cfg, tmp_path / "skip")
    assert info["bad_rows"] == {"unparseable line": 1} and "oops" not in str(info)
    with pytest.raises(CorpusError) as err:
        _build({**cfg, "on_bad_row": "fail"}, tmp_path / "fail")
    msg = _one_line(err)
    assert str(path) in msg and BROKEN[fmt][1] in msg and "corpus.on_bad_row" in msg
    assert not (tmp_path / "fail" / "labels.json").exists()


@pytest.mark.parametrize("labels,expected", [
    (["x", "x", "x"], r"1 class\(es\).*corpus.label_column"),  # one class
    (["x", "y", "NaN"], r"split\(s\) test have no rows.*missing label"),  # "NaN" is no class
    (["x", "NA", "y"], r"split\(s\) val have no rows.*missing label"),
])
def test_one_class_empty_split_and_nan_labels_are_refused(tmp_path, labels, expected):
    import pandas as pd

    from pixelpipe.data.corpusfile import CorpusError

    path = tmp_path / "c.csv"
    pd.DataFrame({"text": ["a", "b", "c"], "label": labels, "split": ["train", "val", "test"]}).to_csv(path, index=False)
    with pytest.raises(CorpusError, match=expected) as err:
        _build(_corpus_cfg(path), tmp_path / "out")
    assert str(path) in _one_line(err)


def test_unknown_split_values_are_one_line_naming_the_key(tmp_path):
    from pixelpipe.data.corpus import planned_split_sizes
    from pixelpipe.data.corpusfile import CorpusError

    path = tmp_path / "c.csv"
    path.write_text("text,label,split\na,x,train\nb,y,validation\n")
    with pytest.raises(CorpusError, match=r"corpus.split_column.*\['validation'\]") as err:
        planned_split_sizes(_corpus_cfg(path))
    assert str(path) in _one_line(err)


def test_missing_corpus_file_fails_before_any_job_naming_file_and_key(tmp_path):
    from tests.workflow_utils import snakemake

    proc = snakemake(tmp_path, "--dry-run", "train", overrides={"corpus": {"path": "nope.csv"}}, check=False)
    assert proc.returncode != 0
    assert "pixelpipe: corpus file nope.csv (corpus.path) does not exist" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_editing_the_corpus_file_reruns_the_corpus_rule(tmp_path):
    import time

    import pandas as pd

    from tests.workflow_utils import planned_jobs

    pd.DataFrame({"text": ["hello", "bonjour", "hola", "ciao"] * 3, "label": ["en", "fr", "es", "it"] * 3}).to_csv(
        tmp_path / "data.csv", index=False)
    outputs = [f"results/corpus/{f}" for f in ("train.parquet", "val.parquet", "test.parquet", "labels.json")]
    old = time.time() - 100
    for rel in [*outputs, "results/metrics/corpus/all.json"]:  # stand-ins for a finished corpus job
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
        os.utime(tmp_path / rel, (old, old))
    os.utime(tmp_path / "data.csv", (old - 10, old - 10))
    cfg = {"corpus": {"path": "data.csv"}}
    assert planned_jobs(tmp_path, "results/corpus/labels.json", overrides=cfg) == {}
    (tmp_path / "data.csv").write_text((tmp_path / "data.csv").read_text().replace("bonjour", "salut"))
    assert planned_jobs(tmp_path, "results/corpus/labels.json", overrides=cfg) == {"corpus": 1}


# ---- out of memory -----------------------------------------------------------------------------------


class _Limited(torch.nn.Module):
    """A model that runs out of memory above `limit` texts per forward (CUDA's error, or CPU's MemoryError)."""

    def __init__(self, model, limit: int, error: type[BaseException]):
        super().__init__()
        self.model, self.cfg, self.limit, self.error, self.calls = model, model.cfg, limit, error, []

    def forward(self, inputs, lengths, *rest):
        self.calls.append(len(inputs))
        if len(inputs) > self.limit:
            raise self.error("CUDA out of memory. Tried to allocate 2.00 GiB" if self.error is RuntimeError
                             else "DefaultCPUAllocator: can't allocate memory")
        return self.model(inputs, lengths, *rest)


@pytest.mark.parametrize("error", [RuntimeError, MemoryError])
def test_evaluate_halves_the_batch_on_out_of_memory(error):
    from pixelpipe.train.scoring import evaluate
    from tests._engine_utils import ToyImages, tiny_model

    data, model = ToyImages(24), tiny_model().eval()
    expected = evaluate(model, data, torch.device("cpu"), batch_size=4)
    limited = _Limited(model, 5, error)
    assert evaluate(limited, data, torch.device("cpu"), batch_size=16) == expected
    assert limited.calls[:2] == [16, 8] and max(limited.calls[2:]) == 4


def test_encode_halves_the_batch_on_out_of_memory(tmp_path):
    from pixelpipe.data.render import row_dtype
    from pixelpipe.train.encode import encode_shard
    from tests._engine_utils import ToyImages, tiny_model

    toy = ToyImages(12)
    rows = np.zeros(12, row_dtype(4, "uint16"))
    rows["glyphs"], rows["label"], rows["length"] = toy.glyphs.numpy(), toy.labels.numpy(), [4, 1, 3] * 4
    np.save(tmp_path / "shard.npy", rows)
    rows = np.load(tmp_path / "shard.npy", mmap_mode="r")  # as encode reads a cache shard: memory-mapped
    model = tiny_model().eval()
    encode_shard(model, rows, "shard.npy", tmp_path / "ref.npz", torch.device("cpu"), batch_size=4, progress=False)
    limited = _Limited(model, 3, MemoryError)
    encode_shard(limited, rows, "shard.npy", tmp_path / "out.npz", torch.device("cpu"), batch_size=8, progress=False)
    assert limited.calls[:2] == [8, 4] and max(limited.calls[2:]) <= 3
    with np.load(tmp_path / "ref.npz") as ref, np.load(tmp_path / "out.npz") as out:
        for name in ref.files:
            np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-5)


def test_cpu_allocation_failures_count_as_out_of_memory():
    from pixelpipe.core.device import is_oom

    assert is_oom(MemoryError()) and is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to "
                                                          "allocate 123 bytes"))
    assert not is_oom(RuntimeError("shape mismatch"))


def test_training_falls_back_on_cpu_memory_error():
    from pixelpipe.train.distill import ClassificationObjective
    from tests._engine_utils import ToyImages, make_trainer

    class CpuOOMAbove(ClassificationObjective):
        def forward(self, model, batch):
            if len(batch["label"]) > 4:
                raise MemoryError()
            return super().forward(model, batch)

    t = make_trainer(ToyImages(32), batch_size=16, objective=CpuOOMAbove())
    t.fit()
    assert (t.micro, t.accum, t.oom_fallbacks) == (4, 4, 2)


# ---- cases that already held (kept here so they keep holding) -----------------------------------------


@pytest.mark.parametrize("fonts", [["../../etc/passwd"], ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"]])
def test_font_names_are_limited_to_the_bundled_faces(fonts):
    from pixelpipe.config.resolve import ConfigError, resolve_config
    from pixelpipe.data.fonts import load_face

    with pytest.raises(ConfigError, match=r"render\.fonts\.0"):
        resolve_config({"render": {"fonts": fonts}})
    with pytest.raises(ValueError):  # a model's metadata naming a path is refused by predict's renderer too
        load_face(fonts[0])


class _MetaSession:
    """An onnxruntime session stand-in: metadata and output shape."""

    def __init__(self, config: dict, classes: int):
        import json
        import types

        from pixelpipe.deploy import onnxmodel

        props = {onnxmodel.META_FORMAT: onnxmodel.FORMAT, onnxmodel.META_CONFIG: json.dumps(config),
                 onnxmodel.META_FOLD: json.dumps({})}
        self.meta = types.SimpleNamespace(custom_metadata_map=props)
        self.outputs = [types.SimpleNamespace(shape=["batch", classes])]

    def get_modelmeta(self):
        return self.meta

    def get_outputs(self):
        return self.outputs


def test_predict_refuses_labels_that_do_not_match_the_logits():
    from pixelpipe.deploy.onnxmodel import ModelFileError, read_metadata

    config = {"labels": ["a", "b"], "render": {}, "atlas": {}, "encoder": {}}
    assert read_metadata(_MetaSession(config, 2))["config"]["labels"] == ["a", "b"]
    with pytest.raises(ModelFileError, match="2 labels but the model outputs 3 logits") as err:
        read_metadata(_MetaSession(config, 3))
    _one_line(err)


class _NaNSession:
    """A real session whose logits turn NaN (what NaN weights give), inputs checked as onnxruntime would take them."""

    def __init__(self, session):
        self.session = session

    def run(self, names, feeds):
        (logits,) = self.session.run(names, feeds)
        return [np.full_like(logits, np.nan)]


def test_predict_refuses_nan_logits_and_writes_strict_json(deployed_student):
    import io as stdio
    import json

    from pixelpipe.deploy.onnxmodel import ModelFileError
    from pixelpipe.deploy.predictor import Predictor
    from pixelpipe.predict import Writer

    predictor = Predictor(deployed_student.path)
    texts = ["Guten Tag", ""]  # a record with an error has no probability: NaN must not reach the JSON either
    preds = predictor.predict(texts, top=2)
    predictor.session = _NaNSession(predictor.session)
    with pytest.raises(ModelFileError, match="non-finite logits") as err:
        predictor.predict(texts)
    _one_line(err)
    out = stdio.StringIO()
    writer = Writer(out, "json", top=2)
    writer.write([(t, f"text {i}") for i, t in enumerate(texts)], preds)
    writer.close()

    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")

    records = json.loads(out.getvalue(), parse_constant=refuse)  # what predict --json writes: strict JSON
    assert records[1] == {"input": "", "error": "empty text"} and len(records[0]["top"]) == 2


@pytest.mark.parametrize("damage,expected", [
    ("no fold map", "has no pixelpipe metadata"),
    ("config not JSON", "pixelpipe metadata is not valid JSON"),
    ("atlas altered", "glyph atlas checksum differs"),
    ("fold map not base64", "fold map cannot be used"),
    ("fold map of another width", "fold map cannot be used"),
    ("glyph scripts beyond their names", "glyph scripts: codes beyond"),
])
def test_damaged_model_metadata_is_refused_in_one_line(deployed_student, tmp_path, capsys, damage, expected):
    """The model file carries what predict needs to read text (render settings, atlas, fold map): damaged, the
    model is refused at load with one line naming what, never a traceback at the first unseen character."""
    import json

    import onnx

    from pixelpipe.deploy import onnxmodel
    from pixelpipe.predict import run
    from tests._deploy_utils import UNSEEN

    model = onnx.load(str(deployed_student.path))
    meta = {p.key: p.value for p in model.metadata_props}
    config, fold = json.loads(meta[onnxmodel.META_CONFIG]), json.loads(meta[onnxmodel.META_FOLD])
    if damage == "no fold map":
        del model.metadata_props[[p.key for p in model.metadata_props].index(onnxmodel.META_FOLD)]
    elif damage == "config not JSON":
        onnxmodel.set_metadata(model, {onnxmodel.META_CONFIG: meta[onnxmodel.META_CONFIG][:-1]})
    elif damage == "atlas altered":
        config["atlas"]["clusters"][5] = "Z"
        onnxmodel.set_metadata(model, {onnxmodel.META_CONFIG: json.dumps(config)})
    elif damage == "fold map not base64":
        onnxmodel.set_metadata(model, {onnxmodel.META_FOLD: json.dumps({**fold, "matrix": {"shape": [1], "data": "%"}})})
    elif damage == "glyph scripts beyond their names":
        scripts = json.loads(meta[onnxmodel.META_SCRIPTS])
        onnxmodel.set_metadata(model, {onnxmodel.META_SCRIPTS: json.dumps({**scripts, "names": scripts["names"][:-1]})})
    else:
        narrower = {k: onnxmodel.encode_array(onnxmodel.decode_array(fold[k])[..., :-1]) for k in ("matrix", "offset")}
        onnxmodel.set_metadata(model, {onnxmodel.META_FOLD: json.dumps({**fold, **narrower})})
    onnx.save(model, str(tmp_path / "damaged.onnx"))
    assert run(["--model", str(tmp_path / "damaged.onnx"), "Guten Tag", f"{UNSEEN} neu"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().split("\n")
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines


# ---- end to end: a damaged shard under a real run -------------------------------------------------------


@pytest.mark.slow
def test_damaged_cache_shard_stops_the_run_and_the_log_says_why(tiny_workdir, tmp_path):
    """Flip one byte of a finished run's cache and force the student to retrain: the job fails naming the
    shard and the rule to rerun, its log carries the traceback, and no student model is left behind."""
    import shutil

    from tests.workflow_utils import snakemake

    workdir = Path(shutil.copytree(tiny_workdir, tmp_path / "copy", symlinks=True))
    shard = workdir / "results/cache/train/shard-00000.npy"
    st = shard.stat()
    _flip_byte(shard, 1000)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))  # bit rot: the bytes change, the timestamp does not
    proc = snakemake(workdir, "--forcerun", "train_student", "train", check=False)
    assert proc.returncode != 0, proc.stderr[-3000:]
    log = (workdir / "logs/train_student/student.log").read_text()
    assert "IntegrityError" in log and "Traceback" in log
    assert "results/cache/train/shard-00000.npy is corrupt" in log and "snakemake --forcerun render_train" in log
    assert not (workdir / "results/student/model.safetensors").exists()
