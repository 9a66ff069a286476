"""GPU benchmark of the training engine at the reference teacher size.

    PYTHONPATH=. python bench/engine_gpu.py --out DIR [--quick] [--max-autotune] [--budget-s 450]
    PYTHONPATH=. python bench/engine_gpu.py --out DIR --quick --cpu-smoke     # tiny, CPU, < 60 s

Real glyph-aligned images of built-in-corpus texts (the h100 profile's layout:
4 lines of 104 cells of 16x8, 64x832 pixels) are rendered to a
memory-mapped cache shard on disk and read back through the real
CacheDataset and a real DataLoader (workers, pinned memory); every step goes
through the engine's own pieces (to_device, augment_batch, autocast_context,
compile_model, ClassificationObjective, LazyAdamW: AdamW with sparse n-gram table rows on CPU). Rows stack switches on
a plain fp32 eager baseline, and each row's speedup is against that baseline
measured in the same run.

FLOP accounting: model FLOPs, not hardware FLOPs. Training = 3 x forward
(pixelpipe.model.encoder.flops_per_sample); with grad_free_cycles the backward only
covers the last H-cycle, so those rows count forward + 2 x (forward of one
H-cycle); activation checkpointing's recompute is NOT counted (it is work the
hardware does, not work the model needs). MFU = achieved model TFLOP/s / the
card's dense bf16 (fp16 on T4) peak, also for fp32 rows. GPU busy = share of
the timed window the CUDA stream spends inside training steps (events at the
start and end of each step), so time starved by the DataLoader shows as idle.

One failing row (a compile error, an OOM) is recorded in the table, not fatal.
Rows past --budget-s are recorded as skipped.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from pixelpipe.config.resolve import load_config
from pixelpipe.core.device import autocast_context, compile_model
from pixelpipe.core.io import write_json, write_text
from pixelpipe.data.augment import augment_batch, images_from_glyphs
from pixelpipe.data.cache import CacheDataset, atlas_tensor
from pixelpipe.data.charset import build_charset, text_clusters
from pixelpipe.data.corpus import generate_default_corpus
from pixelpipe.data.render import RenderSettings, render_split
from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder, count_parameters, flops_per_sample
from pixelpipe.train.batchsize import find_batch_size
from pixelpipe.train.distill import ClassificationObjective
from pixelpipe.train.optim import LazyAdamW, param_groups, sparse_tables
from pixelpipe.train.run import encoder_config
from pixelpipe.train.scoring import to_device
from pixelpipe.train.settings import EngineSettings

# Dense (no sparsity) peak TFLOP/s for bf16 (fp16 where the card has no bf16), by device-name substring.
PEAK_TFLOPS = [
    ("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("A100", 312.0), ("A10G", 125.0),
    ("L40S", 362.0), ("L4", 121.0), ("T4", 65.0),
]
NUM_CLASSES = 19


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def peak_tflops(name: str) -> float | None:
    for key, peak in PEAK_TFLOPS:
        if key.lower() in name.lower():
            return peak
    return None


@dataclass
class Row:
    name: str
    precision: str = "fp32"
    tf32: bool = False
    channels_last: bool = False
    compile: str = "none"
    activation_checkpointing: bool = False
    grad_free_cycles: bool = False
    batch: int = 128
    optional: bool = False  # skipped first when time runs short


def train_flops_per_sample(cfg: EncoderConfig, grad_free: bool) -> float:
    fwd = flops_per_sample(cfg)
    if not grad_free:
        return 3 * fwd
    return fwd + 2 * flops_per_sample(replace(cfg, H_cycles=1))


# ---- data: a real memory-mapped cache shard ---------------------------------------------------


def write_shard(root: Path, n: int, render: dict, chars: tuple[int, int], seed: int = 0) -> Path:
    """n built-in-corpus texts laid out with `render` settings into a cache split CacheDataset reads."""
    split = root / "train"
    split.mkdir(parents=True, exist_ok=True)
    corpus = generate_default_corpus(n, *chars, seed=seed)
    corpus["label"] = [sorted(set(corpus["label"])).index(l) for l in corpus["label"]]
    corpus[["text", "label"]].to_parquet(split / "corpus.parquet")
    settings = RenderSettings.from_section(render)
    charset = build_charset(text_clusters(corpus["text"]), settings.fonts, inventory=True)
    render_split(split / "corpus.parquet", charset, settings, [split / "shard-00000.npy"], split / "manifest.json",
                 shard_size=n, progress=False)
    return split


def infinite(loader: DataLoader):
    while True:
        yield from loader


# ---- one training row -------------------------------------------------------------------------


def run_row(row: Row, cfg: EncoderConfig, dataset: CacheDataset, device: torch.device, args) -> dict:
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = row.tf32
    torch.backends.cudnn.allow_tf32 = row.tf32
    torch.backends.cudnn.benchmark = True
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()
    model = TRMVisionEncoder(copy.deepcopy(cfg), atlas_tensor(dataset.split)).to(device)
    model.activation_checkpointing, model.grad_free_cycles = row.activation_checkpointing, row.grad_free_cycles
    if row.channels_last:
        model.to(memory_format=torch.channels_last)
    model.train()
    objective = ClassificationObjective().to(device)
    fwd_model, mode_used = compile_model(model, row.compile, 1, log)
    sparse_tables(model, device)  # as the engine: n-gram tables sparse on CPU, dense on CUDA
    opt = LazyAdamW(param_groups([model], 0.05), lr=1e-4, betas=(0.9, 0.95))  # the engine's optimizer
    cuda = device.type == "cuda"
    loader = DataLoader(dataset, batch_size=row.batch, shuffle=True, drop_last=True, num_workers=args.workers,
                        collate_fn=dataset.collate_fn,
                        pin_memory=cuda, persistent_workers=args.workers > 0,
                        prefetch_factor=4 if args.workers > 0 else None)
    batches = infinite(loader)
    gen = torch.Generator(device=device).manual_seed(0)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)

    def step(events: tuple | None) -> float:
        t = time.perf_counter()
        batch = next(batches)
        wait = time.perf_counter() - t
        if events:
            events[0].record()
        b = to_device(batch, device)  # as the engine's augment path: images assembled on the device, then augmented
        images = images_from_glyphs(b["glyphs"], model.atlas, cfg.lines, cfg.channels)
        if row.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        b["image"] = augment_batch(images, gen)
        with autocast_context(device, row.precision):
            loss, _ = objective(fwd_model, b)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if events:
            events[1].record()
        return wait

    t_compile = time.perf_counter()
    for _ in range(args.warmup + (2 if row.compile != "none" else 0)):
        step(None)
    if cuda:
        torch.cuda.synchronize(device)
    warm_s = time.perf_counter() - t_compile
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else None
              for _ in range(args.steps)]
    t0 = time.perf_counter()
    data_wait = sum(step(ev) for ev in events)
    if cuda:
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - t0
    samples_s = args.steps * row.batch / wall
    tflops = train_flops_per_sample(cfg, row.grad_free_cycles) * samples_s / 1e12
    out = {"samples_per_s": samples_s, "step_ms": 1000 * wall / args.steps, "model_tflops": tflops,
           "data_wait_share": data_wait / wall, "warmup_s": warm_s, "compile_mode_used": mode_used}
    if cuda:
        busy = sum(s.elapsed_time(e) for s, e in events) / 1000
        span = events[0][0].elapsed_time(events[-1][1]) / 1000
        out.update(gpu_busy=busy / span if span > 0 else None,
                   peak_allocated_gib=torch.cuda.max_memory_allocated(device) / 2**30,
                   peak_reserved_gib=torch.cuda.max_memory_reserved(device) / 2**30)
    return out


# ---- finder and encode ------------------------------------------------------------------------


def run_finder(cfg: EncoderConfig, dataset: CacheDataset, device: torch.device, args) -> dict:
    torch.manual_seed(0)
    model = TRMVisionEncoder(copy.deepcopy(cfg), atlas_tensor(dataset.split)).to(device)
    objective = ClassificationObjective().to(device)
    precision = "bf16" if device.type == "cuda" else "fp32"
    engine = EngineSettings.from_section({**load_config(None)["engine"], "precision": precision,
                                          "channels_last": device.type == "cuda", "augment": True, "progress": False})

    def sample_batch(b: int) -> dict:
        return dataset.__getitems__([i % len(dataset) for i in range(b)])

    t0 = time.perf_counter()
    found = find_batch_size(model, objective, sample_batch, engine, device, max_batch=args.finder_max, log=log)
    res = {**found.to_dict(), "wall_s": time.perf_counter() - t0, "precision": precision,
           "memory_target": engine.memory_target, "memory_margin": engine.memory_margin}
    if device.type == "cuda":
        res["total_memory_gib"] = torch.cuda.get_device_properties(device).total_memory / 2**30
    del model, objective
    return res


@torch.inference_mode()
def run_encode(cfg: EncoderConfig, device: torch.device, batch: int, args) -> dict:
    torch.manual_seed(0)
    atlas = torch.randint(0, 256, (1024, cfg.cell_height, cfg.cell_width), dtype=torch.uint8)
    model = TRMVisionEncoder(copy.deepcopy(cfg), atlas).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    cuda = device.type == "cuda"
    precision = "bf16" if cuda else "fp32"
    glyphs = torch.randint(1, 1024, (batch, cfg.cells), device=device)
    lengths = torch.full((batch,), cfg.cells, device=device)
    for _ in range(args.warmup):
        with autocast_context(device, precision):
            model(glyphs, lengths)
    if cuda:
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        with autocast_context(device, precision):
            model(glyphs, lengths)
    if cuda:
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - t0
    ips = args.steps * batch / wall
    return {"batch": batch, "precision": precision, "rows_per_s": ips,
            "model_tflops": flops_per_sample(cfg) * ips / 1e12,
            "note": "frozen teacher, inference_mode, full-length glyph rows on the device"}


# ---- driver ---------------------------------------------------------------------------------


def rows_for(args, smoke: bool) -> list[Row]:
    b = 16 if smoke else (64 if args.quick else 128)
    base = Row("fp32 eager", batch=b)
    tf32 = replace(base, name="+TF32", tf32=True)
    bf16 = replace(tf32, name="+bf16 autocast", precision="bf16")
    cl = replace(bf16, name="+channels_last", channels_last=True)
    comp = replace(cl, name="+compile default", compile="default")
    rows = [base, tf32, bf16, cl, comp]
    best = cl if smoke else comp  # the smoke run has no compiler; its rows still exercise every other switch
    rows += [replace(best, name="+activation checkpointing", activation_checkpointing=True),
             replace(best, name="+grad_free_cycles", grad_free_cycles=True)]
    sizes = (8, 32) if smoke else (64, 128, 256)
    rows += [replace(best, name=f"batch {s}", batch=s, optional=True) for s in sizes if s != b]
    if args.max_autotune:
        rows.append(replace(cl, name="+compile max-autotune-no-cudagraphs", compile="max-autotune-no-cudagraphs",
                            optional=True))
    return rows


def switches(row: Row) -> str:
    parts = [row.precision, "tf32" if row.tf32 else None, "channels_last" if row.channels_last else None,
             f"compile={row.compile}" if row.compile != "none" else "eager",
             "act-ckpt" if row.activation_checkpointing else None, "grad-free" if row.grad_free_cycles else None]
    return ", ".join(p for p in parts if p)


def fmt(v, spec: str, missing: str = "-") -> str:
    return missing if v is None else format(v, spec)


def markdown(report: dict) -> str:
    lines = [f"# Engine benchmark on {report['device']}", "",
             f"torch {report['torch']}, CUDA {report['cuda']}, model {report['model']['parameters']:,} parameters "
             f"({report['model']['config']['dim']}d, {report['model']['config']['depth']} layers, "
             f"H={report['model']['config']['H_cycles']}, L={report['model']['config']['L_cycles']}, "
             f"{report['model']['config']['lines']}x{report['model']['config']['line_chars']} cells), "
             f"{report['timed_steps']} timed steps per row after {report['warmup_steps']} warm-up steps, "
             f"peak {fmt(report['peak_tflops'], '.0f', 'unknown')} TFLOP/s (dense bf16/fp16).", "",
             "| row | switches | batch | samples/s | model TFLOP/s | MFU | peak alloc GiB | GPU busy | data wait "
             "| speedup | status |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in report["rows"]:
        m = r.get("result") or {}
        mfu = m.get("mfu")
        lines.append(
            f"| {r['name']} | {switches(Row(**r['row']))} | {r['row']['batch']} | {fmt(m.get('samples_per_s'), '.1f')} "
            f"| {fmt(m.get('model_tflops'), '.1f')} | {fmt(mfu and 100 * mfu, '.1f')}{' %' if mfu else ''} "
            f"| {fmt(m.get('peak_allocated_gib'), '.1f')} | {fmt(m.get('gpu_busy') and 100 * m['gpu_busy'], '.0f')} "
            f"| {fmt(m.get('data_wait_share') and 100 * m['data_wait_share'], '.0f')} "
            f"| {fmt(m.get('speedup'), '.2f')}{'x' if m.get('speedup') else ''} | {r['status']} |")
    f = report.get("finder") or {}
    lines += ["", "## Batch-size finder", ""]
    if "error" in f:
        lines.append(f"error: {f['error']}")
    elif f:
        lines.append(f"Picked micro-batch **{f['micro_batch']}** (budget {f['budget_bytes'] / 2**30:.1f} GiB = "
                     f"{f['memory_target']:.0%} target, {f['memory_margin']:.0%} margin; fixed "
                     f"{f['fixed_bytes'] / 2**30:.2f} GiB + {f['per_sample_bytes'] / 2**20:.1f} MiB/sample; predicted "
                     f"{f['predicted_micro']}, confirmed {f['confirmed_micro']}) in {f['wall_s']:.1f} s, "
                     f"{f['precision']}.")
    e = report.get("encode") or {}
    lines += ["", "## Encode (frozen teacher)", ""]
    if "error" in e:
        lines.append(f"error: {e['error']}")
    elif e:
        lines.append(f"{e['rows_per_s']:.0f} texts/s at batch {e['batch']}, {e['precision']}, inference_mode "
                     f"({e['model_tflops']:.1f} model TFLOP/s; full-length glyph rows already on the device).")
    lines += ["", "Model FLOPs: training = 3 x forward (grad_free_cycles: forward + 2 x one H-cycle); activation "
              "checkpointing's recompute is not counted. GPU busy = stream time inside steps / timed window. "
              "Speedup = samples/s against the fp32 eager row of this run."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="fewer steps, smaller batches")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny model on CPU, no compile (for tests)")
    ap.add_argument("--max-autotune", action="store_true", help="add the (slow to compile) max-autotune row")
    ap.add_argument("--budget-s", type=float, default=450.0, help="skip optional rows past this wall time")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    smoke = args.cpu_smoke
    if not smoke and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or use --quick --cpu-smoke", file=sys.stderr)
        return 2
    device = torch.device("cpu" if smoke else "cuda")
    args.steps = args.steps or (2 if smoke else (8 if args.quick else 20))
    args.warmup = args.warmup or (1 if smoke else 3)
    args.workers = args.workers if args.workers is not None else (1 if smoke else 6)
    args.finder_max = 64 if smoke else 4096
    profile = load_config(None, {"hardware": {"profile": "cpu" if smoke else "h100"}})
    render = {**profile["render"], **({"line_chars": 8} if smoke else {})}
    chars = (profile["corpus"]["min_chars"], profile["corpus"]["max_chars"])
    if smoke:
        torch.set_num_threads(1)  # tiny model: more threads only spin-wait on a busy CPU
        model = {**profile["teacher"]["model"], "dim": 32, "heads": 2, "mixer_ratio": 2.0, "H_cycles": 2, "L_cycles": 1,
                 "num_capsules": 2}
    else:
        model = profile["teacher"]["model"]  # the h100 profile's (pixelpipe/config/profiles.yaml) with the schema's other keys
    cfg = encoder_config(model, RenderSettings.from_section(render).to_dict(), NUM_CLASSES)
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu (smoke)"
    peak = peak_tflops(name) if device.type == "cuda" else None
    args.out.mkdir(parents=True, exist_ok=True)
    data_root = args.out / "_bench_cache"
    n_images = 256 if smoke else (2048 if args.quick else 4096)
    log(f"device {name}, torch {torch.__version__}; writing {n_images} synthetic images to {data_root}")
    dataset = CacheDataset(write_shard(data_root, n_images, render, chars))
    report = {"device": name, "torch": torch.__version__, "cuda": torch.version.cuda, "peak_tflops": peak,
              "model": {"config": cfg.to_dict(), "parameters": count_parameters(TRMVisionEncoder(copy.deepcopy(cfg))),
                        "forward_gflops_per_sample": flops_per_sample(cfg) / 1e9},
              "timed_steps": args.steps, "warmup_steps": args.warmup, "rows": [], "quick": args.quick,
              "cpu_smoke": smoke}

    def save() -> None:
        write_json(args.out / "engine_gpu.json", report)
        write_text(args.out / "engine_gpu.md", markdown(report))

    baseline, compile_failed = None, False
    try:
        for row in rows_for(args, smoke):
            entry = {"name": row.name, "row": asdict(row), "status": "ok", "result": None}
            report["rows"].append(entry)
            elapsed = time.perf_counter() - t_start
            if smoke and row.compile != "none":
                entry["status"] = "skipped: no compile in cpu-smoke"
                continue
            if compile_failed and row.compile != "none" and row.name != "+compile max-autotune-no-cudagraphs":
                row = replace(row, compile="none")  # the compile row failed: measure the rest eager
                entry["row"] = asdict(row)
                entry["status"] = "ok (eager: compile failed)"
            if row.optional and elapsed > args.budget_s:
                entry["status"] = f"skipped: time budget ({elapsed:.0f}s > {args.budget_s:.0f}s)"
                continue
            log(f"row '{row.name}' ({switches(row)}, batch {row.batch}) ...")
            try:
                res = run_row(row, cfg, dataset, device, args)
                if baseline is None and row.name == "fp32 eager":
                    baseline = res["samples_per_s"]
                res["speedup"] = res["samples_per_s"] / baseline if baseline else None
                res["mfu"] = res["model_tflops"] / peak if peak else None
                entry["result"] = res
                log(f"  {res['samples_per_s']:.1f} samples/s, {res['model_tflops']:.1f} TFLOP/s, "
                    f"speedup {fmt(res['speedup'], '.2f')}, warm-up {res['warmup_s']:.1f}s")
            except Exception as err:  # one broken row must not lose the others
                entry["status"] = f"error: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
                entry["traceback"] = traceback.format_exc()[-4000:]
                compile_failed = compile_failed or row.name == "+compile default"
                log(f"  {entry['status']}")
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            save()
        log("batch-size finder ...")
        try:
            report["finder"] = run_finder(cfg, dataset, device, args)
        except Exception as err:
            report["finder"] = {"error": f"{type(err).__name__}: {err}"[:300]}
        save()
        log("encode throughput ...")
        try:
            report["encode"] = run_encode(cfg, device, 64 if smoke else 512, args)
            log(f"  {report['encode']['rows_per_s']:.0f} texts/s")
        except Exception as err:
            report["encode"] = {"error": f"{type(err).__name__}: {err}"[:300]}
    finally:
        report["wall_s"] = time.perf_counter() - t_start
        save()
        shutil.rmtree(data_root, ignore_errors=True)
    log(f"done in {report['wall_s']:.0f}s: {args.out / 'engine_gpu.md'}")
    print(markdown(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
