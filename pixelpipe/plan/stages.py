"""One prediction per stage (`predict_<stage>()`) over the frozen PlanInputs: peak host RAM, bytes written,
peak GPU memory on CUDA and wall time where a throughput figure is known."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..data.corpus import shard_count
from ..model.encoder import EncoderConfig, flops_per_sample
from .inputs import SPLITS, PlanInputs
from .memory import (
    BASELINE_BYTES_PER_NGRAM,
    CUDA_RESERVED_OVERHEAD,
    HOST_BASELINE,
    HOST_RUNTIME,
    ONNX_MODEL_COPIES,
    ORT_ARENA_FACTOR,
    predict_inference_memory,
    predict_train_memory,
)
from .shapes import model_tensors, param_shapes
from .sizes import (
    BASELINE_METRICS_BYTES,
    checkpoint_bytes,
    deploy_report_bytes,
    json_len,
    metrics_csv_bytes,
    model_config_bytes,
    npy_bytes,
    npz_bytes,
    onnx_bytes,
    onnx_metadata,
    render_manifest_bytes,
    run_fingerprint_placeholder,
    safetensors_bytes,
)
from .walltime import encode_wall_s, train_wall_s


@dataclass
class StagePlan:
    """One job's prediction: the plan's row, and (via `prediction()`) what StageMeter stores beside the measurement."""

    rule: str
    name: str
    peak_host_bytes: int
    disk_written_bytes: int
    wall_s: float | None = None
    peak_gpu_allocated_bytes: int | None = None
    peak_gpu_reserved_bytes: int | None = None
    checkpoint_bytes: int | None = None
    samples: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.rule}/{self.name}"

    def prediction(self) -> dict[str, Any]:
        """The `predicted` block StageMeter stores beside the measurement."""
        d = {k: v for k, v in asdict(self).items() if v is not None and k not in ("rule", "name")}
        d["source"] = "pixelpipe.plan (analytic, before the stage ran)"
        return d


def _train_steps(n_train: int, tcfg: dict) -> tuple[int, int]:
    """Batch and optimizer steps as engine.schedule counts them (an `auto` batch is planned at 64)."""
    from ..train.engine import schedule

    bs = tcfg["batch_size"] if tcfg["batch_size"] != "auto" else 64
    return bs, schedule(max(n_train, bs), bs, tcfg["epochs"])[1]


def predict_corpus(inp: PlanInputs) -> StagePlan:
    n_all = sum(inp.sizes.values())
    return StagePlan("corpus", "all", HOST_BASELINE["corpus"] + HOST_RUNTIME["corpus"] + n_all * HOST_RUNTIME["corpus_row"],
                     sum(inp.facts.corpus_bytes.values()), samples=n_all, detail={"disk": inp.facts.corpus_bytes})


def predict_baseline(inp: PlanInputs) -> StagePlan:
    """The n-gram baseline: ids of every 1-3-gram of every text (int64), the bag's weights with their
    gradient and Adam's two moments, one batch's bags."""
    bcfg = inp.cfg["baseline"]
    ngrams = sum(3 * (inp.chars[split] + len(texts)) for split, (texts, _, _) in inp.facts.splits.items())
    host = {"baseline": HOST_BASELINE["baseline"], "runtime": HOST_RUNTIME["baseline"], "n-gram ids": BASELINE_BYTES_PER_NGRAM * ngrams,
            "weights, gradient, Adam moments": 4 * 4 * bcfg["buckets"] * inp.classes}
    return StagePlan("baseline", "baseline", int(sum(host.values())), BASELINE_METRICS_BYTES,
                     samples=inp.sizes["train"] * bcfg["epochs"], detail={"host": host})


def predict_render(inp: PlanInputs) -> list[StagePlan]:
    """One render job per split: its cache shards and manifest."""
    stages = []
    for split in SPLITS:
        n = inp.sizes[split]
        shard_files = inp.shard_file_bytes(split)
        full, split_atlas = inp.layouts[split]
        _, labels, ids = inp.facts.splits[split]
        manifest = render_manifest_bytes(inp.cfg, labels, ids, len(shard_files), full, split_atlas)
        disk = sum(shard_files) + manifest
        host = {"baseline": HOST_BASELINE["render"], "runtime": HOST_RUNTIME["render"],
                "code point table": 0x110000 * 4, "cell indices": n * inp.capacity * 4,
                "texts (original + normalized)": 2 * n * HOST_RUNTIME["render_text"] + 2 * inp.chars[split] * 2,
                "vectorized lookup": inp.chars[split] * HOST_RUNTIME["render_per_char"],
                "shard images (one gather)": min(n, inp.shard_size) * inp.pixels}
        stages.append(StagePlan("render", split, int(sum(host.values())), disk, samples=n,
                                detail={"host": host, "disk": {"shards": sum(shard_files), "manifest": manifest}}))
    return stages


def _train_host(inp: PlanInputs, mem_cpu: dict[str, Any], eval_batch: int, enc: EncoderConfig) -> dict[str, int]:
    """Host RAM of a training job by part; on CUDA the training state lives on the GPU and the host
    holds the loader and the maps."""
    engine = inp.cfg["engine"]
    host = {"baseline": HOST_BASELINE["torch"], "runtime": HOST_RUNTIME["train"],
            "weights+grads+optimizer": mem_cpu["weights"] + mem_cpu["gradients"] + mem_cpu["optimizer_state"],
            "activations": sum(mem_cpu["activations"].values()) + mem_cpu["backward_workspace"]
            + mem_cpu["allocator_overhead"],
            "loader workers (USS)": engine["num_workers"] * HOST_RUNTIME["loader_worker"]}
    if inp.cuda:
        host["weights+grads+optimizer"] = mem_cpu["weights"]
        host["activations"] = 0
    host["eval forward"] = 0 if inp.cuda else max(0, predict_inference_memory(enc, eval_batch, device="cpu")
                                                  - mem_cpu["weights"] - host["activations"])
    return {k: int(v) for k, v in host.items()}


def _predict_train(inp: PlanInputs, role: str, enc: EncoderConfig, extra_tensors: dict, extra_host: dict,
                   keep: int, every: int) -> tuple[StagePlan, int]:
    """A train_<role> job and the bytes of one of its checkpoints."""
    cfg, engine = inp.cfg, inp.cfg["engine"]
    tcfg = cfg[role]["train"]
    bs, steps = _train_steps(inp.sizes["train"], tcfg)
    micro = bs // engine["grad_accum_steps"]
    extra_params = sum(int(np.prod(v[0])) for v in extra_tensors.values())
    mem_cpu = predict_train_memory(enc, micro, "fp32", engine["activation_checkpointing"],
                                   engine["grad_free_cycles"], extra_params, device="cpu")
    host = _train_host(inp, mem_cpu, max(64, micro), enc)
    # Memory-mapped data is page cache (file-backed, reclaimable), not memory the job allocates:
    # reported beside the prediction, not added to it (measure.anon_rss does not count it either).
    page_cache = {"cache pages (mmap, all splits)": inp.cache_bytes, **extra_host}
    model_file = safetensors_bytes(model_tensors(enc))
    cfg_json = model_config_bytes(cfg, role, enc, inp.classes, inp.atlas)
    csv = metrics_csv_bytes(tcfg["epochs"])
    ckpt = checkpoint_bytes(enc, extra_tensors, tcfg["epochs"])
    flops = flops_per_sample(enc)
    samples = steps * bs
    evals = inp.sizes["val"] * math.ceil(tcfg["epochs"]) + inp.sizes["test"]
    wall = train_wall_s(flops, samples, evals, inp.gflops)
    saves = len({s for s in range(every, steps, every)} | {steps})  # Trainer: every `every` steps, and at the end
    left = min(keep, saves) * ckpt + len(run_fingerprint_placeholder) + 1  # + the RUN marker
    sp = StagePlan(f"train_{role}", role, sum(host.values()), model_file + cfg_json + csv, wall_s=wall, samples=samples,
                   checkpoint_bytes=left,
                   detail={"host": host, "page_cache (not in host)": page_cache,
                           "disk": {"model.safetensors": model_file, "config.json (estimate)": cfg_json,
                                    "metrics.csv (estimate)": csv, "checkpoint (each)": ckpt},
                           "train_memory": mem_cpu, "steps": steps, "batch_size": bs, "flops_per_sample": flops})
    if inp.cuda:
        g = predict_train_memory(enc, micro, inp.precision, engine["activation_checkpointing"],
                                 engine["grad_free_cycles"], extra_params, device="cuda")
        sp.peak_gpu_allocated_bytes, sp.peak_gpu_reserved_bytes = g["allocated_peak"], g["reserved_peak"]
        sp.detail["train_memory"] = g
    return sp, ckpt


def predict_train_teacher(inp: PlanInputs) -> tuple[StagePlan, int]:
    """The teacher's checkpoint policy is train.run.train_teacher's."""
    from ..train.run import TEACHER_EVERY_STEPS, TEACHER_KEEP_LAST

    return _predict_train(inp, "teacher", inp.teacher, {}, {}, keep=TEACHER_KEEP_LAST, every=TEACHER_EVERY_STEPS)


def predict_train_student(inp: PlanInputs) -> tuple[StagePlan, int]:
    """The student: an adapter from student to teacher width; teacher logits+sketches memory-mapped."""
    teacher, student = inp.teacher, inp.student
    adapter = {"adapter.weight": ((teacher.dim, student.dim), "float32", 4), "adapter.bias": ((teacher.dim,), "float32", 4)}
    teacher_maps = inp.sizes["train"] * (inp.classes * 4 + teacher.num_capsules * teacher.dim * 2)
    ck = inp.cfg["student"]["checkpoint"]
    return _predict_train(inp, "student", student, adapter, {"teacher outputs (mmap)": teacher_maps},
                          keep=ck["keep_last"], every=ck["every_steps"])


def _encoded_fields(inp: PlanInputs, n: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    """The teacher outputs for `n` samples (an encoded shard, a dataset split), as encode writes them."""
    from ..train.encode import encoded_fields

    return encoded_fields(inp.teacher, n)


def predict_encode(inp: PlanInputs, split: str) -> list[StagePlan]:
    """One encode job per cache shard of `split`."""
    teacher, shard_size = inp.teacher, inp.shard_size
    out_per_sample = sum(int(np.prod(s[1:])) * np.dtype(t).itemsize for s, t in _encoded_fields(inp, 1).values())
    teacher_params = sum(int(np.prod(s)) for s in param_shapes(teacher))
    eb = inp.cfg["encode"]["batch_size"]
    n = inp.sizes[split]
    stages = []
    for s in range(shard_count(inp.planned[split], shard_size)):
        m = min(shard_size, max(0, n - s * shard_size))
        disk = npz_bytes(_encoded_fields(inp, m))
        live = predict_inference_memory(teacher, min(eb, max(m, 1)), inp.precision, "cuda" if inp.cuda else "cpu")
        host = {"baseline": HOST_BASELINE["torch"], "runtime": HOST_RUNTIME["encode"],
                "teacher weights": 4 * teacher_params, "output buffers": m * out_per_sample,
                "batch forward": 0 if inp.cuda else live - 4 * teacher_params}  # shard pages: page cache
        wall = encode_wall_s(flops_per_sample(teacher), m, inp.gflops)
        sp = StagePlan("encode", f"{split}-{s:05d}", int(sum(host.values())), disk, wall_s=wall, samples=m,
                       detail={"host": host})
        if inp.cuda:
            sp.peak_gpu_allocated_bytes = int(live)
            sp.peak_gpu_reserved_bytes = int(live * CUDA_RESERVED_OVERHEAD)
        stages.append(sp)
    return stages


def predict_consolidate(inp: PlanInputs, split: str) -> StagePlan:
    """The consolidate job of `split`: one memory-mappable array per field plus the manifest."""
    n, shard_size = inp.sizes[split], inp.shard_size
    n_sh = shard_count(inp.planned[split], shard_size)
    fields = _encoded_fields(inp, n)
    arrays = sum(npy_bytes(shape, dt) for shape, dt in fields.values())
    manifest = json_len({"format": "pixelpipe.dataset/1", "count": n,
                         "shards": [f"results/encoded/{split}/shard-{s:05d}.npz" for s in range(n_sh)],
                         "shard_counts": [shard_size] * n_sh,
                         "fields": {f: {"file": f"{f}.npy", "shape": list(shape), "dtype": np.dtype(dt).name,
                                        "sha256": "0" * 64} for f, (shape, dt) in fields.items()}})
    biggest_field = max(int(np.prod(shape[1:])) * np.dtype(dt).itemsize for shape, dt in _encoded_fields(inp, 1).values())
    host = {"baseline": HOST_BASELINE["consolidate"], "runtime": HOST_RUNTIME["consolidate"],
            "one field of one shard": min(n, shard_size) * biggest_field}  # written memmap pages: page cache
    return StagePlan("consolidate", split, int(sum(host.values())), arrays + manifest, samples=n,
                     detail={"host": host, "disk": {"arrays": arrays, "manifest (estimate)": manifest}})


# ---- the deploy stages ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StudentOnnx:
    """The exported student's parameter count and predicted ONNX sizes, shared by the deploy stages."""

    enc: EncoderConfig
    params: int
    sizes: dict[str, int]

    @property
    def fp32(self) -> int:
        return self.sizes["fp32"]

    @property
    def int8(self) -> int:
        return self.sizes["int8"]

    def forward(self, batch: int) -> int:
        """Live temporaries of an inference forward (torch or onnxruntime)."""
        return max(0, predict_inference_memory(self.enc, max(1, batch), device="cpu") - 4 * self.params)


def student_onnx(inp: PlanInputs) -> StudentOnnx:
    """The student's parameter count and ONNX sizes, computed once for the three deploy stages."""
    student = inp.student
    params = sum(int(np.prod(v[0])) for v in model_tensors(student).values())
    return StudentOnnx(student, params, onnx_bytes(student, onnx_metadata(inp.cfg, student, inp.classes, inp.atlas)))


def predict_export_onnx(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    """ONNX fp32 export, with the parity check on the first val shard."""
    n_parity = min(inp.shard_size, inp.sizes["val"])
    host = {"baseline": HOST_BASELINE["deploy"], "runtime": HOST_RUNTIME["export_onnx"], "torch weights": 4 * onnx.params,
            "model copies": ONNX_MODEL_COPIES["export_onnx"] * onnx.fp32, "val shard": n_parity * inp.pixels,
            "parity batch": onnx.forward(min(256, n_parity)) + min(256, n_parity) * inp.pixels * 4,
            "onnxruntime arena": ORT_ARENA_FACTOR["export_onnx"] * onnx.forward(min(256, n_parity))}
    host = {k: int(v) for k, v in host.items()}
    return StagePlan("export_onnx", "student", sum(host.values()), onnx.fp32, samples=n_parity,
                     detail={"host": host, "disk": {"student.onnx (estimate)": onnx.fp32}, "onnx": onnx.sizes})


def predict_quantize_onnx(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    qcfg = inp.cfg["quantize"]
    calib = min(qcfg["calibration_samples"], inp.sizes["train"]) if qcfg["method"] == "static" else 0
    batch = max(min(64, calib), min(256, inp.sizes["test"]))  # calibration batches of 64, accuracy batches of 256
    host = {"baseline": HOST_BASELINE["quantize"], "runtime": HOST_RUNTIME["quantize_onnx"],
            "model copies": ONNX_MODEL_COPIES["quantize_onnx"] * onnx.fp32 + onnx.int8,
            "largest batch forward": onnx.forward(batch) + batch * inp.pixels * 4,
            "onnxruntime arenas": ORT_ARENA_FACTOR["quantize_onnx"] * onnx.forward(batch)}
    host = {k: int(v) for k, v in host.items()}
    return StagePlan("quantize_onnx", "student", sum(host.values()), onnx.int8, samples=calib,
                     detail={"host": host, "disk": {"student.int8.onnx (estimate)": onnx.int8}})


def predict_deploy_benchmark(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    dcfg = inp.cfg["deploy_benchmark"]
    n_test = inp.sizes["test"]
    batch = max(max(dcfg["batch_sizes"]), min(256, n_test))  # timing batches, accuracy batches of 256
    host = {"baseline": HOST_BASELINE["deploy"], "runtime": HOST_RUNTIME["deploy_benchmark"],
            "models (torch, ONNX fp32, int8)": 4 * onnx.params + onnx.fp32 + onnx.int8, "test images": n_test * inp.pixels,
            "largest batch forward": onnx.forward(batch) + batch * inp.pixels * 4,
            "onnxruntime arenas": ORT_ARENA_FACTOR["deploy_benchmark"] * onnx.forward(batch)}
    host = {k: int(v) for k, v in host.items()}
    reports = deploy_report_bytes(inp.cfg, inp.student, onnx.fp32, onnx.int8, n_test)
    return StagePlan("deploy_benchmark", "student", sum(host.values()), sum(reports.values()),
                     detail={"host": host, "disk": reports})
