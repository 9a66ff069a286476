"""What the deployed forms cost on the CPU at hand: latency, throughput, size and accuracy.

Three forms of the same student: torch eager fp32 (the trained model on its
glyph path), ONNX fp32 and ONNX int8 (folded), each at the configured batch
sizes, on real test rows (trimmed to their longest text, as predict runs them). Repeats run in
short blocks interleaved round-robin across the forms (not all of one form,
then the next), so a background process that slows the machine for a while
slows every form alike and the ratios stay fair on a shared machine; blocks
rather than single calls, because torch's and onnxruntime's thread pools
each spin-wait for a moment after a call and would otherwise steal each
other's cores. The load average before and after is recorded beside the
numbers.

Why the timings hold on a busy machine: torch's OpenMP threads spin-wait
between parallel regions, and when another job holds a core a region waits
for a descheduled spinner. Measured so (2 threads, a 2-core machine, one
other busy process), a torch student of the default shape took 80 ms at batch 1 against
0.8 ms, with quartiles hundreds of ms apart: a number nobody can use. So the
thread pools are pinned (`pin_threads`: torch's intra-op threads as configured,
one inter-op thread, OpenMP waiting passively, onnxruntime not spinning), every
form warms up for a while rather than a few calls, and fast forms are timed
for at least `MIN_TIMED_S` (many more runs than `repeats`), so the median and
quartiles describe the form, not the neighbours.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core import io
from . import onnxmodel

FORMS = ("torch_fp32", "onnx_fp32", "onnx_int8")
FORM_TITLES = {"torch_fp32": "torch eager fp32", "onnx_fp32": "ONNX fp32", "onnx_int8": "ONNX int8"}
_ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_int8", "amx_bf16", "neon", "asimd")
BLOCK = 5  # timed runs of one form in a row before the next form's turn
WARMUP_S = 0.25  # untimed seconds per form and batch, at least (and at least `warmup` runs)
MIN_TIMED_S = 0.5  # timed seconds per form and batch, at least (and at least `repeats` runs) ...
MAX_RUNS_FACTOR = 20  # ... but no more than this many times `repeats` runs


def pin_threads(threads: int) -> str:
    """Fix torch at `threads` intra-op threads and one inter-op thread; returns the OpenMP wait policy in effect.

    Why: spinning OpenMP threads on a shared machine make torch's latency that of the other jobs (module
    docstring). The policy is PASSIVE unless the user set another: `pixelpipe/__init__.py` sets it when the
    package is imported, before torch loads OpenMP (which reads it once); the report records it."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # set before, or inter-op work already ran: the pool stays as it is
        pass
    return os.environ.get("OMP_WAIT_POLICY", "unset (spinning)")


def cpu_info() -> dict[str, Any]:
    """CPU model, logical cores and the SIMD flags that decide int8 kernel speed."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("model name", "hardware") and not model:
                model = value.strip()
            elif key in ("flags", "features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    model = model or platform.processor()
    return {"model": model or "unknown", "logical_cores": os.cpu_count(), "machine": platform.machine(),
            "isa": [f for f in _ISA_FLAGS if f in flags]}


def _stats(times_s: list[float], batch: int) -> dict[str, float]:
    t = np.asarray(times_s) * 1e3
    med = float(np.median(t))
    return {"median_ms": med, "p25_ms": float(np.percentile(t, 25)), "p75_ms": float(np.percentile(t, 75)),
            "min_ms": float(t.min()), "max_ms": float(t.max()), "repeats": len(t),
            "throughput_per_s": batch / (med / 1e3) if med > 0 else float("inf")}


Feeds = dict[str, np.ndarray]  # the ONNX model's inputs (deployed glyph ids, lengths)


def _torch_runner(model: Any) -> Callable[[Feeds], np.ndarray]:
    import torch

    def run(feeds: Feeds) -> np.ndarray:
        glyphs = torch.from_numpy(np.maximum(feeds["glyphs"] - 1, 0))  # back to atlas ids (PAD is masked anyway)
        with torch.inference_mode():
            return model(glyphs, torch.from_numpy(feeds["lengths"]))["logits"].numpy()

    return run


def _onnx_runner(session: Any) -> Callable[[Feeds], np.ndarray]:
    def run(feeds: Feeds) -> np.ndarray:
        return onnxmodel.run_logits(session, feeds)

    return run


def _bench_session(path: str | os.PathLike, threads: int) -> Any:
    """An onnxruntime session as predict opens one, but its pool threads do not spin after a call: spinning
    would take the cores the next form (torch, interleaved) needs. One thread has no pool: nothing changes."""
    import onnxruntime as ort

    so = onnxmodel.session_options(threads)
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _warm(run: Callable[[Feeds], Any], x: Feeds, calls: int, seconds: float) -> None:
    """Run untimed until at least `calls` runs and `seconds` have passed: allocators, caches, thread pools."""
    t0, n = time.perf_counter(), 0
    while n < calls or time.perf_counter() - t0 < seconds:
        run(x)
        n += 1


def _enough(times: list[float], repeats: int, seconds: float) -> bool:
    return len(times) >= repeats and (sum(times) >= seconds or len(times) >= MAX_RUNS_FACTOR * repeats)


def time_forms(runners: dict[str, Callable[[Feeds], Any]], x: Feeds, warmup: int, repeats: int,
               seconds: float = MIN_TIMED_S, warmup_seconds: float = WARMUP_S) -> dict[str, list[float]]:
    """Seconds per timed run of each form on `x`: each warmed up, then timed in blocks of up to BLOCK runs,
    round-robin across the forms (see the module docstring), until every form has at least `repeats` runs
    and `seconds` of timed work (at most MAX_RUNS_FACTOR x `repeats` runs)."""
    for run in runners.values():
        _warm(run, x, warmup, warmup_seconds)
    times: dict[str, list[float]] = {form: [] for form in runners}
    while not all(_enough(t, repeats, seconds) for t in times.values()):
        for form, run in runners.items():
            if _enough(times[form], repeats, seconds):
                continue
            run(x)  # re-warm: the other runtime's threads ran last
            have = len(times[form])
            for _ in range(min(BLOCK, (repeats if have < repeats else MAX_RUNS_FACTOR * repeats) - have)):
                t0 = time.perf_counter()
                run(x)
                times[form].append(time.perf_counter() - t0)
    return times


def _accuracy(run: Callable[[Feeds], np.ndarray], split_dir: Path, batch: int = 256) -> dict[str, Any]:
    correct = total = 0
    for feeds, labels in onnxmodel.split_batches(split_dir, batch):
        correct += int((run(feeds).argmax(1) == labels).sum())
        total += len(labels)
    return {"accuracy": correct / total if total else float("nan"), "samples": total}


def _test_feeds(split_dir: Path, batch: int, lines: int, line_chars: int) -> Feeds:
    """`batch` real test rows (a tiny split is cycled to fill it) as the model's inputs."""
    parts, have = [], 0
    for rows in onnxmodel.iter_cache_split(split_dir):  # only the shards the batch needs
        parts.append(np.asarray(rows[: batch - have]))
        have += len(parts[-1])
        if have >= batch:
            break
    pool = np.concatenate(parts) if parts else np.zeros(0)
    if len(pool) == 0:
        raise ValueError(f"no test rows in {split_dir}")
    rows = pool[np.arange(batch) % len(pool)]
    return onnxmodel.deployed_batch(rows["glyphs"], rows["length"], lines, line_chars)


def op_profile(model_path: str | os.PathLike, feeds: Feeds, threads: int, runs: int = 10) -> dict[str, Any]:
    """Share of kernel time per ONNX op type (onnxruntime's profiler), to show what bounds the latency."""
    import collections
    import json
    import tempfile

    import onnxruntime as ort

    so = onnxmodel.session_options(threads)
    so.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        so.profile_file_prefix = str(Path(tmp) / "ort")
        session = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
        for _ in range(runs):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
    per_op: collections.Counter = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            per_op[e["args"]["op_name"]] += e["dur"]
    total = sum(per_op.values()) or 1
    return {"kernel_ms_per_run": total / runs / 1e3,
            "share": {op: us / total for op, us in per_op.most_common()}}


def benchmark(student_dir: str | os.PathLike, onnx_fp32: str | os.PathLike, onnx_int8: str | os.PathLike,
              test_split_dir: str | os.PathLike, batch_sizes: list[int], warmup: int, repeats: int, threads: int,
              log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Measure every form at every batch size; return the report dict (see write_reports)."""
    wait_policy = pin_threads(threads)
    import torch

    from ..model.checkpoint import load_model

    test_split_dir = Path(test_split_dir)
    model, config = load_model(student_dir)
    model.eval()
    for path in (onnx_fp32, onnx_int8):
        onnxmodel.open_session(path, threads)  # a file onnxruntime cannot load: the one-line error
    runners = {
        "torch_fp32": _torch_runner(model),
        "onnx_fp32": _onnx_runner(_bench_session(onnx_fp32, threads)),
        "onnx_int8": _onnx_runner(_bench_session(onnx_int8, threads)),
    }
    sizes = {"torch_fp32": Path(student_dir, "model.safetensors").stat().st_size,
             "onnx_fp32": Path(onnx_fp32).stat().st_size, "onnx_int8": Path(onnx_int8).stat().st_size}
    lines, line_chars = config["render"]["lines"], config["render"]["line_chars"]
    load_before = os.getloadavg()
    latency: dict[str, dict[str, Any]] = {f: {} for f in FORMS}
    for b in batch_sizes:
        x = _test_feeds(test_split_dir, b, lines, line_chars)
        times = time_forms(runners, x, warmup, repeats)
        for form in FORMS:
            latency[form][str(b)] = _stats(times[form], b)
            log(f"batch {b:3d} {FORM_TITLES[form]:17s} median {latency[form][str(b)]['median_ms']:8.2f} ms")
    load_after = os.getloadavg()
    b_prof = max(batch_sizes)
    x = _test_feeds(test_split_dir, b_prof, lines, line_chars)
    profile = {"batch": b_prof, "onnx_fp32": op_profile(onnx_fp32, x, threads), "onnx_int8": op_profile(onnx_int8, x, threads)}
    accuracy = {}
    for form in FORMS:
        accuracy[form] = _accuracy(runners[form], test_split_dir)
        log(f"{FORM_TITLES[form]:17s} test accuracy {100 * accuracy[form]['accuracy']:.2f} %")
    ratios = {}
    for b in map(str, batch_sizes):
        int8 = latency["onnx_int8"][b]["median_ms"]
        ratios[b] = {"int8_vs_onnx_fp32": latency["onnx_fp32"][b]["median_ms"] / int8,
                     "int8_vs_torch_fp32": latency["torch_fp32"][b]["median_ms"] / int8,
                     "onnx_fp32_vs_torch_fp32": latency["torch_fp32"][b]["median_ms"] / latency["onnx_fp32"][b]["median_ms"]}
    import onnxruntime

    return {
        "cpu": cpu_info(), "threads": threads, "omp_wait_policy": wait_policy, "min_timed_s": MIN_TIMED_S,
        "warmup_s": WARMUP_S, "load_average_before": load_before, "load_average_after": load_after,
        "versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
        "encoder": config["encoder"], "batch_sizes": batch_sizes, "warmup": warmup, "repeats": repeats,
        "latency": latency, "speedup": ratios, "op_profile": profile, "size_bytes": sizes, "accuracy": accuracy,
        "accuracy_drop_points_int8_vs_onnx_fp32": 100 * (accuracy["onnx_fp32"]["accuracy"] - accuracy["onnx_int8"]["accuracy"]),
    }


def goal_check(report: dict[str, Any], batch: str = "32") -> dict[str, Any]:
    """The issue's bar: int8 at batch 32 >= 2x ONNX fp32, >= 3x torch eager, <= 1 point less accurate."""
    if batch not in report["speedup"]:
        return {"evaluated": False, "reason": f"batch {batch} not benchmarked"}
    s = report["speedup"][batch]
    drop = report["accuracy_drop_points_int8_vs_onnx_fp32"]
    checks = {"int8_vs_onnx_fp32 >= 2": s["int8_vs_onnx_fp32"] >= 2.0,
              "int8_vs_torch_fp32 >= 3": s["int8_vs_torch_fp32"] >= 3.0,
              "accuracy drop <= 1 point": drop <= 1.0}
    return {"evaluated": True, "batch": int(batch), "checks": checks, "met": all(checks.values())}


def _spread_note(report: dict[str, Any], ratio: float = 2.0) -> list[str]:
    """A warning naming the rows whose 75th percentile is over `ratio` times their 25th: timings disturbed by
    other work on the machine (the load average says how busy it was), to be rerun before they are quoted."""
    wide = [f"{FORM_TITLES[form]} at batch {b}" for form in FORMS for b, st in report["latency"][form].items()
            if st["p75_ms"] > ratio * st["p25_ms"]]
    if not wide:
        return []
    one = " or with `deploy_benchmark.threads: 1`" if report.get("threads", 1) != 1 else ""
    return [f"**Unsteady timings** (75th percentile over {ratio:g}x the 25th): {', '.join(wide)}. Other work competed "
            f"for the cores; rerun on a quiet machine{one} before quoting them."]


def render_markdown(report: dict[str, Any]) -> str:
    cpu = report["cpu"]
    lines = [
        "# Deploy benchmark",
        "",
        f"CPU: **{cpu['model']}** ({cpu['logical_cores']} logical cores, {cpu['machine']}, "
        f"ISA: {', '.join(cpu['isa']) or 'n/a'}); **{report['threads']} thread(s)** for torch and onnxruntime. "
        f"torch {report['versions']['torch']}, onnxruntime {report['versions']['onnxruntime']}.",
        f"Load average (1/5/15 min) before: {', '.join(f'{x:.2f}' for x in report['load_average_before'])}; "
        f"after: {', '.join(f'{x:.2f}' for x in report['load_average_after'])}.",
        f"Each form warmed up for at least {report['warmup']} runs and {report.get('warmup_s', 0):g} s, then "
        f"timed for at least {report['repeats']} runs and {report.get('min_timed_s', 0):g} s, interleaved in blocks "
        f"of up to {BLOCK}, round-robin across forms; OpenMP wait policy "
        f"{report.get('omp_wait_policy', 'unrecorded')}. Latency is the median, spread the 25th-75th percentile.",
        *_spread_note(report),
        "",
        "| form | batch | median ms | p25-p75 ms | texts/s | size | test accuracy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for form in FORMS:
        for b in map(str, report["batch_sizes"]):
            st = report["latency"][form][b]
            acc = report["accuracy"][form]
            lines.append(f"| {FORM_TITLES[form]} | {b} | {st['median_ms']:.2f} | {st['p25_ms']:.2f}-{st['p75_ms']:.2f} | "
                         f"{st['throughput_per_s']:.0f} | {report['size_bytes'][form] / 1024:.0f} KiB | "
                         f"{100 * acc['accuracy']:.2f} % |")
    lines += ["", "| batch | int8 vs ONNX fp32 | int8 vs torch fp32 | ONNX fp32 vs torch fp32 |", "| ---: | ---: | ---: | ---: |"]
    for b, s in report["speedup"].items():
        lines.append(f"| {b} | {s['int8_vs_onnx_fp32']:.2f}x | {s['int8_vs_torch_fp32']:.2f}x | {s['onnx_fp32_vs_torch_fp32']:.2f}x |")
    g = report.get("goal", {})
    if g.get("evaluated"):
        lines += ["", f"Goal at batch {g['batch']} (int8 >= 2x ONNX fp32, >= 3x torch eager, <= 1 point accuracy drop): "
                  + ("**met**" if g["met"] else "**not met**") + " — "
                  + "; ".join(f"{k}: {'yes' if v else 'no'}" for k, v in g["checks"].items()) + "."]
    prof = report.get("op_profile")
    if prof:
        lines += ["", f"Where the time goes (onnxruntime profiler, batch {prof['batch']}, share of kernel time):", "",
                  "| op (fp32) | share | op (int8) | share |", "| --- | ---: | --- | ---: |"]
        a, b = list(prof["onnx_fp32"]["share"].items())[:8], list(prof["onnx_int8"]["share"].items())[:8]
        for i in range(max(len(a), len(b))):
            left = f"{a[i][0]} | {100 * a[i][1]:.1f} %" if i < len(a) else " | "
            right = f"{b[i][0]} | {100 * b[i][1]:.1f} %" if i < len(b) else " | "
            lines.append(f"| {left} | {right} |")
        lines.append(f"| kernel total (profiled) | {prof['onnx_fp32']['kernel_ms_per_run']:.2f} ms | kernel total (profiled) | "
                     f"{prof['onnx_int8']['kernel_ms_per_run']:.2f} ms |")
    enc = report["encoder"]
    core = (f"recursive core (depth {enc['depth']}, H_cycles {enc['H_cycles']}, L_cycles {enc['L_cycles']})"
            if enc.get("core", "recursive") == "recursive" else "no recursive core")
    lines += ["", f"Student: {enc['lines']} x {enc['line_chars']} cells of {enc['cell_height']}x{enc['cell_width']} "
              f"(x{enc['channels']} channels), {enc['stem']} stem, mixer kernel {enc['mixer_kernel']}, dim {enc['dim']}, {core}, "
              f"K {enc['num_capsules']}, {enc['num_classes']} classes; accuracy on {report['accuracy']['onnx_int8']['samples']} "
              "test texts.", ""]
    return "\n".join(lines)


def write_reports(report: dict[str, Any], json_path: str | os.PathLike, md_path: str | os.PathLike) -> None:
    report = {**report, "goal": goal_check(report)}
    io.write_json(json_path, report)
    io.write_text(md_path, render_markdown(report))
