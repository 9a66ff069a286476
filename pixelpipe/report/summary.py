"""The closing lines of a run: test accuracy of the models and the text baseline, truncated texts."""

from __future__ import annotations

from pathlib import Path

from ..core.io import read_json


def model_results(results_dir: str | Path) -> list[dict]:
    """One row per model that exists: teacher, student (torch, and int8 ONNX once measured), the n-gram baseline."""
    results_dir = Path(results_dir)
    rows = []
    for role in ("teacher", "student"):
        cfg = results_dir / role / "config.json"
        if cfg.exists():
            m = read_json(cfg).get("metrics", {})
            if m.get("test_accuracy") is not None:
                rows.append({"model": role, "test_accuracy": m["test_accuracy"], "parameters": m.get("parameters"),
                             "train_s": m.get("train_wall_s"), "mflops": m.get("mflops_per_text")})
    deploy = results_dir / "reports" / "deploy.json"
    if deploy.exists():
        acc = read_json(deploy).get("accuracy", {}).get("onnx_int8", {})
        if acc.get("accuracy") is not None:
            rows.append({"model": "student, int8 ONNX", "test_accuracy": acc["accuracy"], "parameters": None,
                         "train_s": None, "mflops": None})
    base = results_dir / "baseline" / "metrics.json"
    if base.exists():
        b = read_json(base)
        rows.append({"model": "n-gram baseline (text)", "test_accuracy": b["test_accuracy"],
                     "parameters": b.get("parameters"), "train_s": b.get("train_s"), "mflops": None})
    return rows


def truncation(results_dir: str | Path) -> dict[str, dict]:
    """Per rendered split: texts, how many were truncated to the layout, and the capacity."""
    out = {}
    for manifest in sorted(Path(results_dir, "cache").glob("*/manifest.json")):
        m = read_json(manifest)
        r = m["render"]
        out[manifest.parent.name] = {"texts": m["count"], "truncated": m["truncated"],
                                     "share": m["truncated_share"], "capacity": r["lines"] * r["line_chars"],
                                     "warn": m.get("truncation_warning", 0.25)}
    return out


def accuracy_summary(results_dir: str | Path) -> str:
    lines = []
    for r in model_results(results_dir):
        extra = []
        if r["parameters"]:
            extra.append(f"{r['parameters']:,} parameters")
        if r["train_s"] is not None:
            extra.append(f"trained in {r['train_s']:.0f} s")
        lines.append(f"  {r['model']:24s} test accuracy {r['test_accuracy']:.4f}" + (f"  ({', '.join(extra)})" if extra else ""))
    heldout = Path(results_dir) / "eval" / "evaluation.json"
    if heldout.exists():
        from ..evaluate.accuracy import clean_accuracy_all_sets

        clean = clean_accuracy_all_sets(read_json(heldout)).iloc[0]
        lines.append("  held-out real text (results/eval/evaluation.md), all sets: "
                     + ", ".join(f"{model} {value:.2f} %" for model, value in clean.items()))
    for split, t in truncation(results_dir).items():
        if t["share"] > t["warn"]:
            lines.append(f"  warning: {t['truncated']} of {t['texts']} {split} texts ({100 * t['share']:.1f} %) were "
                         f"truncated to {t['capacity']} characters (render.line_chars x render.lines)")
    return "pixelpipe results:\n" + "\n".join(lines) if lines else ""


def heldout_lines(results_dir: str | Path) -> list[str]:
    """The held-out evaluation's clean accuracy by set and its goals, from results/eval/evaluation.json."""
    path = Path(results_dir) / "eval" / "evaluation.json"
    if not path.exists():
        return []
    from ..evaluate.accuracy import accuracy_table

    result = read_json(path)
    table = accuracy_table(result["rows"], perturbation="clean", bucket="all")
    models = list(table.columns)
    lines = ["## Held-out real text (results/eval/evaluation.md)", "", "| set | " + " | ".join(models) + " |",
             "|---|" + "---:|" * len(models)]
    for name, row in table.iterrows():
        lines.append(f"| {name} ({result['sets'][name]:,} texts) | " + " | ".join(f"{v:.2f} %" for v in row) + " |")
    met = [g for g in result.get("goals", []) if g["met"] is not None]
    missed = [g["goal"] for g in met if not g["met"]]
    lines += ["", f"Goals met: {len(met) - len(missed)} of {len(met)}" + (f"; missed: {'; '.join(missed)}" if missed else ""), ""]
    return lines


def summary_markdown_lines(results_dir: str | Path) -> list[str]:
    """The models and truncation part of results/reports/summary.md."""
    lines = ["| model | test accuracy | parameters | MFLOPs per text (mean length, as trained) | training s |",
             "|---|---:|---:|---:|---:|"]
    for r in model_results(results_dir):
        params = f"{r['parameters']:,}" if r["parameters"] else "-"
        train = f"{r['train_s']:.0f}" if r["train_s"] is not None else "-"
        flops = f"{r['mflops']:.2f}" if r.get("mflops") is not None else "-"
        lines.append(f"| {r['model']} | {100 * r['test_accuracy']:.2f} % | {params} | {flops} | {train} |")
    lines += ["", "| split | texts | truncated to the layout | share |", "|---|---:|---:|---:|"]
    for split, t in truncation(results_dir).items():
        lines.append(f"| {split} | {t['texts']} | {t['truncated']} (> {t['capacity']} characters) | "
                     f"{100 * t['share']:.1f} % |")
    return lines + [""] + heldout_lines(results_dir)
