# pixelpipe: corpus -> render -> teacher -> encode -> consolidate -> student (-> ONNX -> reports)
# `snakemake --cores 4 train` builds the student; `snakemake --cores 4` builds everything and the reports;
# `snakemake --cores 2 benchmark` measures the optimization matrix.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


configfile: str(Path(workflow.basedir) / "config.yaml")


# The HTML report's landing page (`snakemake --report results/report.html`).
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/corpus.smk"
include: "rules/render.smk"
include: "rules/teacher.smk"
include: "rules/encode.smk"
include: "rules/student.smk"
include: "rules/deploy.smk"
include: "rules/baseline.smk"
include: "rules/evaluate.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        STUDENT_FILES,
        DEPLOY_FILES,
        expand("results/dataset/{split}/manifest.json", split=ENCODED_SPLITS),
        rules.baseline.output,
        rules.evaluate.output,
        rules.report.output,


rule benchmark:
    input:
        rules.benchmark_matrix.output,


rule train:
    input:
        STUDENT_FILES,


onstart:
    disk_preflight()


onsuccess:
    print_accuracy_summary()
