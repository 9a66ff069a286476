# Snakemake adapter: build the corpus splits and labels.json.
from pathlib import Path

from pixelpipe.data.corpus import build_corpus
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    info = build_corpus(sm.params.corpus, sm.params.fonts, Path(sm.output.labels).parent, seed=sm.params.seed, log=log)
    meter.record(samples=int(sum(info["split_sizes"].values())), bad_rows=info.get("bad_rows", {}))
