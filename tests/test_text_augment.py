"""Training augmentation on glyph rows, and batches grouped by length."""

import numpy as np
import pytest

from pixelpipe.data.cache import CacheDataset, StepBatch
from pixelpipe.data.render import render_split
from pixelpipe.data.text_augment import TextAugmenter
from pixelpipe.train.sampling import epoch_order
from tests.test_render import settings, write_corpus

TEXTS = ["Der schnelle braune Fuchs", "Příliš žluťoučký kůň", "Быстрая лиса", "le renard brun"] * 4
LANGS = ["de", "cs", "ru", "fr"]


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    d = tmp_path_factory.mktemp("aug") / "train"
    corpus, _ = write_corpus(d / "corpus.parquet", TEXTS, [i % 4 for i in range(len(TEXTS))])
    from pixelpipe.data.charset import build_charset, text_clusters

    import string

    from pixelpipe.data.perturb import drop_diacritics

    # the letters the rewrites need, whether or not the shipped inventory is there
    extra = [string.ascii_letters, "".join(TEXTS).upper(), drop_diacritics("".join(TEXTS)), "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"]
    charset = build_charset(text_clusters(TEXTS + extra), settings().fonts, inventory=False)
    render_split(corpus, charset, settings(line_chars=32), [d / "shard-00000.npy"], d / "manifest.json",
                 shard_size=64, progress=False)
    return CacheDataset(d)


def augmenter(ds, kinds, prob=1.0):
    return TextAugmenter(ds.split.atlas, ds.split.settings, kinds, prob, LANGS, seed=0)


def texts_of(aug, rows):
    return [aug.text(r) for r in rows]


def test_rewrites_are_decoded_rewritten_and_laid_out_again(split):
    aug = augmenter(split, ["no_diacritics"])
    rows = split.split.rows(range(4))
    out = aug(rows, step=3, indices=range(4))
    assert texts_of(aug, rows) == TEXTS[:4]
    assert texts_of(aug, out) == ["Der schnelle braune Fuchs", "Prilis zlutoucky kun", "Быстрая лиса", "le renard brun"]
    assert out["length"][1] == len("Prilis zlutoucky kun") and (out["label"] == rows["label"]).all()


def test_draws_depend_on_seed_step_and_row_only(split):
    aug = augmenter(split, ["typos", "case"], prob=0.5)
    rows = split.split.rows(range(16))
    a = aug(rows, step=7, indices=range(16))
    assert (aug(rows, step=7, indices=range(16)) == a).all()
    shuffled = aug(rows[::-1], step=7, indices=list(range(16))[::-1])
    assert (shuffled[::-1] == a).all()  # a row's rewrite does not depend on its place in the batch
    assert not (aug(rows, step=8, indices=range(16)) == a).all()
    changed = sum(x != y for x, y in zip(texts_of(aug, a), TEXTS))
    assert 2 <= changed <= 14  # about half, at prob 0.5


def test_dataset_applies_it_per_step(split):
    ds = CacheDataset(split.split.split_dir, transform=augmenter(split, ["case"]))
    a = ds.__getitems__(StepBatch([0, 1], 5))
    assert not (a["glyphs"].numpy() == split.__getitems__([0, 1])["glyphs"].numpy()).all()


def test_rewrites_needing_unknown_characters_are_not_used(split):
    aug = augmenter(split, ["case"])
    aug.known = set(" ")  # a charset without letters: no rewrite can be laid out
    rows = split.split.rows(range(4))
    assert (aug(rows, step=0, indices=range(4)) == rows).all()
    with pytest.raises(ValueError, match="unknown kind"):
        augmenter(split, ["rot13"])


def test_length_grouping_batches_similar_lengths_and_keeps_every_sample():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 100, 1000)
    plain = epoch_order(1000, 3, 0)
    grouped = epoch_order(1000, 3, 0, lengths, batch_size=10, group=20)
    assert sorted(grouped.tolist()) == list(range(1000))
    assert (grouped == epoch_order(1000, 3, 0, lengths, batch_size=10, group=20)).all()
    spread = lambda order: np.mean([np.ptp(lengths[order[i : i + 10]]) for i in range(0, 1000, 10)])  # noqa: E731
    assert spread(grouped) < spread(plain) / 4
    assert not (epoch_order(1000, 3, 1, lengths, 10, 20) == grouped).all()


def test_the_deployed_models_length_temperatures_are_fitted_on_val_as_training_rewrites_it(split):
    """Every val text rewritten by one of train.augment's kinds (calibrate.py says why); none without kinds."""
    from types import SimpleNamespace

    from pixelpipe.train.run import length_calibration_set

    rewritten = length_calibration_set(split, SimpleNamespace(augment=["no_diacritics"]), LANGS, seed=0)
    aug = augmenter(split, [])
    got = [aug.text(r) for r in rewritten.transform(split.split.rows(range(4)), None, range(4))]
    assert got == ["Der schnelle braune Fuchs", "Prilis zlutoucky kun", "Быстрая лиса", "le renard brun"]
    plain = length_calibration_set(split, SimpleNamespace(augment=[]), LANGS, seed=0)
    assert plain.transform is None and len(plain) == len(split)
