# One render rule per split: each split's shard list is known up front from the planned corpus size.
for _split in SPLITS:

    rule:
        name:
            f"render_{_split}"
        input:
            corpus=f"results/corpus/{_split}.parquet",
            charset="results/corpus/charset.json",
        output:
            shards=cache_shards(_split),
            manifest=f"results/cache/{_split}/manifest.json",
            metrics=f"results/metrics/render/{_split}.json",
        params:
            render=render_params(),
            shard_size=config["render"]["shard_size"],
            split=_split,
        log:
            f"logs/render/{_split}.log",
        benchmark:
            f"benchmarks/render/{_split}.tsv"
        conda:
            "../envs/data.yaml"
        script:
            "../workflow_scripts/render.py"
