"""Training speed and held-out accuracy against fastText supervised trained on the same rows.

    pip install fasttext-numpy2-wheel     # a benchmark anchor only, never a dependency of pixelpipe
    PYTHONPATH=. python bench/fasttext_speed.py --run DIR [--config config.yaml] [--out docs/sweeps/fasttext_speed.json]

DIR is a finished default-target run (results/corpus, results/metrics, results/eval). fastText is trained on
the run's train split with the usual language-identification recipe (character n-grams, softmax), each recipe of a
small grid once, on one thread; the recipe is picked on the run's val split only. The picked recipe is also
trained on the rows plus two window cuts of each (>= 15 characters, as the student's own augmentation cuts them).
Reported side by side: rows/s of training (rows x epochs / training seconds; the teacher's and student's from the
run's metrics, on the threads their jobs used) and held-out accuracy by length bucket on the evaluation's own sets
(the same texts, drawn with the run's seed) against the teacher and the deployed student of the run.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pixelpipe.config.resolve import load_config
from pixelpipe.evaluate.accuracy import BUCKETS, accuracy_table
from pixelpipe.evaluate.sets import CLEAN, EvaluateSettings, heldout_sets

GRID = [  # (dim, epoch, lr, minn, maxn)
    (16, 5, 0.5, 1, 4), (64, 5, 0.5, 1, 4), (64, 15, 0.5, 2, 5), (64, 25, 1.0, 1, 5)]
CUT_MIN = 15


def clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def write_rows(path: Path, texts: list[str], labels: list[str]) -> None:
    path.write_text("".join(f"__label__{y} {clean(t)}\n" for t, y in zip(texts, labels)), encoding="utf-8")


def window_cuts(texts: list[str], labels: list[str], seed: int) -> tuple[list[str], list[str]]:
    """Each row and two random windows of it of >= CUT_MIN characters (uniform length, uniform start)."""
    rng = np.random.default_rng([seed, 0xF7])
    out_t, out_y = list(texts), list(labels)
    for t, y in zip(texts, labels):
        t = clean(t)
        for _ in range(2):
            if len(t) <= CUT_MIN:
                break
            m = int(rng.integers(CUT_MIN, len(t) + 1))
            a = int(rng.integers(0, len(t) - m + 1))
            out_t.append(t[a : a + m])
            out_y.append(y)
    return out_t, out_y


def train(path: Path, recipe: tuple) -> tuple[object, float]:
    import fasttext

    dim, epoch, lr, minn, maxn = recipe
    t0 = time.perf_counter()
    model = fasttext.train_supervised(input=str(path), dim=dim, epoch=epoch, lr=lr, minn=minn, maxn=maxn,
                                      wordNgrams=1, loss="softmax", thread=1, verbose=0)
    return model, time.perf_counter() - t0


def predict(model, texts: list[str]) -> list[str]:
    labels, _ = model.predict([clean(t) for t in texts], k=1)
    return [lab[0].removeprefix("__label__") if lab else "" for lab in labels]


def heldout_rows(model, sets: dict[str, pd.DataFrame], name: str) -> list[dict]:
    rows = []
    for set_name, df in sets.items():
        texts = df["text"].tolist()
        right = np.array(predict(model, texts)) == df["label"].to_numpy()
        lengths = np.array([len(clean(t)) for t in texts])
        for bucket, lo, hi in (*BUCKETS, ("all", 1, 1 << 30)):
            sel = (lengths >= lo) & (lengths <= hi)
            if sel.any():
                rows.append({"model": name, "set": set_name, "perturbation": CLEAN, "bucket": bucket,
                             "n": int(sel.sum()), "correct": int(right[sel].sum()), "scope": "all"})
    return rows


def pipeline_rates(run: Path) -> dict[str, dict]:
    """Rows/s of training of the run's teacher and student (their metrics), and the threads their jobs had."""
    out = {}
    for role in ("teacher", "student"):
        m = json.loads((run / f"results/metrics/train_{role}/{role}.json").read_text())
        out[role] = {"rows_per_s": m["train_samples"] / m["train_wall_s"], "train_s": m["train_wall_s"],
                     "job_s": m["wall_s"], "threads": m.get("threads")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--config", type=Path, default=Path("config.yaml"), help="the run's config (its evaluate section)")
    ap.add_argument("--seed", type=int, default=None, help="the run's seed (default: the config's)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cfg = load_config(args.config, {"seed": args.seed} if args.seed is not None else None)
    train_df = pd.read_parquet(args.run / "results/corpus/train.parquet")
    val_df = pd.read_parquet(args.run / "results/corpus/val.parquet")
    labels = json.loads((args.run / "results/corpus/labels.json").read_text())["labels"]
    for df in (train_df, val_df):  # the corpus stores label indices into labels.json
        df["label"] = [labels[int(i)] for i in df["label"]]
    sets = heldout_sets(EvaluateSettings.from_section(cfg["evaluate"]), labels, cfg["render"]["fonts"], cfg["seed"])
    with tempfile.TemporaryDirectory() as tmp:
        plain, cuts = Path(tmp) / "train.txt", Path(tmp) / "cuts.txt"
        write_rows(plain, train_df["text"].tolist(), train_df["label"].tolist())
        cut_t, cut_y = window_cuts(train_df["text"].tolist(), train_df["label"].tolist(), cfg["seed"])
        write_rows(cuts, cut_t, cut_y)
        grid = []
        for recipe in GRID:
            model, seconds = train(plain, recipe)
            val = float(np.mean(np.array(predict(model, val_df["text"].tolist())) == val_df["label"].to_numpy()))
            grid.append({"recipe": recipe, "val_accuracy": val, "train_s": seconds,
                         "rows_per_s": len(train_df) * recipe[1] / seconds})
            print(json.dumps(grid[-1]), flush=True)
        best = max(grid, key=lambda g: g["val_accuracy"])
        model, _ = train(plain, best["recipe"])
        with_cuts, cut_s = train(cuts, best["recipe"])
    rows = heldout_rows(model, sets, "fasttext") + heldout_rows(with_cuts, sets, "fasttext_cuts")
    run_rows = [r for r in json.loads((args.run / "results/eval/evaluation.json").read_text())["rows"]
                if r["model"] in ("teacher", "onnx_fp32", "py3langid") and r["perturbation"] == CLEAN]
    table = accuracy_table(rows + run_rows, perturbation=CLEAN, set=list(sets))
    rates = {**pipeline_rates(args.run),
             "fasttext": {"rows_per_s": best["rows_per_s"], "train_s": best["train_s"], "threads": 1},
             "fasttext_cuts": {"rows_per_s": len(cut_t) * best["recipe"][1] / cut_s, "train_s": cut_s, "threads": 1}}
    print(table.round(2).to_string())
    for name, r in rates.items():
        print(f"{name:14s} {r['rows_per_s']:10,.0f} rows/s of training, {r['train_s']:7.1f} s, {r['threads']} thread(s)")
    if args.out:
        args.out.write_text(json.dumps({"grid": grid, "best": best["recipe"], "rates": rates,
                                        "accuracy": table.round(2).to_dict(), "train_rows": len(train_df),
                                        "cut_rows": len(cut_t), "date": time.strftime("%Y-%m-%d")}, indent=1) + "\n")


if __name__ == "__main__":
    main()
