"""Fresh texts through `python -m pixelpipe.predict`, beside py3langid on the same texts.

The texts come from Faker with seeds no corpus uses (the default corpus seeds
locale i with `seed * 19 + i`; these start at 1,000,000), `--per-language`
of each kind for each of the 19 languages:

  sentences  made like the default corpus (sentences joined to 60-90 characters)
  phrases    15-40 characters (one sentence or a cut at a word boundary)
  single     one Faker sentence each (mostly 20-60 characters)

pixelpipe is run as a user runs it (the CLI, `--json`, one call per kind);
py3langid (an optional benchmark dependency: `pip install py3langid`) is
restricted to the same 19 languages. Prints a Markdown table and writes JSON.

    python bench/language_id.py --model results/models/student.int8.onnx --out docs/language_id.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from faker import Faker

from pixelpipe.data.corpus import DEFAULT_LOCALES, faker_text

SEED_BASE = 1_000_000
KINDS = {"sentences": (60, 90), "phrases": (15, 40), "single": None}


def fresh_texts(per_language: int) -> dict[str, list[tuple[str, str]]]:
    """{kind: [(text, language)]}, deterministic for a given `per_language`."""
    out: dict[str, list[tuple[str, str]]] = {k: [] for k in KINDS}
    for i, locale in enumerate(DEFAULT_LOCALES):
        lang = locale.split("_")[0]
        for k, (kind, span) in enumerate(KINDS.items()):
            fake = Faker(locale)
            fake.seed_instance(SEED_BASE + 100 * i + k)
            for _ in range(per_language):
                out[kind].append((faker_text(fake, *span) if span else fake.sentence(), lang))
    return out


def run_pixelpipe(model: str, texts: list[str]) -> tuple[list[str], float]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
        f.write("\n".join(texts) + "\n")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pixelpipe.predict", "--model", model, "--file", f.name, "--json"],
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    Path(f.name).unlink()
    return [r["label"] for r in json.loads(proc.stdout)], seconds


def run_py3langid(texts: list[str], languages: list[str]) -> tuple[list[str], float] | None:
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        return None
    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    ident.set_languages(languages)
    t0 = time.perf_counter()
    labels = [ident.classify(t)[0] for t in texts]
    return labels, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="results/models/student.int8.onnx")
    ap.add_argument("--per-language", type=int, default=40)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    languages = sorted({loc.split("_")[0] for loc in DEFAULT_LOCALES})
    rows = []
    for kind, items in fresh_texts(args.per_language).items():
        texts, truth = [t for t, _ in items], [y for _, y in items]
        row = {"kind": kind, "texts": len(texts), "mean_chars": round(sum(map(len, texts)) / len(texts), 1)}
        systems = {"pixelpipe": run_pixelpipe(args.model, texts), "py3langid": run_py3langid(texts, languages)}
        for name, result in systems.items():
            if result is None:
                continue
            labels, seconds = result
            wrong = [(t, y, p) for t, y, p in zip(texts, truth, labels) if y != p]
            row[name] = {"accuracy": 1 - len(wrong) / len(texts), "errors": len(wrong), "seconds": round(seconds, 2),
                         "examples": [{"text": t, "true": y, "predicted": p} for t, y, p in wrong[:10]]}
        rows.append(row)
    print(f"model: {args.model}\n")
    print("| texts | n | mean chars | pixelpipe | py3langid |\n| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        cells = [f"{100 * r[s]['accuracy']:.1f} % ({r[s]['errors']} wrong)" if s in r else "not installed"
                 for s in ("pixelpipe", "py3langid")]
        print(f"| {r['kind']} | {r['texts']} | {r['mean_chars']} | {cells[0]} | {cells[1]} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, "per_language": args.per_language, "rows": rows},
                                             indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
