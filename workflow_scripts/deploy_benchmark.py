# Snakemake adapter: time torch eager fp32, ONNX fp32 and ONNX int8 on this CPU; write results/reports/deploy.*.
from pathlib import Path

from pixelpipe.deploy.benchmark import benchmark, write_reports
from pixelpipe.deploy.onnxmodel import verify_onnx
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
cfg = sm.params.deploy_benchmark
with stage(sm) as (log, meter):
    verify_onnx(sm.input.onnx, sm.input.export_metrics, "export_onnx")
    verify_onnx(sm.input.int8, sm.input.quantize_metrics, "quantize_onnx")
    report = benchmark(Path(sm.input.student[0]).parent, sm.input.onnx, sm.input.int8, Path(sm.input.test[0]).parent,
                       batch_sizes=list(cfg["batch_sizes"]), warmup=cfg["warmup"], repeats=cfg["repeats"],
                       threads=sm.threads, log=log)
    write_reports(report, sm.output.json, sm.output.md)
    meter.record(threads=sm.threads, speedup=report["speedup"])
