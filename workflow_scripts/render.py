# Snakemake adapter: lay one split's corpus out as glyph ids in its cache shards.
from pathlib import Path

from pixelpipe.data.charset import read_charset
from pixelpipe.data.render import RenderSettings, render_split
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    manifest = render_split(Path(sm.input.corpus), read_charset(sm.input.charset),
                            RenderSettings.from_section(sm.params.render), [Path(p) for p in sm.output.shards],
                            Path(sm.output.manifest), shard_size=sm.params.shard_size, desc=f"render {sm.params.split}",
                            log=log, truncation_warning=sm.params.render["truncation_warning"])
    log(f"laid out {manifest['count']} texts into {len(sm.output.shards)} shards at {manifest['rows_per_s']:,.0f} "
        f"texts/s; {manifest['truncated']} truncated, {len(manifest['atlas']['clusters'])} glyphs in the atlas")
    meter.record(samples=manifest["count"], split=sm.params.split, truncated=manifest["truncated"],
                 rows_per_s=manifest["rows_per_s"])
