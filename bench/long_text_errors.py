"""Which languages the deployed students and py3langid confuse on the held-out texts over `--min-chars` characters:
both restricted to the languages they share (as the evaluation's `onnx_fp32_shared` and `py3langid` columns), on
the same texts for every run (the first run's held-out sets), misses grouped by family (docs/benchmarks.md, "What
limits distillation").

    python bench/long_text_errors.py --runs run0 run1 run2 [--config run0/config.yaml] [--min-chars 100] [--out f.json]

Each run is a finished pipeline directory (its results/models/student.onnx and results/corpus/labels.json); the
held-out sets are drawn as the config given (the first run's config.yaml by default) draws them. Without py3langid
(requirements-bench.txt) the students are counted on every language, unrestricted.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from pixelpipe.config.resolve import load_config
from pixelpipe.core.io import read_json
from pixelpipe.evaluate.reference import common_languages, py3langid_scorer, reference_code
from pixelpipe.evaluate.scorers import OnnxScorer, SharedLanguagesScorer
from pixelpipe.evaluate.sets import EvaluateSettings, heldout_sets

FAMILIES = {"bs": "bs/hr/sr-Latn", "hr": "bs/hr/sr-Latn", "sr-Latn": "bs/hr/sr-Latn", "ms": "ms/id", "id": "ms/id",
            "nb": "nb/nn", "nn": "nb/nn", "oc": "oc"}


def misses(truth: list[str], predicted: list[str], key=lambda label: label) -> dict:
    """Accuracy, misses by family of the true language, and the most frequent (true, predicted) pairs."""
    wrong = [(t, p) for t, p in zip(truth, predicted) if key(t) != p]
    return {"accuracy": round(100 * (1 - len(wrong) / max(len(truth), 1)), 2), "misses": len(wrong),
            "by_family": dict(collections.Counter(FAMILIES.get(t, "other") for t, _ in wrong).most_common()),
            "pairs": [[t, p, n] for (t, p), n in collections.Counter(wrong).most_common(10)]}


def long_text_misses(runs: list[Path], config: Path, min_chars: int) -> dict:
    """{"texts": N, "py3langid": misses, str(run): misses, ...} on the held-out texts over `min_chars` characters."""
    cfg = load_config(str(config))
    labels = read_json(runs[0] / "results/corpus/labels.json")["labels"]
    reference = py3langid_scorer(labels)
    common = (common_languages(reference.known, labels) if reference is not None else None) or labels
    sets = heldout_sets(EvaluateSettings.from_section(cfg["evaluate"]), labels, cfg["render"]["fonts"], cfg["seed"])
    rows = [(text, label) for df in sets.values() for text, label in zip(df["text"], df["label"])
            if len(text) > min_chars and label in common]
    texts, truth = [r[0] for r in rows], [r[1] for r in rows]
    result = {"texts": len(texts)}
    if reference is not None:
        result["py3langid"] = misses(truth, reference(texts), reference_code)
    for run in runs:
        if read_json(run / "results/corpus/labels.json")["labels"] != labels:
            raise SystemExit(f"{run}: its labels differ from {runs[0]}'s")
        result[str(run)] = misses(truth, SharedLanguagesScorer(OnnxScorer(run / "results/models/student.onnx"),
                                                               common)(texts))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True, help="finished pipeline directories")
    ap.add_argument("--config", type=Path, help="the config whose held-out sets to draw (default: RUN0/config.yaml)")
    ap.add_argument("--min-chars", type=int, default=100, help="texts longer than this many characters")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    result = long_text_misses(args.runs, args.config or args.runs[0] / "config.yaml", args.min_chars)
    for name, figures in result.items():
        if name != "texts":
            print(f"{name}: {figures['accuracy']:.2f} %, {figures['misses']} misses of {result['texts']}: "
                  f"{figures['by_family']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
