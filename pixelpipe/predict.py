"""Classify text (or pre-rendered images) with an exported pixelpipe ONNX model.

    python -m pixelpipe.predict --model results/models/student.onnx "some text" "more text"
    python -m pixelpipe.predict --model results/models/student.onnx --file texts.txt --jsonl
    cat texts.txt | python -m pixelpipe.predict --model results/models/student.onnx --file -
    python -m pixelpipe.predict --model results/models/student.onnx --image a.png --image b.png
    python -m pixelpipe.predict --model results/models/student.onnx --list-languages

Render settings, the glyph atlas and the labels come from the model file's
own metadata, never from the command line. Files and stdin are read and
answered in chunks, so memory stays bounded at any input size, and output
lines come in input order: one per text. A line that cannot be classified
(empty, not UTF-8, a control character such as NUL) gets an error record and
the rest go on (`--strict` stops at the first one instead, exit status 2).
What the model never saw (characters, lengths) and the symbols its fonts
cannot draw (left out of the text) are summarized once on stderr.
Needs onnxruntime, numpy and Pillow; torch is not imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import IO, Iterator, Sequence

import numpy as np

from .core.cli import ArgumentParser
from .deploy import onnxmodel
from .deploy.decide import DEFAULT_THRESHOLD
from .deploy.predictor import BATCH_SIZE, MAX_BATCH_CELLS, MIN_BATCH_TEXTS, RUN_CHUNK, Prediction, Predictor

EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a Unix tool whose reader left
CHUNK = RUN_CHUNK  # lines read, classified and written at a time, the predictor's own chunk (4096: 18 MiB more
# peak memory, no faster; 512: 4 MiB less, 5-8 % slower) ...
CHUNK_CHARS = 32_768  # ... and characters: the layout's temporaries are ~50 bytes a character of the chunk's texts,
# so 1,024 sentences of prose (140 characters) held 5 MiB more than 1,024 short UI strings (34)


class InputError(ValueError):
    """A user input that cannot be classified; the message names it."""


def read_lines(path: str) -> Iterator[tuple[str | None, str]]:
    """(text or None, where) per line of a file or stdin ('-'); a line that is not UTF-8 comes as None."""
    try:
        stream: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"text file not found: {path}") from None
    except OSError as e:
        raise InputError(f"cannot read text file {path}: {e}") from None
    name = "stdin" if path == "-" else path
    with stream:
        for number, raw in enumerate(stream, 1):
            try:
                yield raw.decode("utf-8").rstrip("\r\n"), f"line {number} of {name}"
            except UnicodeDecodeError as e:
                yield None, f"line {number} of {name} is not UTF-8 (byte {e.start})"


def inputs(args: argparse.Namespace) -> Iterator[tuple[str | None, str]]:
    for i, text in enumerate(args.texts, 1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # bytes that are not UTF-8 reach argv as lone surrogates (surrogateescape)
            yield None, f"text {i} is not UTF-8 (character {e.start})"
            continue
        yield text, f"text {i}"
    for path in args.file:
        yield from read_lines(path)


def chunks(items: Iterator[tuple[str | None, str]], size: int,
           chars: int = CHUNK_CHARS) -> Iterator[list[tuple[str | None, str]]]:
    """`size` items at a time, fewer where their texts reach `chars` characters."""
    buf, held = [], 0
    for item in items:
        buf.append(item)
        held += len(item[0] or "")
        if len(buf) == size or held >= chars:
            yield buf
            buf, held = [], 0
    if buf:
        yield buf


def classify(predictor: Predictor, chunk: list[tuple[str | None, str]], top: int, strict: bool) -> list[Prediction]:
    """Predictions for a chunk; undecodable lines become error records (or InputError under --strict)."""
    texts = [t if t is not None else "" for t, _ in chunk]
    preds = predictor.predict(texts, top)
    for (text, where), pred in zip(chunk, preds):
        if text is None:  # `where` ends with the reason (read_lines); the file's name may hold " is " too
            pred.error = where.rsplit(" is ", 1)[1]
        if pred.error is not None and strict:
            raise InputError(where if text is None else f"{where}: {pred.error}")
    return preds


def text_line(text: str, p: Prediction) -> str:
    """One plain output line: label, probability, text (with --top k: the k labels and their probabilities, the
    most probable first, then the text); `unknown` and the reason for no language; ERROR."""
    if p.error is not None:
        return f"ERROR\t{p.error}\t{text}"
    if p.group is not None:  # can't tell which of these relatives: the group and its probability
        return f"{p.group}[{','.join(p.languages)}]\t{p.probability:.4f}\t{text}"
    if p.reason is not None:
        return f"unknown\t{p.reason}\t{text}"
    ranked = p.top or [(p.label, p.probability)]
    return "".join(f"{label}\t{prob:.4f}\t" for label, prob in ranked) + text


class Writer:
    """Writes records as they come: text lines, a JSON array, or JSON lines."""

    def __init__(self, out: IO[str], fmt: str, top: int) -> None:
        self.out, self.fmt, self.top, self.first = out, fmt, top, True
        self.encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode

    def record(self, text: str | None, where: str, p: Prediction) -> dict:
        rec: dict = {"input": text if text is not None else where}
        if p.error is not None:
            return {**rec, "error": p.error}
        if p.group is not None:  # can't tell which of these relatives
            rec.update(label=None, group=p.group, languages=p.languages, probability=round(p.probability, 6))
            return {**rec, "reason": p.reason, "truncated": p.truncated}
        if p.reason is not None:  # no language: label null and why (undecided: with --top, the candidates)
            rec.update(label=None, probability=None, reason=p.reason, truncated=p.truncated)
            if self.top > 1 and p.top:
                rec["top"] = [{"label": lab, "probability": round(pr, 6)} for lab, pr in p.top]
            return rec
        rec.update(label=p.label, probability=round(p.probability, 6), truncated=p.truncated)
        if self.top > 1:
            rec["top"] = [{"label": lab, "probability": round(pr, 6)} for lab, pr in p.top]
        return rec

    def write(self, chunk: Sequence[tuple[str | None, str]], preds: Sequence[Prediction]) -> None:
        if self.fmt == "text":
            lines = [text_line(t if t is not None else w, p) for (t, w), p in zip(chunk, preds)]
            self.out.write("\n".join(lines) + "\n")
            return
        recs = [self.encode(self.record(t, w, p)) for (t, w), p in zip(chunk, preds)]
        if self.fmt == "jsonl":
            self.out.write("\n".join(recs) + "\n")
        else:
            self.out.write(("[\n" if self.first else ",\n") + ",\n".join(recs))
        self.first = False

    def close(self) -> None:
        if self.fmt == "json":
            self.out.write("[]\n" if self.first else "\n]\n")
        self.out.flush()


def load_images(paths: Sequence[str], predictor: Predictor, invert: bool) -> list[np.ndarray]:
    """Image files rendered like the cache (light ink on dark, the model's exact size) as uint8 [1, H, W]."""
    from PIL import Image, UnidentifiedImageError

    s = predictor.settings
    out = []
    for p in paths:
        try:
            with Image.open(p) as im:
                im.load()
                img = im.convert("L")
        except FileNotFoundError:
            raise InputError(f"image file not found: {p}") from None
        except (UnidentifiedImageError, OSError) as e:
            raise InputError(f"cannot read image {p}: {e}") from None
        if img.size != (s.image_width, s.image_height):
            raise InputError(f"image {p} is {img.size[0]}x{img.size[1]}, the model takes {s.image_width}x"
                             f"{s.image_height} (width x height)")
        arr = np.asarray(img, dtype=np.uint8)
        out.append((255 - arr if invert else arr)[None])
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(prog="python -m pixelpipe.predict", description=__doc__.split("\n\n")[0])
    ap.add_argument("texts", nargs="*", help="texts to classify")
    ap.add_argument("--model", required=True, help="pixelpipe ONNX model (student.onnx or student.int8.onnx)")
    ap.add_argument("--file", action="append", default=[],
                    help="UTF-8 file with one text per line, '-' for stdin (repeatable; streamed)")
    ap.add_argument("--image", action="append", default=[],
                    help="image file already rendered at the model's size, light ink on dark (repeatable)")
    ap.add_argument("--invert", action="store_true", help="images are dark ink on light: invert them first")
    ap.add_argument("--top", type=int, default=1,
                    help="the k most probable labels with their probabilities (text: k label/probability pairs "
                         "before the input; JSON: a `top` list)")
    ap.add_argument("--languages", default=None,
                    help="answer only among these labels, comma-separated (e.g. de,fr,it): the others get "
                         "probability 0, as if the model knew only these")
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="format", action="store_const", const="json", help="one JSON array on stdout")
    fmt.add_argument("--jsonl", dest="format", action="store_const", const="jsonl", help="one JSON object per line")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                    help="below this probability answer a group of confusable languages or 'undecided' (can't tell) "
                         f"instead of a guess (default {DEFAULT_THRESHOLD}; 0 = always the most probable label)")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1; 0 = all cores)")
    ap.add_argument("--batch-size", type=int, default=BATCH_SIZE,
                    help=f"texts per model call at most (sorted by length first; at most {MAX_BATCH_CELLS} characters "
                         f"a call, yet {MIN_BATCH_TEXTS} texts of any length)")
    ap.add_argument("--strict", action="store_true", help="stop at the first input that cannot be classified (exit 2)")
    ap.add_argument("--list-languages", action="store_true",
                    help="print the model's labels, one per line with its name from the language registry, and exit")
    ap.set_defaults(format="text")
    return ap


def list_languages(predictor: Predictor) -> None:
    """The model's labels, `code<TAB>name` per line (the code alone where the registry has no name for it)."""
    for code, name in predictor.language_names.items():
        print(code if name is None else f"{code}\t{name}")


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.threads < 0:
            raise InputError("--threads must be >= 0 (0 = all cores)")
        if args.list_languages:
            if args.texts or args.file or args.image:
                raise InputError("--list-languages takes no texts, --file or --image")
            list_languages(Predictor(args.model, args.threads or None))
            return 0
        if not args.texts and not args.file and not args.image:
            raise InputError("nothing to classify: give texts, --file or --image")
        if args.top < 1 or args.batch_size < 1:
            raise InputError("--top and --batch-size must be >= 1")
        if not 0.0 <= args.threshold <= 1.0:
            raise InputError(f"--threshold must be within [0, 1], got {args.threshold}")
        for path in args.file:
            if path != "-" and not Path(path).is_file():
                raise InputError(f"text file not found: {path}")
        predictor = Predictor(args.model, args.threads or None, args.batch_size, threshold=args.threshold)
        if args.languages is not None:
            try:
                predictor.set_languages([code.strip() for code in args.languages.split(",") if code.strip()])
            except ValueError as e:
                raise InputError(f"--languages: {e}") from None
        writer = Writer(sys.stdout, args.format, args.top)
        for chunk in chunks(inputs(args), CHUNK):
            writer.write(chunk, classify(predictor, chunk, args.top, args.strict))
        if args.image:
            images = load_images(args.image, predictor, args.invert)
            writer.write([(None, p) for p in args.image], predictor.predict_images(images, args.top))
        writer.close()
    except (InputError, onnxmodel.ModelFileError) as e:
        sys.stdout.flush()
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in predictor.notices.lines(predictor.capacity, predictor.min_chars):
        print(f"note: {line}", file=sys.stderr)
    return 0


def main() -> None:
    try:
        code = run()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left early (`predict ... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush would fail again
        code = EXIT_BROKEN_PIPE
    sys.exit(code)


if __name__ == "__main__":
    main()
