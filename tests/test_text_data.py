"""The shipped real text (pixelpipe/data/text) is what SOURCES.md says: clean, licensed, held-out kept apart."""

from __future__ import annotations

import importlib.util
import json
import re
import unicodedata
from collections import Counter
from functools import cache
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pixelpipe.data.sources import LANGUAGES

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "pixelpipe" / "data" / "text"
LANGS = set(LANGUAGES)
COLUMNS = ["text", "label", "source", "origin"]
MIN_UI_ROWS = 1000  # every training source of interface strings has at least this many rows in every language
MIN_PROSE_ROWS = 500  # the training prose sources together, in every language not in PROSE_GAPS
PROSE_GAPS = {"az", "hy", "he", "uk", "mk", "el"}  # no clean prose source found (SOURCES.md says why)
MIN_HELDOUT_UI_ROWS = 300
INVENTORY_SHARE = 0.995
# Written independently of tools/prepare_text.py on purpose: what no shipped text may contain.
PLACEHOLDERS = re.compile(
    r"\{|\}"  # Fluent { $var } { -term }, {0}, {{...}}, %(name)s's braces
    r"|%(?:\d+\$)?[sdSD]|%\(\w+\)|%\d"  # printf, Python, Qt
    r"|\$\d|\$[a-zA-Z_]"  # $1 $var
    r"|&(?:amp|lt|gt|quot|nbsp|#\d+);"  # entities
    r"|<\s*/?\s*[a-zA-Z][^>]*>"  # tags
    r"|\[\[|\]\]|https?://"  # wiki links, URLs
)

WHITESPACE = re.compile(r"^\s|\s$|\s\s|[^\S ]")  # stripped, one plain space between words
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ue000-\uf8ff\ud800-\udfff]")


@cache
def sources() -> list[dict]:
    return json.loads((TEXT / "sources.json").read_text(encoding="utf-8"))


@cache
def table(source_id: str) -> dict[str, list[str]]:
    return pq.read_table(TEXT / f"{source_id}.parquet").to_pydict()


def ids(role: str | None = None, style: str | None = None) -> list[str]:
    return [s["id"] for s in sources() if role in (None, s["role"]) and style in (None, s["style"])]


def leak_key(text: str) -> str:
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()
    return text.casefold().rstrip(" .!?:;…")


def test_both_roles_and_styles_are_there():
    assert {(s["role"], s["style"]) for s in sources()} == {
        ("train", "ui"),
        ("train", "prose"),
        ("heldout", "ui"),
        ("heldout", "prose"),
    }


@pytest.mark.parametrize("source_id", [s["id"] for s in sources()])
def test_rows_are_clean_and_sorted(source_id):
    rows = table(source_id)
    schema = pq.read_schema(TEXT / f"{source_id}.parquet")
    assert schema.names == COLUMNS and all(str(t) == "string" for t in schema.types)
    assert set(rows["label"]) <= LANGS and set(rows["source"]) == {source_id}
    keys = list(zip(rows["label"], rows["origin"]))
    assert keys == sorted(keys), "not sorted by (label, origin)"
    bad = {
        "length": [t for t in rows["text"] if not 15 <= len(t) <= 600],
        "not NFC": [t for t in rows["text"] if not unicodedata.is_normalized("NFC", t)],
        "whitespace": [t for t in rows["text"] if WHITESPACE.search(t)],
        "placeholder": [t for t in rows["text"] if PLACEHOLDERS.search(t)],
        "control": [t for t in rows["text"] if CONTROL.search(t)],
    }
    assert not any(bad.values()), {k: v[:5] for k, v in bad.items() if v}
    pairs = Counter(zip(rows["label"], rows["text"]))
    assert not [p for p, n in pairs.items() if n > 1], "duplicate (label, text)"


@pytest.mark.parametrize("source_id", [s["id"] for s in sources()])
def test_counts_and_licenses_match_the_index(source_id):
    entry = next(s for s in sources() if s["id"] == source_id)
    counts = Counter(table(source_id)["label"])
    assert entry["counts"] == {lang: counts.get(lang, 0) for lang in sorted(LANGS)}
    assert {"package", "version", "license", "attribution"} <= set(entry) and entry["role"] in ("train", "heldout")
    for name in [entry["license_file"], *entry.get("license_files", [])]:
        assert (TEXT / "LICENSES" / name).is_file(), f"{source_id}: LICENSES/{name} missing"
    assert f"`{source_id}`" in (TEXT / "SOURCES.md").read_text(encoding="utf-8")


def test_sources_md_table_shows_the_counts():
    markdown = (TEXT / "SOURCES.md").read_text(encoding="utf-8")
    for entry in sources():
        total = sum(entry["counts"].values())
        assert f"**{total:,}**" in markdown, f"SOURCES.md table is stale for {entry['id']}"


def test_ui_training_sources_cover_every_language():
    for source_id in ids("train", "ui"):
        thin = {k: v for k, v in Counter(table(source_id)["label"]).items() if v < MIN_UI_ROWS}
        assert set(Counter(table(source_id)["label"])) == LANGS and not thin, (source_id, thin)


def test_training_prose_covers_every_language_but_the_documented_gaps():
    counts = Counter(label for s in ids("train", "prose") for label in table(s)["label"])
    covered = {lang for lang in LANGS if counts[lang] >= MIN_PROSE_ROWS}
    assert covered == LANGS - PROSE_GAPS, f"prose rows per language: {dict(counts)}; update PROSE_GAPS and SOURCES.md"


def test_heldout_sources_cover_every_language():
    for source_id in ids("heldout"):
        counts = Counter(table(source_id)["label"])
        floor = MIN_HELDOUT_UI_ROWS if source_id in ids("heldout", "ui") else 60
        assert set(counts) == LANGS and min(counts.values()) >= floor, (source_id, dict(counts))


def test_heldout_texts_never_occur_in_training():
    training = {leak_key(t) for s in ids("train") for t in table(s)["text"]}
    for source_id in ids("heldout"):
        leaked = [t for t in table(source_id)["text"] if leak_key(t) in training]
        assert not leaked, (source_id, leaked[:5])


def inventory_for(label: str, inventory: dict) -> set[str]:
    """What the atlas should hold for a language: its CLDR sets, the common punctuation, space and basic Latin."""
    entry = inventory["languages"][label]
    basic_latin = {chr(c) for c in range(0x41, 0x5B)} | {chr(c) for c in range(0x61, 0x7B)}  # brand names, acronyms
    return set("".join(entry.values())) | set(inventory["common"]) | {" "} | basic_latin


def test_inventory_covers_nearly_every_row():
    inventory = json.loads((TEXT / "inventory.json").read_text(encoding="utf-8"))
    assert set(inventory["languages"]) == LANGS and inventory["cldr_version"]
    assert set("0123456789,.;:!?\"'()-«»“”„…–—") <= set(inventory["common"])
    by_label: dict[str, list[str]] = {label: [] for label in LANGS}
    for source in sources():
        for text, label in zip(table(source["id"])["text"], table(source["id"])["label"]):
            by_label[label].append(text)
    misses = {}
    for label, texts in sorted(by_label.items()):
        allowed = inventory_for(label, inventory)
        outside = [t for t in texts if not allowed.issuperset(t)]
        if len(outside) > (1 - INVENTORY_SHARE) * len(texts):
            misses[label] = (
                len(outside),
                len(texts),
                Counter(c for t in outside for c in set(t) - allowed).most_common(8),
            )
    assert not misses, f"rows with characters outside the inventory: {misses}"


def _prepare_text():
    spec = importlib.util.spec_from_file_location("prepare_text", ROOT / "tools" / "prepare_text.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prepare_text_helpers():
    prep = _prepare_text()
    assert prep.unicode_set(r"[a-c {ch} \- ä]") == ["a", "b", "c", "ch", "-", "ä"]
    assert prep.clean("  Zwei\u00a0 Wörter\u200e\n") == "Zwei Wörter"
    assert prep.strip_simple_markup("&Open <b>file</b>") == "Open  file "
    assert prep.rejection("Open the { $name } folder", "en") == "placeholder"
    assert prep.rejection("Открыть папку с загрузками", "de") == "script"
    assert prep.rejection("Открыть папку с загрузками", "ru") is None
    assert prep.sentences("Erste Aussage, ja. Zweite Aussage; weiter! Dritte?", "de") == [
        "Erste Aussage, ja.",
        "Zweite Aussage; weiter!",
        "Dritte?",
    ]
    assert prep.sentences("Τι είναι; Ένα βιβλίο.", "el") == ["Τι είναι;", "Ένα βιβλίο."]
