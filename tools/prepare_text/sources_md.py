"""The generated tables of SOURCES.md (between their <!-- name:start/end --> markers), so its numbers are always
those of the files beside it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .labels import final_labels
from .qualify import THRESHOLD_FAMILIES, THRESHOLD_FAMILY_MIN, THRESHOLD_STRINGS


def counts_table(entries: list[dict], codes: list[str]) -> str:
    """Markdown table of rows per source and language, as SOURCES.md shows it."""
    lines = [
        "| language | " + " | ".join(f"{e['id']} ({e['role']}, {e['style']})" for e in entries) + " |",
        "| --- |" + " ---: |" * len(entries),
    ]
    lines += [f"| {code} | " + " | ".join(f"{e['counts'][code]:,}" for e in entries) + " |" for code in codes]
    lines.append("| **total** | " + " | ".join(f"**{sum(e['counts'].values()):,}**" for e in entries) + " |")
    return "\n".join(lines)


def languages_table(registry: list[dict]) -> str:
    """Markdown table of the registry: what ships and why it qualifies."""
    lines = ["| code | language | scripts | distinct strings | by family | confusable groups |",
             "| --- | --- | --- | ---: | --- | --- |"]
    for e in registry:
        families = ", ".join(f"{f} {n:,}" for f, n in e["families"].items())
        lines.append(f"| {e['code']} | {e['name']} | {' '.join(e['scripts'])} | {e['strings']:,} | {families} | "
                     f"{', '.join(e['groups'])} |")
    return "\n".join(lines)


def short_list(short: dict[str, dict]) -> str:
    """Every language with training text that misses the threshold, by reason, most text first."""
    reasons = defaultdict(list)
    shown_as = final_labels(short)
    for provisional, by_family in short.items():
        label = shown_as[provisional]
        total = sum(by_family.values())
        rich = [f for f, n in by_family.items() if n >= THRESHOLD_FAMILY_MIN]
        if len(rich) >= THRESHOLD_FAMILIES:
            why = f"fewer than {THRESHOLD_STRINGS:,} distinct strings"
        elif total >= THRESHOLD_STRINGS:
            why = f"enough text, but from {len(rich)} source famil{'y' if len(rich) == 1 else 'ies'} with " \
                  f"{THRESHOLD_FAMILY_MIN}+ strings"
        else:
            why = f"fewer than {THRESHOLD_STRINGS:,} distinct strings and fewer than {THRESHOLD_FAMILIES} families " \
                  f"with {THRESHOLD_FAMILY_MIN}+"
        reasons[why].append((total, label, by_family))
    lines = []
    for why, items in sorted(reasons.items()):
        items.sort(key=lambda x: (-x[0], x[1]))
        shown = "; ".join(f"{label} {total:,} ({', '.join(f'{f} {n:,}' for f, n in fam.items())})"
                          for total, label, fam in items if total >= 500)
        rest = ", ".join(f"{label} {total:,}" for total, label, _ in items if total < 500)
        lines.append(f"- **{why}** ({len(items)}): {shown}" + (f"; under 500 strings: {rest}" if rest else ""))
    return "\n".join(lines)


def threshold_table(ok: dict[str, dict], short: dict[str, dict]) -> str:
    """How many languages other thresholds would keep (distinct strings in all x strings per family, two families),
    counted on the same text: what the chosen threshold was picked from."""
    every = [list(by_family.values()) for by_family in (*ok.values(), *short.values())]
    family_mins = (200, 300, 500, 1000)
    lines = ["| distinct strings | " + " | ".join(f"2 families with {f:,}+" for f in family_mins) + " |",
             "| ---: |" + " ---: |" * len(family_mins)]
    for total in (1000, 2000, 3000, 4000, 8000):
        counts = [sum(sum(c) >= total and sum(n >= f for n in c) >= THRESHOLD_FAMILIES for c in every)
                  for f in family_mins]
        lines.append(f"| {total:,}+ | " + " | ".join(f"**{n}**" if (total, f) == (THRESHOLD_STRINGS,
                     THRESHOLD_FAMILY_MIN) else str(n) for n, f in zip(counts, family_mins)) + " |")
    return "\n".join(lines)


def _replace_between(text: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text:
        return text + f"\n{start}\n{body}\n{end}\n"
    head, rest = text.split(start)
    return f"{head}{start}\n{body}\n{end}{rest.split(end)[1]}"


def update_sources_md(markdown: Path, index: list[dict], registry: list[dict], ok: dict, short: dict) -> None:
    """Rewrite the generated tables between their markers in SOURCES.md."""
    text = markdown.read_text() if markdown.exists() else "# Sources\n"
    codes = [e["code"] for e in registry]
    text = _replace_between(text, "threshold", threshold_table(ok, short))
    text = _replace_between(text, "counts", counts_table(index, codes))
    text = _replace_between(text, "languages", languages_table(registry))
    text = _replace_between(text, "short", short_list(short))
    markdown.write_text(text)
