"""Tiny deployable students over a real glyph atlas (drawn from real text), exported in seconds.

Shared by the deploy, predict and fault tests: a model whose atlas is the charset of a few real texts
(firefox strings of all 19 languages plus hand-picked multilingual ones), random weights moved away
from their initialization so every path carries real numbers, and the config a trained model's
config.json carries (labels, render settings, atlas, encoder, text lengths, trained glyphs).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from pixelpipe.data.atlas import GlyphAtlas
from pixelpipe.data.charset import build_charset, text_clusters
from pixelpipe.data.render import Renderer, RenderSettings
from pixelpipe.data.sources import FAKER_LOCALES, TEXT_DIR
from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder

# The models are tiny: one thread avoids spin-wait oversubscription on a shared, busy CPU (as tests/_engine_utils.py).
torch.set_num_threads(1)

FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")
LABELS = ["ar", "de", "el", "ru", "vi"]
# Vietnamese (two marks on a letter), right-to-left, a Persian ZWNJ cluster, Armenian, Greek, Cyrillic, Turkic.
MULTILINGUAL = ["Xin chào thế giới", "مرحبا بالعالم", "שלום עולם", "می‌خواهم", "Բարև աշխարհ", "Καλημέρα σε όλους",
                "Привет, как дела?", "Größe ändern", "Ağ bağlantısı"]
TABLES = dict(ngram_orders=3, ngram_bits=10, ngram_dim=8)  # small hashed glyph n-gram tables (the deployed form has them)
UNSEEN = "ʃ"  # drawable by the fonts, absent from every text above (the tests check): a character to fold on the fly
UNTRAINED = "ß"  # in the atlas but left out of `trained_glyphs`: a glyph the model was never trained on


@functools.cache
def real_texts() -> tuple[str, ...]:
    """Two firefox strings per language (the first of each) and the multilingual ones: real text, fixed."""
    import pandas as pd

    strings = pd.read_parquet(TEXT_DIR / "firefox.parquet", columns=["text", "label"])
    strings = strings[strings["label"].isin(FAKER_LOCALES)]  # the first 19 languages: scripts the DejaVu faces draw
    return tuple(strings.groupby("label").head(2)["text"].tolist()) + tuple(MULTILINGUAL)


def render_settings(lines: int = 1, line_chars: int = 24, channels: int = 1) -> RenderSettings:
    return RenderSettings.from_section(dict(fonts=FONTS, font_size=12, cell_height=16, cell_width=8,
                                            line_chars=line_chars, lines=lines, channels=channels))


def real_charset() -> list[str]:
    return build_charset(text_clusters(real_texts()), FONTS, inventory=False)


def real_atlas(charset: Sequence[str] | None = None) -> GlyphAtlas:
    return GlyphAtlas.from_clusters(list(charset or real_charset()), FONTS, 12, 16, 8)


def tiny_student(settings: RenderSettings, atlas: GlyphAtlas, core: str = "none", stem: str = "pair",
                 seed: int = 0, **model: Any) -> TRMVisionEncoder:
    """A tiny encoder over `atlas`, weights moved away from their initialization (eval mode); `model` overrides
    `{role}.model` keys (mixer_kernel, positions, ...)."""
    shape = {**dict(core=core, stem=stem, activation="gelu", mixer_kernel=3, mixer_ratio=2.0, positions=False, dim=16, depth=1, heads=2,
                    mlp_ratio=1.0, H_cycles=1, L_cycles=1, num_capsules=2), **model}
    cfg = EncoderConfig(channels=settings.channels, cell_height=settings.cell_height, cell_width=settings.cell_width,
                        lines=settings.lines, line_chars=settings.line_chars, num_classes=len(LABELS),
                        num_children=4, checksum_bits=32, **shape)
    torch.manual_seed(seed)
    model = TRMVisionEncoder(cfg, torch.from_numpy(atlas.cells.copy())).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def student_config(model: TRMVisionEncoder, settings: RenderSettings, atlas: GlyphAtlas, min_chars: int = 5,
                   trained_glyphs: Sequence[int] | None = None) -> dict[str, Any]:
    """What a trained student's config.json carries (pixelpipe.train.run.model_extras) for `model`."""
    from pixelpipe.data.scripts import known_scripts

    trained = list(range(len(atlas))) if trained_glyphs is None else list(trained_glyphs)
    return {"role": "student", "encoder": model.cfg.to_dict(), "labels": list(LABELS), "render": settings.to_dict(),
            "atlas": atlas.to_dict(), "text_length": {"min_chars": min_chars, "max_chars": settings.cells},
            "trained_glyphs": trained, "scripts": known_scripts(atlas.clusters[i] for i in trained)}


def export(model: TRMVisionEncoder, config: dict[str, Any], path: Path) -> Path:
    from pixelpipe.deploy.export import export_student

    return export_student(model, config, path, log=lambda m: None)


def layout(settings: RenderSettings, atlas: GlyphAtlas, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(atlas glyph ids [N, cells], lengths [N] after truncation) of texts, as the cache stores them."""
    ids, full = Renderer(settings, atlas).layout(list(texts))
    return ids, np.minimum(full, settings.cells)


def torch_logits(model: TRMVisionEncoder, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The torch model's logits on its glyph path, each text alone (no batch effects in the reference)."""
    with torch.inference_mode():
        return np.concatenate([model(torch.from_numpy(ids[i : i + 1].astype(np.int64)),
                                     torch.from_numpy(lengths[i : i + 1].astype(np.int64)))["logits"].numpy()
                               for i in range(len(ids))])


class Deployed:
    """A tiny `core: none` student (pair stem, one line of 24 cells) over the real atlas, exported to ONNX."""

    def __init__(self, path: Path) -> None:
        self.settings = render_settings()
        self.charset = real_charset()
        self.atlas = real_atlas(self.charset)
        self.model = tiny_student(self.settings, self.atlas, **TABLES)
        self.config = student_config(self.model, self.settings, self.atlas,
                                     trained_glyphs=[i for i, c in enumerate(self.charset) if c != UNTRAINED])
        self.path = export(self.model, self.config, path)

    def window_reference(self, text: str, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """The torch model's mean logits [classes] over the windows [start, stop) of `text` (its glyph ids laid
        out whole, sliced by hand): what reading a long text in windows must give."""
        ids, _ = Renderer(self.settings, self.atlas).layout([text], 8 * self.settings.cells)
        return self._windows_logits(ids[0], spans)

    def _windows_logits(self, row: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        cells = self.settings.cells
        windows = [np.pad(row[a:b], (0, cells - (b - a))) for a, b in spans]
        return torch_logits(self.model, np.stack(windows), np.array([b - a for a, b in spans])).mean(0)

    def reference(self, texts: Sequence[str]) -> np.ndarray:
        """The torch model's logits for `texts` on its glyph path, its atlas extended by the cells of the clusters
        the texts hold and the atlas lacks (drawn by the same renderer): a model whose atlas contained them. A text
        longer than the layout is read as the deployed model documents: k = ceil(n / cells) windows (n up to 8
        layouts), the i-th covering [i n // k, (i + 1) n // k), their logits averaged."""
        atlas, cells = real_atlas(self.charset), self.settings.cells
        ids, full = Renderer(self.settings, atlas).layout(list(texts), capacity=8 * cells)
        self.model.set_atlas(torch.from_numpy(atlas.cells.copy()))
        try:
            out = []
            for row, n in zip(ids, np.minimum(full, 8 * cells).tolist()):
                k = max(1, -(-n // cells))
                out.append(self._windows_logits(row, [(i * n // k, (i + 1) * n // k) for i in range(k)]))
            return np.stack(out)
        finally:
            self.model.set_atlas(torch.from_numpy(self.atlas.cells.copy()))
