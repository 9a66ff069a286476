"""The shipped real text (pixelpipe/data/text) is what SOURCES.md says: clean, licensed, held-out kept apart, every
language of the registry meeting the threshold, every character drawn by the default fonts."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pixelpipe.config.resolve import resolve_config
from pixelpipe.data.sources import FAKER_LOCALES, registry

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "pixelpipe" / "data" / "text"
LANGS = set(registry())
COLUMNS = ["text", "label", "source", "origin"]
DENSE_SCRIPTS = {"Hani", "Hira", "Kana", "Hang"}  # 6-character minimum (15 for every other script)
MIN_HELDOUT_UI_ROWS = 100
INVENTORY_SHARE = 0.995  # the first 19 languages (Faker's): CLDR's sets cover their text
INVENTORY_SHARE_OTHERS = 0.9  # the others: CLDR's data is thinner (SOURCES.md lists the measured shares)
# CLDR's sets leave out what a language's text uses often: mai (candrabindu, vocalic r), skr (harakat), zh-Hant (Han
# characters beyond CLDR's lists).
INVENTORY_EXCEPTIONS = {"mai", "skr", "zh-Hant"}
# Written independently of tools/prepare_text/ on purpose: what no shipped text may contain.
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
def languages_file() -> dict:
    return json.loads((TEXT / "languages.json").read_text(encoding="utf-8"))


@cache
def table(source_id: str) -> dict[str, list[str]]:
    return pq.read_table(TEXT / f"{source_id}.parquet").to_pydict()


def ids(role: str | None = None, style: str | None = None) -> list[str]:
    return [s["id"] for s in sources() if role in (None, s["role"]) and style in (None, s["style"])]


def leak_key(text: str) -> str:
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()
    return text.casefold().rstrip(" .!?:;…")


def min_chars(label: str) -> int:
    return 6 if set(registry()[label]["scripts"]) <= DENSE_SCRIPTS else 15


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
        "length": [t for t, lab in zip(rows["text"], rows["label"]) if not min_chars(lab) <= len(t) <= 600],
        "not NFC": [t for t in rows["text"] if not unicodedata.is_normalized("NFC", t)],
        "whitespace": [t for t in rows["text"] if WHITESPACE.search(t)],
        "placeholder": [t for t in rows["text"] if PLACEHOLDERS.search(t)],
        "control": [t for t in rows["text"] if CONTROL.search(t)],
    }
    assert not any(bad.values()), {k: v[:5] for k, v in bad.items() if v}
    pairs = Counter(zip(rows["label"], rows["text"]))
    assert not [p for p, n in pairs.items() if n > 1], "duplicate (label, text)"
    groups = pq.ParquetFile(TEXT / f"{source_id}.parquet").metadata
    assert groups.num_row_groups == len(set(rows["label"])), "one row group per language"


@pytest.mark.parametrize("source_id", [s["id"] for s in sources()])
def test_counts_and_licenses_match_the_index(source_id):
    entry = next(s for s in sources() if s["id"] == source_id)
    counts = Counter(table(source_id)["label"])
    assert entry["counts"] == {lang: counts.get(lang, 0) for lang in sorted(LANGS)}
    assert {"package", "version", "license", "attribution", "family"} <= set(entry)
    assert entry["role"] in ("train", "heldout")
    for name in [entry["license_file"], *entry.get("license_files", [])]:
        assert (TEXT / "LICENSES" / name).is_file(), f"{source_id}: LICENSES/{name} missing"
    assert f"`{source_id}`" in (TEXT / "SOURCES.md").read_text(encoding="utf-8")
    cap = languages_file()["threshold"]["cap_" + ("train" if entry["role"] == "train" else "heldout")]
    assert max(counts.values()) <= cap


def test_sources_md_tables_show_the_counts_and_the_registry():
    markdown = (TEXT / "SOURCES.md").read_text(encoding="utf-8")
    for entry in sources():
        total = sum(entry["counts"].values())
        assert f"**{total:,}**" in markdown, f"SOURCES.md table is stale for {entry['id']}"
    for lang, entry in registry().items():
        assert f"| {lang} | {entry['name']} |" in markdown, f"SOURCES.md's language table lacks {lang}"


def test_training_text_is_one_copy_per_language():
    """No text ships twice under one language (across sources), nor under two languages (a small translation
    copying its neighbour), except under English as well as another (an untranslated copy is dropped from the
    other)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for source_id in ids("train"):
        for text, label in zip(table(source_id)["text"], table(source_id)["label"]):
            assert label not in seen[text], (source_id, label, text)
            seen[text].add(label)
    shared = {t: labels for t, labels in seen.items() if len(labels) > 1}
    assert not shared, list(shared.items())[:5]


def test_every_shipped_language_meets_the_threshold():
    """Training rows from at least `families` independent source families with `family_min` rows each and
    `strings` rows in all: true of the shipped (capped) rows, so true of the text they were drawn from."""
    threshold = languages_file()["threshold"]
    family = {s["id"]: s["family"] for s in sources()}
    per = defaultdict(Counter)
    for source_id in ids("train"):
        for label in table(source_id)["label"]:
            per[label][family[source_id]] += 1
    assert set(per) == LANGS
    for lang, by_family in per.items():
        rich = [f for f, n in by_family.items() if n >= threshold["family_min"]]
        assert sum(by_family.values()) >= threshold["strings"] and len(rich) >= threshold["families"], (lang, by_family)
        assert registry()[lang]["strings"] >= sum(by_family.values())
        assert set(registry()[lang]["families"]) >= set(by_family)


def test_registry_is_consistent():
    codes = [e["code"] for e in languages_file()["languages"]]
    assert codes == sorted(codes) and len(codes) == len(set(codes)) and 85 <= len(codes) <= 130
    for code, entry in registry().items():
        assert re.fullmatch(r"[a-z]{2,3}(-[A-Z][a-z]{3})?", code) and entry["name"] and entry["scripts"]
        assert all(re.fullmatch(r"[A-Z][a-z]{3}", s) for s in entry["scripts"])
    assert {"zh-Hans", "zh-Hant", "sr", "sr-Latn", "nb", "nn", "pt", "es", "en"} <= LANGS
    assert not {"pt-BR", "es-AR", "en-GB", "zh", "sh", "qqq"} & LANGS  # merged, or no single language
    udhr = Counter(table("udhr")["label"])
    assert {lang for lang, e in registry().items() if e["udhr"]} == set(udhr)


def test_heldout_sources_cover_the_languages():
    """UDHR: every language the package has a complete declaration of; the interface catalogs: most languages."""
    prose = Counter(table("udhr")["label"])
    assert min(prose.values()) >= 20 and len(prose) >= 0.85 * len(LANGS), dict(prose)
    ui = Counter(table("gettext-ui")["label"])
    covered = {lang for lang, n in ui.items() if n >= MIN_HELDOUT_UI_ROWS}
    assert len(covered) >= 0.8 * len(LANGS), sorted(LANGS - covered)


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
    assert set(inventory["languages"]) <= LANGS and inventory["cldr_version"]
    assert set("0123456789,.;:!?\"'()-«»“”„…–—") <= set(inventory["common"])
    by_label: dict[str, list[str]] = defaultdict(list)
    for source in sources():
        for text, label in zip(table(source["id"])["text"], table(source["id"])["label"]):
            by_label[label].append(text)
    misses = {}
    for label in sorted(set(inventory["languages"]) - INVENTORY_EXCEPTIONS):
        texts, allowed = by_label[label], inventory_for(label, inventory)
        outside = [t for t in texts if not allowed.issuperset(t)]
        share = INVENTORY_SHARE if label in FAKER_LOCALES else INVENTORY_SHARE_OTHERS
        if len(outside) > (1 - share) * len(texts):
            misses[label] = (len(outside), len(texts),
                             Counter(c for t in outside for c in set(t) - allowed).most_common(8))
    assert not misses, f"rows with characters outside the inventory: {misses}"


def test_default_fonts_draw_every_character_of_the_shipped_text():
    """Every cluster (a character with its marks) of every shipped text: one font of the default chain has all its
    glyphs, so no shipped row is a bad row."""
    from pixelpipe.data.atlas import undrawable
    from pixelpipe.data.charset import text_clusters

    fonts = resolve_config({})["render"]["fonts"]
    found = text_clusters(t for s in sources() for t in table(s["id"])["text"])
    assert not [c for c in sorted(found) if undrawable(c, fonts)]


def test_no_two_clusters_of_one_script_share_a_cell():
    """The atlas of every character of the shipped text and of every language's inventory, in the default render
    settings: clusters of one script draw distinct cells (look-alikes across scripts may share one)."""
    from pixelpipe.data.atlas import GlyphAtlas, check_distinct, cluster_script
    from pixelpipe.data.charset import build_charset, text_clusters

    render = resolve_config({})["render"]
    texts = [t for s in sources() for t in table(s["id"])["text"]]
    charset = build_charset(text_clusters(texts), render["fonts"], inventory=True)
    atlas = GlyphAtlas.from_clusters(charset, render["fonts"], render["font_size"], render["cell_height"],
                                     render["cell_width"])
    check_distinct(charset, atlas.cells)
    a, cyrillic_a = atlas.index["a"], atlas.index["\u0430"]
    assert cluster_script("a") != cluster_script("\u0430") and (atlas.cells[a] == atlas.cells[cyrillic_a]).all()


def test_prepare_text_modules_import():
    """Every module of tools/prepare_text/ imports: its sources need Debian and npm downloads, so no test runs them."""
    import importlib
    import pkgutil

    import tools.prepare_text as package

    names = [m.name for m in pkgutil.iter_modules(package.__path__)]
    assert {"__main__", "build", "labels", "cleaning"} <= set(names)
    for name in names:
        importlib.import_module(f"tools.prepare_text.{name}")


def test_prepare_text_helpers():
    from tools.prepare_text import cleaning, inventory, prose
    assert inventory.unicode_set(r"[a-c {ch} \- ä]") == ["a", "b", "c", "ch", "-", "ä"]
    assert cleaning.clean("  Zwei\u00a0 Wörter\u200e\n") == "Zwei Wörter"
    assert cleaning.strip_simple_markup("&Open <b>file</b>") == "Open  file "
    assert cleaning.rejection("Open the { $name } folder", "en-Latn") == "placeholder"
    assert cleaning.rejection("Открыть папку с загрузками", "de-Latn") == "script"
    assert cleaning.rejection("Открыть папку с загрузками", "ru-Cyrl") is None
    assert cleaning.rejection("ファイルを開く", "ja-Jpan") is None  # 7 characters: enough for Han and Kana
    assert cleaning.rejection("हिन्दी में खोजें", "hi-Deva") is None  # vowel signs count with their letters
    assert prose.sentences("Erste Aussage, ja. Zweite Aussage; weiter! Dritte?", "de-Latn") == [
        "Erste Aussage, ja.",
        "Zweite Aussage; weiter!",
        "Dritte?",
    ]
    assert prose.sentences("Τι είναι; Ένα βιβλίο.", "el-Grek") == ["Τι είναι;", "Ένα βιβλίο."]
    assert prose.sentences("第一句。第二句！", "zh-Hans") == ["第一句。", "第二句！"]


def test_prepare_text_reads_locale_codes(monkeypatch):
    """Regional variants merge, script variants stay apart, codes that are no single language are refused (CLDR's
    likelySubtags stubbed with the entries these codes need)."""
    from tools.prepare_text import labels
    likely = {"es": "es-Latn-ES", "pt": "pt-Latn-BR", "zh": "zh-Hans-CN", "sr": "sr-Cyrl-RS", "en": "en-Latn-US",
              "be": "be-Cyrl-BY", "nb": "nb-Latn-NO", "ca": "ca-Latn-ES"}
    scripts = {"Latn": "Latin", "Cyrl": "Cyrillic", "Hans": "Simplified", "Hant": "Traditional"}
    monkeypatch.setattr(labels, "cldr_core", lambda: {"likely": likely, "alias": {}, "scripts": scripts})
    cases = {("es-AR", "bcp47"): "es-Latn", ("pt_BR", "gettext"): "pt-Latn", ("zh-TW", "bcp47"): "zh-Hant",
             ("sr@latin", "gettext"): "sr-Latn", ("sr-ec", "mediawiki"): "sr-Cyrl", ("en@quot", "gettext"): None,
             ("be-tarask", "mediawiki"): "be-Cyrl", ("qqq", "mediawiki"): None, ("sh", "mediawiki"): None,
             ("roa-tara", "mediawiki"): None, ("no", "gettext"): "nb-Latn", ("ca-valencia", "bcp47"): "ca-Latn",
             ("zh", "bcp47"): None, ("en_GB", "gettext"): "en-Latn"}
    for (code, kind), label in cases.items():
        assert labels.provisional_label(code, kind) == label, code
    assert labels.final_labels(["sr-Cyrl", "sr-Latn", "zh-Hans", "pt-Latn"]) == {
        "sr-Cyrl": "sr", "sr-Latn": "sr-Latn", "zh-Hans": "zh-Hans", "pt-Latn": "pt"}
