# Snakemake adapter: export the student to ONNX and fail unless onnxruntime reproduces torch on a val shard.
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pixelpipe.core.io import sha256_file
from pixelpipe.data.render import verify_shards
from pixelpipe.deploy.export import export_and_verify
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
cfg = sm.params.export
with stage(sm) as (log, meter):
    verify_shards(Path(sm.input.val_manifest).parent, [Path(sm.input.val_shard).name])
    val = np.load(sm.input.val_shard)
    report = export_and_verify(Path(sm.input.model).parent, sm.output.onnx, val, opset=cfg["opset"],
                               atol=cfg["parity_atol"], max_label_mismatch=cfg["max_label_mismatch"],
                               threads=sm.threads, log=log)
    meter.record(samples=report.samples, parity=asdict(report), opset=cfg["opset"],
                 onnx_bytes=Path(sm.output.onnx).stat().st_size, onnx_sha256=sha256_file(sm.output.onnx))
