"""Every model the run builds as one callable, texts -> predicted labels, for the held-out evaluation.

The torch models read text as training did: laid out with their own render
settings and atlas (characters the atlas lacks are drawn, and the model's
atlas extended), texts sorted by length and batched trimmed, a text longer
than the layout in windows as the Predictor reads it (core/longtext.py). The ONNX files
go through the deployed Predictor, exactly as a user's predict call. The
n-gram baseline reads the text itself. The reference they are compared with,
py3langid (optional), is in pixelpipe.evaluate.reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..core.batching import length_batches, trimmed_width
from ..core.longtext import MAX_WINDOWS, windowed_logits
from ..data.atlas import GlyphAtlas
from ..data.render import Renderer, RenderSettings
from ..model.checkpoint import load_model
from .accuracy import COMMON


CHUNK = 4096  # texts laid out at a time (up to MAX_WINDOWS x cells columns each)


class TorchScorer:
    """A trained teacher or student (model.safetensors + config.json) on its glyph path."""

    def __init__(self, model_dir: str | Path, batch_size: int = 256) -> None:
        self.model, config = load_model(model_dir)
        self.model.eval()
        self.labels = list(config["labels"])
        self.settings = RenderSettings.from_section(config["render"])
        self.atlas = GlyphAtlas.from_dict(config["atlas"], self.settings.fonts, self.settings.font_size)
        self.renderer, self.batch_size = Renderer(self.settings, self.atlas), batch_size

    @torch.inference_mode()
    def __call__(self, texts: list[str]) -> list[str]:
        cells = self.settings.cells
        capacity = cells * MAX_WINDOWS  # a long text read whole in windows, as the deployed Predictor reads it
        out: list[str] = []
        for start in range(0, len(texts), CHUNK):  # a chunk is laid out as wide as its longest text
            ids, full = self.renderer.layout(texts[start : start + CHUNK], capacity, fit=True)
            logits = windowed_logits(ids, np.minimum(full, capacity), cells, self._logits)
            out += [self.labels[p] for p in logits.argmax(1)]
        return out

    def _logits(self, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if len(self.atlas) > self.model.atlas.shape[0]:  # characters the atlas lacked were drawn: the model sees them
            self.model.set_atlas(torch.from_numpy(self.atlas.cells.copy()))
        s = self.settings
        out = np.empty((len(ids), len(self.labels)), np.float32)
        for idx in length_batches(lengths, self.batch_size):
            t = trimmed_width(int(lengths[idx].max()), s.line_chars, s.lines, ids.shape[1])
            glyphs = torch.from_numpy(ids[idx, :t].astype(np.int64))
            out[idx] = self.model(glyphs, torch.from_numpy(lengths[idx].astype(np.int64)))["logits"].float().numpy()
        return out


class OnnxScorer:
    """An exported ONNX model through the deployed Predictor (what `python -m pixelpipe.predict` runs)."""

    def __init__(self, path: str | Path, batch_size: int = 64, threads: int | None = 1) -> None:
        from ..deploy.predictor import Predictor

        # forced choice (threshold 0): accuracy is scored as every model is, on its most probable label; what the
        # can't-tell threshold trades is measured from the probabilities (calibration.heldout_calibration)
        self.predictor = Predictor(path, threads, batch_size, threshold=0.0)

    def __call__(self, texts: list[str]) -> list[str]:
        return [p.label or "" for p in self.predictor.predict(texts)]

    def proba(self, texts: list[str]) -> "np.ndarray":
        """Probabilities [N, classes] (NaN rows for texts that cannot be classified)."""
        return self.predictor.predict_proba(texts)[0]


class SharedLanguagesScorer:
    """The deployed model answering only among `languages` (Predictor.set_languages, what `predict --languages`
    does), counted on the texts of those languages alone: the model as it compares with py3langid restricted to
    the same languages (issue 30: both restricted to the languages they share). Shares the ONNX scorer's session."""

    scope = COMMON

    def __init__(self, onnx: OnnxScorer, languages: Sequence[str]) -> None:
        self.predictor, self.languages = onnx.predictor, list(languages)

    def __call__(self, texts: list[str]) -> list[str]:
        self.predictor.set_languages(self.languages)
        try:
            return [p.label or "" for p in self.predictor.predict(texts)]
        finally:
            self.predictor.set_languages(None)


class BaselineScorer:
    """The character n-gram baseline trained on the same corpus."""

    def __init__(self, path: str | Path, labels: Sequence[str]) -> None:
        from ..train.baseline import load_baseline

        self.model, self.labels = load_baseline(path), list(labels)

    def __call__(self, texts: list[str]) -> list[str]:
        from ..train.baseline import predict

        return [self.labels[p] for p in predict(self.model, texts)]
