# Snakemake adapter: build the corpus splits and labels.json.
from pathlib import Path

from pixelpipe.corpus import build_corpus
from pixelpipe.logs import stage_log
from pixelpipe.measure import StageMeter

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage_log(sm.log[0]) as log, StageMeter("corpus", sm.output.metrics, [sm.output.train, sm.output.val, sm.output.test, sm.output.labels]) as meter:
    info = build_corpus(sm.params.corpus, sm.params.fonts, Path(sm.output.labels).parent, seed=sm.params.seed, log=log)
    meter.record(samples=int(sum(info["split_sizes"].values())), bad_rows=info.get("bad_rows", {}))
