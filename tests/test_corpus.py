import json

import numpy as np
import pandas as pd
import pytest

from pixelpipe.core import io
from pixelpipe.data.corpus import assign_splits, build_corpus, find_bad_rows, generate_default_corpus, planned_split_sizes
from pixelpipe.data.corpusfile import SPLITS, CorpusError, load_user_corpus
from pixelpipe.data.sources import DEFAULT_LOCALES
from tests._config_utils import section

DEFAULT_CFG = section("corpus", path=None, num_samples=190, min_chars=10, max_chars=40, sources=["faker"],
                      splits={"train": 0.8, "val": 0.1, "test": 0.1})
REAL_LANGS = ["de", "fr", "ja", "ru", "hi"]
REAL_CFG = section("corpus", path=None, num_samples=100, languages=REAL_LANGS)  # the default sources: real text
FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")
FONTS_ALL = FONTS + ("Unifont",)

ROWS = [  # (text, label, split); rows 3-6 are bad
    ("Hello world", "en", "train"),
    ("Bonjour le monde", "fr", "train"),
    ("", "en", "train"),
    ("Hola", None, "val"),
    ("rocket \U0001F680 launch", "en", "val"),
    ("no label here", "NA", "test"),
    ("Guten Tag", "de", "train"),
    ("Привет мир", "ru", "val"),
    ("Γειά σου", "el", "test"),
    ("Good night", "en", "test"),
]
EXPECTED_BAD = {"empty text": 1, "missing label": 2, "undrawable characters": 1}


def _write_user(tmp_path, fmt):
    df = pd.DataFrame(ROWS, columns=["body", "lang", "part"])
    path = tmp_path / f"corpus.{fmt}"
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(dict(zip(df.columns, r)), ensure_ascii=False) + "\n" for r in ROWS))
    else:
        df.to_parquet(path, index=False)
    return path


def _user_cfg(path, **kw):
    return section("corpus", **{"path": str(path), "text_column": "body", "label_column": "lang", "split_column": "part", **kw})


def test_default_corpus_matches_plan(tmp_path):
    logs = []
    info = build_corpus(DEFAULT_CFG, FONTS, tmp_path, seed=0, log=logs.append)
    planned = planned_split_sizes(DEFAULT_CFG)
    assert planned == {"train": 152, "val": 19, "test": 19}
    assert info["split_sizes"] == planned and info["bad_rows"] == {} and info["sources"] == {"faker": 190}
    assert info["labels"] == sorted(loc.split("_")[0] for loc in DEFAULT_LOCALES)
    assert io.read_json(tmp_path / "labels.json") == info
    frames = {s: pd.read_parquet(tmp_path / f"{s}.parquet") for s in SPLITS}
    assert {s: len(f) for s, f in frames.items()} == planned
    all_rows = pd.concat(frames.values())
    assert all_rows["label"].dtype == np.int64 and set(all_rows["label"]) == set(range(19))
    assert all_rows["id"].is_unique and all_rows["text"].str.len().between(10, 40).all()
    assert list(all_rows.columns) == ["id", "text", "label", "source", "origin"]
    assert all_rows["origin"].str.startswith("faker:").all()


def test_real_text_corpus_is_balanced_with_provenance_and_a_charset(tmp_path):
    """The default corpus: real human-written text from the shipped sources, 20 rows per language of a 5-language
    subset, every row naming its source and where in it the text comes from; the charset covers every split's
    characters and the inventory of those languages, not of the others."""
    from pixelpipe.data.charset import read_charset, text_clusters
    from pixelpipe.data.sources import catalog

    info = build_corpus(REAL_CFG, FONTS_ALL, tmp_path, seed=0, log=lambda _: None)
    rows = pd.concat(pd.read_parquet(tmp_path / f"{s}.parquet") for s in SPLITS)
    assert len(rows) == 100 and rows["label"].value_counts().eq(20).all() and info["labels"] == sorted(REAL_LANGS)
    assert set(rows["source"]) <= set(REAL_CFG["sources"]) and len(set(rows["source"])) >= 4
    assert rows["origin"].str.len().gt(0).all()
    assert sum(info["sources"].values()) == 100 and catalog()["firefox"]["role"] == "train"
    charset = read_charset(tmp_path / "charset.json")
    assert charset[0] == " " and text_clusters(rows["text"]) <= set(charset)
    assert {"«", "“", "0", "ß", "ё", "ツ", "क"} <= set(charset)  # the languages' inventory, whatever the sample holds
    assert not {"ㄱ", "ש", "ก"} & set(charset)  # Korean, Hebrew, Thai: not among the corpus's languages
    assert planned_split_sizes(REAL_CFG) == info["split_sizes"]


def test_every_language_by_default_and_quotas_balanced():
    """corpus.languages null: every registry language; each gets an equal share, a language short of rows gives
    all it has and the others share what it lacks."""
    from pixelpipe.data.sources import language_quotas, languages

    cfg = section("corpus", path=None, num_samples=len(languages()) * 10)
    assert sum(planned_split_sizes(cfg).values()) == len(languages()) * 10
    assert language_quotas(100, {"a": 5, "b": None, "c": 100, "d": 20}) == {"a": 5, "b": 38, "c": 37, "d": 20}
    assert language_quotas(10, {"a": None, "b": None, "c": None}) == {"a": 4, "b": 3, "c": 3}
    assert language_quotas(100, {"a": 5, "b": 7}) == {"a": 5, "b": 7}


@pytest.mark.parametrize("languages, message", [
    (["de", "xx"], r"corpus\.languages: unknown language\(s\) \['xx'\]"),
    (["de"], r"corpus\.languages: a classifier needs at least 2 languages"),
    (["de", "de"], r"corpus\.languages lists a language twice"),
])
def test_languages_are_checked(languages, message):
    with pytest.raises(CorpusError, match=message):
        planned_split_sizes(section("corpus", path=None, languages=languages))


def test_a_corpus_file_takes_the_inventory_of_its_languages(tmp_path):
    """With corpus.path, corpus.languages names whose characters the inventory adds (unknown codes refused)."""
    from pixelpipe.data.charset import read_charset

    path = _write_user(tmp_path, "csv")
    build_corpus(_user_cfg(path, languages=["ja", "de"]), FONTS_ALL, tmp_path / "ja", seed=0, log=lambda _: None)
    assert {"ツ", "ß"} <= set(read_charset(tmp_path / "ja" / "charset.json"))
    build_corpus(_user_cfg(path), FONTS_ALL, tmp_path / "default", seed=0, log=lambda _: None)
    charset = set(read_charset(tmp_path / "default" / "charset.json"))
    assert "ß" in charset and "ツ" not in charset  # Faker's 19 languages, as before the registry
    with pytest.raises(CorpusError, match=r"corpus\.languages: unknown language\(s\) \['xx'\]"):
        planned_split_sizes(_user_cfg(path, languages=["xx"]))


def test_faker_only_covers_its_19_languages_and_refuses_others():
    assert len(build_quotas(section("corpus", path=None, sources=["faker"], num_samples=190))) == 19
    with pytest.raises(CorpusError, match=r"corpus\.languages: \['ja'\] have no text in corpus\.sources"):
        planned_split_sizes(section("corpus", path=None, sources=["faker"], languages=["de", "ja"]))


def build_quotas(cfg):
    from pixelpipe.data.corpus import CorpusSettings, builtin_quotas

    return builtin_quotas(CorpusSettings.from_section(cfg))


def test_sources_are_checked():
    with pytest.raises(CorpusError, match="unknown source 'nope'"):
        planned_split_sizes(section("corpus", sources=["nope"]))


def test_default_corpus_deterministic(tmp_path):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        build_corpus(DEFAULT_CFG, FONTS, tmp_path / name, seed=seed, log=lambda _: None)
    for s in SPLITS:
        assert (tmp_path / "a" / f"{s}.parquet").read_bytes() == (tmp_path / "b" / f"{s}.parquet").read_bytes()
    assert (tmp_path / "a/train.parquet").read_bytes() != (tmp_path / "c/train.parquet").read_bytes()


def test_generate_balanced_and_drawable():
    df = generate_default_corpus(57, 5, 30, seed=3)
    assert df["label"].value_counts().eq(3).all() and df["label"].nunique() == 19
    assert df["id"].iloc[0] == "row-000001"
    assert find_bad_rows(df, FONTS).empty


def test_assign_splits():
    a = assign_splits(100, {"train": 0.7, "val": 0.2, "test": 0.1}, seed=5)
    assert (a == assign_splits(100, {"train": 0.7, "val": 0.2, "test": 0.1}, seed=5)).all()
    assert {s: int((a == s).sum()) for s in SPLITS} == {"train": 70, "val": 20, "test": 10}
    with pytest.raises(ValueError, match="corpus.splits"):
        assign_splits(10, {"train": 0.5, "val": 0.1}, seed=0)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_user_corpus_skip(tmp_path, fmt):
    path = _write_user(tmp_path, fmt)
    cfg = _user_cfg(path)
    assert sum(planned_split_sizes(cfg).values()) == len(ROWS)
    logs = []
    info = build_corpus(cfg, FONTS, tmp_path / "out", seed=0, log=logs.append)
    assert info["bad_rows"] == EXPECTED_BAD
    assert info["labels"] == ["de", "el", "en", "fr", "ru"]
    assert sum(info["split_sizes"].values()) == len(ROWS) - 4
    assert "skipped 4 bad row(s)" in logs[0] and any("row 5" in line and "\U0001F680" in line for line in logs)
    texts = pd.concat(pd.read_parquet(tmp_path / "out" / f"{s}.parquet") for s in SPLITS)["text"]
    assert sorted(texts) == sorted(r[0] for i, r in enumerate(ROWS) if i not in (2, 3, 4, 5))


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_user_corpus_fail(tmp_path, fmt):
    cfg = _user_cfg(_write_user(tmp_path, fmt), on_bad_row="fail")
    with pytest.raises(ValueError, match=r"row 3 \(split \w+, id row-000003\): empty text; 4 bad row"):
        build_corpus(cfg, FONTS, tmp_path / "out", seed=0, log=lambda _: None)
    assert not (tmp_path / "out" / "labels.json").exists()


def test_user_split_column_and_int_labels(tmp_path):
    path = tmp_path / "c.csv"
    pd.DataFrame({"text": ["a", "b", "c", "d", "e"], "label": [10, 2, 3, 2, 10],
                  "part": ["train", "train", "val", "test", "train"]}).to_csv(path, index=False)
    cfg = section("corpus", path=str(path), split_column="part")
    assert planned_split_sizes(cfg) == {"train": 3, "val": 1, "test": 1}
    info = build_corpus(cfg, FONTS, tmp_path / "out", seed=0, log=lambda _: None)
    assert info["labels"] == ["2", "3", "10"] and info["split_sizes"] == {"train": 3, "val": 1, "test": 1}
    assert pd.read_parquet(tmp_path / "out/train.parquet")["label"].tolist() == [2, 0, 2]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_missing_column(tmp_path, fmt):
    path = _write_user(tmp_path, fmt)
    with pytest.raises(ValueError, match=r"no column 'label'.*'body', 'lang', 'part'"):
        load_user_corpus(path, "body", "label")
    with pytest.raises(ValueError, match="no column 'nope'"):
        planned_split_sizes(_user_cfg(path, split_column="nope"))


def test_long_user_texts_are_kept(tmp_path):
    """A paragraph is a normal text: the corpus keeps it (the renderer truncates what its layout cannot hold)."""
    path = tmp_path / "long.csv"
    paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 4  # ~230 characters
    pd.DataFrame({"text": [paragraph] * 6 + ["short"] * 6, "label": ["a", "b"] * 6,
                  "split": ["train"] * 8 + ["val"] * 2 + ["test"] * 2}).to_csv(path, index=False)
    info = build_corpus(section("corpus", path=str(path), split_column="split"), FONTS, tmp_path / "out", seed=0, log=lambda _: None)
    assert info["bad_rows"] == {} and info["split_sizes"] == {"train": 8, "val": 2, "test": 2}


def test_empty_split_or_one_class_fails_naming_counts_and_key(tmp_path):
    path = tmp_path / "c.csv"
    pd.DataFrame({"text": ["a", "b", "", "d"], "label": ["x", "y", "x", "y"],
                  "split": ["train", "train", "val", "test"]}).to_csv(path, index=False)
    with pytest.raises(CorpusError, match=r"split\(s\) val have no rows.*'val': 0.*empty text.*corpus.splits"):
        build_corpus(section("corpus", path=str(path), split_column="split"), FONTS, tmp_path / "o1", seed=0, log=lambda _: None)
    assert not (tmp_path / "o1" / "labels.json").exists()
    pd.DataFrame({"text": ["a", "b", "c", "d"], "label": ["x", "x", "x", "NaN"],
                  "split": ["train", "train", "val", "test"]}).to_csv(path, index=False)
    with pytest.raises(CorpusError, match=r"split\(s\) test have no rows.*missing label"):
        build_corpus(section("corpus", path=str(path), split_column="split"), FONTS, tmp_path / "o2", seed=0, log=lambda _: None)
    pd.DataFrame({"text": ["a", "b", "c"], "label": ["x", "x", "x"],
                  "split": ["train", "val", "test"]}).to_csv(path, index=False)
    with pytest.raises(CorpusError, match=r"1 class\(es\) \['x'\].*at least 2.*corpus.label_column"):
        build_corpus(section("corpus", path=str(path), split_column="split"), FONTS, tmp_path / "o3", seed=0, log=lambda _: None)
