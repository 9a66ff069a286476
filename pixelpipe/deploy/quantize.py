"""int8 ONNX: onnxruntime's pre-processing, then static QDQ quantization, activation ranges read on cache images.

Why static and not dynamic: dynamic quantization computes activation scales
at run time and quantizes only the weights of MatMul/Gemm ahead of time, so
every matmul pays a min/max pass and a (de)quantize; onnxruntime's own BERT
example gets about 1.3x from it. Static QDQ fixes activation scales from the
ranges the activations take on real inputs (train cache rows), so onnxruntime
can fuse Q -> op -> DQ into integer kernels (QLinearConv, QLinearMatMul,
QGemm). Per-channel weight scales keep the accuracy of the narrow
patch-embedding and head layers. `quant_pre_process` (symbolic shape
inference + onnxruntime's basic graph optimizations) first folds constants
and fuses what it can, so fewer tensors need Q/DQ pairs.

The rule fails, with the numbers, when int8 test accuracy falls more than the
configured number of points below the fp32 ONNX model's.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..config.settings import Section
from ..core import io
from . import onnxmodel


class AccuracyDropError(RuntimeError):
    """The quantized model lost more accuracy than allowed."""


class CacheRangeReader:
    """The inputs static quantization reads activation ranges from: the first `samples` rows of cache shards.

    Real training rows, in order (the cache is already shuffled by the corpus
    split), fed in the exact form the deployed model takes (pixelpipe.deploy.onnxmodel.deployed_batch).
    """

    def __init__(self, shard_paths: Sequence[str | os.PathLike], samples: int, batch_size: int = 64) -> None:
        if samples < 1:
            raise ValueError(f"quantize.range_samples must be >= 1, got {samples}")
        self.shard_paths = [Path(p) for p in shard_paths]
        self.samples, self.batch_size = samples, batch_size
        self.used = 0
        self._it = self._batches()

    def _batches(self) -> Iterator[dict[str, np.ndarray]]:
        left = self.samples
        from ..data.render import verify_shards

        for path in self.shard_paths:
            render = verify_shards(path.parent, [path.name])["render"]
            shard = np.load(path, mmap_mode="r") if path.stat().st_size > 256 else np.load(path)
            for i in range(0, len(shard), self.batch_size):
                if left <= 0:
                    return
                block = np.asarray(shard[i : i + min(self.batch_size, left)])
                left -= len(block)
                self.used += len(block)
                yield onnxmodel.deployed_batch(block["glyphs"], block["length"], render["lines"], render["line_chars"])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:
        self.used = 0
        self._it = self._batches()


def _as_reader(reader: CacheRangeReader):
    """Wrap in onnxruntime's CalibrationDataReader base class (imported lazily: heavy)."""
    # "Calibration" is onnxruntime's name for reading activation ranges (CalibrationDataReader, CalibrationMethod,
    # calibrate_method); in pixelpipe calibration means fitting predicted probabilities (train/calibrate.py).
    from onnxruntime.quantization import CalibrationDataReader

    class _Reader(CalibrationDataReader):
        def get_next(self):
            return reader.get_next()

        def rewind(self):
            reader.rewind()

    return _Reader()


@dataclass
class QuantizeSettings(Section):
    """The `quantize` section (defaults and meaning: the schema)."""

    SECTION = "quantize"

    method: str  # static | dynamic
    range_samples: int
    range_method: str  # minmax | entropy | percentile
    per_channel: bool
    table_rows: str  # int4 | int8 | fp32: the n-gram table's rows in the int8 file
    glyph_table: str  # int8 | fp32: the folded glyph table in the int8 file
    activation_type: str
    weight_type: str
    op_types: tuple[str, ...]
    reduce_range: bool
    activation_matmuls: bool
    max_accuracy_drop: float  # points

    def __post_init__(self) -> None:
        self.op_types = tuple(self.op_types)


def activation_matmuls(model_path: str | os.PathLike) -> list[str]:
    """MatMul nodes with no weight input (attention's QK^T and AV).

    Quantizing them buys nothing on CPU: the matrices are tiny per head, so
    int8 packing costs more than it saves, and their Q/DQ pairs make
    onnxruntime turn the softmax between them into the slow QLinearSoftmax.
    """
    import onnx

    model = onnx.load(str(model_path))
    weights = {t.name for t in model.graph.initializer}
    weights |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in model.graph.node
            if n.op_type == "MatMul" and not any(i in weights for i in n.input)]


def span_products(model_path: str | os.PathLike) -> list[str]:
    """The MatMuls by the span-sum matrix (fold.span_sum): left in fp32, where int8_glyph_table folds the glyph
    table's column scales into that matrix (its entries are 0 and 1: nothing to gain from int8)."""
    import onnx

    return [n.name for n in onnx.load(str(model_path)).graph.node
            if n.op_type == "MatMul" and onnxmodel.SPAN_SUM_NAME in n.input]


TABLE_NAME = "ngrams.table.weight"  # the exported n-gram table (model/ngrams.py GlyphNgrams.table)


def int4_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int4 values as int8 in [-8, 7], float32 scale per row [R, 1], float16-exact).

    Each row's scale is the one of 11 clips (0.5-1.0 of max |value| / 7) with the least squared error: at 4 bits
    rounding, not the rare large value, decides the error. Measured on the default student's held-out sets:
    93.34 % against 93.27 for max |value| / 7 (fp32 93.36; blocks of 32 or 16 values: docs/benchmarks.md)."""
    top = np.abs(rows).max(-1, keepdims=True).astype(np.float32) / 7
    # An all-zero row reads zeros at any scale; a small one (2^-15 after the clip search) keeps the rounding of the
    # int4 mean's difference of sums small.
    top[top == 0] = 2.0 ** -14
    best_err, scale = None, top
    for f in np.linspace(0.5, 1.0, 11):
        s = np.maximum((top * f).astype(np.float16).astype(np.float32), 2.0 ** -24)  # no scale 0 (fp16 underflow)
        err = np.square(np.clip(np.round(rows / s), -8, 7) * s - rows).sum(-1, keepdims=True)
        scale = s if best_err is None else np.where(err < best_err, s, scale)
        best_err = err if best_err is None else np.minimum(err, best_err)
    return np.clip(np.round(rows / scale), -8, 7).astype(np.int8), scale


def _mean_reader(graph: Any, gather: Any) -> Any:
    """The MatMul(weights [B, 1, N], rows) that alone reads the rows `gather` takes (axis 0) from a table (the
    masked mean), else None."""
    from onnx import helper

    axis = next((helper.get_attribute_value(a) for a in gather.attribute if a.name == "axis"), 0)
    out = gather.output[0]
    reader = _sole_reader(graph, out)
    if axis == 0 and reader is not None and reader.op_type == "MatMul" and list(reader.input).index(out) == 1:
        return reader
    return None


def _sole_reader(graph: Any, name: str) -> Any:
    """The one node that reads tensor `name`, None if several do or it is also a graph output."""
    readers = [n for n in graph.node if name in n.input]
    return readers[0] if len(readers) == 1 and name not in {o.name for o in graph.output} else None


def _int4_packed(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 [R, C/2]: value j + 8 in the low nibble, value j + C/2 + 8 in the high, fp32 scale per row [R, 1])."""
    q, scale = int4_rows(rows)
    u, half = (q + 8).astype(np.uint8), rows.shape[1] // 2
    return u[:, :half] | (u[:, half:] << 4), scale


def _scaled_weights(name: str, ids: str, o: str, w: str) -> list[Any]:
    """w * the gathered rows' scales ([B, 1, N]): a mean over quantized rows scales its weights, not the rows."""
    from onnx import helper

    return [helper.make_node("Gather", [name + ".scale", ids], [o + ".scale"], axis=0),
            helper.make_node("Transpose", [o + ".scale"], [o + ".scale.t"], perm=[0, 2, 1]),
            helper.make_node("Mul", [w, o + ".scale.t"], [o + ".w"])]


def _int4_mean_nodes(gather: Any, mean: Any) -> list[Any]:
    """The nodes that compute `mean` (MatMul(w, Gather(table, ids))) from the packed rows and their scales.

    A byte P = 16 (high + 8) + (low + 8). DequantizeLinear(P, 1, zero point 8) = P - 8 as floats, and
    QuantizeLinear of that at a scale of 255/16 rounds it to high + 8 exactly ((P - 8) / (255/16) is within 0.498
    of high + 8; the saturation takes high = -8 with low < 0 from -1 to 0): both are vectorized where
    onnxruntime's BitwiseAnd over the bytes was not (docs/benchmarks.md). mean(low) = mean(P - 8) - 16 mean(high + 8);
    mean(high) = mean(high + 8) - 8 sum(w)."""
    import onnx
    from onnx import helper

    name, ids, o, w = gather.input[0], gather.input[1], gather.output[0], mean.input[0]
    return [helper.make_node("Gather", [name + ".int4", ids], [o + ".packed"], axis=0),
            helper.make_node("DequantizeLinear", [o + ".packed", "pp.one", "pp.u8"], [o + ".bytes8"]),
            helper.make_node("QuantizeLinear", [o + ".bytes8", "pp.high_step", "pp.u0"], [o + ".high8"]),
            helper.make_node("Cast", [o + ".high8"], [o + ".high8.float"], to=onnx.TensorProto.FLOAT),
            *_scaled_weights(name, ids, o, w),
            helper.make_node("MatMul", [o + ".w", o + ".bytes8"], [o + ".mean.bytes8"]),
            helper.make_node("MatMul", [o + ".w", o + ".high8.float"], [o + ".mean.high8"]),
            helper.make_node("Mul", [o + ".mean.high8", "pp.c16"], [o + ".mean.high8x16"]),
            helper.make_node("Sub", [o + ".mean.bytes8", o + ".mean.high8x16"], [o + ".mean.low"]),
            helper.make_node("ReduceSum", [o + ".w", "pp.last"], [o + ".wsum"], keepdims=1),
            helper.make_node("Mul", [o + ".wsum", "pp.c8"], [o + ".offset"]),
            helper.make_node("Sub", [o + ".mean.high8", o + ".offset"], [o + ".mean.high"]),
            helper.make_node("Concat", [o + ".mean.low", o + ".mean.high"], [mean.output[0]], axis=-1)]


def _int8_mean_nodes(gather: Any, mean: Any) -> list[Any]:
    """`mean` (MatMul(w, Gather(table, ids))) as MatMul(w * scales, Cast(Gather(int8 rows))): no dequantized copy
    of the rows."""
    import onnx
    from onnx import helper

    name, ids, o, w = gather.input[0], gather.input[1], gather.output[0], mean.input[0]
    return [helper.make_node("Gather", [name + ".int8", ids], [o + ".int8"], axis=0),
            helper.make_node("Cast", [o + ".int8"], [o + ".float"], to=onnx.TensorProto.FLOAT),
            *_scaled_weights(name, ids, o, w),
            helper.make_node("MatMul", [o + ".w", o + ".float"], [mean.output[0]])]


def _node_name(node: Any) -> str:
    """A base for the names of the nodes that replace `node`: its name, or its output's where it has none."""
    return node.name or node.output[0]


def _gather_cast(gather: Any, data: str) -> list[Any]:
    """Gather(table, ids) as Gather(`data`: int8 rows) -> Cast to float (output: the gather's output + ".float")."""
    import onnx
    from onnx import helper

    ids, out, name = gather.input[1], gather.output[0], _node_name(gather)
    axis = next((helper.get_attribute_value(a) for a in gather.attribute if a.name == "axis"), 0)
    return [helper.make_node("Gather", [data, ids], [out + ".int8"], name=name + ".int8", axis=axis),
            helper.make_node("Cast", [out + ".int8"], [out + ".float"], name=name + ".cast", to=onnx.TensorProto.FLOAT)]


def _int8_gather_nodes(gather: Any, data: str, scale: str) -> list[Any]:
    """Gather(table, ids) as Gather(`data`: int8 rows) -> Cast -> Mul(Gather(`scale`: the rows' scales))."""
    from onnx import helper

    ids, out, name = gather.input[1], gather.output[0], _node_name(gather)
    axis = next((helper.get_attribute_value(a) for a in gather.attribute if a.name == "axis"), 0)
    return [*_gather_cast(gather, data),
            helper.make_node("Gather", [scale, ids], [out + ".scale"], name=name + ".scale", axis=axis),
            helper.make_node("Mul", [out + ".float", out + ".scale"], [out], name=name + ".dequantize")]


def _int8_column_gather_nodes(gather: Any, data: str, scale: str, scale_here: bool) -> list[Any]:
    """Gather(table, ids) as Gather(`data`: int8 rows) -> Cast, then, if `scale_here`, Mul(`scale`: per column)."""
    from onnx import helper

    out = gather.output[0]
    scaled = [helper.make_node("Mul", [out + ".float", scale], [out], name=_node_name(gather) + ".dequantize")]
    return _gather_cast(gather, data) + (scaled if scale_here else [])


def table_rows(path: str | os.PathLike, bits: int) -> dict[str, str]:
    """Store the n-gram tables of the ONNX file at `path` at `bits` (8 or 4) per value, in place; each table's
    name -> the form it got ("int4" or "int8").

    onnxruntime's quantizer leaves a Gather's data in fp32, and the table is nearly all of the file. A lookup
    reads a few hundred rows per text, so the dequantization is paid only on the rows a text reads.
    8 bits: Gather(int8 rows) -> Cast -> Mul(Gather(row scales)), 4x fewer bytes than fp32; where the rows are
    read by the masked mean alone (MatMul(w, rows)), MatMul(w * scales, Cast(int8 rows)) instead: no dequantized
    copy of the rows.
    4 bits: one byte holds value j of a row (low nibble) and value j + C/2 (high), plus 8; the masked mean
    reading the rows (MatMul(w, rows)) becomes MatMul(w * scales, nibbles) - 8 * sum(w * scales), once for each
    half of the row: 8x fewer bytes and no dequantized copy of the rows. The nibbles come apart by a rounding
    (`_int4_mean_nodes`), which spares a BitShift or BitwiseAnd over the gathered rows.
    (onnxruntime's GatherBlockQuantized reads int4 too, but ran 13x slower than the int8 path here: 18.7 against
    1.4 ms a batch of 64 texts.)
    A table read otherwise than by one such mean, or whose width is odd, stays at 8 bits.
    """
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    graph = proto.graph
    tables = {t.name: t for t in graph.initializer if t.name.endswith(TABLE_NAME) and len(t.dims) == 2
              and t.data_type == onnx.TensorProto.FLOAT}
    gathers = [n for n in graph.node if n.op_type == "Gather" and n.input[0] in tables]
    means = {id(n): _mean_reader(graph, n) for n in gathers}
    four = {name for name, t in tables.items() if bits == 4 and t.dims[1] % 2 == 0}
    read_by_means = set(tables) - {n.input[0] for n in gathers if means[id(n)] is None}
    four &= read_by_means  # every reader of a 4-bit table must be a mean
    replaced = {id(means[id(n)]) for n in gathers if n.input[0] in read_by_means}
    nodes = []
    consts = {"pp.one": np.array(1, np.float32), "pp.u8": np.array(8, np.uint8), "pp.u0": np.array(0, np.uint8),
              "pp.high_step": np.array(255 / 16, np.float32), "pp.c16": np.array(16, np.float32),
              "pp.c8": np.array(8, np.float32), "pp.last": np.array([-1], np.int64)}
    for node in graph.node:
        if id(node) in means:
            name = node.input[0]
            nodes += _int4_mean_nodes(node, means[id(node)]) if name in four else \
                _int8_mean_nodes(node, means[id(node)]) if name in read_by_means else \
                _int8_gather_nodes(node, name + ".int8", name + ".scale")
        elif id(node) not in replaced:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    if four:
        graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    for name, table in tables.items():
        rows = numpy_helper.to_array(table)
        graph.initializer.remove(table)
        data, scale = _int4_packed(rows) if name in four else onnxmodel.int8_rows(rows)
        graph.initializer.extend([numpy_helper.from_array(data, name + (".int4" if name in four else ".int8")),
                                  numpy_helper.from_array(scale, name + ".scale")])
    onnx.save(proto, str(path))
    return {name: "int4" if name in four else "int8" for name in sorted(tables)}


def int8_glyph_table(path: str | os.PathLike) -> bool:
    """Store the ONNX file's glyph table input (an overridable initializer) as int8 with a float32 scale per column,
    a second overridable input (onnxmodel.TABLE_SCALE_NAME, [width]), in place; False if the file has none.

    The table's rows are read by Gathers, which the quantizer leaves in fp32: each becomes Gather(int8) -> Cast.
    Where the rows feed only the product that sums the spans (fold.span_sum), the scales go into that product's
    matrix (a scale per column commutes with the sum over spans: no product per gathered value); elsewhere they
    multiply right after the Cast. A scale per row would have to multiply every gathered row before that sum,
    broadcast over the width: a quarter of onnxruntime's time in the int8 file, docs/benchmarks.md. predict still
    extends the table at run time, quantizing the rows it folds with the same scales (onnxmodel.int8_columns)."""
    import onnx
    from onnx import helper, numpy_helper

    name, scale_name = onnxmodel.TABLE_NAME, onnxmodel.TABLE_SCALE_NAME
    proto = onnx.load(str(path))
    graph = proto.graph
    init = next((t for t in graph.initializer if t.name == name and t.data_type == onnx.TensorProto.FLOAT), None)
    inp = next((i for i in graph.input if i.name == name), None)
    if init is None or inp is None:
        return False
    users = [n for n in graph.node if name in n.input and n.op_type != "Shape"]  # its shape is the same in int8
    if any(n.op_type != "Gather" or list(n.input).index(name) != 0 for n in users):
        raise ValueError(f"{path}: the glyph table feeds {sorted({n.op_type for n in users})}, not only Gathers "
                         "and Shape")
    if any(next((a.i for a in n.attribute if a.name == "axis"), 0) not in (0, -2) for n in users):
        raise ValueError(f"{path}: the glyph table is gathered along its columns: a scale per column needs rows")
    nodes = _int8_table_nodes(graph, users, init.dims[1])
    del graph.node[:]
    graph.node.extend(nodes)
    table = numpy_helper.to_array(init)
    scale = onnxmodel.column_scale(np.abs(table).max(0))
    graph.initializer.remove(init)
    graph.initializer.extend([numpy_helper.from_array(onnxmodel.int8_columns(table, scale), name),
                              numpy_helper.from_array(scale, scale_name)])
    inp.type.tensor_type.elem_type = onnx.TensorProto.INT8
    graph.input.append(helper.make_tensor_value_info(scale_name, onnx.TensorProto.FLOAT, [table.shape[1]]))
    onnx.save(proto, str(path))
    return True


SCALED_SPAN_SUM = onnxmodel.SPAN_SUM_NAME + ".scaled"


def _int8_table_nodes(graph: Any, gathers: list[Any], width: int) -> list[Any]:
    """The graph's nodes with each of the table's `gathers` reading int8 rows, scaled in the span product that
    alone reads them (its Reshape reads the Cast, its MatMul the scaled matrix) or right after the Cast."""
    table, scale = onnxmodel.TABLE_NAME, onnxmodel.TABLE_SCALE_NAME
    flats = {id(g): _span_product(graph, g) for g in gathers}
    flattened = {id(f): g for g in gathers if (f := flats[id(g)]) is not None}  # Reshape -> the Gather it reads
    products = {f.output[0] for f in flats.values() if f is not None}  # what the span products read
    nodes: list[Any] = []
    for node in graph.node:
        if id(node) in flats:
            nodes += _int8_column_gather_nodes(node, table, scale, scale_here=flats[id(node)] is None)
            continue
        if id(node) in flattened:  # the Reshape reads the unscaled Cast; the matrix takes the scales, once
            node.input[0] = flattened[id(node)].output[0] + ".float"
            if not any(n.output[0] == SCALED_SPAN_SUM for n in nodes):
                nodes += _scaled_span_sum_nodes(graph, scale, width)
        elif node.op_type == "MatMul" and node.input[0] in products:
            node.input[1] = SCALED_SPAN_SUM
        nodes.append(node)
    return nodes


def _span_product(graph: Any, gather: Any) -> Any:
    """The Reshape that alone reads `gather`'s rows [..., S, W] when only a MatMul by the span-sum matrix reads
    it (fold.span_sum: rows flattened to [..., S * W] times [S * W, W]), else None."""
    reshape = _sole_reader(graph, gather.output[0])
    if reshape is None or reshape.op_type != "Reshape":
        return None
    product = _sole_reader(graph, reshape.output[0])
    if product is None or product.op_type != "MatMul" or list(product.input) != [reshape.output[0],
                                                                                 onnxmodel.SPAN_SUM_NAME]:
        return None
    return reshape if any(t.name == onnxmodel.SPAN_SUM_NAME for t in graph.initializer) else None


def _scaled_span_sum_nodes(graph: Any, scale: str, width: int) -> list[Any]:
    """The span-sum matrix [S * W, W] times the column scales [W] tiled over its S blocks of rows: the int8 rows'
    product with it is the sum of the scaled rows."""
    from onnx import helper, numpy_helper

    matrix = next(t for t in graph.initializer if t.name == onnxmodel.SPAN_SUM_NAME)
    repeats, axis, tiled = (SCALED_SPAN_SUM + suffix for suffix in (".repeats", ".axis", ".tiled"))
    graph.initializer.extend([numpy_helper.from_array(np.array([matrix.dims[0] // width], np.int64), repeats),
                              numpy_helper.from_array(np.array([1], np.int64), axis)])
    return [helper.make_node("Tile", [scale, repeats], [tiled], name=tiled),
            helper.make_node("Unsqueeze", [tiled, axis], [tiled + ".column"], name=tiled + ".column"),
            helper.make_node("Mul", [onnxmodel.SPAN_SUM_NAME, tiled + ".column"], [SCALED_SPAN_SUM],
                             name=SCALED_SPAN_SUM)]


def _qtype(name: str):
    from onnxruntime.quantization import QuantType

    return {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8}[name]


def quantize_file(fp32_path: str | os.PathLike, out_path: str | os.PathLike, settings: QuantizeSettings,
                  range_shards: Sequence[str | os.PathLike], log: Callable[[str], Any] = print) -> dict[str, Any]:
    """fp32 ONNX -> pre-processed -> int8 ONNX at `out_path` (metadata carried over); returns what was done."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    out_path = Path(out_path)
    info: dict[str, Any] = {"settings": asdict(settings)}
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".quantize-") as tmp:
        pre = Path(tmp) / "preprocessed.onnx"
        # ONNX shape inference only: onnxruntime's symbolic one fails on the masked ReduceMax (axes as an input)
        quant_pre_process(str(fp32_path), str(pre), skip_optimization=False, skip_symbolic_shape=True)
        q_tmp = Path(tmp) / out_path.name
        if settings.method == "static":
            reader = CacheRangeReader(range_shards, settings.range_samples)
            exclude = ([] if settings.activation_matmuls else activation_matmuls(pre)) + span_products(pre)
            info["excluded_nodes"] = exclude
            quantize_static(
                str(pre), str(q_tmp), _as_reader(reader), quant_format=QuantFormat.QDQ,
                op_types_to_quantize=list(settings.op_types), per_channel=settings.per_channel,
                reduce_range=settings.reduce_range, activation_type=_qtype(settings.activation_type),
                weight_type=_qtype(settings.weight_type), nodes_to_exclude=exclude,
                calibrate_method={"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
                                  "percentile": CalibrationMethod.Percentile}[settings.range_method],
            )
            info["range_samples_used"] = reader.used
            log(f"static QDQ quantization, activation ranges read on {info['range_samples_used']} train images "
                f"({settings.range_method}, per_channel={settings.per_channel}); "
                f"{len(exclude)} activation-by-activation or span-sum MatMul(s) left in fp32")
        elif settings.method == "dynamic":
            quantize_dynamic(str(pre), str(q_tmp), op_types_to_quantize=list(settings.op_types),
                             per_channel=settings.per_channel, reduce_range=settings.reduce_range,
                             weight_type=_qtype(settings.weight_type), nodes_to_exclude=span_products(pre))
            log("dynamic quantization (weights int8, activations quantized at run time)")
        else:
            raise ValueError(f"quantize.method must be 'static' or 'dynamic', got {settings.method!r}")
        if settings.table_rows != "fp32":
            info["table_rows"] = tables = table_rows(q_tmp, int(settings.table_rows[3:]))
            log("n-gram table rows: " + (", ".join(f"{k} {v}" for k, v in tables.items()) or "none (no n-gram tables)"))
        if settings.glyph_table == "int8":
            info["int8_glyph_table"] = int8_glyph_table(q_tmp)
            log(f"glyph table as int8 with a scale per column: {'yes' if info['int8_glyph_table'] else 'none'}")
        onnxmodel.copy_metadata(fp32_path, q_tmp)
        import onnx

        onnx.checker.check_model(str(q_tmp))
        io.publish(q_tmp, out_path)
    return info


def quantize_and_verify(fp32_path: str | os.PathLike, out_path: str | os.PathLike, settings: QuantizeSettings,
                        range_shards: Sequence[str | os.PathLike], test_split_dir: str | os.PathLike,
                        threads: int | None = None, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Quantize, then measure fp32 and int8 test accuracy; `out_path` survives only if the drop is allowed."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".int8-") as tmp:
        q_tmp = Path(tmp) / out_path.name
        info = quantize_file(fp32_path, q_tmp, settings, range_shards, log)
        fp32 = onnxmodel.accuracy(onnxmodel.open_session(fp32_path, threads), test_split_dir)
        if not fp32["samples"]:
            raise AccuracyDropError(f"int8 model {out_path} not checked: the test split {test_split_dir} has no images")
        int8 = onnxmodel.accuracy(onnxmodel.open_session(q_tmp, threads), test_split_dir)
        drop = 100.0 * (fp32["accuracy"] - int8["accuracy"])
        info.update(fp32_test_accuracy=fp32["accuracy"], int8_test_accuracy=int8["accuracy"],
                    test_samples=int8["samples"], accuracy_drop_points=drop,
                    fp32_bytes=Path(fp32_path).stat().st_size, int8_bytes=q_tmp.stat().st_size)
        msg = (f"test accuracy fp32 {100 * fp32['accuracy']:.2f} % -> int8 {100 * int8['accuracy']:.2f} % "
               f"(drop {drop:.2f} points, allowed {settings.max_accuracy_drop:g}; {int8['samples']} test samples); "
               f"size {info['fp32_bytes']:,} -> {info['int8_bytes']:,} bytes")
        log(msg)
        if not drop <= settings.max_accuracy_drop:  # NaN fails too
            raise AccuracyDropError(f"int8 model {out_path} rejected: {msg}")
        io.publish(q_tmp, out_path)
    return info
