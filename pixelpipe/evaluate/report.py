"""The held-out evaluation as files: evaluation.json (every count), evaluation.md (tables, goals), a plot.

Goals, judged on clean held-out text pooled over the sets unless said otherwise (issues 18, 24, 25):
the teacher at or ahead of the student and of the n-gram baseline on all sets and on every length
bucket; the deployed student (ONNX fp32) at or ahead of the n-gram baseline on all sets, under 20 and
20-40 characters, and at or ahead of py3langid on every length bucket (py3langid restricted to the
languages it shares with the model, on the texts of those languages; the deployed model too, restricted to the
same languages, is `onnx_fp32_shared`) and, with all of py3langid's
languages, on all sets and 15-40 characters; on the prose set, look-alike letters within 0.5 points of
clean, dropped diacritics >= 98 %, typos >= 98.5 %; the deployed forms within 0.3 points of the
student. Beside them: accuracy per language with what each was misread as, and how well the deployed
model's probabilities match its accuracy (expected calibration error, reliability bins).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..core import io
from ..deploy.decide import confusable_groups
from .accuracy import ALL, BUCKETS, COMMON, accuracy_table, clean_accuracy_all_sets
from .sets import CLEAN

DEPLOYED = ("onnx_fp32", "onnx_int8")
SHIPPED = "onnx_fp32"
SHARED = "onnx_fp32_shared"  # the shipped model answering only among the languages py3langid knows
SETS = ["prose", "phrases", "ui"]
REFERENCE, REFERENCE_ALL = "py3langid", "py3langid_all"


def _acc(rows: list[dict], model: str, **where: Any) -> float | None:
    table = accuracy_table(rows, **where)
    if model not in table.columns or not len(table):
        return None
    got = table[model].dropna()
    return float(got.iloc[0]) if len(got) == 1 else None


def _scope(rows: list[dict]) -> str:
    """Where a reference is compared: the texts of the languages it knows when the evaluation counted them apart."""
    return COMMON if any(r.get("scope") == COMMON for r in rows) else ALL


def goals(rows: list[dict]) -> list[dict]:
    """Each goal with the measured value and whether it is met (None: a model is missing)."""
    out = []

    def add(name: str, value: float | None, target: float | None, ok: bool | None = None) -> None:
        if ok is None and value is not None and target is not None:
            ok = value >= target
        out.append({"goal": name, "value": value, "target": target, "met": ok})

    def clean(model: str, bucket: str, scope: str = ALL) -> float | None:
        return _acc(rows, model, perturbation=CLEAN, bucket=bucket, set=SETS, scope=scope)

    present = [b for b, *_ in BUCKETS if clean(SHIPPED, b) is not None or clean("teacher", b) is not None]
    for bucket in ["all", *present]:
        where = "all sets" if bucket == "all" else f"{bucket} chars"
        for other in ("student", "ngram"):
            add(f"teacher >= {other}, {where}", clean("teacher", bucket), clean(other, bucket))
    for bucket in ("all", "<20", "20-40"):
        add(f"{SHIPPED} >= ngram, {'all sets' if bucket == 'all' else bucket + ' chars'}", clean(SHIPPED, bucket),
            clean("ngram", bucket))
    scope = _scope(rows)
    within = "" if scope == ALL else " (languages it knows)"
    for bucket in ["all", *present]:
        add(f"{SHIPPED} >= {REFERENCE}, {'all sets' if bucket == 'all' else bucket + ' chars'}{within}",
            clean(SHIPPED, bucket, scope), clean(REFERENCE, bucket, scope))
    if scope == COMMON:  # both restricted to the languages they share (issue 30's comparison)
        for bucket in ["all", *present]:
            add(f"{SHARED} >= {REFERENCE} (both restricted to the languages they share), "
                f"{'all sets' if bucket == 'all' else bucket + ' chars'}", clean(SHARED, bucket, scope),
                clean(REFERENCE, bucket, scope))
    for bucket in ("all", "15-40"):
        add(f"{SHIPPED} >= {REFERENCE_ALL} (all its languages), {'all sets' if bucket == 'all' else bucket + ' chars'}"
            f"{within}", clean(SHIPPED, bucket, scope), clean(REFERENCE_ALL, bucket, scope))
    prose = _acc(rows, SHIPPED, perturbation=CLEAN, bucket="all", set="prose")
    for kind, floor in (("lookalikes", None), ("no_diacritics", 98.0), ("typos", 98.5)):
        v = _acc(rows, SHIPPED, perturbation=kind, bucket="all", set="prose")
        target = prose - 0.5 if floor is None and prose is not None else floor
        add(f"{SHIPPED} prose, {kind}" + (" within 0.5 of clean" if floor is None else f" >= {floor} %"), v, target)
    student = clean("student", "all")
    for model in DEPLOYED:
        add(f"{model} within 0.3 of student", clean(model, "all"), None if student is None else student - 0.3)
    return out


def calibration_goals(cal: dict | None) -> list[dict]:
    """Short text: probabilities that mean what they say (ECE <= 2 %), and with the default can't-tell threshold
    answers >= 99 % right while >= 85 % are answered."""
    short = (cal or {}).get("buckets", {}).get("<20")
    if not short:
        return []
    at = next((r for r in short["selective"] if r["threshold"] == cal["threshold"]), None)
    rows = [{"goal": f"{SHIPPED} ECE, <20 chars (%)", "value": 100 * short["ece"], "target": 2.0,
             "met": 100 * short["ece"] <= 2.0}]
    if at is not None:
        rows += [{"goal": f"{SHIPPED} accuracy of answers given, <20 chars, threshold {cal['threshold']}",
                  "value": 100 * at["accuracy"], "target": 99.0, "met": 100 * at["accuracy"] >= 99.0},
                 {"goal": f"{SHIPPED} share answered, <20 chars, threshold {cal['threshold']}",
                  "value": 100 * at["answered"], "target": 85.0, "met": 100 * at["answered"] >= 85.0}]
    return rows


def language_rows(result: dict, models: list[str]) -> pd.DataFrame:
    """Per language: texts and each model's clean accuracy (%), and what the deployed model misread it as."""
    per = result.get("languages", {})
    langs = sorted({lang for m in models for lang in per.get(m, {})})
    table = {}
    for lang in langs:
        row: dict[str, Any] = {"texts": per.get(SHIPPED, {}).get(lang, {}).get("n")}
        for m in models:
            e = per.get(m, {}).get(lang)
            row[m] = 100 * e["correct"] / e["n"] if e and e["n"] else None
        read_as = per.get(SHIPPED, {}).get(lang, {}).get("read_as", {})
        row["misread as (deployed)"] = ", ".join(f"{k} {v}" for k, v in sorted(read_as.items(), key=lambda kv: -kv[1])[:3])
        table[lang] = row
    return pd.DataFrame.from_dict(table, orient="index")


def confusions(result: dict, model: str = SHIPPED, top: int = 10) -> list[tuple[str, str, int]]:
    """The most frequent (true language, read as, texts) of a model on clean text."""
    pairs = [(lang, other, n) for lang, e in result.get("languages", {}).get(model, {}).items()
             for other, n in e["read_as"].items()]
    return sorted(pairs, key=lambda p: (-p[2], p[0], p[1]))[:top]


def group_rows(result: dict, model: str = SHIPPED) -> pd.DataFrame:
    """The confusable groups of the language registry (e.g. bosnian-croatian-serbian) with two or more of the
    evaluated languages: their accuracy together, and how many of their misreadings stay inside the group."""
    per = result.get("languages", {}).get(model, {})
    rows = {}
    for g, langs in confusable_groups(list(per)).items():
        n = sum(per[x]["n"] for x in langs)
        wrong = sum(per[x]["n"] - per[x]["correct"] for x in langs)
        inside = sum(k for x in langs for other, k in per[x]["read_as"].items() if other in langs)
        rows[g] = {"languages": " ".join(langs), "texts": n, model: 100 * (n - wrong) / n if n else None,
                   "misreadings inside the group": f"{inside} of {wrong}"}
    return pd.DataFrame.from_dict(rows, orient="index")


def length_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The length buckets of a table indexed by bucket, in order (those present)."""
    return table.loc[[b[0] for b in BUCKETS if b[0] in table.index]]


def _cell(v: Any) -> str:
    if isinstance(v, str):
        return v or "-"
    if v is None or pd.isna(v):
        return "-"
    return f"{v:,}" if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and v > 100) else f"{v:.2f}"


def _md_table(df: pd.DataFrame, index_names: list[str]) -> str:
    cols = list(df.columns)
    right = [not (df[c].dtype == object and df[c].map(lambda v: isinstance(v, str)).any()) for c in cols]
    lines = ["| " + " | ".join(index_names + [str(c) for c in cols]) + " |",
             "| " + " | ".join(["---"] * len(index_names) + ["---:" if r else "---" for r in right]) + " |"]
    for key, row in df.iterrows():
        keys = list(key) if isinstance(key, tuple) else [key]
        lines.append("| " + " | ".join([str(k) for k in keys] + [_cell(v) for v in row]) + " |")
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _language_section(result: dict) -> list[str]:
    models = [m for m in (SHIPPED, SHARED, "teacher", "ngram", REFERENCE, REFERENCE_ALL)
              if m in result.get("languages", {})]
    table = language_rows(result, models)
    if table.empty:
        return []
    worst = table[SHIPPED].dropna().sort_values().head(10) if SHIPPED in table else pd.Series(dtype=float)
    parts = ["\n## Per language (clean text, all sets)\n",
             "Worst ten for the deployed model: " + ", ".join(f"{lang} {v:.1f} %" for lang, v in worst.items()) + ".",
             "", "Most frequent misreadings (deployed model; true language -> read as, texts): "
             + "; ".join(f"{a} -> {b} {n}" for a, b, n in confusions(result)) + ".", "",
             _md_table(table, ["language"])]
    groups = group_rows(result)
    if not groups.empty:
        parts += ["", "Confusable groups (the language registry's, pixelpipe/data/text/languages.json), deployed model:",
                  "", _md_table(groups, ["group"])]
    return parts + _breadth_lines(table, result.get("reference_languages") or [])


def breadth(table: pd.DataFrame, known: list[str]) -> dict[str, list[tuple[str, float]]]:
    """Language by language against py3langid restricted to the languages both know: where the deployed model is
    ahead (restricted to the same languages where the evaluation scored it so), where py3langid is, where they are
    level; and the languages only the model knows, with its accuracy."""
    out: dict[str, list[tuple[str, float]]] = {"ahead": [], "behind": [], "level": [], "only": []}
    if SHIPPED not in table or REFERENCE not in table:
        return out
    for lang, row in table.iterrows():
        ours = row[SHIPPED]
        if ours is None or pd.isna(ours):
            continue
        if lang not in known:
            out["only"].append((lang, float(ours)))
            continue
        shared = row[SHARED] if SHARED in table and not pd.isna(row[SHARED]) else ours
        diff = float(shared - row[REFERENCE])
        out["ahead" if diff > 0 else "behind" if diff < 0 else "level"].append((lang, diff))
    return out


def _breadth_lines(table: pd.DataFrame, known: list[str]) -> list[str]:
    b = breadth(table, known)
    if not any(b.values()):
        return []

    def names(key: str) -> str:
        return ", ".join(f"{lang} {v:+.1f}" for lang, v in sorted(b[key], key=lambda x: -abs(x[1]))) or "none"

    only = ", ".join(f"{lang} {v:.1f} %" for lang, v in sorted(b["only"], key=lambda x: x[1])) or "none"
    both = " (both restricted to them)" if SHARED in table else ""
    return ["", f"Against {REFERENCE} (restricted to the {len(known)} languages both know), language by language "
            f"(points of the deployed model{both} over it): ahead on {len(b['ahead'])} ({names('ahead')}); behind on "
            f"{len(b['behind'])} ({names('behind')}); level on {len(b['level'])}. Languages only the model knows "
            f"({len(b['only'])}): {only}."]


def _calibration_section(result: dict) -> list[str]:
    cal = result.get("calibration")
    if not cal:
        return []
    lines = ["\n## Calibration of the deployed model (clean text, all sets)\n",
             f"Expected calibration error {100 * cal['ece']:.2f} % over {cal['texts']:,} texts: how far the predicted "
             "probability is from the share of texts read right, per confidence bin.\n",
             "| confidence | texts | mean confidence | accuracy |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {b['low']:.2f}-{b['high']:.2f} | {b['n']:,} | {100 * b['confidence']:.2f} | {100 * b['accuracy']:.2f} |"
              for b in cal["bins"]]
    return lines + _bucket_calibration(cal) + _cant_tell_section(cal)


def _bucket_calibration(cal: dict) -> list[str]:
    buckets = {k: v for k, v in cal.get("buckets", {}).items() if k != "all"}
    if not buckets:
        return []
    lines = ["", "By length (characters): a pooled ECE is mostly long, easy text.", "",
             "| length | texts | ECE (%) | accuracy (%) | mean confidence (%) |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, b in buckets.items():
        n = sum(p["n"] for p in b["bins"])
        acc = sum(p["n"] * p["accuracy"] for p in b["bins"]) / n
        conf = sum(p["n"] * p["confidence"] for p in b["bins"]) / n
        lines.append(f"| {name} | {b['texts']:,} | {100 * b['ece']:.2f} | {100 * acc:.2f} | {100 * conf:.2f} |")
    return lines


def _cant_tell_section(cal: dict) -> list[str]:
    buckets = cal.get("buckets", {})
    if not buckets:
        return []
    groups = ", ".join(f"{g} ({' '.join(m)})" for g, m in cal.get("groups", {}).items()) or "none among these labels"
    lines = ["\n## Can't tell: answers given against share answered (deployed model, clean text, all sets)\n",
             f"Below the threshold predict answers a confusable group when its probability reaches the threshold "
             f"(groups: {groups}), else no language (`undecided`). Default threshold **{cal['threshold']}**. "
             "Answered: a language or a group; accuracy: of the answers given (a group is right when it holds the "
             "true language).\n"]
    names = list(buckets)
    lines += ["| threshold | " + " | ".join(f"{b} answered | {b} accuracy" for b in names) + " |",
              "| ---: | " + " | ".join("---: | ---:" for _ in names) + " |"]
    for k, row in enumerate(buckets[names[0]]["selective"]):
        t = row["threshold"]
        cells = [f"{100 * buckets[b]['selective'][k]['answered']:.1f} | {100 * buckets[b]['selective'][k]['accuracy']:.2f}"
                 for b in names]
        mark = f"**{t}**" if t == cal["threshold"] else f"{t}"
        lines.append(f"| {mark} | " + " | ".join(cells) + " |")
    return lines


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
             "\n## Clean text, by length (characters, all sets)\n", _md_table(buckets, ["length"])]
    if _scope(rows) == COMMON:
        common = length_rows(accuracy_table(rows, perturbation=CLEAN, set=sets, scope=COMMON))
        total = clean_accuracy_all_sets(result, COMMON)
        parts += [f"\n## Clean text of the languages py3langid knows ({len(result.get('reference_languages', []))} "
                  "of the model's), by length\n", _md_table(pd.concat([common, total]), ["length"])]
    parts += ["\n## Perturbations, by set\n", _md_table(kinds, ["set", "perturbation"]), "\n## Goals\n",
              "| goal | measured | target | met |", "| --- | ---: | ---: | --- |"]
    for g in result["goals"]:
        parts.append(f"| {g['goal']} | {_fmt(g['value'])} | {_fmt(g['target'])} | "
                     f"{'-' if g['met'] is None else ('yes' if g['met'] else '**no**')} |")
    parts += _calibration_section(result) + _language_section(result)
    if result.get("missing"):
        parts.append(f"\nNot scored: {', '.join(result['missing'])}.")
    return "\n".join(parts) + "\n"


def figure(result: dict):
    """The evaluation figure (matplotlib Figure): clean accuracy by length bucket, accuracy per perturbation (one
    bar per model), and the deployed model's reliability diagram. One legend for the two bar panels (the same
    models), below them: inside an axes it covered the bars, which all reach near 100 %."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, sets = result["rows"], list(result["sets"])
    panels = [(length_rows(accuracy_table(rows, perturbation=CLEAN, set=sets)), "clean text by length"),
              (accuracy_table(rows, bucket="all", set=sets), "by perturbation (all sets)")]
    cal = result.get("calibration")
    fig, axes = plt.subplots(1, 3 if cal else 2, figsize=(18 if cal else 13, 4.2))
    for ax, (table, title) in zip(axes, panels):
        table.plot.bar(ax=ax, rot=0, width=0.8, legend=False)
        ax.set_ylim(max(0.0, float(table.min().min()) - 5), 100.5)
        ax.set_title(title)
        ax.set_ylabel("accuracy (%)")
        ax.grid(axis="y", alpha=0.3)
    if cal:
        ax = axes[2]
        ax.plot([0, 1], [0, 1], color="gray", lw=1, ls="--")
        ax.plot([b["confidence"] for b in cal["bins"]], [b["accuracy"] for b in cal["bins"]], marker="o",
                label=f"all ({100 * cal['ece']:.2f} %)")
        for name, entry in cal.get("buckets", {}).items():  # per length: where a pooled ECE hides short text
            if name != "all":
                ax.plot([b["confidence"] for b in entry["bins"]], [b["accuracy"] for b in entry["bins"]], marker=".",
                        lw=1, alpha=0.8, label=f"{name} chars ({100 * entry['ece']:.2f} %)")
        ax.set_xlabel("predicted probability")
        ax.set_ylabel("share read right")
        ax.set_title("deployed model, reliability (ECE)")
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    columns = min(len(labels), 8) or 1
    fig.tight_layout(rect=(0, 0.02 + 0.06 * -(-len(labels) // columns), 1, 1))  # room for the legend below
    below = (axes[0].get_position().x0 + axes[1].get_position().x1) / 2  # centred under the two bar panels
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(below, 0), ncol=columns, fontsize=8,
               frameon=False)
    return fig


def plot(result: dict, path: str | Path) -> None:
    """The evaluation figure as a PNG (written atomically)."""
    import matplotlib.pyplot as plt

    fig = figure(result)
    with io.atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def write_outputs(result: dict, json_path: str | Path, md_path: str | Path, png_path: str | Path) -> None:
    result = {**result, "goals": goals(result["rows"]) + calibration_goals(result.get("calibration"))}
    io.write_json(json_path, result)
    io.write_text(md_path, render_markdown(result))
    plot(result, png_path)
