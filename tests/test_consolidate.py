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


def test_views_are_the_teachers_reading_of_fixed_windows(tmp_path):
    """With views, encode also stores the teacher's logits for views - 1 windows of each text, drawn from the seed
    and the shard's name alone (the same on a rerun, others for another shard), and consolidate keeps them."""
    import torch

    from pixelpipe.data.encoded import dataset_fields
    from pixelpipe.data.render import shard_dtype
    from pixelpipe.model.encoder import TRMVisionEncoder
    from pixelpipe.train.encode import encode_shard, windowed_rows
    from tests._engine_utils import encoder_config, toy_atlas

    model = TRMVisionEncoder(encoder_config(line_chars=6), toy_atlas()).eval()
    g = np.random.default_rng(1)
    rows = np.zeros(29, shard_dtype(6, 8))
    rows["length"] = g.integers(1, 7, 29)
    rows["glyphs"] = g.integers(1, 8, (29, 6)) * (np.arange(6)[None] < rows["length"][:, None])
    for name in ("train-00000", "train-00000", "train-00001"):
        encode_shard(model, rows, name, tmp_path / f"{name}.npz", torch.device("cpu"), batch_size=8, progress=False,
                     views=3, window_min_chars=2, seed=5)
    enc, other = np.load(tmp_path / "train-00000.npz"), np.load(tmp_path / "train-00001.npz")
    windows = enc["view_windows"]
    assert windows.shape == (29, 2, 2) and enc["view_logits"].shape == (29, 2, model.cfg.num_classes)
    start, m = windows[..., 0], windows[..., 1]
    n = rows["length"][:, None]
    assert (m >= np.minimum(n, 2)).all() and (m <= n).all() and (start + m <= n).all()
    assert (windows != other["view_windows"]).any()
    for v in range(2):
        cut = windowed_rows(rows, windows[:, v])
        with torch.no_grad():
            ref = model(torch.from_numpy(cut["glyphs"].astype(np.int64)), torch.from_numpy(cut["length"].astype(np.int64)))
        np.testing.assert_allclose(enc["view_logits"][:, v], ref["logits"].numpy(), atol=2e-2, rtol=1e-2)
    manifest = consolidate([tmp_path / "train-00000.npz", tmp_path / "train-00001.npz"], tmp_path / "out",
                           fields=dataset_fields(3))
    assert manifest["fields"]["view_windows"]["shape"] == [58, 2, 2] and dataset_fields(1) == dataset_fields(1)[:5]


def test_picking_views_takes_the_window_and_its_target():
    import torch

    from pixelpipe.data.windows import pick_views

    glyphs = torch.tensor([[1, 2, 3, 4, 5, 6]] * 64)
    batch = {"glyphs": glyphs.clone(), "length": torch.full((64,), 6), "teacher_logits": torch.zeros(64, 2),
             "view_windows": torch.tensor([[[1, 3], [4, 2]]] * 64, dtype=torch.int16),
             "view_logits": torch.tensor([[[1.0, 0.0], [0.0, 2.0]]] * 64, dtype=torch.float16)}
    pick_views(batch, torch.Generator().manual_seed(0))
    views = {6: ([1, 2, 3, 4, 5, 6], [0.0, 0.0]),  # the whole text, its own target
             3: ([2, 3, 4, 0, 0, 0], [1.0, 0.0]), 2: ([5, 6, 0, 0, 0, 0], [0.0, 2.0])}  # each window, its logits
    seen = set()
    for g, n, t in zip(batch["glyphs"].tolist(), batch["length"].tolist(), batch["teacher_logits"].tolist()):
        assert (g, t) == views[n]
        seen.add(n)
    assert seen == {6, 3, 2}  # every view is drawn
