rule train_student:
    input:
        cache=cache_inputs(),
        dataset="results/dataset/train/manifest.json",
        teacher=TEACHER_FILES,
        labels="results/corpus/labels.json",
    output:
        model="results/student/model.safetensors",
        config="results/student/config.json",
        metrics_csv="results/student/metrics.csv",
        metrics="results/metrics/train_student/student.json",
    params:
        student=config["student"],
        engine=engine_params(),
        seed=config["seed"],
        device=config["hardware"]["device"],
        profile=config["hardware"]["profile"],
        checkpoints="results/checkpoints",  # a param, not an output: it must outlive a failed job (resume)
        profile_dir="results/profile/student",  # written only when engine.profiler is on
    threads: training_threads()
    resources:
        gpu=training_gpus,
        **training_nodes(),
        **engine_runtime(),
    log:
        "logs/train_student/student.log",
    benchmark:
        "benchmarks/train_student/student.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/train_student.py"
