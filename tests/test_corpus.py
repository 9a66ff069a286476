import json

import numpy as np
import pandas as pd
import pytest

from pixelpipe import io
from pixelpipe.corpus import (
    DEFAULT_LOCALES, SPLITS, assign_splits, build_corpus, find_bad_rows, generate_default_corpus,
    load_user_corpus, planned_split_sizes,
)  # fmt: skip
from pixelpipe.fonts import FontSet
from pixelpipe.render import RenderSettings

DEFAULT_CFG = {"path": None, "num_samples": 190, "min_chars": 10, "max_chars": 40}
SETTINGS = RenderSettings()

ROWS = [  # (text, label, split); rows 3-6 are bad
    ("Hello world", "en", "train"),
    ("Bonjour le monde", "fr", "train"),
    ("", "en", "train"),
    ("Hola", None, "val"),
    ("rocket \U0001F680 launch", "en", "val"),
    ("x" * 50, "fr", "test"),
    ("Guten Tag", "de", "train"),
    ("Привет мир", "ru", "val"),
    ("Γειά σου", "el", "test"),
    ("Good night", "en", "test"),
]
EXPECTED_BAD = {"empty text": 1, "missing label": 1, "undrawable characters": 1, "text too long": 1}


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
    return {"path": str(path), "text_column": "body", "label_column": "lang", "max_chars": 40, **kw}


def test_default_corpus_matches_plan(tmp_path):
    logs = []
    info = build_corpus(DEFAULT_CFG, SETTINGS, tmp_path, seed=0, log=logs.append)
    planned = planned_split_sizes(DEFAULT_CFG)
    assert planned == {"train": 152, "val": 19, "test": 19}
    assert info["split_sizes"] == planned and info["bad_rows"] == {}
    assert info["labels"] == sorted(loc.split("_")[0] for loc in DEFAULT_LOCALES)
    assert io.read_json(tmp_path / "labels.json") == info
    frames = {s: pd.read_parquet(tmp_path / f"{s}.parquet") for s in SPLITS}
    assert {s: len(f) for s, f in frames.items()} == planned
    all_rows = pd.concat(frames.values())
    assert all_rows["label"].dtype == np.int64 and set(all_rows["label"]) == set(range(19))
    assert all_rows["id"].is_unique and all_rows["text"].str.len().between(10, 40).all()
    assert list(all_rows.columns) == ["id", "text", "label"]


def test_default_corpus_deterministic(tmp_path):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        build_corpus(DEFAULT_CFG, SETTINGS, tmp_path / name, seed=seed, log=lambda _: None)
    for s in SPLITS:
        assert (tmp_path / "a" / f"{s}.parquet").read_bytes() == (tmp_path / "b" / f"{s}.parquet").read_bytes()
    assert (tmp_path / "a/train.parquet").read_bytes() != (tmp_path / "c/train.parquet").read_bytes()


def test_generate_balanced_and_drawable():
    df = generate_default_corpus(57, 5, 30, seed=3)
    assert df["label"].value_counts().eq(3).all() and df["label"].nunique() == 19
    assert df["id"].iloc[0] == "row-000001"
    assert find_bad_rows(df, FontSet(), 30).empty


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
    info = build_corpus(cfg, SETTINGS, tmp_path / "out", seed=0, log=logs.append)
    assert info["bad_rows"] == EXPECTED_BAD
    assert info["labels"] == ["de", "el", "en", "fr", "ru"]
    assert sum(info["split_sizes"].values()) == len(ROWS) - 4
    assert "skipping 4 bad row(s)" in logs[0] and any("row 5" in line and "\U0001F680" in line for line in logs)
    texts = pd.concat(pd.read_parquet(tmp_path / "out" / f"{s}.parquet") for s in SPLITS)["text"]
    assert sorted(texts) == sorted(r[0] for i, r in enumerate(ROWS) if i not in (2, 3, 4, 5))


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_user_corpus_fail(tmp_path, fmt):
    cfg = _user_cfg(_write_user(tmp_path, fmt), on_bad_row="fail")
    with pytest.raises(ValueError, match=r"row 3 \(split \w+, id row-000003\): empty text; 4 bad row"):
        build_corpus(cfg, SETTINGS, tmp_path / "out", seed=0, log=lambda _: None)
    assert not (tmp_path / "out" / "labels.json").exists()


def test_user_split_column_and_int_labels(tmp_path):
    path = tmp_path / "c.csv"
    pd.DataFrame({"text": ["a", "b", "c", "d", "e"], "label": [10, 2, 3, 2, 10],
                  "part": ["train", "train", "val", "test", "train"]}).to_csv(path, index=False)
    cfg = {"path": str(path), "split_column": "part"}
    assert planned_split_sizes(cfg) == {"train": 3, "val": 1, "test": 1}
    info = build_corpus(cfg, SETTINGS, tmp_path / "out", seed=0, log=lambda _: None)
    assert info["labels"] == ["2", "3", "10"] and info["split_sizes"] == {"train": 3, "val": 1, "test": 1}
    assert pd.read_parquet(tmp_path / "out/train.parquet")["label"].tolist() == [2, 0, 2]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_missing_column(tmp_path, fmt):
    path = _write_user(tmp_path, fmt)
    with pytest.raises(ValueError, match=r"no column 'label'.*'body', 'lang', 'part'"):
        load_user_corpus(path, "body", "label")
    with pytest.raises(ValueError, match="no column 'nope'"):
        planned_split_sizes(_user_cfg(path, split_column="nope"))
