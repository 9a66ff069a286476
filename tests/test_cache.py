import shutil

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from pixelpipe.cache import CacheDataset, CacheSplit, shard_count
from pixelpipe.render import RenderSettings, TextRenderer, render_split

TEXTS = [f"text {i} " + "abc " * (i % 4) for i in range(8)]
LABELS = [i % 3 for i in range(8)]


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cache") / "train"
    paths = [d / f"shard-{i:05d}.npy" for i in range(shard_count(10, 3))]  # planned 10 rows, 8 left: 3,3,2,0
    render_split(TEXTS, LABELS, [f"id{i}" for i in range(8)], RenderSettings(), paths, d / "manifest.json",
                 shard_size=3, workers=1, progress=False)
    return d


def test_shard_count():
    assert [shard_count(n, 3) for n in (0, 1, 3, 4, 9, 10)] == [1, 1, 1, 2, 3, 4]


def test_round_trip(split_dir):
    c = CacheSplit(split_dir, verify=True)
    r = TextRenderer(RenderSettings())
    assert len(c) == 8 and c.image_shape == (1, 32, 128) and c.shard_counts == [3, 3, 2, 0]
    assert c.labels.dtype == np.int64 and c.labels.tolist() == LABELS
    assert c.ids == [f"id{i}" for i in range(8)]
    assert c.render_settings == RenderSettings().to_dict()
    for i in range(8):
        assert (c.get(i) == r.render(TEXTS[i], i)).all()
    assert (c.get(-1) == c.get(7)).all()
    with pytest.raises(IndexError):
        c.get(8)
    b = c.batch([7, 0, 4])
    assert b.shape == (3, 1, 32, 128) and b.dtype == np.uint8 and (b[0] == c.get(7)).all()
    assert c.batch([]).shape == (0, 1, 32, 128)
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
    CacheSplit(bad)  # not verified: opens fine
    with pytest.raises(ValueError, match="shard-00001.npy"):
        CacheSplit(bad, verify=True)


def test_dataset_with_extras(split_dir):
    logits = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    sketches = np.ones((8, 2, 4), dtype=np.float16)
    ds = CacheDataset(split_dir, extra={"logits": logits, "sketches": sketches})
    item = ds[5]
    assert item["image"].dtype == torch.uint8 and item["image"].shape == (1, 32, 128)
    assert item["label"].dtype == torch.int64 and int(item["label"]) == LABELS[5] and item["index"] == 5
    assert torch.equal(item["logits"], torch.from_numpy(logits[5]))
    assert item["sketches"].dtype == torch.float16
    batches = list(DataLoader(ds, batch_size=3, num_workers=2))
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(8))
    assert torch.cat([b["label"] for b in batches]).tolist() == LABELS
    with pytest.raises(ValueError, match="logits"):
        CacheDataset(split_dir, extra={"logits": logits[:4]})
