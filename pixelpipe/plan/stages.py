"""One prediction per stage (`predict_<stage>()`) over the frozen PlanInputs: peak host RAM, bytes written,
peak GPU memory on CUDA and wall time where a throughput figure is known."""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..data.corpus import shard_count
from ..model.encoder import EncoderConfig, flops_per_sample
from ..train.settings import RoleSettings, TrainSettings
from .inputs import SPLITS, PlanInputs
from .memory import (
    BASELINE_BYTES_PER_NGRAM,
    CUDA_RESERVED_OVERHEAD,
    HOST_BASELINE,
    HOST_RUNTIME,
    ONNX_MODEL_COPIES,
    ORT_ARENA_FACTOR,
    RENDER_CREEP,
    predict_inference_memory,
    predict_train_memory,
)
from .shapes import model_tensors, param_shapes
from .sizes import (
    BASELINE_METRICS_BYTES,
    checkpoint_bytes,
    deploy_report_bytes,
    evaluation_bytes,
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
from .walltime import (
    WallTime,
    baseline_wall_s,
    benchmark_wall_s,
    consolidate_wall_s,
    corpus_wall_s,
    encode_wall_s,
    evaluate_wall_s,
    export_wall_s,
    quantize_wall_s,
    render_wall_s,
    train_wall_s,
)


@dataclass
class StagePlan:
    """One job's prediction: the plan's row, and (via `prediction()`) what StageMeter stores beside the measurement."""

    rule: str
    name: str
    peak_host_bytes: int
    disk_written_bytes: int
    time: WallTime | None = None  # alone, at the published rates; workflow.py scales it by the time factors and schedules it
    wall_s: float | None = None  # the plan's prediction: scaled by the time factors, with the sharing of cores
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
        d = {k: v for k, v in asdict(self).items() if v is not None and k not in ("rule", "name", "time")}
        if self.time:
            d["startup_s"], d["work_s"] = self.time.startup_s, self.time.work_s
        d["source"] = "pixelpipe.plan (analytic, before the stage ran)"
        return d


def _train_steps(n_train: int, train: TrainSettings) -> tuple[int, int]:
    """Batch and optimizer steps as sampling.schedule counts them (an `auto` batch is planned at 64)."""
    from ..train.sampling import schedule

    bs = 64 if train.batch_size_auto else train.batch_size
    return bs, schedule(max(n_train, bs), bs, train.epochs)[1]


def predict_corpus(inp: PlanInputs) -> StagePlan:
    """The corpus job streams. Its peak is the larger of two phases: drawing (the shipped sources read one language
    at a time, the drawn rows picked from them) and writing (the drawn rows, one chunk, held while Faker's chunks stream, two alive at a
    time); a user file is one chunk. What grows with the corpus is one split code per row (and the permutation
    that assigns them)."""
    from .corpusfacts import FAKER_CHUNK_ROWS

    facts, rt = inp.facts, HOST_RUNTIME
    n_all = facts.frame_rows + facts.faker_rows
    frame = facts.frame_rows * (rt["corpus_user_row"] if facts.user_file else rt["corpus_row"])
    read_sources = facts.frame_rows and not facts.user_file  # rows drawn from the shipped sources
    drawing = {"shipped sources read": rt["corpus_sources"] if read_sources else 0, "drawn rows": frame}
    writing = {"drawn rows (one chunk)": frame, "Faker providers": rt["corpus_faker"] if facts.faker_rows else 0,
               "Faker chunks (two alive)": min(facts.faker_rows, 2 * FAKER_CHUNK_ROWS) * rt["corpus_faker_row"]}
    phase = drawing if sum(drawing.values()) >= sum(writing.values()) else writing
    host = {"baseline": HOST_BASELINE["corpus"], "runtime": rt["corpus"], **phase,
            "split codes (uint8) and their permutation (int64)": 9 * n_all}
    return StagePlan("corpus", "all", int(sum(host.values())), sum(facts.corpus_bytes.values()), samples=n_all,
                     time=corpus_wall_s(0 if facts.user_file else facts.frame_rows, facts.faker_rows,
                                          facts.frame_rows if facts.user_file else 0),
                     detail={"host": host, "disk": facts.corpus_bytes, "exact": facts.exact,
                             "rows": {"drawn": facts.frame_rows, "faker": facts.faker_rows}})


def predict_baseline(inp: PlanInputs) -> StagePlan:
    """The n-gram baseline: the three splits' parquet frames, ids of every 1-3-gram of every text (int64), the bag's
    weights with their gradient and Adam's two moments."""
    baseline = inp.settings.baseline
    texts = inp.facts.texts
    share = {s: min(1.0, baseline.max_rows / t.rows) if t.rows else 1.0 for s, t in texts.items()}  # first max_rows
    rows = sum(share[s] * t.rows for s, t in texts.items())
    ngrams = sum(share[s] * 3 * (t.codepoints + t.rows) for s, t in texts.items())  # " text ": L + 2, L + 1, L n-grams
    host = {"baseline": HOST_BASELINE["baseline"], "runtime": HOST_RUNTIME["baseline"],
            "frames (5 columns)": rows * HOST_RUNTIME["baseline_row"],
            "n-gram ids": BASELINE_BYTES_PER_NGRAM * ngrams,
            "weights, gradient, Adam moments": 4 * 4 * baseline.buckets * inp.classes}
    model = safetensors_bytes({"bag.weight": ((baseline.buckets, inp.classes), "float32", 4),
                               "bias": ((inp.classes,), "float32", 4)})  # what evaluate scores
    return StagePlan("baseline", "baseline", int(sum(host.values())), BASELINE_METRICS_BYTES + model,
                     samples=int(min(inp.sizes["train"], baseline.max_rows) * baseline.epochs),
                     time=baseline_wall_s(ngrams * baseline.epochs), detail={"host": host})


def render_creep(shards: int) -> float:
    """What a render job keeps of its earlier shards' buffers, as a share of one shard's terms: none with one
    shard, growing with the log of the shards written up to a cap (RENDER_CREEP, fitted: see plan/memory.py)."""
    return min(RENDER_CREEP["cap"], RENDER_CREEP["per_doubling"] * math.log2(max(shards, 1)))


def predict_render(inp: PlanInputs) -> list[StagePlan]:
    """One render job per split: it streams its parquet shard by shard, so its memory is one shard's texts and
    layout (flat in the corpus size); it writes the shards of glyph rows and a manifest."""
    stages = []
    for split in SPLITS:
        n, tally = inp.sizes[split], inp.facts.texts[split]
        shard_files = inp.shard_file_bytes(split)
        manifest = render_manifest_bytes(inp.settings.render, inp.shard_size, inp.stats[split], len(shard_files),
                                         inp.atlas, inp.row_dtype)
        chunk = min(n, inp.shard_size)
        chars = chunk * tally.codepoints / max(tally.rows, 1)
        host = {"baseline": HOST_BASELINE["render"], "runtime": HOST_RUNTIME["render"],
                "code point table": 0x110000 * 4,
                "atlas (cells, stacked)": 2 * inp.glyphs * inp.teacher.cell_height * inp.teacher.cell_width,
                "one shard: texts": chunk * HOST_RUNTIME["render_text"],
                "one shard: layout, rows, counts": chunk * inp.capacity * HOST_RUNTIME["render_per_cell"],
                "one shard: vectorized lookup": chars * HOST_RUNTIME["render_per_char"]}
        shard_terms = sum(v for k, v in host.items() if k.startswith("one shard"))
        host["earlier shards (what glibc keeps of them)"] = shard_terms * render_creep(len(shard_files))
        stages.append(StagePlan("render", split, int(sum(host.values())), sum(shard_files) + manifest, samples=n,
                                time=render_wall_s(n),
                                detail={"host": host, "disk": {"shards": sum(shard_files), "manifest": manifest}}))
    return stages


def _train_host(inp: PlanInputs, mem_cpu: dict[str, Any], eval_batch: int, enc: EncoderConfig,
                eval_tokens: float) -> dict[str, int]:
    """Host RAM of a training job by part; on CUDA the training state lives on the GPU and the host
    holds the loader and the maps."""
    engine = inp.settings.engine
    host = {"baseline": HOST_BASELINE["torch"], "runtime": HOST_RUNTIME["train"],
            "weights+grads+optimizer": mem_cpu["weights"] + mem_cpu["gradients"] + mem_cpu["optimizer_state"],
            "activations": sum(mem_cpu["activations"].values()) + mem_cpu["backward_workspace"]
            + mem_cpu["allocator_overhead"] + mem_cpu["input_buffers"],
            "loader workers (USS)": engine.num_workers * HOST_RUNTIME["loader_worker"]}
    if inp.cuda:
        host["weights+grads+optimizer"] = mem_cpu["weights"]
        host["activations"] = 0
    forward = predict_inference_memory(enc, eval_batch, device="cpu", tokens=eval_tokens)
    host["eval forward"] = 0 if inp.cuda else max(0, forward - mem_cpu["weights"] - host["activations"])
    return {k: int(v) for k, v in host.items()}


def _train_tokens(inp: PlanInputs, enc: EncoderConfig, settings: TrainSettings, bs: int,
                  eval_bs: int) -> dict[str, float]:
    """Tokens per trimmed batch: training (after the random windows), evaluation, and the peak (the longest text)."""
    train, val, test = (inp.lengths[s] for s in SPLITS)
    window = (settings.window_prob, settings.window_min_chars)
    group = inp.settings.engine.length_grouping
    return {"train_batch": train.grouped_batch_tokens(enc, bs, group, *window),
            "val_batch": val.sorted_batch_tokens(enc, eval_bs), "test_batch": test.sorted_batch_tokens(enc, eval_bs),
            "peak": train.peak_tokens(enc),
            "eval_peak": max(val.peak_tokens(enc), test.peak_tokens(enc)), "layout": float(enc.num_tokens),
            "mean_clusters": train.mean}


def table_elements(enc: EncoderConfig, clusters: float) -> float:
    """n-gram table row elements one text of `clusters` glyphs reads: every n-gram of 1..N glyphs of the text
    padded with a blank on each side, and with `ngram_words` a word slot every two cells (the gathered form's,
    model/ngrams.py:word_buckets), a row of ngram_dim each (0 without tables)."""
    n = enc.ngram_orders
    if not n:
        return 0.0
    grams = sum(max(0.0, clusters + 2 - k + 1) for k in range(1, n + 1))
    words = (clusters + 3) / 2 if enc.ngram_words else 0.0
    return (grams + words) * enc.ngram_dim


def _predict_train(inp: PlanInputs, role: RoleSettings, enc: EncoderConfig, extra_tensors: dict,
                   extra_host: dict) -> tuple[StagePlan, int]:
    """A train_<role> job and the bytes of one of its checkpoints (its policy: the role's checkpoint settings, as
    train.run hands them to the Trainer)."""
    engine, train = inp.settings.engine, role.train
    keep, every = role.checkpoint.keep_last, role.checkpoint.every_steps
    bs, steps = _train_steps(inp.train_rows(role), train)
    micro = bs // engine.grad_accum_steps
    tokens = _train_tokens(inp, enc, train, micro, max(64, micro))
    extra_params = sum(int(np.prod(v[0])) for v in extra_tensors.values())
    mem = functools.partial(predict_train_memory, enc, micro,
                            activation_checkpointing=engine.activation_checkpointing,
                            grad_free_cycles=engine.grad_free_cycles, extra_params=extra_params,
                            tokens=tokens["peak"], images=bool(engine.augment))
    mem_cpu = mem(precision="fp32", device="cpu")
    host = _train_host(inp, mem_cpu, max(64, micro), enc, tokens["eval_peak"])
    # temperature scaling after the last epoch (train/calibrate.py), while the training state is still held:
    # the val split's logits [N, C] fp32 whole and windowed, their concatenation, the fit's two buffers, the
    # softmax before and after (8 copies of N x C at its peak; 70 MiB of the 111-language student's 494)
    host["calibration (val logits)"] = 8 * inp.sizes["val"] * inp.classes * 4 if train.calibrate else 0
    # Memory-mapped data is page cache (file-backed, reclaimable), not memory the job allocates:
    # reported beside the prediction, not added to it (measure.anon_rss does not count it either).
    page_cache = {"cache pages (mmap, all splits)": inp.cache_bytes, **extra_host}
    model_file = safetensors_bytes(model_tensors(enc))
    cfg_json = model_config_bytes(role, inp.settings.render, enc, inp.classes, inp.atlas, inp.stats["train"])
    csv = metrics_csv_bytes(train.epochs)
    ckpt = checkpoint_bytes(enc, extra_tensors, train.epochs)
    flops = {k: flops_per_sample(enc, tokens=tokens[f"{k}_batch"]) for k in ("train", "val", "test")}
    samples = steps * bs
    evaluated = inp.sizes["val"] * math.ceil(train.epochs) + inp.sizes["test"]
    per_text = table_elements(enc, tokens["mean_clusters"])
    wall = train_wall_s(flops["train"], samples, inp.sizes["val"] * math.ceil(train.epochs) * flops["val"]
                        + inp.sizes["test"] * flops["test"], inp.gflops, enc.core, inp.cuda,
                        samples * per_text, evaluated * per_text, steps)
    saves = len({s for s in range(every, steps, every)} | {steps})  # Trainer: every `every` steps, and at the end
    left = min(keep, saves) * ckpt + len(run_fingerprint_placeholder) + 1  # + the RUN marker
    sp = StagePlan(f"train_{role.role}", role.role, sum(host.values()), model_file + cfg_json + csv, time=wall,
                   samples=samples, checkpoint_bytes=left,
                   detail={"host": host, "page_cache (not in host)": page_cache,
                           "disk": {"model.safetensors": model_file, "config.json (estimate)": cfg_json,
                                    "metrics.csv (estimate)": csv, "checkpoint (each)": ckpt},
                           "train_memory": mem_cpu, "steps": steps, "batch_size": bs, "tokens": tokens,
                           "flops_per_sample": flops["train"]})
    if inp.cuda:
        g = mem(precision=inp.precision, device="cuda")
        sp.peak_gpu_allocated_bytes, sp.peak_gpu_reserved_bytes = g["allocated_peak"], g["reserved_peak"]
        sp.detail["train_memory"] = g
    return sp, ckpt


def predict_train_teacher(inp: PlanInputs) -> tuple[StagePlan, int]:
    """The teacher: labels only."""
    return _predict_train(inp, inp.settings.teacher, inp.teacher, {}, {})


def predict_train_student(inp: PlanInputs) -> tuple[StagePlan, int]:
    """The student: an adapter from student to teacher width; teacher logits+sketches memory-mapped."""
    teacher, student = inp.teacher, inp.student
    adapter = {"adapter.weight": ((teacher.dim, student.dim), "float32", 4), "adapter.bias": ((teacher.dim,), "float32", 4)}
    teacher_maps = inp.sizes["train"] * (inp.classes * 4 + teacher.num_capsules * teacher.dim * 2)
    return _predict_train(inp, inp.settings.student, student, adapter, {"teacher outputs (mmap)": teacher_maps})


def _encoded_fields(inp: PlanInputs, n: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    """The teacher outputs for `n` samples (an encoded shard, a dataset split), as encode writes them."""
    from ..data.encoded import encoded_fields

    return encoded_fields(inp.teacher, n)


def predict_encode(inp: PlanInputs, split: str) -> list[StagePlan]:
    """One encode job per cache shard of `split`: the shard sorted by length and cut into batches, each trimmed to
    its longest text."""
    teacher, eb = inp.teacher, inp.settings.encode_batch_size
    out_per_sample = sum(int(np.prod(s[1:])) * np.dtype(t).itemsize for s, t in _encoded_fields(inp, 1).values())
    teacher_params = sum(int(np.prod(s)) for s in param_shapes(teacher))
    lengths = inp.lengths[split]
    tokens_at: dict[int, float] = {}
    stages = []
    for s, m in enumerate(inp.shard_rows(split)):
        batch = min(eb, max(m, 1))
        disk = npz_bytes(_encoded_fields(inp, m))
        live = predict_inference_memory(teacher, batch, inp.precision, "cuda" if inp.cuda else "cpu",
                                        tokens=lengths.peak_tokens(teacher))
        host = {"baseline": HOST_BASELINE["torch"], "runtime": HOST_RUNTIME["encode"],
                "teacher weights": 4 * teacher_params, "output buffers": m * out_per_sample,
                "glyph batches (int64, one read ahead)": 2 * batch * inp.capacity * 8 * 2,
                "batch forward": 0 if inp.cuda else live - 4 * teacher_params}  # shard pages: page cache
        if batch not in tokens_at:  # one value per batch size, not per shard: the split is sorted as a whole
            tokens_at[batch] = lengths.sorted_batch_tokens(teacher, batch)
        flops = flops_per_sample(teacher, tokens=tokens_at[batch])
        sp = StagePlan("encode", f"{split}-{s:05d}", int(sum(host.values())), disk,
                       time=encode_wall_s(flops, m, inp.gflops, teacher.core, inp.cuda,
                                          m * table_elements(teacher, lengths.mean)), samples=m,
                       detail={"host": host, "flops_per_sample": flops})
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
                     time=consolidate_wall_s(arrays),
                     detail={"host": host, "disk": {"arrays": arrays, "manifest (estimate)": manifest}})


# ---- the deploy stages ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StudentOnnx:
    """The exported (folded) student's parameter count and predicted ONNX sizes, shared by the deploy stages."""

    enc: EncoderConfig
    params: int
    sizes: dict[str, int]
    tokens: float  # tokens of the largest batch the deploy stages run (the test / val split's longest text)

    @property
    def fp32(self) -> int:
        return self.sizes["fp32"]

    @property
    def int8(self) -> int:
        return self.sizes["int8"]

    @property
    def without_ngrams(self) -> int:
        """The fp32 file less its n-gram table and glyph keys: what the export and quantize copies scale with
        (fitted before the tables; the table is read once, see docs/engine.md)."""
        return self.sizes["fp32"] - self.sizes["ngram_table"]

    @property
    def table(self) -> int:
        """Bytes of the folded glyph table (float32 [G + 1, W]): the torch module export builds holds one."""
        return 4 * self.sizes["table_rows"] * self.sizes["table_width"]

    def forward(self, batch: int) -> int:
        """Live temporaries of the torch student's inference forward (glyph path) at the largest batch's tokens."""
        return max(0, predict_inference_memory(self.enc, max(1, batch), device="cpu", tokens=self.tokens)
                   - 4 * self.params)

    def onnx_forward(self, batch: int) -> int:
        """What the folded graph's glyph path computes per batch: the gathered table rows [B, T + spans - 1, W]
        and, in the `ngram` form, the summed pre-activations, GELU and the pooling's masked copies [B, T, H] (4 of
        them); in the `stem` form the model after the stem (as the torch forward)."""
        width, t = self.sizes["table_width"], self.tokens
        if self.enc.deploy_form == "ngram":
            spans = width // self.enc.mixer_hidden
            return int(batch * ((t + spans - 1) * width + 4 * t * self.enc.mixer_hidden) * 4)
        return int(batch * t * width * 4) + self.forward(batch)

    def onnx_ngrams(self, batch: int) -> int:
        """The n-gram table rows a batch gathers [B, grams, D] (fp32; 0 without tables)."""
        return int(batch * table_elements(self.enc, self.tokens) * 4)

    def arena(self, stage: str, batch: int) -> int:
        """onnxruntime's arenas of a deploy stage at its largest batch (ORT_ARENA_FACTOR)."""
        glyphs, ngrams = ORT_ARENA_FACTOR[stage]
        return int(glyphs * self.onnx_forward(batch) + ngrams * self.onnx_ngrams(batch))


def student_onnx(inp: PlanInputs) -> StudentOnnx:
    """The student's parameter count and ONNX sizes, computed once for the three deploy stages."""
    student = inp.student
    params = sum(int(np.prod(v[0])) for v in model_tensors(student).values())
    meta = onnx_metadata(inp.settings.student, inp.settings.render, student, inp.classes, inp.atlas,
                         inp.stats["train"])
    tokens = max(inp.lengths[s].peak_tokens(student) for s in ("val", "test"))
    return StudentOnnx(student, params, onnx_bytes(student, meta, inp.glyphs, inp.settings.quantize.table_rows,
                                                      inp.settings.quantize.glyph_table), tokens)


def _rows_bytes(inp: PlanInputs, n: int) -> int:
    """Cache rows (glyph ids, label, length) as np.load reads them."""
    return n * inp.row_dtype.itemsize


def _feeds_bytes(inp: PlanInputs, batch: int) -> int:
    """One batch of the deployed model's inputs (int64 glyph ids + 1 and lengths) and its float logits."""
    return batch * (inp.capacity * 8 * 2 + 8 + 4 * inp.classes)


def predict_export_onnx(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    """ONNX fp32 export of the folded student, with the parity check on the first val shard."""
    n_parity = min(inp.shard_size, inp.sizes["val"])
    batch = min(256, n_parity)
    host = {"baseline": HOST_BASELINE["export"], "runtime": HOST_RUNTIME["export_onnx"],
            "torch weights": 4 * onnx.params,
            "folded module (glyph table)": onnx.table,
            "model copies": ONNX_MODEL_COPIES["export_onnx"] * onnx.without_ngrams, "val shard rows": _rows_bytes(inp, n_parity),
            "parity batch (torch forward)": onnx.forward(batch) + _feeds_bytes(inp, batch),
            "onnxruntime arena": onnx.arena("export_onnx", batch)}
    host = {k: int(v) for k, v in host.items()}
    return StagePlan("export_onnx", "student", sum(host.values()), onnx.fp32, samples=n_parity,
                     time=export_wall_s(onnx.fp32, n_parity),
                     detail={"host": host, "disk": {"student.onnx (estimate)": onnx.fp32}, "onnx": onnx.sizes})


def predict_quantize_onnx(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    quantize = inp.settings.quantize
    calib = min(quantize.range_samples, inp.sizes["train"]) if quantize.method == "static" else 0
    batch = max(min(64, calib), min(256, inp.sizes["test"]))  # range batches of 64, accuracy batches of 256
    host = {"baseline": HOST_BASELINE["quantize"], "runtime": HOST_RUNTIME["quantize_onnx"],
            "model copies": ONNX_MODEL_COPIES["quantize_onnx"] * onnx.without_ngrams + onnx.int8,
            "largest batch": _feeds_bytes(inp, batch),
            "onnxruntime arenas": onnx.arena("quantize_onnx", batch)}
    host = {k: int(v) for k, v in host.items()}
    return StagePlan("quantize_onnx", "student", sum(host.values()), onnx.int8, samples=calib,
                     time=quantize_wall_s(onnx.fp32),
                     detail={"host": host, "disk": {"student.int8.onnx (estimate)": onnx.int8}})


def predict_deploy_benchmark(inp: PlanInputs, onnx: StudentOnnx) -> StagePlan:
    bench = inp.settings.deploy_benchmark
    n_test = inp.sizes["test"]
    batch = max(max(bench.batch_sizes), min(256, n_test))  # timing batches, accuracy batches of 256
    host = {"baseline": HOST_BASELINE["deploy"], "runtime": HOST_RUNTIME["deploy_benchmark"],
            "models (torch, ONNX fp32, int8)": 4 * onnx.params + onnx.fp32 + onnx.int8,
            "test rows": _rows_bytes(inp, n_test),
            "largest batch (torch forward)": onnx.forward(batch) + _feeds_bytes(inp, batch),
            "onnxruntime arenas": onnx.arena("deploy_benchmark", batch)}
    host = {k: int(v) for k, v in host.items()}
    reports = deploy_report_bytes(bench, inp.student, onnx.fp32, onnx.int8, n_test)
    # the test split scored by each form (torch, fp32, int8), then each batch size timed `repeats` times per form
    texts = 3 * (n_test + bench.repeats * sum(bench.batch_sizes))
    return StagePlan("deploy_benchmark", "student", sum(host.values()), sum(reports.values()),
                     time=benchmark_wall_s(texts), detail={"host": host, "disk": reports})


def predict_evaluate(inp: PlanInputs, onnx: StudentOnnx, teacher_params: int) -> StagePlan:
    """The held-out evaluation: the two torch models, the two ONNX sessions and the n-gram baseline loaded at
    once, the held-out sets (small, fixed by the shipped sources), one torch batch of the teacher; its files are
    the evaluation JSON (one row per model, set, perturbation and length bucket), its Markdown and its plot."""
    from ..evaluate.reference import compared_on_common, py3langid_installed

    evaluate = inp.settings.evaluate
    batch = evaluate.batch_size
    host = {"baseline": HOST_BASELINE["deploy"], "runtime": HOST_RUNTIME["evaluate"],
            "torch models (teacher, student)": 4 * (teacher_params + onnx.params),
            "ONNX sessions (fp32, int8)": onnx.fp32 + onnx.int8,
            "n-gram baseline": 4 * inp.settings.baseline.buckets * inp.classes,
            # the teacher's forward on the longest batch (scored first, core.order.longest_first)
            "largest batch (teacher forward)": predict_inference_memory(
                inp.teacher, batch, "fp32", "cpu", tokens=max(inp.lengths[x].peak_tokens(inp.teacher) for x in ("val", "test")))
            - 4 * teacher_params + _feeds_bytes(inp, batch),
            "onnxruntime arenas": onnx.arena("deploy_benchmark", 64),
            "per atlas glyph (four glyph-path scorers)": inp.glyphs * HOST_RUNTIME["evaluate_glyph"],
            # two identifiers when installed: restricted to the model's languages, and with all of py3langid's
            "py3langid's models (when installed)": 2 * HOST_RUNTIME["evaluate_py3langid"] if py3langid_installed() else 0}
    host = {k: int(v) for k, v in host.items()}
    common = compared_on_common(inp.facts.labels)
    disk = evaluation_bytes(evaluate, inp.classes, common)
    # each held-out text (three sets, per_language per language) read clean and perturbed by every model
    models = 5 + (2 if py3langid_installed() else 0) + (1 if common else 0)  # + ONNX fp32 on py3langid's languages
    scores = 3 * evaluate.per_language * inp.classes * (1 + len(evaluate.perturbations)) * models
    return StagePlan("evaluate", "heldout", sum(host.values()), sum(disk.values()), time=evaluate_wall_s(scores),
                     detail={"host": host, "disk": disk, "scores": scores})
