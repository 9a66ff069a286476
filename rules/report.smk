# Reports: every stage's prediction against its measurement, time per rule, training curves.


rule plan:
    input:
        corpus_file(),
    output:
        "results/plan.json",
    params:
        # the whole config: the plan predicts every stage, so any change re-plans (cheap; nothing else reruns)
        config=config,
        # This machine's time factors file, read when it exists (the report rule below writes it). A param, not an
        # input: it is missing on a fresh clone, and an input listed only once it exists changes the plan's set of
        # inputs after the first run, so Snakemake would re-plan and re-report it (merging that run's measurements
        # into the file twice); and as the report's output it would make plan -> report -> plan a cycle. The plan
        # reads the factors earlier runs fitted; this run's report adds its own for the next plan.
        time_factors=config["time_factors"]["file"],
    resources:
        run_cores=run_cores,  # the schedule: which jobs share the machine's cores
    log:
        "logs/plan/plan.log",
    benchmark:
        "benchmarks/plan/plan.tsv"
    conda:
        # the planner builds the corpus (Faker, pandas), renders its atlas and sizes torch models
        "../envs/data.yaml"
    script:
        "../workflow_scripts/plan.py"


rule report:
    input:
        plan="results/plan.json",
        metrics=all_metrics_files(),
        benchmarks=all_benchmark_files(),
        teacher_csv="results/teacher/metrics.csv",
        student_csv="results/student/metrics.csv",
        # the summary's models table and truncation lines
        models=["results/teacher/config.json", "results/student/config.json", "results/reports/deploy.json",
                "results/baseline/metrics.json", "results/eval/evaluation.json"],
        manifests=expand("results/cache/{split}/manifest.json", split=SPLITS),
        # the other stages' Markdown reports, for their HTML pages in the HTML report
        deploy_md="results/reports/deploy.md",
        evaluation_md="results/eval/evaluation.md",
    output:
        memory_json="results/reports/memory.json",
        time_json="results/reports/time.json",
        memory_md="results/reports/memory.md",
        time_md="results/reports/time.md",
        time_factors="results/reports/time_factors.json",  # the factors fitted on this run alone
        summary="results/reports/summary.md",
        # HTML twins of the Markdown reports: the HTML report shows HTML, but offers Markdown only as a download
        summary_html=report("results/reports/summary.html", caption="../report/summary.rst", category="1. Summary"),
        memory_html=report("results/reports/memory.html", caption="../report/memory.rst", category="2. Memory and disk"),
        predicted_vs_measured=report("results/reports/predicted_vs_measured.png", caption="../report/predicted_vs_measured.rst", category="2. Memory and disk"),
        disk_over_dag=report("results/reports/disk_over_dag.png", caption="../report/disk_over_dag.rst", category="2. Memory and disk"),
        time_html=report("results/reports/time.html", caption="../report/time.rst", category="3. Time"),
        time_per_rule=report("results/reports/time_per_rule.png", caption="../report/time_per_rule.rst", category="3. Time"),
        train_breakdown=report("results/reports/train_breakdown.png", caption="../report/train_breakdown.rst", category="3. Time"),
        throughput=report("results/reports/throughput.png", caption="../report/throughput.rst", category="3. Time"),
        curves=report("results/reports/curves.png", caption="../report/curves.rst", category="4. Training"),
        deploy_html=report("results/reports/deploy.html", caption="../report/deploy.rst", category="5. Deployment"),
        evaluation_html=report("results/reports/evaluation.html", caption="../report/evaluation.rst", category="6. Held-out real text"),
        # this machine's time factors file, outside results/: the report merges the factors above into it (update())
        **machine_time_factors(),
    params:
        report=config["report"],
    log:
        "logs/report/report.log",
    benchmark:
        "benchmarks/report/report.tsv"
    conda:
        "../envs/data.yaml"
    script:
        "../workflow_scripts/report.py"


rule benchmark_matrix:
    output:
        json="results/reports/benchmark.json",
        md="results/reports/benchmark.md",
        html=report("results/reports/benchmark.html", caption="../report/benchmark.rst", category="7. Optimization matrix"),
        png=report("results/reports/benchmark.png", caption="../report/benchmark.rst", category="7. Optimization matrix"),
    params:
        matrix=config["benchmark_matrix"],
        teacher=config["teacher"],
        render=render_params(),
        engine=config["engine"],  # all of it: threads and loader switches change timings too
        device=config["hardware"]["device"],
    threads: 2
    resources:
        gpu=lambda wc: 1 if config["hardware"]["profile"] != "cpu" else 0,
    log:
        "logs/benchmark_matrix/benchmark.log",
    benchmark:
        "benchmarks/benchmark_matrix/benchmark.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/benchmark_matrix.py"
