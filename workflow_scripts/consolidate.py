# Snakemake adapter: stream the encoded shards into one memory-mappable array per field.
from pathlib import Path

from pixelpipe.consolidate import consolidate
from pixelpipe.logs import stage_log
from pixelpipe.measure import StageMeter

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage_log(sm.log[0]) as log, StageMeter("consolidate", sm.output.metrics, [*sm.output.arrays, sm.output.manifest]) as meter:
    manifest = consolidate(list(sm.input.shards), Path(sm.output.manifest).parent,
                           fields=["sketches", "children", "checksums", "logits", "labels"])
    log(f"consolidated {manifest['count']} rows from {len(sm.input.shards)} shards")
    meter.record(samples=manifest["count"], shards=len(sm.input.shards))
