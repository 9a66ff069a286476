"""The held-out evaluation as files: evaluation.json (every count), evaluation.md (tables, goals), a plot.

Goals (issue 18, 19), judged on clean held-out text pooled over the sets unless said otherwise:
the deployed model >= 99.5 % on texts over 40 characters and >= 98.5 % on 15-40, at or ahead of
py3langid on both (when it is installed); on the prose set, look-alike letters within 0.5 points of
clean, dropped diacritics >= 98 %, typos >= 98.5 %; the student within 0.3 points of the teacher, the
deployed forms within 0.3 points of the student.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..core import io
from .evaluation import BUCKETS, CLEAN, accuracy_table, clean_accuracy_all_sets

DEPLOYED = ("onnx_fp32", "onnx_int8")


def _acc(rows: list[dict], model: str, **where: Any) -> float | None:
    table = accuracy_table(rows, **where)
    if model not in table.columns or not len(table):
        return None
    got = table[model].dropna()
    return float(got.iloc[0]) if len(got) == 1 else None


def goals(rows: list[dict]) -> list[dict]:
    """Each goal with the measured value and whether it is met (None: a model is missing)."""
    out = []

    def add(name: str, value: float | None, target: float | None, ok: bool | None) -> None:
        out.append({"goal": name, "value": value, "target": target, "met": ok})

    ref = {b: _acc(rows, "py3langid", perturbation=CLEAN, bucket=b, set=["prose", "phrases", "ui"]) for b in (">40", "15-40")}
    for model in DEPLOYED:
        for bucket, floor in ((">40", 99.5), ("15-40", 98.5)):
            v = _acc(rows, model, perturbation=CLEAN, bucket=bucket, set=["prose", "phrases", "ui"])
            add(f"{model} {bucket} chars >= {floor} %", v, floor, None if v is None else v >= floor)
            add(f"{model} {bucket} chars >= py3langid", v, ref[bucket],
                None if v is None or ref[bucket] is None else v >= ref[bucket])
        clean = _acc(rows, model, perturbation=CLEAN, bucket="all", set="prose")
        for kind, floor in (("lookalikes", None), ("no_diacritics", 98.0), ("typos", 98.5)):
            v = _acc(rows, model, perturbation=kind, bucket="all", set="prose")
            target = clean - 0.5 if floor is None and clean is not None else floor
            add(f"{model} prose, {kind}" + (" within 0.5 of clean" if floor is None else f" >= {floor} %"), v, target,
                None if v is None or target is None else v >= target)
    pooled = {m: _acc(rows, m, perturbation=CLEAN, bucket="all", set=["prose", "phrases", "ui"])
              for m in ("teacher", "student", *DEPLOYED)}
    if pooled["teacher"] is not None and pooled["student"] is not None:
        add("student within 0.3 of teacher", pooled["student"], pooled["teacher"] - 0.3,
            pooled["student"] >= pooled["teacher"] - 0.3)
    for model in DEPLOYED:
        if pooled[model] is not None and pooled["student"] is not None:
            add(f"{model} within 0.3 of student", pooled[model], pooled["student"] - 0.3,
                pooled[model] >= pooled["student"] - 0.3)
    return out


def length_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The length buckets of a table indexed by bucket, in order (those present)."""
    return table.loc[[b[0] for b in BUCKETS if b[0] in table.index]]


def _md_table(df: pd.DataFrame, index_names: list[str]) -> str:
    models = list(df.columns)
    lines = ["| " + " | ".join(index_names + models) + " |", "| " + " | ".join(["---"] * len(index_names) +
                                                                               ["---:"] * len(models)) + " |"]
    for key, row in df.iterrows():
        keys = list(key) if isinstance(key, tuple) else [key]
        lines.append("| " + " | ".join([str(k) for k in keys] + [f"{v:.2f}" if pd.notna(v) else "-" for v in row]) + " |")
    return "\n".join(lines)


def render_markdown(result: dict) -> str:
    rows = result["rows"]
    sets = list(result["sets"])
    by_set = accuracy_table(rows, perturbation=CLEAN, bucket="all")
    pooled = clean_accuracy_all_sets(result).rename(index={"all": "all sets"})
    buckets = length_rows(accuracy_table(rows, perturbation=CLEAN, set=sets))
    kinds = accuracy_table(rows, bucket="all")
    sizes = ", ".join(f"{name} {n:,}" for name, n in result["sets"].items())
    parts = [f"# Held-out real text\n\nSources: {', '.join(result['sources'])} (no training row comes from them); "
             f"texts: {sizes}. Accuracy in %.\n", "## Clean text, by set\n", _md_table(pd.concat([by_set, pooled]), ["set"]),
             "\n## Clean text, by length (characters, all sets)\n", _md_table(buckets, ["length"]),
             "\n## Perturbations, by set\n", _md_table(kinds, ["set", "perturbation"]), "\n## Goals\n",
             "| goal | measured | target | met |", "| --- | ---: | ---: | --- |"]
    for g in result["goals"]:
        fmt = (lambda v: "-" if v is None else f"{v:.2f}")  # noqa: E731
        parts.append(f"| {g['goal']} | {fmt(g['value'])} | {fmt(g['target'])} | "
                     f"{'-' if g['met'] is None else ('yes' if g['met'] else '**no**')} |")
    if result.get("missing"):
        parts.append(f"\nNot scored: {', '.join(result['missing'])}.")
    return "\n".join(parts) + "\n"


def plot(result: dict, path: str | Path) -> None:
    """Clean accuracy by length bucket and accuracy per perturbation, one bar per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, sets = result["rows"], list(result["sets"])
    panels = [(length_rows(accuracy_table(rows, perturbation=CLEAN, set=sets)), "clean text by length"),
              (accuracy_table(rows, bucket="all", set=sets), "by perturbation (all sets)")]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    for ax, (table, title) in zip(axes, panels):
        table.plot.bar(ax=ax, rot=0, width=0.8)
        ax.set_ylim(max(0.0, float(table.min().min()) - 5), 100.5)
        ax.set_title(title)
        ax.set_ylabel("accuracy (%)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    with io.atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def write_outputs(result: dict, json_path: str | Path, md_path: str | Path, png_path: str | Path) -> None:
    result = {**result, "goals": goals(result["rows"])}
    io.write_json(json_path, result)
    io.write_text(md_path, render_markdown(result))
    plot(result, png_path)
