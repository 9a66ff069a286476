rule encode:
    input:
        shard="results/cache/{split}/shard-{i}.npy",
        manifest="results/cache/{split}/manifest.json",
        model="results/teacher/model.safetensors",
        config="results/teacher/config.json",
    output:
        encoded=temp("results/encoded/{split}/shard-{i}.npz"),
        metrics="results/metrics/encode/{split}-{i}.json",
    params:
        precision=config["engine"]["precision"],
        tf32=config["engine"]["tf32"],
        device=config["hardware"]["device"],
        batch_size=config["encode"]["batch_size"],
        views=config["encode"]["views"],
        window_min_chars=config["student"]["train"]["window_min_chars"],
        seed=config["seed"],
    threads: 2
    resources:
        gpu=lambda wc: 1 if config["hardware"]["profile"] != "cpu" else 0,
        **engine_runtime("threads", "progress"),
    log:
        "logs/encode/{split}-{i}.log",
    benchmark:
        "benchmarks/encode/{split}-{i}.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/encode.py"


rule consolidate:
    input:
        shards=get_encoded_shards,
    output:
        arrays=multiext("results/dataset/{split}/", *DATASET_FILES),
        manifest="results/dataset/{split}/manifest.json",
        metrics="results/metrics/consolidate/{split}.json",
    log:
        "logs/consolidate/{split}.log",
    benchmark:
        "benchmarks/consolidate/{split}.tsv"
    conda:
        "../envs/data.yaml"
    script:
        "../workflow_scripts/consolidate.py"
