"""Export, quantize and deploy benchmark on the tiny config: the rules end to end, then each guarantee."""

import json

import numpy as np
import onnx
import pytest

from pixelpipe.deploy import onnxmodel
from pixelpipe.deploy.export import ParityError, check_parity, export_and_verify
from pixelpipe.deploy.quantize import AccuracyDropError, CacheCalibrationReader, QuantizeSettings, quantize_and_verify
from pixelpipe.model.checkpoint import load_model
from tests._config_utils import section


def test_default_target_builds_models_and_report(tiny_run):
    for name in ("models/student.onnx", "models/student.int8.onnx", "reports/deploy.json", "reports/deploy.md",
                 "metrics/export_onnx/student.json", "metrics/quantize_onnx/student.json"):
        assert (tiny_run / name).is_file(), name
    report = json.loads((tiny_run / "reports/deploy.json").read_text())
    assert set(report["latency"]) == {"torch_fp32", "onnx_fp32", "onnx_int8"}
    for form in report["latency"].values():
        assert set(form) == {"1", "32"} and all(s["repeats"] == 3 and s["median_ms"] > 0 for s in form.values())
    assert report["threads"] == 1 and report["cpu"]["model"] and report["cpu"]["logical_cores"] >= 1
    assert report["size_bytes"]["onnx_int8"] < report["size_bytes"]["onnx_fp32"]
    shares = report["op_profile"]["onnx_int8"]["share"]
    assert shares and sum(shares.values()) == pytest.approx(1.0) and "QLinearSoftmax" not in shares
    md = (tiny_run / "reports/deploy.md").read_text()
    assert report["cpu"]["model"] in md and "1 thread(s)" in md and "| ONNX int8 | 32 |" in md


def test_onnx_is_valid_opset18_with_dynamic_batch(tiny_run):
    model = onnx.load(str(tiny_run / "models/student.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 18
    (inp,) = model.graph.input
    assert inp.name == "images" and inp.type.tensor_type.shape.dim[0].dim_param  # symbolic batch axis
    assert [o.name for o in model.graph.output] == ["logits", "sketches"]
    assert not any(n.metadata_props for n in model.graph.node)  # exporter stack traces stripped
    blobs = [(t.data_type, tuple(t.dims), t.raw_data) for t in model.graph.initializer if t.raw_data]
    assert len(blobs) == len(set(blobs))  # recursion-shared weights stored once


def test_parity_with_torch_on_val(tiny_run):
    torch_model, _ = load_model(tiny_run / "student")
    images = np.load(tiny_run / "cache/val/shard-00000.npy")
    session = onnxmodel.open_session(tiny_run / "models/student.onnx", 1)
    for batch in (1, 7, 256):  # dynamic batch axis: any batch size computes the same
        report = check_parity(session, torch_model, images, atol=1e-3, max_label_mismatch=0.001, batch_size=batch)
        assert report.ok and report.samples == len(images) and report.label_mismatches == 0
        assert report.max_abs_logits < 1e-4 and report.max_abs_sketches < 1e-3


def test_parity_failure_fails_export_and_writes_nothing(tiny_run, tmp_path):
    images = np.load(tiny_run / "cache/val/shard-00000.npy")
    out = tmp_path / "student.onnx"
    with pytest.raises(ParityError, match=r"max \|onnx - torch\| on logits .* \(tolerance 1e-15\)"):
        export_and_verify(tiny_run / "student", out, images, opset=18, atol=1e-15, max_label_mismatch=0.001,
                          log=lambda m: None)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_metadata_makes_the_file_self_contained(tiny_run):
    student_cfg = json.loads((tiny_run / "student/config.json").read_text())
    for name in ("student.onnx", "student.int8.onnx"):
        meta = onnxmodel.read_metadata(tiny_run / "models" / name)
        assert meta["config"] == student_cfg
        assert meta["config"]["render"]["fonts"] and meta["config"]["atlas"]["sha256"]


def test_int8_is_smaller_quantized_and_within_tolerance(tiny_run):
    fp32, int8 = tiny_run / "models/student.onnx", tiny_run / "models/student.int8.onnx"
    assert int8.stat().st_size < fp32.stat().st_size
    q = onnx.load(str(int8))
    ops = {n.op_type for n in q.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    int8_weights = [t for t in q.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) >= 2]
    assert int8_weights  # weights stored as int8
    m = json.loads((tiny_run / "metrics/quantize_onnx/student.json").read_text())
    assert m["calibration_samples_used"] == 64
    assert m["accuracy_drop_points"] <= 10.0  # the tiny config's gate: 38 near-ties of a barely trained student
    # int8 logits stay close to fp32 on real test images (the default student's drop: docs/deploy.md)
    images = np.load(tiny_run / "cache/test/shard-00000.npy")
    a = onnxmodel.run_logits(onnxmodel.open_session(fp32, 1), images)
    b = onnxmodel.run_logits(onnxmodel.open_session(int8, 1), images)
    assert np.abs(a - b).max() < 0.1 * max(1.0, np.abs(a).max())


def test_accuracy_gate_rejects_and_writes_nothing(tiny_run, tmp_path):
    out = tmp_path / "student.int8.onnx"
    settings = QuantizeSettings.from_section(section("quantize", calibration_samples=32, max_accuracy_drop=-1.0))  # any result is "too much"
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


def test_calibration_reader_reads_real_images(tiny_run):
    shards = sorted((tiny_run / "cache/train").glob("shard-*.npy"))
    reader = CacheCalibrationReader(shards, samples=150, batch_size=64)
    batches = list(iter(reader.get_next, None))
    assert [len(b["images"]) for b in batches] == [64, 64, 22] and reader.used == 150
    first = np.load(shards[0])[:64]
    np.testing.assert_allclose(batches[0]["images"], first.astype(np.float32) / 255, rtol=1e-6)
    assert batches[0]["images"].dtype == np.float32 and batches[0]["images"].max() <= 1.0
    reader.rewind()
    assert len(reader.get_next()["images"]) == 64


def test_report_states_goal_and_ratios(tiny_run):
    report = json.loads((tiny_run / "reports/deploy.json").read_text())
    g = report["goal"]
    assert g["evaluated"] and set(g["checks"]) == {"int8_vs_onnx_fp32 >= 2", "int8_vs_torch_fp32 >= 3",
                                                   "accuracy drop <= 1 point"}
    s = report["speedup"]["32"]
    lat = report["latency"]
    assert s["int8_vs_onnx_fp32"] == pytest.approx(lat["onnx_fp32"]["32"]["median_ms"] / lat["onnx_int8"]["32"]["median_ms"])
