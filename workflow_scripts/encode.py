# Snakemake adapter: encode one cache shard with the frozen teacher.
import torch

from pixelpipe.config.resolve import runtime_switches
from pixelpipe.core.device import configure_backends, intra_op_threads
from pixelpipe.core.hardware import detect_device, resolve_precision
from pixelpipe.data.cache import CacheSplit
from pixelpipe.workflow_job import stage
from pixelpipe.train.encode import encode_shard
from pixelpipe.train.run import load_teacher

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, meter):
    info = detect_device(sm.params.device)
    runtime = runtime_switches(sm.resources, ("threads", "progress"))
    precision = resolve_precision(sm.params.precision, info)
    configure_backends(sm.params.tf32, intra_op_threads(runtime["threads"], 1, sm.threads))
    device = torch.device(info.kind)
    split = CacheSplit(sm.input.manifest.rsplit("/", 1)[0], verify=False)
    index = int(sm.wildcards.i)
    split.verify([index])  # only the shard this job reads
    model = load_teacher(sm.input.model.rsplit("/", 1)[0], device)
    stats = encode_shard(model, split.shard(index), f"{sm.wildcards.split}-{sm.wildcards.i}", sm.output.encoded,
                         device, precision, sm.params.batch_size, progress=runtime["progress"], views=sm.params.views,
                         window_min_chars=sm.params.window_min_chars, seed=sm.params.seed)
    log(f"encoded {stats['samples']} texts at {stats['rows_per_s']:.0f} texts/s on {info.name}")
    meter.record(**stats, device=info.name, precision=precision)
