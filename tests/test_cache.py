import shutil

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from pixelpipe.data.atlas import GlyphAtlas
from pixelpipe.data.cache import CacheDataset, CacheSplit
from pixelpipe.data.corpus import shard_count
from pixelpipe.data.render import Renderer, render_split
from tests.test_render import FONTS, settings

TEXTS = [f"text {i} " + "abc " * (i % 4) for i in range(8)]
LABELS = [i % 3 for i in range(8)]


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cache") / "train"
    paths = [d / f"shard-{i:05d}.npy" for i in range(shard_count(10, 3))]  # planned 10 rows, 8 left: 3,3,2,0
    render_split(TEXTS, LABELS, [f"id{i}" for i in range(8)], settings(), paths, d / "manifest.json",
                 shard_size=3, progress=False)
    return d


def test_shard_count():
    assert [shard_count(n, 3) for n in (0, 1, 3, 4, 9, 10)] == [1, 1, 1, 2, 3, 4]


def test_round_trip(split_dir):
    c = CacheSplit(split_dir, verify=True)
    r = Renderer(settings(), GlyphAtlas.from_dict(c.manifest["atlas"], FONTS, 12))
    assert len(c) == 8 and c.image_shape == (1, 16, 96) and c.shard_counts == [3, 3, 2, 0]
    assert c.labels.dtype == np.int64 and c.labels.tolist() == LABELS
    assert c.lengths.tolist() == [min(12, len(t.strip())) for t in TEXTS]
    assert c.ids == [f"id{i}" for i in range(8)]
    assert c.render_settings == settings().to_dict()
    for i in range(8):
        assert (c.get(i) == r.render([TEXTS[i]])[0][0]).all()
    assert (c.get(-1) == c.get(7)).all()
    with pytest.raises(IndexError):
        c.get(8)
    b = c.batch([7, 0, 4])
    assert b.shape == (3, 1, 16, 96) and b.dtype == np.uint8 and (b[0] == c.get(7)).all()
    assert c.batch([]).shape == (0, 1, 16, 96)
    shards = list(c.iter_shards())
    assert [(s, len(x), y.tolist()) for s, x, y in shards] == [
        (0, 3, LABELS[:3]), (1, 3, LABELS[3:6]), (2, 2, LABELS[6:]), (3, 0, [])]


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
    assert item["image"].dtype == torch.uint8 and item["image"].shape == (1, 16, 96)
    assert item["label"].dtype == torch.int64 and int(item["label"]) == LABELS[5] and item["index"] == 5
    assert int(item["length"]) == ds.split.lengths[5]
    assert torch.equal(item["logits"], torch.from_numpy(logits[5]))
    assert item["sketches"].dtype == torch.float16
    batches = list(DataLoader(ds, batch_size=3, num_workers=2))
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(8))
    assert torch.cat([b["label"] for b in batches]).tolist() == LABELS
    with pytest.raises(ValueError, match="logits"):
        CacheDataset(split_dir, extra={"logits": logits[:4]})
