# The held-out evaluation: every model on real text no training row comes from, by set, length and perturbation.


rule evaluate:
    input:
        teacher=TEACHER_FILES,
        student=STUDENT_FILES,
        onnx="results/models/student.onnx",
        int8="results/models/student.int8.onnx",
        export_metrics="results/metrics/export_onnx/student.json",  # the ONNX files' sha256
        quantize_metrics="results/metrics/quantize_onnx/student.json",
        baseline="results/baseline/model.safetensors",
        labels="results/corpus/labels.json",
    output:
        json="results/eval/evaluation.json",
        md="results/eval/evaluation.md",  # shown in the HTML report as the report rule's evaluation.html
        png=report("results/eval/evaluation.png", caption="../report/evaluation.rst", category="6. Held-out real text"),
        metrics="results/metrics/evaluate/heldout.json",
    params:
        evaluate=config["evaluate"],
        seed=config["seed"],
        fonts=config["render"]["fonts"],
    threads: 2
    log:
        "logs/evaluate/heldout.log",
    benchmark:
        "benchmarks/evaluate/heldout.tsv"
    conda:
        "../envs/deploy.yaml"
    script:
        "../workflow_scripts/evaluate.py"
