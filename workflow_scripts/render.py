# Snakemake adapter: render one split's corpus into its cache shards.
from pathlib import Path

import pandas as pd

from pixelpipe.data.render import RenderSettings, render_split
from pixelpipe.scripts import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    df = pd.read_parquet(sm.input.corpus)
    manifest = render_split(df["text"].tolist(), df["label"].tolist(), df["id"].tolist(),
                            RenderSettings.from_section(sm.params.render), [Path(p) for p in sm.output.shards],
                            Path(sm.output.manifest), shard_size=sm.params.shard_size, desc=f"render {sm.params.split}",
                            log=log)
    log(f"rendered {manifest['count']} images into {len(sm.output.shards)} shards at {manifest['images_per_s']:,.0f} "
        f"images/s; {manifest['truncated']} truncated, {len(manifest['atlas']['clusters'])} distinct characters")
    meter.record(samples=manifest["count"], split=sm.params.split, truncated=manifest["truncated"],
                 images_per_s=manifest["images_per_s"])
