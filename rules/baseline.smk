# The text baseline: hashed character n-grams and one linear layer, on the corpus itself (no pixels).


rule baseline:
    input:
        train="results/corpus/train.parquet",
        val="results/corpus/val.parquet",
        test="results/corpus/test.parquet",
        labels="results/corpus/labels.json",
    output:
        json="results/baseline/metrics.json",
        model="results/baseline/model.safetensors",
        metrics="results/metrics/baseline/baseline.json",
    params:
        baseline=config["baseline"],
        seed=config["seed"],
    threads: 2
    log:
        "logs/baseline/baseline.log",
    benchmark:
        "benchmarks/baseline/baseline.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/baseline.py"
