# Deploy: the student as ONNX (parity-checked), as int8 ONNX (accuracy-checked), and what both cost on this CPU.
import os

DEPLOY_FILES = [
    "results/models/student.onnx",
    "results/models/student.int8.onnx",
    "results/reports/deploy.json",
    "results/reports/deploy.md",
]


rule export_onnx:
    input:
        model="results/student/model.safetensors",
        config="results/student/config.json",
        val_shard="results/cache/val/shard-00000.npy",
        val_manifest="results/cache/val/manifest.json",
    output:
        onnx="results/models/student.onnx",
        metrics="results/metrics/export_onnx/student.json",
    params:
        export=config["export"],
    threads: 2
    log:
        "logs/export_onnx/student.log",
    benchmark:
        "benchmarks/export_onnx/student.tsv"
    conda:
        "../envs/deploy.yaml"
    script:
        "../workflow_scripts/export_onnx.py"


rule quantize_onnx:
    input:
        onnx="results/models/student.onnx",
        export_metrics="results/metrics/export_onnx/student.json",  # the ONNX file's sha256
        range_shards=cache_shards("train"),  # the rows static quantization reads activation ranges on
        test=cache_inputs(["test"]),
    output:
        onnx="results/models/student.int8.onnx",
        metrics="results/metrics/quantize_onnx/student.json",
    params:
        quantize=config["quantize"],
    threads: 2
    log:
        "logs/quantize_onnx/student.log",
    benchmark:
        "benchmarks/quantize_onnx/student.tsv"
    conda:
        "../envs/deploy.yaml"
    script:
        "../workflow_scripts/quantize_onnx.py"


rule deploy_benchmark:
    input:
        student=STUDENT_FILES,
        onnx="results/models/student.onnx",
        int8="results/models/student.int8.onnx",
        export_metrics="results/metrics/export_onnx/student.json",  # the ONNX files' sha256
        quantize_metrics="results/metrics/quantize_onnx/student.json",
        test=cache_inputs(["test"]),
    output:
        json="results/reports/deploy.json",
        md="results/reports/deploy.md",
        metrics="results/metrics/deploy_benchmark/student.json",
    params:
        deploy_benchmark=config["deploy_benchmark"],
    # All the cores the run allows (Snakemake caps this at --cores), so nothing runs beside the timing.
    threads: config["deploy_benchmark"]["threads"] or os.cpu_count()
    log:
        "logs/deploy_benchmark/student.log",
    benchmark:
        "benchmarks/deploy_benchmark/student.tsv"
    conda:
        "../envs/deploy.yaml"
    script:
        "../workflow_scripts/deploy_benchmark.py"
