from pathlib import Path

import numpy as np
import pytest

from pixelpipe.core.io import sha256_file
from pixelpipe.data.consolidate import consolidate, npz_headers, open_dataset


def _shard(path, n, k=2, d=4, c=3, offset=0):
    np.savez(path, sketches=np.full((n, k, d), offset, np.float16), logits=np.arange(offset, offset + n * c, dtype=np.float32).reshape(n, c),
             labels=np.arange(offset, offset + n, dtype=np.int64))
    return path


def test_unequal_and_empty_shards_are_concatenated_in_order(tmp_path):
    shards = [_shard(tmp_path / "a.npz", 5, offset=0), _shard(tmp_path / "b.npz", 2, offset=5),
              _shard(tmp_path / "c.npz", 0, offset=7), _shard(tmp_path / "d.npz", 3, offset=7)]
    manifest = consolidate(shards, tmp_path / "out")
    assert manifest["count"] == 10 and manifest["shard_counts"] == [5, 2, 0, 3]
    data = open_dataset(tmp_path / "out", verify=True)
    np.testing.assert_array_equal(data["labels"], np.arange(10))
    assert data["sketches"].shape == (10, 2, 4) and isinstance(data["sketches"], np.memmap)
    assert data["sketches"][7, 0, 0] == 7  # first row of shard d
    for info in manifest["fields"].values():
        assert sha256_file(tmp_path / "out" / info["file"]) == info["sha256"]
    assert not list((tmp_path / "out").glob(".*.tmp"))


def test_shards_are_deleted_as_they_are_copied_so_disk_never_holds_both(tmp_path, monkeypatch):
    """With delete_shards the disk holds the consolidated copy plus one shard at most: measured by the bytes of
    shards and outputs present each time a field block is written."""
    import pixelpipe.data.consolidate as mod

    shards = [_shard(tmp_path / f"s{i}.npz", 50, d=64, offset=50 * i) for i in range(4)]
    one_shard = max(p.stat().st_size for p in shards)
    peaks = []
    real_unlink = Path.unlink

    def watch(path, *a, **kw):
        real_unlink(path, *a, **kw)
        on_disk = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
        peaks.append(on_disk)

    monkeypatch.setattr(Path, "unlink", watch)
    manifest = mod.consolidate(shards, tmp_path / "out", delete_shards=True)
    final = sum(p.stat().st_size for p in (tmp_path / "out").glob("*.npy"))
    assert manifest["count"] == 200 and not any(p.exists() for p in shards)
    assert max(peaks) <= final + one_shard
    np.testing.assert_array_equal(open_dataset(tmp_path / "out")["labels"], np.arange(200))


def test_headers_are_read_without_loading(tmp_path):
    h = npz_headers(_shard(tmp_path / "a.npz", 7))
    assert h["sketches"][0] == (7, 2, 4) and h["sketches"][1] == np.float16


def test_mismatched_shapes_are_refused(tmp_path):
    a = _shard(tmp_path / "a.npz", 2, d=4)
    b = _shard(tmp_path / "b.npz", 2, d=5)
    with pytest.raises(ValueError, match="b.npz"):
        consolidate([a, b], tmp_path / "out")


def test_corruption_is_detected(tmp_path):
    consolidate([_shard(tmp_path / "a.npz", 4)], tmp_path / "out")
    arr = np.load(tmp_path / "out/labels.npy", mmap_mode="r+")
    arr[0] = 99
    arr.flush()
    del arr
    with pytest.raises(ValueError, match="sha256"):
        open_dataset(tmp_path / "out", verify=True)


def test_encode_writes_what_the_model_computes(tmp_path):
    import torch

    from pixelpipe.model.encoder import TRMVisionEncoder
    from pixelpipe.train.encode import encode_shard, pack_bits
    from tests._engine_utils import encoder_config

    from pixelpipe.data.render import shard_dtype
    from tests._engine_utils import toy_atlas

    model = TRMVisionEncoder(encoder_config(line_chars=6), toy_atlas()).eval()
    g = np.random.default_rng(0)
    rows = np.zeros(37, shard_dtype(6, 8))
    rows["length"] = g.integers(1, 7, 37)
    rows["glyphs"] = g.integers(1, 8, (37, 6)) * (np.arange(6)[None] < rows["length"][:, None])
    rows["label"] = np.arange(37)
    stats = encode_shard(model, rows, "shard", tmp_path / "enc.npz", torch.device("cpu"), batch_size=8, progress=False)
    assert stats["samples"] == 37
    enc = np.load(tmp_path / "enc.npz")
    with torch.no_grad():  # batches of 8, each trimmed to its longest text: the same as the whole padded shard
        ref = model(torch.from_numpy(rows["glyphs"].astype(np.int64)), torch.from_numpy(rows["length"].astype(np.int64)))
    np.testing.assert_allclose(enc["logits"], ref["logits"].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(enc["sketches"], ref["sketches"].half().numpy(), rtol=1e-3, atol=1e-3)
    bits = (ref["checksum_logits"] > 0).numpy()
    np.testing.assert_array_equal(enc["checksums"], np.packbits(bits, axis=-1))
    np.testing.assert_array_equal(pack_bits(torch.from_numpy(bits)).numpy(), np.packbits(bits, axis=-1))
    np.testing.assert_array_equal(enc["labels"], np.arange(37))
