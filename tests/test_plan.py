"""The resource planner: exact disk arithmetic, the activation model, the disk preflight,
and its predictions on the tiny config against what the stages measured."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from pixelpipe.config.resolve import deep_merge, load_config
from pixelpipe.core.io import read_json
from pixelpipe.model.encoder import TRMVisionEncoder
from pixelpipe.plan.memory import activation_bytes_per_sample, predict_train_memory
from pixelpipe.plan.preflight import DiskSpaceError, check_disk
from pixelpipe.plan.shapes import model_tensors
from pixelpipe.plan.sizes import npy_bytes, npz_bytes, safetensors_bytes
from pixelpipe.plan.workflow import plan_workflow
from tests._engine_utils import encoder_config
from tests.workflow_utils import TINY, snakemake

TOLERANCE_PCT = 15.0  # the goal for peak host RAM and disk
# disk is arithmetic; JSON/CSV side files, parquet and the ONNX graph bytes (a fit, see plan.ONNX_GRAPH) are the estimates
DISK_TOLERANCE_PCT = 2.0
# A stage whose whole output is a small JSON report (the baseline's, deploy.{json,md}) is checked in bytes.
SMALL_FILE_SLACK = 512
# The evaluation's JSON, Markdown and plot (~200-290 KB) depend on which texts are misread (per-language misreadings,
# error examples), on the reliability diagram's bins and on how many models have bars (py3langid is optional): the
# planner sizes a stand-in result, within 11 KB on the tiny run and 4 KB on the default one.
EVALUATION_SLACK = 16384
DEPLOY_STAGES = ("export_onnx/student", "quantize_onnx/student", "deploy_benchmark/student")


@pytest.fixture(scope="module")
def tiny_cfg():
    return load_config(TINY)


def test_npy_and_npz_sizes_are_exact(tmp_path):
    arrays = {"a": np.zeros((37, 4, 16), np.float16), "b": np.zeros((37, 19), np.float32), "c": np.zeros((37,), np.int64)}
    np.save(tmp_path / "a.npy", arrays["a"])
    assert (tmp_path / "a.npy").stat().st_size == npy_bytes((37, 4, 16), np.float16)
    np.savez(tmp_path / "x.npz", **arrays)
    assert (tmp_path / "x.npz").stat().st_size == npz_bytes({k: (v.shape, v.dtype) for k, v in arrays.items()})


def test_safetensors_size_within_bytes(tmp_path):
    cfg = encoder_config(line_chars=8, dim=24, num_capsules=3, num_classes=7)
    model = TRMVisionEncoder(cfg)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "m.safetensors"))
    real = (tmp_path / "m.safetensors").stat().st_size
    assert abs(safetensors_bytes(model_tensors(cfg)) - real) <= 64  # header offsets' digit count only


@pytest.mark.parametrize("core,grad_free,cells", [("recursive", False, 96), ("recursive", True, 40),
                                                  ("none", False, 96), ("none", False, 40)])
def test_activation_model_matches_saved_tensors(core, grad_free, cells):
    """The per-sample activation term against the bytes autograd actually saves (CPU, fp32, glyph path, a batch
    trimmed to `cells` characters as training trims it)."""
    cfg = encoder_config(line_chars=96, dim=64, heads=4, mixer_ratio=4.0, H_cycles=1, L_cycles=2, num_capsules=4,
                         core=core)
    model = TRMVisionEncoder(cfg, torch.randint(0, 256, (50, cfg.cell_height, cfg.cell_width), dtype=torch.uint8))
    model.train().grad_free_cycles = grad_free
    saved: dict[int, int] = {}

    def pack(t):
        # count each storage once: views of one buffer (q, k, v of qkv) are one allocation
        ptr = t.untyped_storage().data_ptr()
        saved[ptr] = max(saved.get(ptr, 0), t.untyped_storage().nbytes())
        return t

    batch = 8
    glyphs = torch.randint(1, 50, (batch, cells))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(glyphs, torch.full((batch,), cells))
    weights = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    measured = sum(v for k, v in saved.items() if k not in weights) / batch
    predicted = sum(activation_bytes_per_sample(cfg, 4, grad_free_cycles=grad_free, tokens=cells + cfg.lead).values())
    assert abs(predicted - measured) / measured < 0.05, (predicted, measured)


def test_batch_tokens_follow_the_longest_text_of_a_batch():
    """Trimmed batches: the expected longest of B lengths drawn from the histogram (checked by simulation),
    shorter with random windows, and the peak at the split's longest text."""
    from pixelpipe.plan.lengths import LengthStats

    cfg = encoder_config(line_chars=96)
    rng = np.random.default_rng(0)
    lengths = np.minimum(rng.geometric(1 / 30, 20_000), 200)
    stats = LengthStats.from_histogram(np.bincount(lengths), cfg.cells)
    assert stats.longest == 96 and abs(stats.mean - np.minimum(lengths, 96).mean()) < 1e-9
    for batch in (1, 8, 64):
        sim = np.minimum(rng.choice(lengths, (4000, batch)), 96).max(1).mean() + cfg.lead
        assert abs(stats.batch_tokens(cfg, batch) - sim) / sim < 0.02, (batch, stats.batch_tokens(cfg, batch), sim)
    assert stats.batch_tokens(cfg, 64, window_prob=1.0, min_chars=15) < stats.batch_tokens(cfg, 64)
    assert stats.peak_tokens(cfg) == 96 + cfg.lead == cfg.num_tokens


def test_sorted_and_grouped_batches_follow_the_engines_order():
    """Evaluation/encode sort the split by length; training groups chunks of batches by length
    (train.sampling.epoch_order): the planner's tokens per text match both orders, simulated on the real code."""
    from pixelpipe.plan.lengths import LengthStats
    from pixelpipe.train.sampling import epoch_order

    cfg = encoder_config(line_chars=96)
    rng = np.random.default_rng(1)
    lengths = np.minimum(rng.geometric(1 / 30, 20_000), 200)
    clipped = np.minimum(lengths, 96)
    stats = LengthStats.from_histogram(np.bincount(lengths), cfg.cells)
    for batch in (16, 256):
        ordered = np.sort(clipped)
        sim = np.mean([ordered[i:i + batch].max() * len(ordered[i:i + batch]) for i in range(0, len(ordered), batch)]) \
            * -(-len(ordered) // batch) / len(ordered) + cfg.lead
        assert abs(stats.sorted_batch_tokens(cfg, batch) - sim) / sim < 0.01, (batch, sim)
    for group in (8, 32):
        order = epoch_order(len(clipped), 0, 0, clipped, 64, group)
        full = len(order) // 64 * 64
        sim = clipped[order[:full]].reshape(-1, 64).max(1).mean() + cfg.lead
        predicted = stats.grouped_batch_tokens(cfg, 64, group)
        assert abs(predicted - sim) / sim < 0.03, (group, predicted, sim)
        assert predicted < stats.batch_tokens(cfg, 64) * 0.8  # grouping is what cuts the padding


def test_predict_train_memory_is_linear_in_batch():
    cfg = encoder_config(lines=4, line_chars=104, dim=768, depth=2, heads=12, mlp_ratio=4.0, H_cycles=2, L_cycles=3,
                         num_capsules=12)
    m8, m16 = (predict_train_memory(cfg, b, "bf16") for b in (8, 16))
    per_sample = m8["per_sample_activation_bytes"]
    assert sum(m16["activations"].values()) - sum(m8["activations"].values()) == 8 * per_sample
    assert m8["weights"] == 4 * m8["parameters"] and m8["gradients"] == 4 * m8["trained_parameters"]
    assert m8["optimizer_state"] == 8 * m8["trained_parameters"] < 8 * m8["parameters"]
    assert m8["reserved_peak"] > m8["allocated_peak"]
    ckpt = predict_train_memory(cfg, 8, "bf16", activation_checkpointing=True)
    assert ckpt["per_sample_activation_bytes"] < per_sample / 2


SMALL_REAL = {"corpus": {"sources": ["firefox", "mediawiki"], "num_samples": 950}}  # 50 real rows a language


def _cfg(base, overrides):
    import copy

    cfg = copy.deepcopy(base)
    for section, values in overrides.items():
        cfg[section].update(values)
    return cfg


def _facts(cfg):
    """The planner's corpus facts for a resolved config (through its settings, as plan_inputs reads them)."""
    from pixelpipe.plan import corpusfacts
    from pixelpipe.plan.inputs import PlanSettings

    settings = PlanSettings.from_config(cfg)
    return corpusfacts.corpus_facts(settings.corpus, settings.render, settings.seed)


@pytest.mark.parametrize("overrides", [{}, SMALL_REAL], ids=["tiny-faker", "small-real"])
def test_corpus_facts_are_what_the_corpus_and_render_rules_write(tiny_cfg, tmp_path, overrides):
    """Read as the corpus rule streams (nothing extrapolated here): row counts, every corpus file's bytes, the
    charset, and a render job's shards and manifest, byte for byte."""
    from pixelpipe.data.charset import read_charset
    from pixelpipe.data.corpus import build_corpus
    from pixelpipe.data.render import RenderSettings, render_split
    from pixelpipe.plan.inputs import PlanSettings, plan_inputs
    from pixelpipe.plan.stages import predict_render

    cfg = _cfg(tiny_cfg, overrides)
    info = build_corpus(cfg["corpus"], cfg["render"]["fonts"], tmp_path, seed=cfg["seed"], log=lambda m: None)
    inp = plan_inputs(PlanSettings.from_config(cfg))
    assert inp.facts.exact and inp.sizes == info["split_sizes"]
    assert inp.facts.corpus_bytes == {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert inp.facts.charset == read_charset(tmp_path / "charset.json")
    shards = [tmp_path / "cache" / f"shard-{s:05d}.npy" for s in range(len(inp.shard_rows("val")))]
    render_split(tmp_path / "val.parquet", inp.facts.charset, RenderSettings.from_section(cfg["render"]), shards,
                 tmp_path / "cache" / "manifest.json", shard_size=cfg["render"]["shard_size"], progress=False)
    written = sum(p.stat().st_size for p in (tmp_path / "cache").iterdir())
    manifest = read_json(tmp_path / "cache" / "manifest.json")
    predicted = predict_render(inp)[1]
    assert predicted.name == "val" and abs(predicted.disk_written_bytes - written) <= 8, (predicted.disk_written_bytes,
                                                                                          written)  # rows_per_s digits
    assert inp.stats["val"].to_dict() == {k: manifest[k] for k in inp.stats["val"].to_dict()}
    # the rows a role reads with train.rows_per_language: what the train split holds of each language, capped
    counts = pd.read_parquet(tmp_path / "train.parquet", columns=["label"])["label"].value_counts()
    student = inp.settings.student
    assert inp.train_rows(student) == info["split_sizes"]["train"]
    cap = int(counts.median())
    capped = dataclasses.replace(student, train=dataclasses.replace(student.train, rows_per_language=cap))
    assert inp.train_rows(capped) == int(counts.clip(upper=cap).sum()) < info["split_sizes"]["train"]
    transfer = dataclasses.replace(capped, distill=dataclasses.replace(capped.distill, transfer=True))
    assert inp.train_rows(transfer) == info["split_sizes"]["train"]  # the rest are read without their label


def test_corpus_facts_of_a_user_file_with_bad_rows(tiny_cfg, tmp_path):
    """A user CSV with a split column and bad rows (empty text, NA label, a character no font draws, marks):
    the planner drops and counts what the corpus rule drops, and sizes its files to the byte."""
    import csv

    from pixelpipe.data.corpus import build_corpus

    rows = [("text", "label", "split")]
    for i in range(120):
        text = ["hello world", "Tiếng Việt có dấu", "مرحبا بالعالم", "γειά σου κόσμε", "x\u0301y z"][i % 5] + f" {i}"
        rows.append((text, ["en", "vi", "ar", "el", "xx"][i % 5], ["train", "val", "test"][i % 3]))
    rows += [("", "en", "train"), ("no label", "NA", "val"), ("tofu \U0001F9FF", "en", "test")]
    with open(tmp_path / "corpus.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    cfg = _cfg(tiny_cfg, {"corpus": {"path": str(tmp_path / "corpus.csv"), "split_column": "split"}})
    out = tmp_path / "out"
    info = build_corpus(cfg["corpus"], cfg["render"]["fonts"], out, seed=cfg["seed"], log=lambda m: None)
    facts = _facts(cfg)
    assert sum(info["bad_rows"].values()) == 3 and facts.sizes == info["split_sizes"] and facts.num_classes == 5
    assert facts.corpus_bytes == {p.name: p.stat().st_size for p in out.iterdir()}


def test_builtin_real_rows_are_the_corpus_rules_first_chunk(tiny_cfg):
    from pixelpipe.data.corpus import CorpusSettings, builtin_corpus, builtin_real_rows

    ccfg = CorpusSettings.from_section({**tiny_cfg["corpus"], "sources": ["firefox", "mediawiki", "faker"],
                                        "num_samples": 950})
    frame, fill = builtin_real_rows(ccfg, 7)
    n, chunks = builtin_corpus(ccfg, 7)
    first = next(chunks)
    assert n == len(frame) + sum(fill.values()) and first.equals(frame)


def test_charset_clusters_match_text_clusters():
    """The whole-column cluster pass the planner uses on large corpora equals data.charset.text_clusters."""
    import pandas as pd

    from pixelpipe.data.atlas import undrawable
    from pixelpipe.data.charset import text_clusters
    from pixelpipe.data.sources import TEXT_DIR
    from pixelpipe.plan.corpusscan import charset_clusters

    fonts = ["DejaVuSans", "DejaVuSerif", "DejaVuSansMono"]
    real = pd.read_parquet(TEXT_DIR / "mediawiki.parquet", columns=["text"])["text"].tolist()[::7]
    odd = ["  \u0301abc", "x \t\u0301y", "a\u200c b", " \u0651 ", "e\u0301\u0302 z", "\u0301", "tab\tend ", "\u0378x"]
    for texts in (real, odd):
        assert charset_clusters(texts, fonts) == {c for c in text_clusters(texts) if not undrawable(c, fonts)}


def test_sampled_corpus_facts_stay_close_to_exact(tiny_cfg, monkeypatch):
    """Beyond FRAME_EXACT_ROWS the drawn rows are sampled and extrapolated: rows, lengths and bytes stay close."""
    from pixelpipe.plan import corpusfacts

    cfg = _cfg(tiny_cfg, {"corpus": {"sources": ["firefox", "mediawiki"], "num_samples": 3800}})
    exact = _facts(cfg)
    monkeypatch.setattr(corpusfacts, "FRAME_EXACT_ROWS", 800)
    sampled = _facts(cfg)
    assert exact.exact and not sampled.exact and sampled.charset == exact.charset  # every row's clusters
    for split in ("train", "val", "test"):
        assert abs(sampled.sizes[split] - exact.sizes[split]) <= 0.01 * exact.sizes[split] + 2
        e, s = exact.texts[split], sampled.texts[split]
        assert abs(s.codepoints / s.rows - e.codepoints / e.rows) < 0.1 * e.codepoints / e.rows
        assert abs(sampled.corpus_bytes[f"{split}.parquet"] / exact.corpus_bytes[f"{split}.parquet"] - 1) < 0.15


def test_plan_lists_every_job(tiny_cfg):
    plan = plan_workflow(tiny_cfg)
    keys = {s["key"] for s in plan["stages"]}
    assert {"corpus/all", "render/train", "train_teacher/teacher", "encode/train-00002", "consolidate/test",
            "train_student/student"} <= keys
    assert len([k for k in keys if k.startswith("encode/")]) == 5
    assert set(DEPLOY_STAGES) <= keys
    assert plan["disk"]["deploy (ONNX fp32 + int8, reports, evaluation)"] > 0
    assert plan["disk_peak_bytes"] == sum(plan["disk"].values())
    assert {s["key"]: s for s in plan["stages"]}["encode/val-00000"]["disk_written_bytes"] > 0


def test_disk_preflight_refuses_when_peak_exceeds_free(tiny_cfg, tmp_path):
    need = plan_workflow(tiny_cfg, exact=False)["disk_peak_bytes"]
    exact = plan_workflow(tiny_cfg)["disk_peak_bytes"]
    assert abs(need - exact) / exact < 0.05  # the preflight's estimate (no corpus yet) is close to the exact plan
    assert check_disk(tiny_cfg, tmp_path / "results", free=need + 1)["need"] == need
    with pytest.raises(DiskSpaceError) as err:
        check_disk(tiny_cfg, tmp_path / "results", free=need // 2)
    assert str(need) in str(err.value) and str(need // 2) in str(err.value)


def test_workflow_refuses_to_start_without_disk(tiny_cfg, tmp_path):
    need = plan_workflow(tiny_cfg, exact=False)["disk_peak_bytes"]
    assert snakemake(tmp_path, "-n", "train", env={"PIXELPIPE_FREE_BYTES": "1000"}).returncode == 0  # a dry run plans nothing
    proc = snakemake(tmp_path, "train", env={"PIXELPIPE_FREE_BYTES": "1000"}, check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "exceeds" in out and f"({need} bytes)" in out and "(1000 bytes)" in out
    assert not (tmp_path / "results").exists()  # refused before any job ran
    # (the accepting side is exercised by every workflow run, e.g. the slow tests' tiny run)


def test_plan_cli_prints_table(capsys):
    from pixelpipe.plan.cli import main

    assert main(["--config", str(TINY), "--results", "/nonexistent/results"]) == 0
    out = capsys.readouterr().out
    assert "| train_teacher/teacher |" in out and "| quantize_onnx/student |" in out and "peak (upper bound)" in out


@pytest.mark.slow
def test_plan_cli_from_a_non_editable_install(tmp_path):
    """`pip install .` (a copy, not the checkout) carries the schema: the planner runs outside the repository."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(repo)], check=True, cwd=tmp_path)
    assert (target / "pixelpipe" / "config" / "schema.yaml").is_file()
    shutil.copy(TINY, tmp_path / "config.yaml")
    proc = subprocess.run([sys.executable, "-m", "pixelpipe.plan", "--config", "config.yaml"], cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target), "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| train_teacher/teacher |" in proc.stdout


@pytest.mark.slow
def test_predictions_within_tolerance_on_tiny(tiny_workdir):
    """Every stage's predicted peak host RAM and disk (results/plan.json) against StageMeter's measurement (CPU)."""
    workdir = tiny_workdir
    plan = {s["key"]: s for s in read_json(workdir / "results" / "plan.json")["stages"]}
    metrics = sorted((workdir / "results" / "metrics").glob("*/*.json"))
    # corpus, baseline, 3 render, teacher, 5 encode, 3 consolidate, student, export, quantize, deploy, evaluate
    assert len(metrics) == 19 and set(plan) == {f"{p.parent.name}/{p.stem}" for p in metrics}
    failures = []
    for path in metrics:
        m = read_json(path)
        pred = plan[f"{path.parent.name}/{path.stem}"]
        if m["rule"].startswith("train_"):  # steps x batch, of the rows the role reads (the teacher's are capped)
            assert pred["samples"] == m["samples"], (m["rule"], pred["samples"], m["samples"])
        for key, tol in (("peak_host_bytes", TOLERANCE_PCT), ("disk_written_bytes", DISK_TOLERANCE_PCT)):
            err = 100 * (pred[key] - m[key]) / m[key]
            slack = EVALUATION_SLACK if m["rule"] == "evaluate" else SMALL_FILE_SLACK
            if abs(err) > tol and not (key == "disk_written_bytes" and abs(pred[key] - m[key]) <= slack):
                failures.append(f"{m['rule']}/{path.stem} {key}: predicted {pred[key]}, measured {m[key]} ({err:+.1f} %)")
    assert not failures, "\n".join(failures)


def test_a_larger_batch_is_planned_faster_on_cpu(tiny_cfg):
    """The same trained samples in half the optimizer steps cost less on a CPU (CPU_TRAIN_STEP_S: the table update
    and the launches are paid a step), as measured at batch 256 against 64 and 128 (docs/benchmarks.md)."""
    def student(batch: int, epochs: float) -> dict:
        cfg = deep_merge(tiny_cfg, {"student": {"train": {"batch_size": batch, "epochs": epochs}}})
        return {s["key"]: s for s in plan_workflow(cfg)["stages"]}["train_student/student"]

    small, large = student(8, 4), student(16, 4)
    assert large["samples"] == small["samples"]
    assert large["detail"]["steps"] * 2 == small["detail"]["steps"]
    assert large["work_s"] < small["work_s"]


def test_word_rows_are_planned_as_a_slot_every_two_cells():
    """With `ngram_words` a text reads its n-grams' rows and a word slot every two cells (the exported graph's
    layout; the planner's memory and time terms count them); without tables it reads none."""
    from pixelpipe.model.encoder import EncoderConfig
    from pixelpipe.model.ngrams import GlyphNgrams
    from pixelpipe.plan.stages import table_elements
    from tests._engine_utils import encoder_config

    tables = dict(ngram_orders=3, ngram_bits=8, ngram_dim=4)
    plain, words = encoder_config(**tables), encoder_config(**tables, ngram_words=True)
    ngrams = GlyphNgrams(3, 8, 4, 16 * 8, words=True)
    word_slots = ngrams.buckets(torch.ones(1, 9, 3, dtype=torch.int64), torch.tensor([9]))[0].shape[1] - 3 * 11
    assert table_elements(plain, 9) == (11 + 10 + 9) * 4  # the n-grams of 1, 2 and 3 glyphs of " text "
    assert table_elements(words, 9) - table_elements(plain, 9) == word_slots * 4 == 6 * 4
    assert table_elements(EncoderConfig(**{**plain.to_dict(), "ngram_orders": 0}), 9) == 0
