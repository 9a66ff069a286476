"""Export, quantize and deploy benchmark: the folded student computes the torch student (tiny models over a real
atlas, every core/stem/layout), then the rules end to end on the tiny config and each guarantee."""

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from pixelpipe.deploy import benchmark, onnxmodel
from pixelpipe.deploy.export import ParityError, check_parity, export_and_verify
from pixelpipe.deploy.fold import FoldedNgramStudent, FoldedStemEncoder, folded_module, key_table, span_sum_matrix
from pixelpipe.deploy.foldmap import span_major
from pixelpipe.deploy.foldmap import FoldMap
from pixelpipe.deploy.quantize import (TABLE_NAME, AccuracyDropError, CacheRangeReader, QuantizeSettings, int4_rows,
                                      SCALED_SPAN_SUM, int8_glyph_table, quantize_and_verify, table_rows)
from pixelpipe.model.checkpoint import load_model
from tests import _deploy_utils as du
from tests._config_utils import section

# ---- folding: the deployed module and its ONNX file compute the torch student, on real text --------------------

SHAPES = [(core, stem, lines) for core in ("none", "recursive") for stem in ("pair", "cell") for lines in (1, 2)]
QUICK_EXPORTS = [("none", "pair", 1), ("recursive", "cell", 2)]  # the deployed student's form, and the other corner


def _layout_case(lines: int, channels: int = 1):
    """(settings, atlas, texts, glyph ids, lengths): real texts of every script, a text of one character, one of
    exactly the layout's capacity and one longer (truncated)."""
    settings = du.render_settings(lines, 24 // lines, channels)
    atlas = du.real_atlas()
    long = " ".join(du.real_texts())
    texts = [*du.real_texts(), "a", long[: settings.cells], long[: 3 * settings.cells]]
    ids, lengths = du.layout(settings, atlas, texts)
    assert lengths.min() == 1 and (lengths == settings.cells).sum() >= 2
    return settings, atlas, texts, ids, lengths


def _student(core: str, stem: str, lines: int, channels: int = 1, **model):
    settings, atlas, _, ids, lengths = _layout_case(lines, channels)
    return du.tiny_student(settings, atlas, core, stem, **model), settings, atlas, ids, lengths


# Beyond the grid: RGB images (gray replicated), learned positions (which keep the n-gram convolution unfolded),
# n-gram kernels of 1 and 5 tokens.
VARIANTS = [("none", "pair", 1, dict(channels=3)), ("recursive", "pair", 1, dict(channels=3)),
            ("none", "pair", 1, dict(positions=True)), ("recursive", "pair", 2, dict(positions=True)),
            ("none", "cell", 1, dict(mixer_kernel=5)), ("none", "pair", 1, dict(mixer_kernel=1)),
            ("recursive", "pair", 1, dict(mixer_kernel=5)), ("none", "pair", 1, dict(activation="relu")),
            ("none", "cell", 2, dict(activation="relu")),
            ("none", "pair", 1, dict(activation="relu", **du.TABLES)), ("recursive", "pair", 2, dict(**du.TABLES)),
            ("none", "cell", 1, dict(ngram_orders=1, ngram_bits=4, ngram_dim=3))]


def _variant_id(value):
    return ",".join(f"{k}={v}" for k, v in value.items()) or "grid" if isinstance(value, dict) else None


@pytest.mark.parametrize("core,stem,lines,variant", [(*s, {}) for s in SHAPES] + VARIANTS, ids=_variant_id)
def test_folded_module_computes_the_torch_student(core, stem, lines, variant):
    """Rendering and the stem (and for core none on one line the n-gram convolution) folded into per-glyph tables
    give the torch student's logits on real text, trimmed to the batch's longest text or padded to the layout."""
    model, settings, atlas, ids, lengths = _student(core, stem, lines, **variant)
    module, fold, table = folded_module(model, atlas.cells)
    keys = [] if model.ngrams is None else [torch.from_numpy(key_table(model, atlas.cells))]
    ngram = (core, lines) == ("none", 1) and not variant.get("positions")
    expected = FoldedNgramStudent if ngram else FoldedStemEncoder
    assert isinstance(module, expected)
    assert model.cfg.deploy_form == ("ngram" if expected is FoldedNgramStudent else "stem")
    ref = du.torch_logits(model, ids, lengths)
    assert np.abs(ref).max() > 0.1  # real numbers, not a model that outputs ~0 whatever it reads
    trimmed = onnxmodel.deployed_batch(ids, lengths, settings.lines, settings.line_chars)
    assert trimmed["glyphs"].shape[1] == settings.cells  # the batch holds a text at the capacity
    padded = {**trimmed, "glyphs": np.where(np.arange(settings.cells) < lengths[:, None], ids + 1, 0)}
    with torch.inference_mode():
        for feeds in (trimmed, padded):
            got = module(*(torch.from_numpy(feeds[k]) for k in onnxmodel.INPUT_NAMES), torch.from_numpy(table),
                         *keys).numpy()
            np.testing.assert_allclose(got, ref, atol=1e-4, rtol=0)
    np.testing.assert_allclose(table, span_major(fold.table(atlas.cells), module.spans), atol=0)


@pytest.mark.parametrize("core,stem,lines,positions",
                         list(itertools.product(("none", "recursive"), ("pair", "cell"), (1, 2), (False, True))))
def test_the_configs_deploy_form_is_what_fold_builds_and_the_planner_sizes(core, stem, lines, positions):
    """EncoderConfig.deploy_form, the one statement of what export folds: fold builds that module (export records
    the form in the ONNX metadata) and the planner's table width (plan.sizes.fold_width) is the fold's row width."""
    from pixelpipe.model.encoder import DEPLOY_FORMS
    from pixelpipe.plan.sizes import fold_width

    settings = du.render_settings(lines, 24 // lines)
    atlas = du.real_atlas()
    model = du.tiny_student(settings, atlas, core, stem, positions=positions)
    module, fold, table = folded_module(model, atlas.cells)
    ngram = (core, lines, positions) == ("none", 1, False)
    assert model.cfg.deploy_form == ("ngram" if ngram else "stem") and model.cfg.deploy_form in DEPLOY_FORMS
    assert isinstance(module, FoldedNgramStudent if model.cfg.deploy_form == "ngram" else FoldedStemEncoder)
    assert fold.table(atlas.cells).shape[1] == fold_width(model.cfg) == module.spans * table.shape[1]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each student shape exported once per module: (core, stem, lines) -> (model, settings, atlas, ids, lengths,
    path)."""
    cache: dict = {}

    def get(core: str, stem: str, lines: int):
        if (core, stem, lines) not in cache:
            model, settings, atlas, ids, lengths = _student(core, stem, lines)
            config = du.student_config(model, settings, atlas)
            path = du.export(model, config, tmp_path_factory.mktemp(f"{core}-{stem}-{lines}") / "student.onnx")
            cache[core, stem, lines] = (model, settings, atlas, ids, lengths, path)
        return cache[core, stem, lines]

    return get


@pytest.mark.parametrize("core,stem,lines", [s if s in QUICK_EXPORTS else pytest.param(*s, marks=pytest.mark.slow)
                                             for s in SHAPES])
def test_onnx_export_computes_the_torch_student(exported, core, stem, lines):
    """The exported file (onnxruntime) agrees with torch on real text within 1e-4, for a whole batch and for
    texts alone (dynamic batch and token axes): the one-character text and the truncated one."""
    model, settings, atlas, ids, lengths, path = exported(core, stem, lines)
    ref = du.torch_logits(model, ids, lengths)
    session = onnxmodel.open_session(path, 1)
    feeds = onnxmodel.deployed_batch(ids, lengths, settings.lines, settings.line_chars)
    np.testing.assert_allclose(onnxmodel.run_logits(session, feeds), ref, atol=1e-4, rtol=0)
    assert lengths[-3] == 1 and lengths[-1] == settings.cells
    for i, tokens in ((-3, 1 if lines == 1 else settings.line_chars), (-1, settings.cells)):  # "a"; truncated text
        one = onnxmodel.deployed_batch(ids[i:][:1], lengths[i:][:1], settings.lines, settings.line_chars)
        assert one["glyphs"].shape == (1, tokens)
        np.testing.assert_allclose(onnxmodel.run_logits(session, one), ref[i:][:1], atol=1e-4, rtol=0)


def test_the_exported_graph_sums_spans_in_one_product_and_buckets_ngrams_with_one_div(tmp_path):
    """The deployed form's graph: the glyph table's spans summed by one MatMul with the span-sum matrix (no
    ReduceSum over the spans), and the n-gram bucket (a non-negative hash floor-divided by a power of two) one Div,
    without the exporter's sign correction (Floor, Sign, Equal, And): every batch runs these nodes."""
    model, settings, atlas, ids, lengths = _student("none", "pair", 1, activation="relu", **du.TABLES)
    path = du.export(model, du.student_config(model, settings, atlas), tmp_path / "student.onnx")
    graph = onnx.load(str(path)).graph
    ops = [n.op_type for n in graph.node]
    assert model.ngrams is not None and not {"Floor", "Sign", "Equal", "And"} & set(ops)
    table_gather = next(n for n in graph.node if n.op_type == "Gather" and n.input[0] == onnxmodel.TABLE_NAME)
    flat = next(n for n in graph.node if table_gather.output[0] in n.input)
    product = next(n for n in graph.node if flat.output[0] in n.input)
    assert flat.op_type == "Reshape" and product.op_type == "MatMul" and product.input[1] == onnxmodel.SPAN_SUM_NAME
    assert "ReduceSum" not in {n.op_type for n in graph.node if table_gather.output[0] in n.input}


def test_word_buckets_export_and_compute_the_torch_student(tmp_path):
    """With whole-word rows on (`ngram_words`), the exported graph hashes each word as torch does: onnxruntime's
    logits are torch's on real text, for the batch and for its texts alone."""
    model, settings, atlas, ids, lengths = _student("none", "pair", 1, activation="relu", ngram_words=True,
                                                    **du.TABLES)
    assert model.ngrams.words
    path = du.export(model, du.student_config(model, settings, atlas), tmp_path / "student.onnx")
    ref = du.torch_logits(model, ids, lengths)
    session = onnxmodel.open_session(path, 1)
    feeds = onnxmodel.deployed_batch(ids, lengths, settings.lines, settings.line_chars)
    np.testing.assert_allclose(onnxmodel.run_logits(session, feeds), ref, atol=1e-4, rtol=0)
    for i in range(len(ids)):
        one = onnxmodel.deployed_batch(ids[i : i + 1], lengths[i : i + 1], settings.lines, settings.line_chars)
        np.testing.assert_allclose(onnxmodel.run_logits(session, one), ref[i : i + 1], atol=1e-4, rtol=0)


@pytest.mark.parametrize("core,stem,lines", QUICK_EXPORTS)
def test_glyph_table_is_an_overridable_input(exported, core, stem, lines):
    """The exported table is the default of the `glyph_table` input and is what the metadata's fold map computes
    from the atlas; a table extended with more rows (characters folded at predict time) gives the same logits
    for the old ids, and the rows passed are the ones used."""
    model, settings, atlas, ids, lengths, path = exported(core, stem, lines)
    session = onnxmodel.open_session(path, 1)
    meta = onnxmodel.read_metadata(session)
    fold = meta["fold"]
    rows = FoldMap(onnxmodel.decode_array(fold["matrix"]), onnxmodel.decode_array(fold["offset"])).table(atlas.cells)
    spans = fold["spans"]
    rebuilt = span_major(rows, spans)  # the deployed layout: row s * (G + 1) + g
    stored = next(t for t in onnx.load(str(path)).graph.initializer if t.name == onnxmodel.TABLE_NAME)
    np.testing.assert_allclose(onnx.numpy_helper.to_array(stored), rebuilt, atol=1e-6)
    assert fold["form"] == ("ngram" if (core, lines) == ("none", 1) else "stem")
    feeds = onnxmodel.deployed_batch(ids, lengths, settings.lines, settings.line_chars)
    default = onnxmodel.run_logits(session, feeds)
    extra = np.random.default_rng(0).normal(size=(5, rows.shape[1])).astype(np.float32)
    extended = span_major(np.concatenate([rows, extra]), spans)  # five more glyphs in every span
    np.testing.assert_allclose(onnxmodel.run_logits(session, {**feeds, onnxmodel.TABLE_NAME: extended}), default,
                               atol=1e-6, rtol=0)
    changed = rows.copy()
    changed[feeds["glyphs"][0, 0]] += extra[0]  # not a constant shift: the recursive core's norms would cancel it
    moved = onnxmodel.run_logits(session, {**feeds, onnxmodel.TABLE_NAME: span_major(changed, spans)})
    assert np.abs(moved[0] - default[0]).max() > 1e-3


# ---- the rules end to end on the tiny config -------------------------------------------------------------------


def test_default_target_builds_models_and_report(tiny_run):
    for name in ("models/student.onnx", "models/student.int8.onnx", "reports/deploy.json", "reports/deploy.md",
                 "metrics/export_onnx/student.json", "metrics/quantize_onnx/student.json"):
        assert (tiny_run / name).is_file(), name
    report = json.loads((tiny_run / "reports/deploy.json").read_text())
    assert set(report["latency"]) == {"torch_fp32", "onnx_fp32", "onnx_int8"}
    for form in report["latency"].values():
        assert set(form) == {"1", "32"} and all(3 <= s["repeats"] <= 60 and s["median_ms"] > 0 for s in form.values())
    assert report["threads"] == 1 and report["cpu"]["model"] and report["cpu"]["logical_cores"] >= 1
    assert report["omp_wait_policy"] == "PASSIVE"  # set before the benchmark's process loaded torch
    assert report["size_bytes"]["onnx_int8"] < report["size_bytes"]["onnx_fp32"]
    shares = report["op_profile"]["onnx_int8"]["share"]
    assert shares and sum(shares.values()) == pytest.approx(1.0) and "QLinearSoftmax" not in shares
    md = (tiny_run / "reports/deploy.md").read_text()
    assert report["cpu"]["model"] in md and "1 thread(s)" in md and "| ONNX int8 | 32 |" in md


def test_onnx_is_valid_opset18_with_dynamic_batch(tiny_run):
    model = onnx.load(str(tiny_run / "models/student.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 18
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    # the tiny student has n-gram tables: their glyph keys are an input too, overridable like the glyph table
    assert list(dims) == ["glyphs", "lengths", "glyph_table", "glyph_keys"]
    assert all(isinstance(d, str) for d in dims["glyphs"]) and dims["glyphs"][0] == dims["lengths"][0]  # symbolic
    assert isinstance(dims["glyph_table"][0], str) and dims["glyph_table"][1] > 0  # any number of rows
    assert onnxmodel.TABLE_NAME in {t.name for t in model.graph.initializer}  # ... with the exported one as default
    assert [o.name for o in model.graph.output] == ["logits"]
    assert not any(n.metadata_props for n in model.graph.node)  # exporter stack traces stripped
    blobs = [(t.data_type, tuple(t.dims), t.raw_data) for t in model.graph.initializer if t.raw_data]
    assert len(blobs) == len(set(blobs))  # recursion-shared weights stored once


def test_parity_with_torch_on_val(tiny_run):
    torch_model, _ = load_model(tiny_run / "student")
    rows = np.load(tiny_run / "cache/val/shard-00000.npy")
    session = onnxmodel.open_session(tiny_run / "models/student.onnx", 1)
    for batch in (1, 7, 256):  # dynamic batch and token axes: any batch, trimmed to its longest text, computes the same
        report = check_parity(session, torch_model, rows, atol=1e-3, max_label_mismatch=0.001, batch_size=batch)
        assert report.ok and report.samples == len(rows) and report.label_mismatches == 0
        assert report.max_abs_logits < 1e-4


def test_parity_failure_fails_export_and_writes_nothing(tiny_run, tmp_path):
    rows = np.load(tiny_run / "cache/val/shard-00000.npy")
    out = tmp_path / "student.onnx"
    with pytest.raises(ParityError, match=r"max \|onnx - torch\| on logits .* \(tolerance 1e-15\)"):
        export_and_verify(tiny_run / "student", out, rows, opset=18, atol=1e-15, max_label_mismatch=0.001,
                          log=lambda m: None)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_metadata_makes_the_file_self_contained(tiny_run):
    student_cfg = json.loads((tiny_run / "student/config.json").read_text())
    for name in ("student.onnx", "student.int8.onnx"):
        meta = onnxmodel.read_metadata(tiny_run / "models" / name)
        assert meta["config"] == student_cfg
        assert meta["config"]["render"]["fonts"] and meta["config"]["atlas"]["sha256"]
        assert meta["fold"]["form"] == "ngram"  # the tiny student is core none on one line: stem and n-grams fold
        assert onnxmodel.decode_array(meta["fold"]["matrix"]).shape[0] == 16 * 8  # pixels of one cell -> a row


def test_int8_is_smaller_quantized_and_within_tolerance(tiny_run):
    fp32, int8 = tiny_run / "models/student.onnx", tiny_run / "models/student.int8.onnx"
    assert int8.stat().st_size < fp32.stat().st_size
    q = onnx.load(str(int8))
    ops = {n.op_type for n in q.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    int8_weights = [t for t in q.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) >= 2]
    assert int8_weights  # weights stored as int8
    m = json.loads((tiny_run / "metrics/quantize_onnx/student.json").read_text())
    assert m["range_samples_used"] == 64
    assert m["accuracy_drop_points"] <= 10.0  # the tiny config's gate: 38 near-ties of a barely trained student
    # int8 logits stay close to fp32 on real test rows (the default student's drop: docs/deploy.md)
    sessions = onnxmodel.open_session(fp32, 1), onnxmodel.open_session(int8, 1)
    for feeds, _ in onnxmodel.split_batches(tiny_run / "cache/test"):
        a, b = (onnxmodel.run_logits(s, feeds) for s in sessions)
        assert np.abs(a - b).max() < 0.1 * max(1.0, np.abs(a).max())
    # the n-gram table (quantize.table_rows: int4): two values a byte and a scale per row, no fp32 copy left; the
    # glyph table int8 with a scale per column (quantize.glyph_table), applied after the sum over its spans
    assert m["table_rows"] == {TABLE_NAME: "int4"} and m["int8_glyph_table"] is True
    names = {t.name: t.data_type for t in q.graph.initializer}
    assert TABLE_NAME not in names
    assert names[TABLE_NAME + ".int4"] == onnx.TensorProto.UINT8 and names[TABLE_NAME + ".scale"] == onnx.TensorProto.FLOAT
    assert names[onnxmodel.TABLE_NAME] == onnx.TensorProto.INT8
    assert names[onnxmodel.TABLE_SCALE_NAME] == onnx.TensorProto.FLOAT
    scale_readers = [n for n in q.graph.node if onnxmodel.TABLE_SCALE_NAME in n.input]
    assert [n.op_type for n in scale_readers] == ["Tile"]  # into the span-sum matrix, not onto gathered rows
    product = next(n for n in q.graph.node if n.op_type == "MatMul" and SCALED_SPAN_SUM in n.input)
    assert next(n for n in q.graph.node if product.input[0] in n.output).op_type == "Reshape"


def test_int8_table_rows_dequantize_what_a_gather_reads(tmp_path):
    """Gather(int8 rows) * Gather(row scales) equals the fp32 table's rows within half a step of each row's scale;
    an all-zero row stays zero; other Gathers (the glyph table) are left alone."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    table = rng.normal(0, 0.02, (32, 8)).astype(np.float32)
    table[5] = 0.0
    other = rng.normal(size=(4, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", [TABLE_NAME, "ids"], ["rows"], axis=0),
         helper.make_node("Gather", ["other", "ids4"], ["other_rows"], axis=0)],
        "g", [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [None]),
              helper.make_tensor_value_info("ids4", onnx.TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("rows", onnx.TensorProto.FLOAT, [None, 8]),
         helper.make_tensor_value_info("other_rows", onnx.TensorProto.FLOAT, [None, 8])],
        [numpy_helper.from_array(table, TABLE_NAME), numpy_helper.from_array(other, "other")])
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert table_rows(path, 8) == {TABLE_NAME: "int8"}
    onnx.checker.check_model(str(path), full_check=True)
    import onnxruntime as ort

    ids = np.arange(32, dtype=np.int64)
    rows, other_rows = ort.InferenceSession(str(path)).run(None, {"ids": ids, "ids4": np.arange(4, dtype=np.int64)})
    step = np.abs(table).max(1, keepdims=True) / 127
    assert np.all(np.abs(rows - table) <= step / 2 + 1e-9)
    assert not rows[5].any()
    np.testing.assert_array_equal(other_rows, other)
    assert {t.name for t in onnx.load(str(path)).graph.initializer} == {TABLE_NAME + ".int8", TABLE_NAME + ".scale",
                                                                         "other"}


def test_int8_glyph_table_scales_the_span_sum_matrix(tmp_path):
    """The glyph table as int8 with a scale per column: a Gather whose rows only the span-sum product reads
    (Reshape -> MatMul by fold's span_sum matrix) has the scales folded into that matrix; one read otherwise (a
    graph output, a sum over the columns) is scaled right after its Cast. Both read the table within half a step
    of each column's scale."""
    from onnx import helper, numpy_helper
    import onnxruntime as ort

    name, scale_name = onnxmodel.TABLE_NAME, onnxmodel.TABLE_SCALE_NAME
    table = np.random.default_rng(0).normal(0, [[0.1, 1.0, 3.0]], (20, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", [name, "ids"], ["spans"], axis=0),
         helper.make_node("Reshape", ["spans", "flat"], ["side_by_side"]),
         helper.make_node("MatMul", ["side_by_side", onnxmodel.SPAN_SUM_NAME], ["summed"]),
         helper.make_node("Gather", [name, "ids"], ["across"], axis=0),
         helper.make_node("ReduceSum", ["across", "last_axis"], ["row_sums"], keepdims=0),
         helper.make_node("Gather", [name, "ids"], ["rows"], axis=0)],
        "g", [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [None, 4]),
              helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, shape)
         for o, shape in (("summed", [None, 3]), ("row_sums", [None, 4]), ("rows", [None, 4, 3]))],
        [numpy_helper.from_array(table, name), numpy_helper.from_array(np.array([0, 12], np.int64), "flat"),
         numpy_helper.from_array(span_sum_matrix(4, 3).numpy(), onnxmodel.SPAN_SUM_NAME),
         numpy_helper.from_array(np.array([-1], np.int64), "last_axis")])
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    assert int8_glyph_table(path)
    onnx.checker.check_model(str(path), full_check=True)
    nodes = onnx.load(str(path)).graph.node
    assert {n.output[0] for n in nodes if scale_name in n.input} == {SCALED_SPAN_SUM + ".tiled", "across", "rows"}
    ids = np.random.default_rng(1).integers(0, 20, (6, 4))
    summed, row_sums, rows = ort.InferenceSession(str(path)).run(None, {"ids": ids})
    step = np.abs(table).max(0) / 127
    assert np.all(np.abs(rows - table[ids]) <= step / 2 + 1e-6)
    assert np.all(np.abs(summed - table[ids].sum(1)) <= 4 * step / 2 + 1e-5)
    np.testing.assert_allclose(row_sums, rows.sum(-1), rtol=1e-6)
    assert not int8_glyph_table(path)  # no fp32 glyph table left
    columns = helper.make_graph(  # gathered along the columns: a scale per column cannot serve
        [helper.make_node("Gather", [name, "ids"], ["cols"], axis=1)], "c",
        [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [2]),
         helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("cols", onnx.TensorProto.FLOAT, [20, 2])], [numpy_helper.from_array(table, name)])
    onnx.save(helper.make_model(columns, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    with pytest.raises(ValueError, match="along its columns"):
        int8_glyph_table(path)


def _mean_graph(path: Path, table: np.ndarray, also_read: bool = False) -> None:
    """A table read as the exported student reads its n-gram table: Gather, then the masked mean MatMul(w, rows)
    (`also_read`: the gathered rows are a graph output too)."""
    from onnx import helper, numpy_helper

    width = table.shape[1]
    outputs = [helper.make_tensor_value_info("mean", onnx.TensorProto.FLOAT, [None, 1, width])]
    if also_read:
        outputs.append(helper.make_tensor_value_info("rows", onnx.TensorProto.FLOAT, [None, None, width]))
    graph = helper.make_graph([helper.make_node("Gather", [TABLE_NAME, "ids"], ["rows"], axis=0),
                               helper.make_node("MatMul", ["w", "rows"], ["mean"])], "g",
                              [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [None, None]),
                               helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [None, 1, None])],
                              outputs, [numpy_helper.from_array(table, TABLE_NAME)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def _quantized_mean(path: Path, table: np.ndarray, bits: int, rng: np.random.Generator) -> tuple:
    """`table` read by the masked mean (`_mean_graph`), stored at `bits`, checked and run: (ids, w, the mean);
    the first text reads row 3 only."""
    import onnxruntime as ort

    _mean_graph(path, table)
    assert table_rows(path, bits) == {TABLE_NAME: f"int{bits}"}
    onnx.checker.check_model(str(path), full_check=True)
    ids = rng.integers(0, len(table), (5, 9)).astype(np.int64)
    ids[0] = 3
    w = rng.random((5, 1, 9)).astype(np.float32)
    return ids, w, ort.InferenceSession(str(path)).run(None, {"ids": ids, "w": w})[0]


def test_int4_table_rows_are_what_the_mean_reads(tmp_path):
    """quantize.table_rows int4: the masked mean over the packed rows (two values a byte, a scale per row) is the
    mean of the dequantized rows; the chosen clips err less than max |value| / 7; a zero row stays zero (to 1e-9); the
    table takes 1/8 of its fp32 bytes. A table read otherwise than by the mean stays int8."""
    rng = np.random.default_rng(0)
    table = rng.normal(0, 0.02, (64, 16)).astype(np.float32)
    table[3] = 0.0
    table[7, 5] = 0.5  # an outlier: the row's clip keeps the other values' steps fine
    path = tmp_path / "g.onnx"
    ids, w, mean = _quantized_mean(path, table, 4, rng)
    q, scale = int4_rows(table)
    assert q.min() >= -8 and q.max() <= 7 and scale.shape == (64, 1)
    # the low nibbles' mean is a difference of sums of bytes up to 247: float32 rounding of ~1e-6 here, a thousandth
    # of the 4-bit rounding itself (steps of max |value| / 7 ~ 0.01)
    np.testing.assert_allclose(mean, w @ (q * scale)[ids], rtol=1e-5, atol=3e-6)
    assert np.abs(mean[0]).max() < 1e-9  # a zero row reads zero (each nibble's mean is a difference of sums)
    plain = np.abs(table).max(1, keepdims=True) / 7
    plain[plain == 0] = 1
    assert np.square(q * scale - table).sum() < np.square(np.clip(np.round(table / plain), -8, 7) * plain - table).sum()
    sizes = {t.name: len(t.raw_data) for t in onnx.load(str(path)).graph.initializer if t.name.startswith(TABLE_NAME)}
    assert sizes == {TABLE_NAME + ".int4": table.size // 2, TABLE_NAME + ".scale": 4 * 64}
    _mean_graph(path, table, also_read=True)
    assert table_rows(path, 4) == {TABLE_NAME: "int8"}


def test_int4_rows_read_every_byte_exactly(tmp_path):
    """quantize.table_rows int4: the graph takes each packed byte apart into its two nibbles (a rounding, not a
    BitwiseAnd) exactly, for all 256 bytes: row r holds byte r in every column, at scale 1."""
    import onnxruntime as ort
    from onnx import numpy_helper

    path = tmp_path / "g.onnx"
    _mean_graph(path, np.zeros((256, 4), np.float32))
    assert table_rows(path, 4) == {TABLE_NAME: "int4"}
    proto = onnx.load(str(path))
    for t in proto.graph.initializer:
        if t.name == TABLE_NAME + ".int4":
            t.CopyFrom(numpy_helper.from_array(np.repeat(np.arange(256, dtype=np.uint8)[:, None], 2, 1), t.name))
        elif t.name == TABLE_NAME + ".scale":
            t.CopyFrom(numpy_helper.from_array(np.ones((256, 1), np.float32), t.name))
    onnx.save(proto, str(path))
    ids = np.arange(256, dtype=np.int64)[:, None]  # one row a text, weight 1: the mean is the row
    mean = ort.InferenceSession(str(path)).run(None, {"ids": ids, "w": np.ones((256, 1, 1), np.float32)})[0][:, 0]
    low, high = np.arange(256) % 16 - 8, np.arange(256) // 16 - 8
    np.testing.assert_array_equal(mean, np.stack([low, low, high, high], 1).astype(np.float32))


def test_int8_table_rows_read_by_the_mean_scale_its_weights(tmp_path):
    """quantize.table_rows int8 on a table read by the masked mean alone: MatMul(w * scales, int8 rows), the mean
    of the dequantized rows, with no Mul over the gathered rows; a table whose rows are also read otherwise keeps
    the dequantizing Gather."""
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    table = rng.normal(0, 0.02, (64, 16)).astype(np.float32)
    table[3] = 0.0
    path = tmp_path / "g.onnx"
    ids, w, mean = _quantized_mean(path, table, 8, rng)
    q, scale = onnxmodel.int8_rows(table)
    np.testing.assert_allclose(mean, w @ (q.astype(np.float32) * scale)[ids], rtol=1e-5, atol=1e-7)
    assert not mean[0].any()
    nodes = onnx.load(str(path)).graph.node
    mul_inputs = [n.input for n in nodes if n.op_type == "Mul"]
    assert mul_inputs == [["w", "rows.scale.t"]]  # the weights are scaled, never the [B, N, C] rows
    _mean_graph(path, table, also_read=True)
    assert table_rows(path, 8) == {TABLE_NAME: "int8"}
    assert [n.input for n in onnx.load(str(path)).graph.node if n.op_type == "Mul"] == [["rows.float", "rows.scale"]]
    # a second Gather of the table read otherwise: every lookup of that table dequantizes its rows, the mean too
    from onnx import helper, numpy_helper

    graph = helper.make_graph([helper.make_node("Gather", [TABLE_NAME, "ids"], ["rows"], "gather", axis=0),
                               helper.make_node("MatMul", ["w", "rows"], ["mean"]),
                               helper.make_node("Gather", [TABLE_NAME, "ids"], ["other"], "gather2", axis=0)], "g",
                              [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [None, None]),
                               helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [None, 1, None])],
                              [helper.make_tensor_value_info("mean", onnx.TensorProto.FLOAT, [None, 1, 16]),
                               helper.make_tensor_value_info("other", onnx.TensorProto.FLOAT, [None, None, 16])],
                              [numpy_helper.from_array(table, TABLE_NAME)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    assert table_rows(path, 8) == {TABLE_NAME: "int8"}
    assert sorted(n.input[0] for n in onnx.load(str(path)).graph.node if n.op_type == "Mul") == ["other.float",
                                                                                               "rows.float"]
    mean, other = ort.InferenceSession(str(path)).run(None, {"ids": ids, "w": w})
    np.testing.assert_allclose(mean, w @ (q.astype(np.float32) * scale)[ids], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(other, (q.astype(np.float32) * scale)[ids], rtol=1e-6)


def test_int8_keeps_the_glyph_table_overridable(tiny_run):
    """Quantization leaves the glyph table an input that predict can extend: int8 with a scale per column, which
    predict's own quantization (onnxmodel.int8_columns) reproduces; extra rows change nothing for the old ids, and
    a changed row is used."""
    session = onnxmodel.open_session(tiny_run / "models/student.int8.onnx", 1)
    spans = onnxmodel.read_metadata(session)["fold"]["spans"]
    inits = {t.name: onnx.numpy_helper.to_array(t)
             for t in onnx.load(str(tiny_run / "models/student.int8.onnx")).graph.initializer}
    table, scale = inits[onnxmodel.TABLE_NAME], inits[onnxmodel.TABLE_SCALE_NAME]
    assert table.dtype == np.int8 and scale.shape == (table.shape[1],) and np.abs(table).max() == 127
    np.testing.assert_array_equal(onnxmodel.int8_columns(table * scale, scale), table)  # predict requantizes alike
    np.testing.assert_array_equal(onnxmodel.column_scale(np.abs(table * scale).max(0)), scale)
    dequantized = table * scale
    rows = dequantized.reshape(spans, -1, table.shape[1]).transpose(1, 0, 2).reshape(-1, spans * table.shape[1])
    feeds, _ = next(onnxmodel.split_batches(tiny_run / "cache/test"))
    default = onnxmodel.run_logits(session, feeds)

    def run(glyph_rows):
        q = onnxmodel.int8_columns(span_major(glyph_rows, spans), scale)
        return onnxmodel.run_logits(session, {**feeds, onnxmodel.TABLE_NAME: q, onnxmodel.TABLE_SCALE_NAME: scale})

    np.testing.assert_allclose(run(np.concatenate([rows, np.ones((3, rows.shape[1]), np.float32)])), default,
                               atol=1e-6)
    rows = rows.copy()
    rows[feeds["glyphs"][0, 0]] += np.random.default_rng(0).normal(size=rows.shape[1]).astype(np.float32)
    assert np.abs(run(rows) - default).max() > 1e-3


def test_int8_columns_clip_a_glyph_past_the_exported_range():
    """A row folded after the export is quantized with the file's column scales: within range it rounds to the
    nearest step, past it it is read at the edge (+-127), never wrapped around."""
    table = np.array([[1.0, -2.0, 0.0], [0.5, 1.0, 0.0]], np.float32)
    scale = onnxmodel.column_scale(np.abs(table).max(0))
    np.testing.assert_allclose(scale, [1 / 127, 2 / 127, 1.0])  # an all-zero column: scale 1
    np.testing.assert_array_equal(onnxmodel.int8_columns(table, scale), [[127, -127, 0], [64, 64, 0]])
    np.testing.assert_array_equal(onnxmodel.int8_columns(np.array([[3.0, -5.0, 0.4]], np.float32), scale),
                                  [[127, -127, 0]])


def test_accuracy_gate_rejects_and_writes_nothing(tiny_run, tmp_path):
    out = tmp_path / "student.int8.onnx"
    settings = QuantizeSettings.from_section(section("quantize", range_samples=32, max_accuracy_drop=-1.0))  # any result is "too much"
    with pytest.raises(AccuracyDropError, match=r"test accuracy fp32 .* -> int8 .* \(drop .* allowed -1"):
        quantize_and_verify(tiny_run / "models/student.onnx", out, settings,
                            [tiny_run / "cache/train/shard-00000.npy"], tiny_run / "cache/test", log=lambda m: None)
    assert list(tmp_path.iterdir()) == []


def test_dynamic_quantization_alternative(tiny_run, tmp_path):
    out = tmp_path / "student.dyn.onnx"
    info = quantize_and_verify(tiny_run / "models/student.onnx", out, QuantizeSettings.from_section(section("quantize", method="dynamic", op_types=("MatMul", "Gemm"))),
                               [], tiny_run / "cache/test", log=lambda m: None)
    assert out.is_file() and info["int8_bytes"] < info["fp32_bytes"]
    assert "DynamicQuantizeLinear" in {n.op_type for n in onnx.load(str(out)).graph.node}
    assert onnxmodel.read_metadata(out)["config"]["labels"]


def test_range_reader_reads_real_rows(tiny_run):
    """The activation ranges are read on the deployed model's own inputs: real train rows as deployed glyph ids,
    trimmed."""
    shards = sorted((tiny_run / "cache/train").glob("shard-*.npy"))
    reader = CacheRangeReader(shards, samples=150, batch_size=64)
    batches = list(iter(reader.get_next, None))
    assert [len(b["lengths"]) for b in batches] == [64, 64, 22] and reader.used == 150
    assert all(set(b) == {"glyphs", "lengths"} for b in batches)
    first = np.load(shards[0])[:64]
    glyphs, lengths = batches[0]["glyphs"], batches[0]["lengths"]
    assert glyphs.dtype == np.int64 and glyphs.shape == (64, first["length"].max())
    assert lengths.tolist() == first["length"].tolist()
    inside = np.arange(glyphs.shape[1]) < lengths[:, None]
    assert (glyphs[inside] == first["glyphs"][:, : glyphs.shape[1]][inside] + 1).all() and (glyphs[~inside] == 0).all()
    reader.rewind()
    assert len(reader.get_next()["lengths"]) == 64


def test_report_states_goal_and_ratios(tiny_run):
    report = json.loads((tiny_run / "reports/deploy.json").read_text())
    g = report["goal"]
    assert g["evaluated"] and set(g["checks"]) == {"int8_vs_onnx_fp32 >= 2", "int8_vs_torch_fp32 >= 3",
                                                   "accuracy drop <= 1 point"}
    s = report["speedup"]["32"]
    lat = report["latency"]
    assert s["int8_vs_onnx_fp32"] == pytest.approx(lat["onnx_fp32"]["32"]["median_ms"] / lat["onnx_int8"]["32"]["median_ms"])


# ---- the benchmark's timing: usable numbers on a shared machine --------------------------------------------------


class _Form:
    """A stand-in for one deployed form: the first `cold` calls take `cold_s`, later ones `warm_s`, every 10th
    call a `stall_s` (another job took the core); records the order of calls across forms."""

    def __init__(self, name: str, log: list, cold: int = 0, cold_s: float = 0.0, warm_s: float = 0.0,
                 stall_s: float = 0.0) -> None:
        self.name, self.log, self.cold, self.stall_s = name, log, cold, stall_s
        self.cold_s, self.warm_s = cold_s, warm_s
        self.calls = 0

    def __call__(self, feeds) -> None:
        self.calls += 1
        self.log.append(self.name)
        pause = self.cold_s if self.calls <= self.cold else self.stall_s if self.calls % 10 == 0 else self.warm_s
        end = time.perf_counter() + pause
        while time.perf_counter() < end:  # busy, as a kernel is (sleep would hand the core away)
            pass


def test_time_forms_warms_up_and_times_enough_to_be_usable():
    """A slow start (the first calls of a fresh runtime) is spent in the warm-up, whatever `warmup` says; a form
    gets at least `repeats` runs and `seconds` of timed work (a fast one up to MAX_RUNS_FACTOR x repeats runs);
    forms take turns in blocks of at most BLOCK timed runs; an occasional stall moves the median by nothing."""
    log: list[str] = []
    forms = {"slow_start": _Form("slow_start", log, cold=4, cold_s=0.02, warm_s=0.001, stall_s=0.03),
             "fast": _Form("fast", log)}
    times = benchmark.time_forms(forms, {}, warmup=1, repeats=4, seconds=0.05, warmup_seconds=0.1)
    slow, fast = np.asarray(times["slow_start"]), np.asarray(times["fast"])
    assert (slow > 0.015).sum() <= len(slow) // 10 + 1  # no cold call timed: only the stalls (every 10th call)
    assert 0.0009 < np.median(slow) < 0.002 and slow.sum() >= 0.05 and len(slow) >= 4
    assert len(fast) == benchmark.MAX_RUNS_FACTOR * 4  # too fast to reach `seconds`: the run cap ends it
    timed_from = log.index("slow_start", log.index("fast"))  # both warmed up: the timed rounds begin
    turns = [len(list(calls)) for _, calls in itertools.groupby(log[timed_from:])]
    # a block and its re-warm call, then the other form's turn (the last turn: the form still short of its runs)
    assert max(turns[:-1]) <= benchmark.BLOCK + 1 and len(turns) > 2


def test_pin_threads_makes_openmp_wait_passively():
    """Spinning OpenMP threads made torch's latency that of the other jobs (80 ms a text instead of 0.8 beside one
    busy process): in a fresh process the benchmark's torch waits passively at the given thread count, with one
    inter-op thread, and reports the policy; a policy the user set is kept."""
    code = ("from pixelpipe.deploy.benchmark import pin_threads; print(pin_threads(2)); import torch; "
            "print(torch.get_num_threads(), torch.get_num_interop_threads())")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    run = lambda e: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)  # noqa: E731
    assert run(env).stdout.split() == ["PASSIVE", "2", "1"]
    assert run({**env, "OMP_WAIT_POLICY": "ACTIVE"}).stdout.split() == ["ACTIVE", "2", "1"]


def test_wide_spread_is_flagged_in_the_report():
    """A row whose 75th percentile is over twice its 25th is named in the report, to be rerun before quoting."""
    steady = {"median_ms": 1.0, "p25_ms": 0.9, "p75_ms": 1.1}
    latency = {form: {"1": dict(steady), "32": dict(steady)} for form in benchmark.FORMS}
    assert benchmark._spread_note({"latency": latency}) == []
    latency["torch_fp32"]["1"] = {"median_ms": 6.3, "p25_ms": 1.66, "p75_ms": 346.93}
    note = benchmark._spread_note({"latency": latency})
    assert len(note) == 1 and "torch eager fp32 at batch 1" in note[0] and "ONNX" not in note[0]



def test_evaluation_figure_legend_covers_no_bar():
    """The models' legend sits below the axes (one for both bar panels), inside the figure: drawn inside an axes it
    covered bars that all reach near 100 %."""
    import matplotlib.pyplot as plt

    from pixelpipe.evaluate.report import figure

    models = ["teacher", "student", "onnx_fp32", "onnx_int8", "ngram", "py3langid"]
    rows = [{"model": m, "set": s, "perturbation": p, "bucket": b, "n": 100, "correct": 99 - i}
            for i, m in enumerate(models) for s in ("prose", "ui") for p in ("clean", "typos")
            for b in ("<20", "20-40", "all")]
    cal = {"ece": 0.01, "texts": 5, "bins": [{"low": 0.9, "high": 1.0, "n": 5, "confidence": 0.95, "accuracy": 0.94}]}
    with_cal = {"rows": rows, "sets": {"prose": 1, "ui": 1}, "calibration": cal}
    for result in (with_cal, {"rows": rows, "sets": {"ui": 1}}):
        fig = figure(result)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        assert [t.get_text() for t in legend.get_texts()] == models
        assert not any(box.overlaps(ax.get_tightbbox(renderer)) for ax in fig.axes)
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
        plt.close(fig)
