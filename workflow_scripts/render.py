# Snakemake adapter: render one split's corpus into its cache shards.
from pathlib import Path

import pandas as pd

from pixelpipe.logs import stage_log
from pixelpipe.measure import StageMeter
from pixelpipe.plan import stage_prediction
from pixelpipe.render import RenderSettings, render_split

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage_log(sm.log[0]) as log, StageMeter("render", sm.output.metrics, [*sm.output.shards, sm.output.manifest],
                                                       prediction=lambda: stage_prediction(sm.config, "render", sm.params.split)) as meter:
    df = pd.read_parquet(sm.input.corpus)
    settings = RenderSettings.from_config({**sm.params.render, "seed": sm.params.seed})
    manifest = render_split(df["text"].tolist(), df["label"].tolist(), df["id"].tolist(), settings,
                            [Path(p) for p in sm.output.shards], Path(sm.output.manifest), workers=sm.threads,
                            shard_size=sm.params.shard_size, desc=f"render {sm.params.split}")
    log(f"rendered {manifest['count']} images into {len(sm.output.shards)} shards")
    meter.record(samples=manifest["count"], split=sm.params.split, workers=sm.threads)
