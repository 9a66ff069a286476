# Snakemake adapter: measure the teacher training step under the optimization matrix.
from pixelpipe.report.html import write_markdown_page
from pixelpipe.report.matrix import write_benchmark
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, _):
    p = sm.params  # exactly what the matrix reads; any of it changes the measurement
    cfg = {"benchmark_matrix": p.matrix, "teacher": p.teacher, "render": p.render, "engine": p.engine,
           "hardware": {"device": p.device}}
    write_benchmark(cfg, sm.output.json, sm.output.md, sm.output.png, threads=sm.threads, log=log)
    write_markdown_page(sm.output.md, sm.output.html)  # what the HTML report shows
