# Snakemake adapter: stream the encoded shards into one memory-mappable array per field.
from pathlib import Path

from pixelpipe.data.consolidate import consolidate
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    fields = [Path(f).stem for f in sm.output.arrays]  # the rule's declared arrays, one per field
    manifest = consolidate(list(sm.input.shards), Path(sm.output.manifest).parent, fields=fields, delete_shards=True)
    log(f"consolidated {manifest['count']} rows from {len(sm.input.shards)} shards")
    meter.record(samples=manifest["count"], shards=len(sm.input.shards))
