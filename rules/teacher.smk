rule train_teacher:
    input:
        cache=cache_inputs(),
        labels="results/corpus/labels.json",
    output:
        model="results/teacher/model.safetensors",
        config="results/teacher/config.json",
        metrics_csv="results/teacher/metrics.csv",
        metrics="results/metrics/train_teacher/teacher.json",
    params:
        teacher=config["teacher"],
        engine=engine_params(),
        seed=config["seed"],
        device=config["hardware"]["device"],
        profile=config["hardware"]["profile"],
        checkpoints="results/teacher/checkpoints",  # a param, not an output: it must outlive a failed job (resume)
        profile_dir="results/profile/teacher",  # written only when engine.profiler is on
    threads: training_threads()
    resources:
        gpu=training_gpus,
        **training_nodes(),
        **engine_runtime(),
    log:
        "logs/train_teacher/teacher.log",
    benchmark:
        "benchmarks/train_teacher/teacher.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/train_teacher.py"
