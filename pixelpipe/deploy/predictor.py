"""Classify texts with an exported pixelpipe model: load once, predict many (no torch).

    from pixelpipe.deploy.predictor import Predictor
    p = Predictor("results/models/student.onnx")
    p.classify("Guten Morgen")                  # Prediction(label='de', probability=0.99, ...)
    p.predict(["Guten Morgen", "Bonjour"])      # [Prediction(label='de', probability=0.99, ...), ...]

Each text is laid out with the training renderer and the model's own atlas
(render settings, glyph atlas and labels come from the model file's
metadata), so its glyph ids are exactly what training saw. A character the
atlas lacks is drawn with the same fonts and folded into a new table row on
the fly (the fold map ships in the metadata): the model sees what a reader
sees. Texts are sorted by length and run in batches trimmed to their
longest text, so no compute goes to padding. A text that cannot be
classified (empty, or holding a control character such as NUL) gets an error
record; the others are unaffected. A symbol no font of the model draws (an
emoji past the fonts) is left out and the rest of the text classified. What
the model never saw (characters absent from the training texts, characters
left out, texts truncated by the layout, texts shorter than any training
window) is counted in `notices`, for one summary per run.
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..core.arrays import distinct
from ..core.batching import length_batches
from ..core.longtext import MAX_WINDOWS, windowed_logits
from ..data import languages as registry
from ..data.atlas import control_characters, drop_undrawable, undrawable
from ..data.glyphkeys import cell_keys
from ..data.fonts import carry_coverage
from ..data.scripts import ScriptGate, read_glyph_scripts, written_scripts
from . import onnxmodel
from ..core.reliability import LengthTemperatures
from .decide import DEFAULT_THRESHOLD, UNDECIDED, Decider
from . import foldmap
from .foldmap import FoldMap


@dataclass
class Prediction:
    """One input's result: the label and its probability, or why it could not be classified."""

    label: str | None
    probability: float
    top: list[tuple[str, float]] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None
    reason: str | None = None  # why the text gets no language (label None): no letters, none of a known script,
    # or `undecided` (the evidence does not single out one language: can't tell)
    group: str | None = None  # undecided between confusable languages: the registry's group (probability: its sum)
    languages: list[str] = field(default_factory=list)  # the group's languages (those the model may answer)


@dataclass
class Notices:
    """What a run met outside the training distribution, counted (predict prints it once)."""

    unseen: collections.Counter = field(default_factory=collections.Counter)  # character -> texts holding it
    undrawable: collections.Counter = field(default_factory=collections.Counter)  # left out -> texts holding it
    truncated: int = 0
    short: int = 0
    errors: int = 0

    def lines(self, cells: int, min_chars: int) -> list[str]:
        """`cells`: the characters a text is read up to (Predictor.capacity)."""
        out = []
        if self.unseen:
            chars = ", ".join(f"{c!r} ({n})" for c, n in self.unseen.most_common(20))
            more = f" and {len(self.unseen) - 20} more" if len(self.unseen) > 20 else ""
            out.append(f"characters training never saw (texts holding each): {chars}{more}; drawn with the "
                       "model's fonts, but the model has no knowledge of them")
        if self.undrawable:
            chars = ", ".join(f"{c!r} ({n})" for c, n in self.undrawable.most_common(20))
            more = f" and {len(self.undrawable) - 20} more" if len(self.undrawable) > 20 else ""
            out.append(f"characters the model's fonts cannot draw (texts holding each): {chars}{more}; left out, "
                       "the rest of each text classified")
        if self.truncated:
            out.append(f"{self.truncated} text(s) longer than the model reads ({cells} characters: "
                       f"{MAX_WINDOWS} windows of its layout): it read their first {cells}")
        if self.short:
            out.append(f"{self.short} text(s) shorter than any training text or window ({min_chars} characters): "
                       "their predictions are less reliable")
        if self.errors:
            out.append(f"{self.errors} input(s) could not be classified (see their error records)")
        return out


def as_texts(texts: Iterable[str], method: str) -> list[str]:
    """`texts` as a list of str. A str is refused, not iterated: each of its characters would be classified as a
    text of its own, a silent wrong answer; so is anything else that is not a str, by its index."""
    if isinstance(texts, (str, bytes)):
        got = "one str" if isinstance(texts, str) else "bytes"
        raise TypeError(f"Predictor.{method}() takes a list of texts, got {got}: use Predictor.classify(text) for "
                        f"one text (or {method}([text]))")
    out = list(texts)
    bad = next((i for i, t in enumerate(out) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"Predictor.{method}(): texts[{bad}] is {type(out[bad]).__name__}, not str")
    return out


def control_error(text: str) -> str | None:
    """The error record of a text holding a control character (NUL, ESC, ...): the first one, by code point and
    index in the text as given, so the user can find it; None for a text without one."""
    found = control_characters(text)
    if not found:
        return None
    index, char = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"control character {char!r} (U+{ord(char):04X}) at index {index}{more}"


def table_input(session, name: str = onnxmodel.TABLE_NAME) -> Any:
    """The model's `glyph_table` input (or another overridable initializer), None when the graph has none."""
    inputs = [*session.get_inputs(), *session.get_overridable_initializers()]
    return next((i for i in inputs if i.name == name), None)


def table_width(session) -> int | str | None:
    """The width of the model's `glyph_table` input (None when the graph has none)."""
    table = table_input(session)
    return None if table is None else table.shape[1]


def file_key_weights(fold: dict[str, Any], orders: int, pixels: int) -> np.ndarray | None:
    """The glyph keys' weights a file carries (None: an earlier file's, drawn again by cell_keys); ValueError unless
    they are [orders, pixels]."""
    if "key_weights" not in fold:
        return None
    weights = np.array(fold["key_weights"], np.int64)
    if weights.shape != (orders, pixels):
        raise ValueError(f"key weights {weights.shape} do not fit {orders} orders of {pixels}-pixel cells")
    return weights


def check_fold(fold: FoldMap, pixels: int, width: int | str | None, spans: int) -> None:
    """ValueError unless the fold map turns a cell's pixels into rows the model's table takes (`spans` spans of
    the table's width): checked at load, not at the first character the atlas lacks."""
    want = (pixels, spans * width if isinstance(width, int) else fold.matrix.shape[-1])
    if width is None or fold.matrix.shape != want or fold.offset.shape != want[1:]:
        raise ValueError(f"fold map {fold.matrix.shape} + {fold.offset.shape} does not fit the model's glyph table "
                         f"input (width {width}) and {pixels}-pixel cells")


BATCH_SIZE = 128  # texts a model call holds at most ...
MAX_BATCH_CELLS = 1024  # ... and characters (texts x the longest): 16 texts of 64 characters, 128 of 8. The n-gram
# rows a call reads are [texts, n-grams, width] floats, so cells, not texts, set predict's peak memory: 124 against
# 182 MiB with the spare-row table and 1,024-line chunks, at 3 % more time (docs/deploy.md) ...
MIN_BATCH_TEXTS = 16  # ... but at least 16 texts (1,536 characters of 96-character windows): a call's fixed cost
# (~52 us) over 10 windows was 5 % of predict's time on the held-out prose; 2,048 characters for every call instead
# cost 1-4 MiB more peak on the UI strings, whose short texts fill a call (docs/deploy.md)
RUN_CHUNK = 1024  # texts laid out and classified at a time by `predict` (and lines the command reads at a time)
FOLD_CHUNK = foldmap.CHUNK  # glyphs folded into the table at a time (the first fold refolds the whole atlas); the
# fold map's own chunk, so the first fold's products have the export's shapes and its rows come out as exported
SPARE_GLYPHS = 512  # table rows a span kept free for the characters predict folds at run time


class Predictor:
    """An exported pixelpipe model loaded once; `predict` / `predict_proba` over any number of texts."""

    def __init__(self, model_path: str | os.PathLike, threads: int | None = 1, batch_size: int = BATCH_SIZE,
                 languages: Sequence[str] | None = None, threshold: float = DEFAULT_THRESHOLD,
                 max_cells: int | None = MAX_BATCH_CELLS, min_texts: int = MIN_BATCH_TEXTS) -> None:
        """`threshold`: below this probability the answer is a confusable group or no language (`undecided`), see
        deploy/decide.py; 0 always answers the most probable label. A model call holds at most `batch_size` texts
        and `max_cells` characters (texts x the longest; None: no cap), yet `min_texts` texts where it can."""
        from ..data.atlas import GlyphAtlas
        from ..data.render import Renderer, RenderSettings

        self.session = onnxmodel.open_session(model_path, threads, arena=False)  # bounded memory, same speed
        meta = onnxmodel.read_metadata(self.session)
        self.config, fold = meta["config"], meta["fold"]
        self.labels: list[str] = list(self.config["labels"])
        self.orders = int(self.config["encoder"].get("ngram_orders", 0))  # n-gram tables: glyph keys per glyph
        try:
            carry_coverage(meta["fonts"])  # what each face draws, without parsing the fonts (an earlier file: parsed)
            self.settings = RenderSettings.from_section(self.config["render"])
            self.key_weights = file_key_weights(fold, self.orders, self.settings.cell_height * self.settings.cell_width)
            self.atlas = GlyphAtlas.from_dict(self.config["atlas"], self.settings.fonts, self.settings.font_size)
            self.fold = FoldMap(onnxmodel.decode_array(fold["matrix"]), onnxmodel.decode_array(fold["offset"]))
            self.spans = int(fold["spans"])
            # the exported glyphs' scripts (None, an earlier file: classified as texts bring them)
            self.glyph_scripts = read_glyph_scripts(meta["scripts"], len(self.atlas)) \
                if meta["scripts"] is not None else None
            check_fold(self.fold, self.settings.cell_height * self.settings.cell_width, table_width(self.session),
                       self.spans)
        except (TypeError, ValueError, KeyError) as e:
            raise onnxmodel.ModelFileError(f"the model's render settings, atlas or fold map cannot be used: {e}") \
                from None
        self.renderer = Renderer(self.settings, self.atlas)
        self.capacity = self.settings.cells * MAX_WINDOWS  # characters read of a long text (core/longtext.py)
        self.exported = len(self.atlas)  # glyphs the file's own table holds
        self.trained = np.zeros(self.exported, bool)
        self.trained[self.config.get("trained_glyphs", range(self.exported))] = True
        # the atlas and `trained` hold them now: the cells' text, the cluster list and 12,000 ints (0.57 MiB)
        self.config["atlas"] = {k: v for k, v in self.config["atlas"].items() if k not in ("cells", "clusters")}
        self.config.pop("trained_glyphs", None)
        # Once a glyph beyond the export is folded: the span-major table the model's glyph_table input takes, with
        # spare rows (SPARE_GLYPHS a span, zero: no id reads them) that later glyphs are written into in place
        self.table: np.ndarray | None = None
        self.folded = self.exported  # glyphs the table holds
        table = table_input(self.session)  # the int8 file's table: int8 rows and a scale per column
        self.int8_table = table is not None and table.type == "tensor(int8)"
        scale = table_input(self.session, onnxmodel.TABLE_SCALE_NAME)
        if self.int8_table and (scale is None or len(scale.shape) != 1):
            raise onnxmodel.ModelFileError(f"{model_path}: its int8 glyph table has no scale per column (a scale per "
                                           "row: quantized by an earlier version of pixelpipe); quantize it again: "
                                           "snakemake quantize_onnx")
        self.table_scale: np.ndarray | None = None  # the int8 table's column scales (glyph_table_scale)
        self.keys: np.ndarray | None = None  # the glyph_keys input, once a glyph beyond the export is folded
        self.batch_size, self.max_cells, self.min_texts = batch_size, max_cells, min_texts
        self.min_chars = int(self.config.get("text_length", {}).get("min_chars", 0))
        self.notices = Notices()
        self.decider = Decider(self.labels, threshold)
        self.by_length = LengthTemperatures.from_config(self.config)  # short texts' own temperatures (calibrate.py)
        self.gate = self._gate(None)  # which texts get no language: letters of no script the model may answer
        self.allowed: np.ndarray | None = None  # a mask over the labels (set_languages), None = all of them
        if languages is not None:
            self.set_languages(languages)

    def set_languages(self, languages: Sequence[str] | None) -> None:
        """Answer only among `languages` (as py3langid's set_languages): the others get probability 0 and the
        rest is renormalized, as if the model knew only these, and a text whose letters none of them is written
        in (the registry's scripts) gets no language; None restores every label. ValueError names codes the
        model does not know."""
        if languages is None:
            self.allowed, self.gate = None, self._gate(None)
            return
        wanted = list(dict.fromkeys(languages))
        unknown = [lang for lang in wanted if lang not in self.labels]
        if unknown or not wanted:
            raise ValueError(f"languages {unknown or '(none given)'} are not among the model's {len(self.labels)}: "
                             + ", ".join(self.labels))
        self.allowed = np.isin(self.labels, wanted)
        self.gate = self._gate(wanted)

    def _gate(self, languages: Sequence[str] | None) -> ScriptGate | None:
        """The scripts of the training texts' letters, narrowed to those the allowed `languages` are written in.

        Why: renormalizing over de, fr, it would call a Cyrillic text French with confidence; a text none of
        the allowed languages could be written in gets no language, as one in a script training never saw.
        A label the registry lacks (a user corpus's) narrows nothing; a model exported before the scripts
        were recorded answers everything unless languages narrow it."""
        known = self.config.get("scripts")
        iso = registry.scripts(languages) if languages is not None else None
        written = written_scripts(iso) if iso is not None else None
        if written is None:
            gate = ScriptGate(known) if known is not None else None
        else:
            gate = ScriptGate(written if known is None else written & set(known), users="allowed language")
        if gate is not None and self.glyph_scripts is not None:
            gate.preset(*self.glyph_scripts)
        return gate

    @property
    def language_names(self) -> dict[str, str | None]:
        """Label -> English name from the language registry, to show answers to people; None for a label that is
        not a registry code (a user corpus's)."""
        return registry.names(self.labels)

    # ---- glyph ids -----------------------------------------------------------------------
    def layout(self, texts: Sequence[str], capacity: int | None = None, fold: bool = True,
               fit: bool = False) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
        """(atlas glyph ids [N, capacity], characters per text before truncation [N], error per text or None);
        capacity: the layout's cells unless given; `fit`: only the columns the longest text can fill (Renderer.layout);
        `fold` False leaves the glyphs drawn for it to a later `_extend_table`.

        A text holding a control character is an error (it is not writing). Clusters no font draws are left
        out and counted; a text left with nothing is one blank cell, which the script gate calls 'no letters'."""
        errors = [control_error(t) for t in texts]
        texts = [t if e is None else "" for t, e in zip(texts, errors)]
        blank: list[int] = []
        try:
            ids, full = self.renderer.layout(texts, capacity, fit)
        except ValueError:  # a cluster no font draws (rare): leave it out of the texts holding one, lay out again
            texts, blank = self._drop_undrawable(texts)
            ids, full = self.renderer.layout(texts, capacity, fit)
        if blank:
            full[blank] = 1
        errors = [e if e is not None else "empty text" if n == 0 else None for e, n in zip(errors, full.tolist())]
        if fold:
            self._extend_table()
        return ids, full, errors

    def _drop_undrawable(self, texts: Sequence[str]) -> tuple[list[str], list[int]]:
        """The texts without the clusters no font of the model draws (counted in notices, once per text), and
        the indices of those that held nothing else."""
        out, blank = list(texts), []
        for i, text in enumerate(texts):
            if undrawable(text, self.settings.fonts):
                out[i], dropped = drop_undrawable(text, self.settings.fonts)
                self.notices.undrawable.update(set(dropped))
                if not out[i]:
                    blank.append(i)
        return out, blank

    def _extend_table(self) -> None:
        """Fold the glyphs drawn since the export (characters the atlas lacked) into the table's spare rows."""
        n = len(self.atlas)
        if n == self.folded:
            return
        start = 0 if self.table is None else self.folded  # the exported glyphs first, refolded as the export did
        room = self._room(n + 1)
        if self.int8_table and self.table_scale is None:
            self.table_scale = self._file_scale()
        for first in range(start, n, FOLD_CHUNK):  # float temporaries of a chunk, not of the whole table
            cells = self.atlas.cells_from(first, min(first + FOLD_CHUNK, n))
            rows, ids = self._span_rows(cells), 1 + first + np.arange(len(cells))
            at = (np.arange(self.spans)[:, None] * room + ids[None, :]).ravel()  # span-major
            self.table[at] = onnxmodel.int8_columns(rows, self.table_scale) if self.int8_table else rows
            if self.orders:  # the new glyphs' keys, from their pixels (PAD row first, as exported)
                self.keys[ids] = cell_keys(cells, self.orders, self.key_weights)
        self.folded = n

    def _file_scale(self) -> np.ndarray:
        """The int8 file's column scales, from its exported glyphs' rows as quantize computed them (a glyph folded
        later is read at the edge of that range, not allowed to change the rows every text reads)."""
        peak = np.zeros(self.fold.matrix.shape[1] // self.spans, np.float32)
        for first in range(0, self.exported, FOLD_CHUNK):
            cells = self.atlas.cells_from(first, min(first + FOLD_CHUNK, self.exported))
            peak = np.maximum(peak, np.abs(self._span_rows(cells)).max(0))
        return onnxmodel.column_scale(peak)

    def _span_rows(self, cells: np.ndarray) -> np.ndarray:
        """The table rows of atlas cells, span-major ([spans * glyphs, width])."""
        rows = self.fold.rows(cells).reshape(len(cells), self.spans, -1)
        return rows.transpose(1, 0, 2).reshape(self.spans * len(cells), -1)

    def _room(self, rows: int) -> int:
        """Rows a span of the table holds (PAD, glyphs, spare), at least `rows`: past the spare rows, a new table
        with SPARE_GLYPHS more a span, the old rows copied in (one copy, not one per chunk that brings a glyph)."""
        room = 0 if self.table is None else len(self.table) // self.spans
        if rows <= room:
            return room
        grown, width = rows + SPARE_GLYPHS, self.fold.matrix.shape[1] // self.spans
        table = np.zeros((self.spans, grown, width), np.int8 if self.int8_table else np.float32)
        keys = np.zeros((grown, self.orders), np.int64) if self.orders else None
        if self.table is not None:
            table[:, :room] = self.table.reshape(self.spans, room, width)
            if keys is not None:
                keys[:room] = self.keys
        self.table, self.keys = table.reshape(-1, width), keys
        return grown

    def _count(self, ids: np.ndarray, full: np.ndarray, errors: list[str | None]) -> None:
        """Notices of the characters read (up to the capacity): unseen glyphs (texts holding each), truncated, short
        and failed texts."""
        ok = np.array([e is None for e in errors], bool)
        kept = ids if ok.all() else ids[ok]
        rows, cols = np.nonzero(np.arange(ids.shape[1])[None, :] < np.minimum(full, self.capacity)[ok][:, None])
        used = kept[rows, cols]  # the blank past a text's end is not a character of the text
        unseen = (used >= self.exported) | ~self.trained[np.minimum(used, self.exported - 1)]
        if unseen.any():  # each (text, glyph) pair once, then texts per glyph
            ids_span = int(used.max()) + 1
            pairs = distinct(rows[unseen].astype(np.int64) * ids_span + used[unseen])
            glyphs, texts = np.unique(pairs % ids_span, return_counts=True)
            names = self.atlas.clusters
            for g, n in zip(glyphs.tolist(), texts.tolist()):
                self.notices.unseen[names[g]] += n
        self.notices.truncated += int((full[ok] > self.capacity).sum())
        self.notices.short += int((full[ok] < self.min_chars).sum())
        self.notices.errors += int((~ok).sum())

    # ---- inference -----------------------------------------------------------------------
    def logits(self, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Logits [N, classes] of atlas glyph ids, sorted by length into trimmed batches (original order back)."""
        out = np.empty((len(ids), len(self.labels)), np.float32)
        s = self.settings
        for idx in length_batches(lengths, self.batch_size, max_cells=self.max_cells, min_rows=self.min_texts):
            feeds = onnxmodel.deployed_batch(ids[idx], lengths[idx], s.lines, s.line_chars)
            if self.table is not None:
                feeds[onnxmodel.TABLE_NAME] = self.table
            if self.table_scale is not None:
                feeds[onnxmodel.TABLE_SCALE_NAME] = self.table_scale
            if self.keys is not None:
                feeds[onnxmodel.KEYS_NAME] = self.keys
            out[idx] = onnxmodel.run_logits(self.session, feeds)
        if not np.isfinite(out).all():
            raise onnxmodel.ModelFileError("the model produced non-finite logits (NaN or inf): its weights are broken; "
                                           "retrain or re-export it")
        return out

    def probabilities(self, logits: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Softmax over the labels `set_languages` allows (all by default), each text's logits divided by the
        temperature of its length where the model has them."""
        z = logits.astype(np.float64)  # one [N, classes] array, worked in place (a chunk's peak memory)
        if self.by_length is not None:
            self.by_length.apply(z, lengths)
        if self.allowed is not None:
            z[:, ~self.allowed] = -np.inf
        return onnxmodel.softmax(z)

    def _run(self, texts: Sequence[str]) -> tuple[np.ndarray, list[str | None], np.ndarray, list[str | None]]:
        """(probabilities, errors, characters per text, why a text gets no language or None), RUN_CHUNK texts at a
        time: a chunk is laid out as wide as its longest text (up to the capacity), so memory stays bounded for any
        number of texts."""
        parts = [self._run_chunk(texts[i : i + RUN_CHUNK]) for i in range(0, len(texts), RUN_CHUNK)]
        if not parts:
            return np.zeros((0, len(self.labels))), [], np.zeros(0, np.int64), []
        return (np.concatenate([p[0] for p in parts]), [e for p in parts for e in p[1]],
                np.concatenate([p[2] for p in parts]), [r for p in parts for r in p[3]])

    def _run_chunk(self, texts: Sequence[str]) -> tuple[np.ndarray, list[str | None], np.ndarray, list[str | None]]:
        cells = self.settings.cells
        # laid out once, as wide as the longest text is read: a text longer than the layout is read whole, in
        # windows (up to MAX_WINDOWS of them: core/longtext.py)
        ids, full, errors = self.layout(texts, self.capacity, fit=True)
        self._count(ids, full, errors)
        ok = np.array([e is None for e in errors], bool)
        # only the texts that can be classified: an empty row has no token (a `cell` stem has no lead token either),
        # and its NaN logits would fail the finiteness check for the whole batch
        kept, read = ids if ok.all() else ids[ok], np.minimum(full[ok], self.capacity)
        logits = windowed_logits(kept, read, cells, self.logits)
        probs = self.probabilities(logits, np.minimum(read, cells))  # the temperature of a window's length
        if not ok.all():  # NaN rows for the texts that could not be classified
            probs, kept_probs = np.full((len(texts), len(self.labels)), np.nan), probs
            probs[ok] = kept_probs
        reasons: list[str | None] = [None] * len(texts)
        if self.gate is not None and ok.any():
            self.gate.update(self.atlas.clusters)
            for i, why in zip(np.flatnonzero(ok), self.gate.reasons(kept, read)):  # the letters of all it read
                reasons[i] = why
        return probs, errors, full, reasons

    def predict_proba(self, texts: Sequence[str]) -> tuple[np.ndarray, list[str | None], np.ndarray]:
        """(probabilities [N, classes], error per text or None (its row is NaN), characters per text): the model's
        distribution, also for texts `predict` answers with no language. A str is refused (TypeError)."""
        probs, errors, full, _ = self._run(as_texts(texts, "predict_proba"))
        return probs, errors, full

    def predict(self, texts: Sequence[str], top: int = 1) -> list[Prediction]:
        """One Prediction per text (label, probability, the `top` most probable labels, truncation, error); a text
        with no letters, or only letters of scripts no training text used, gets label None and the reason.
        A str is refused (TypeError): `classify` answers one text."""
        probs, errors, full, reasons = self._run(as_texts(texts, "predict"))
        return self.to_predictions(probs, errors, full, top, reasons)

    def classify(self, text: str, top: int = 1) -> Prediction:
        """One text's Prediction, as py3langid's `classify`: exactly what `predict([text])` gives it (batching
        changes no answer)."""
        if not isinstance(text, str):
            raise TypeError(f"Predictor.classify() takes one text (str), got {type(text).__name__}: "
                            "Predictor.predict(texts) answers a list")
        return self.predict([text], top)[0]

    def to_predictions(self, probs: np.ndarray, errors: list[str | None], full: np.ndarray,
                       top: int, reasons: Sequence[str | None] | None = None) -> list[Prediction]:
        top = min(top, len(self.labels) if self.allowed is None else int(self.allowed.sum()))  # no label at p = 0
        best = np.nan_to_num(probs, nan=-1).argmax(1)
        best_p = probs[np.arange(len(best)), best].tolist()
        truncated = (full > self.capacity).tolist()
        # stable: tied probabilities (an int8 model's) rank as argmax picks, so top[0] is always the label
        ranks = np.argsort(-np.nan_to_num(probs, nan=-1), axis=1, kind="stable")[:, :top] if top > 1 else best[:, None]
        decided = self.decider.decide(probs)
        sure, group_p = (decided.label >= 0).tolist(), decided.probability.tolist()  # lists: no numpy scalar per text
        ranked_p = np.take_along_axis(probs, ranks, 1).tolist() if top > 1 else None
        labels, out = self.labels, []
        for i, (err, b) in enumerate(zip(errors, best.tolist())):
            if err is not None:
                out.append(Prediction(None, float("nan"), error=err))
                continue
            if reasons is not None and reasons[i] is not None:
                out.append(Prediction(None, float("nan"), truncated=truncated[i], reason=reasons[i]))
                continue
            ranked = [(labels[j], p) for j, p in zip(ranks[i].tolist(), ranked_p[i])] if ranked_p is not None \
                else [(labels[b], best_p[i])]
            if not sure[i]:  # can't tell: a confusable group, or no language
                group = decided.group[i]
                out.append(Prediction(None, group_p[i], ranked, truncated[i], reason=UNDECIDED,
                                      group=group, languages=self._allowed_members(group)))
                continue
            out.append(Prediction(labels[b], best_p[i], ranked, truncated[i]))
        return out

    def _allowed_members(self, group: str | None) -> list[str]:
        if group is None:
            return []
        return [m for m in self.decider.members(group) if self.allowed is None or self.allowed[self.labels.index(m)]]

    # ---- pre-rendered images (the pixel path) -------------------------------------------
    def image_glyphs(self, images: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Glyph ids and lengths of uint8 images [C, H, W] at the model's size: each cell is matched to the atlas,
        an unknown cell becomes a new glyph folded from its own pixels, so any image is the pixel path exactly."""
        s = self.settings
        by_bytes = {cell.tobytes(): i for i, cell in enumerate(self.atlas.cells)}
        rows, lengths = [], []
        for image in images:
            cells = image[0].reshape(s.lines, s.cell_height, s.line_chars, s.cell_width).transpose(0, 2, 1, 3)
            cells = np.ascontiguousarray(cells).reshape(-1, s.cell_height, s.cell_width)
            ids = np.array([by_bytes.get(c.tobytes(), -1) for c in cells])
            for k in np.flatnonzero(ids < 0):
                key = cells[k].tobytes()
                if key not in by_bytes:
                    by_bytes[key] = self.atlas.add_cell(f"\ufffc{len(self.atlas)}", cells[k])
                ids[k] = by_bytes[key]
            ink = np.flatnonzero(cells.reshape(len(cells), -1).max(1) > 0)
            rows.append(ids)
            lengths.append(int(ink[-1]) + 1 if len(ink) else 1)
        self._extend_table()
        return np.stack(rows), np.asarray(lengths, np.int64)

    def predict_images(self, images: Sequence[np.ndarray], top: int = 1) -> list[Prediction]:
        ids, lengths = self.image_glyphs(images)
        probs = self.probabilities(self.logits(ids, lengths), lengths)
        return self.to_predictions(probs, [None] * len(ids), lengths, top)
