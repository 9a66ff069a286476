# Snakemake adapter: int8-quantize the ONNX student on train-cache images; fail if test accuracy drops too far.
from pathlib import Path

from pixelpipe.core.io import sha256_file
from pixelpipe.deploy.onnxmodel import verify_onnx
from pixelpipe.deploy.quantize import QuantizeSettings, quantize_and_verify
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    verify_onnx(sm.input.onnx, sm.input.export_metrics, "export_onnx")
    settings = QuantizeSettings.from_section(sm.params.quantize)
    info = quantize_and_verify(sm.input.onnx, sm.output.onnx, settings, list(sm.input.range_shards),
                               Path(sm.input.test[0]).parent, threads=sm.threads, log=log)
    meter.record(samples=info.get("range_samples_used", 0), **info, onnx_sha256=sha256_file(sm.output.onnx))
