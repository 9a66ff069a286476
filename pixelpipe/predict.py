"""Classify text (or pre-rendered images) with an exported pixelpipe ONNX model.

    python -m pixelpipe.predict --model results/models/student.int8.onnx "some text" "more text"
    python -m pixelpipe.predict --model results/models/student.onnx --file texts.txt --json
    python -m pixelpipe.predict --model results/models/student.onnx --image a.png --image b.png

Render settings (cell size, layout, fonts), the glyph atlas and the labels
come from the model file's own metadata, never from the command line: a
model only knows the pixels it was trained on. Each text is laid out with
the training renderer and its cells are copied from the training atlas, so
the image is bit for bit what training would have drawn; characters the
atlas lacks (training never saw them) are drawn with the same fonts and
reported. Needs onnxruntime, numpy and Pillow; torch is not imported.

Bad input (empty text, characters the fonts cannot draw, a missing or
non-pixelpipe model file, an unreadable image) ends with one line on stderr
naming the problem and exit status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .deploy import onnxmodel

EXIT_BAD_INPUT = 2


class InputError(ValueError):
    """A user input that cannot be classified; the message names it."""


@dataclass
class Item:
    name: str  # what the output calls this input (the text, or the image path)
    image: np.ndarray  # uint8 [C, H, W]
    clusters: int = 0  # characters (grapheme clusters) of a text; 0 for an image
    truncated: bool = False


def render_texts(texts: Sequence[str], config: dict[str, Any], where: Sequence[str]) -> tuple[list[Item], str]:
    """(items, characters the training atlas lacks) rendered with the model's own settings and atlas.

    InputError names the first text that is empty or cannot be drawn.
    """
    from .data.atlas import GlyphAtlas, normalize, undrawable
    from .data.render import Renderer, RenderSettings

    try:
        settings = RenderSettings.from_section(config["render"])
        atlas = GlyphAtlas.from_dict(config["atlas"], settings.fonts, settings.font_size)
    except (TypeError, ValueError, KeyError) as e:
        raise onnxmodel.ModelFileError(f"the model's render settings or glyph atlas cannot be used: {e}") from None
    for text, loc in zip(texts, where):
        if not normalize(text):
            raise InputError(f"{loc} is empty")
        missing = undrawable(text, settings.fonts)
        if missing:
            raise InputError(f"{loc} has characters the model's fonts cannot draw: {missing!r}")
    images, full = Renderer(settings, atlas).render(list(texts))
    unseen = "".join(sorted({c for cluster in atlas.drawn for c in cluster}))
    items = [Item(t, img, int(n), bool(n > settings.cells)) for t, img, n in zip(texts, images, full)]
    return items, unseen


def load_images(paths: Sequence[str], render_cfg: dict[str, Any], invert: bool) -> list[Item]:
    """Image files rendered like the cache (light ink on dark, the model's exact size)."""
    from PIL import Image, UnidentifiedImageError

    from .data.render import image_geometry

    c, h, w = image_geometry(render_cfg)
    items = []
    for p in paths:
        try:
            with Image.open(p) as im:
                im.load()
                img = im.convert("L")
        except FileNotFoundError:
            raise InputError(f"image file not found: {p}") from None
        except (UnidentifiedImageError, OSError) as e:
            raise InputError(f"cannot read image {p}: {e}") from None
        if img.size != (w, h):
            raise InputError(f"image {p} is {img.size[0]}x{img.size[1]}, the model takes {w}x{h} (width x height)")
        arr = np.asarray(img, dtype=np.uint8)
        if invert:
            arr = 255 - arr
        arr = np.repeat(arr[None], c, axis=0)
        items.append(Item(str(p), np.ascontiguousarray(arr)))
    return items


def read_text_file(path: str) -> tuple[list[str], list[str]]:
    """Lines of a UTF-8 file (a final newline does not make an empty text)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"text file not found: {path}") from None
    except (UnicodeDecodeError, OSError) as e:
        raise InputError(f"cannot read text file {path}: {e}") from None
    if not lines:
        raise InputError(f"text file {path} has no lines")
    return lines, [f"line {i} of {path}" for i in range(1, len(lines) + 1)]


def classify(session: Any, labels: Sequence[str], items: list[Item], top: int, batch_size: int = 256) -> list[dict]:
    if not items:
        return []
    images = np.stack([it.image for it in items])
    logits = onnxmodel.run_logits(session, images, batch_size).astype(np.float64)
    if not np.isfinite(logits).all():
        raise onnxmodel.ModelFileError("the model produced non-finite logits (NaN or inf): its weights are broken; "
                                       "retrain or re-export it")
    probs = onnxmodel.softmax(logits)
    out = []
    for it, p in zip(items, probs):
        order = np.argsort(-p)[:top]
        out.append({"input": it.name, "label": labels[order[0]], "probability": float(p[order[0]]),
                    "top": [{"label": labels[j], "probability": float(p[j])} for j in order],
                    "truncated": it.truncated})
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pixelpipe.predict", description=__doc__.split("\n\n")[0])
    ap.add_argument("texts", nargs="*", help="texts to classify")
    ap.add_argument("--model", required=True, help="pixelpipe ONNX model (student.onnx or student.int8.onnx)")
    ap.add_argument("--file", action="append", default=[], help="UTF-8 file with one text per line (repeatable)")
    ap.add_argument("--image", action="append", default=[],
                    help="image file already rendered at the model's size, light ink on dark (repeatable)")
    ap.add_argument("--invert", action="store_true", help="images are dark ink on light: invert them first")
    ap.add_argument("--top", type=int, default=1, help="also list the k most probable labels (with --json)")
    ap.add_argument("--json", action="store_true", help="one JSON array on stdout instead of text lines")
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0 = its default)")
    return ap


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        texts, where = list(args.texts), [f"text {i}" for i in range(1, len(args.texts) + 1)]
        for f in args.file:
            t, w = read_text_file(f)
            texts += t
            where += w
        if not texts and not args.image:
            raise InputError("nothing to classify: give texts, --file or --image")
        if args.top < 1:
            raise InputError("--top must be >= 1")
        session = onnxmodel.open_session(args.model, args.threads or None)
        config = onnxmodel.read_metadata(session)["config"]
        items, unseen = render_texts(texts, config, where) if texts else ([], "")
        items += load_images(args.image, config["render"], args.invert)
        results = classify(session, config["labels"], items, args.top)
    except (InputError, onnxmodel.ModelFileError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if unseen:
        print(f"warning: characters training never saw: {unseen!r}; they were drawn with the model's fonts, "
              "but the model has no knowledge of them", file=sys.stderr)
    lengths = config.get("text_length", {})
    for item in items:
        if not item.clusters:
            continue
        if lengths.get("min_chars") and item.clusters < lengths["min_chars"]:
            print(f"warning: {item.name[:40]!r} has {item.clusters} characters, fewer than any training text or "
                  f"window ({lengths['min_chars']}); the prediction is unreliable", file=sys.stderr)
        if item.truncated:
            print(f"warning: {item.name[:40]!r} has {item.clusters} characters; the model sees the first "
                  f"{config['render']['lines'] * config['render']['line_chars']}", file=sys.stderr)
    if args.json:
        json.dump(results, sys.stdout, ensure_ascii=False, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        for r in results:
            print(f"{r['label']}\t{r['probability']:.4f}\t{r['input']}")
    return 0


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
