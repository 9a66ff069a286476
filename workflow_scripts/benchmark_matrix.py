# Snakemake adapter: measure the teacher training step under the optimization matrix.
from pixelpipe.bench import write_benchmark
from pixelpipe.logs import stage_log

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage_log(sm.log[0]) as log:
    write_benchmark(sm.config, sm.output.json, sm.output.md, sm.output.png, threads=sm.threads, log=log)
