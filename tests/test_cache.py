import shutil

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from pixelpipe.data.atlas import GlyphAtlas
from pixelpipe.data.cache import CacheDataset, CacheSplit, rows_per_label
from pixelpipe.data.corpus import shard_count
from pixelpipe.data.render import Renderer, render_split
from tests.test_render import FONTS, settings, write_corpus

TEXTS = [f"text {i} " + "abc " * (i % 4) for i in range(8)]
LABELS = [i % 3 for i in range(8)]


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cache") / "train"
    corpus, charset = write_corpus(d / "corpus.parquet", TEXTS, LABELS)
    paths = [d / f"shard-{i:05d}.npy" for i in range(shard_count(10, 3))]  # planned 10 rows, 8 left: 3,3,2,0
    render_split(corpus, charset, settings(), paths, d / "manifest.json", shard_size=3, progress=False)
    return d


def test_shard_count():
    assert [shard_count(n, 3) for n in (0, 1, 3, 4, 9, 10)] == [1, 1, 1, 2, 3, 4]


def test_round_trip(split_dir):
    """Glyph rows read back give, assembled from the atlas, the images the renderer draws: bit-exact."""
    c = CacheSplit(split_dir, verify=True)
    r = Renderer(settings(), GlyphAtlas.from_dict(c.manifest["atlas"], FONTS, 12))
    assert len(c) == 8 and c.shard_counts == [3, 3, 2, 0]
    rows = c.rows(range(8))
    assert rows["label"].tolist() == LABELS
    assert rows["length"].tolist() == [min(12, len(t.strip())) for t in TEXTS]
    assert c.render_settings == settings().to_dict()
    for i in range(8):
        assert (c.images(rows[i : i + 1]) == r.render([TEXTS[i]])[0]).all()
    assert (c.rows([-1]) == c.rows([7])).all()
    with pytest.raises(IndexError):
        c.rows([8])
    picked = c.rows([7, 0, 4])
    assert picked["label"].tolist() == [LABELS[7], LABELS[0], LABELS[4]] and len(c.rows([])) == 0
    assert [(s, len(x)) for s, x in c.iter_shards()] == [(0, 3), (1, 3), (2, 2), (3, 0)]


def test_verify_detects_corruption(split_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(split_dir, bad)
    shard = bad / "shard-00001.npy"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF
    shard.write_bytes(bytes(data))
    CacheSplit(bad, verify=False)  # not verified: opens fine
    with pytest.raises(ValueError, match="shard-00001.npy"):
        CacheSplit(bad, verify=True)


def test_dataset_with_extras(split_dir):
    logits = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    sketches = np.ones((8, 2, 4), dtype=np.float16)
    ds = CacheDataset(split_dir, extra={"logits": logits, "sketches": sketches})
    item = ds[5]
    assert item["glyphs"].dtype == torch.int64 and item["glyphs"].shape == (12,)
    assert item["label"].dtype == torch.int64 and int(item["label"]) == LABELS[5] and int(item["index"]) == 5
    assert int(item["length"]) == ds.split.rows([5])["length"][0]
    assert torch.equal(item["logits"], torch.from_numpy(logits[5]))
    assert item["sketches"].dtype == torch.float16
    batch = ds.__getitems__([6, 1, 3])  # a whole batch in one fetch, in the asked order
    assert batch["index"].tolist() == [6, 1, 3] and torch.equal(batch["logits"], torch.from_numpy(logits[[6, 1, 3]]))
    batches = list(DataLoader(ds, batch_size=3, num_workers=2, collate_fn=ds.collate_fn))
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(8))
    assert torch.cat([b["label"] for b in batches]).tolist() == LABELS
    with pytest.raises(ValueError, match="logits"):
        CacheDataset(split_dir, extra={"logits": logits[:4]})


def test_a_role_reads_at_most_n_rows_of_each_language(split_dir):
    """rows_per_language: at most `cap` rows of each label, drawn by a seeded permutation (not the first ones: a file
    may be sorted), in split order; and a dataset over them whose rows, lengths and extras are those rows' (the
    teacher reads every row, the student a balanced share)."""
    split = CacheSplit(split_dir)  # labels 0,1,2,0,1,2,0,1
    draws = {seed: rows_per_label(split, 2, seed).tolist() for seed in range(20)}
    for rows in draws.values():
        assert rows == sorted(rows) and sorted(LABELS[i] for i in rows) == [0, 0, 1, 1, 2, 2]
    assert rows_per_label(split, 2, 3).tolist() == draws[3] and len({tuple(r) for r in draws.values()}) > 1
    assert {tuple(rows_per_label(split, 3, seed)) for seed in range(5)} == {tuple(range(8))}
    assert sorted(LABELS[i] for i in rows_per_label(split, 1, 0)) == [0, 1, 2]
    logits = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    subset = np.array([1, 4, 7])  # label 1's rows
    ds = CacheDataset(split_dir, extra={"logits": logits}, subset=subset)
    assert len(ds) == 3 and ds.lengths().tolist() == split.rows(subset)["length"].tolist()
    batch = ds.__getitems__([2, 0])
    assert batch["index"].tolist() == [7, 1] and batch["label"].tolist() == [1, 1]
    assert torch.equal(batch["logits"], torch.from_numpy(logits[[7, 1]]))
    assert torch.equal(batch["glyphs"], torch.from_numpy(split.rows([7, 1])["glyphs"].astype(np.int64)))
