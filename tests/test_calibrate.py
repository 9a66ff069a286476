"""Temperature scaling: found where the labels say it is, folded into the head without changing a label."""

import numpy as np
import torch

from pixelpipe.core.reliability import expected_calibration_error, reliability
from pixelpipe.train.calibrate import fit_temperature, fold_temperature
from tests._engine_utils import encoder_config, toy_atlas
from pixelpipe.model.encoder import TRMVisionEncoder


def _overconfident(scale: float, n: int = 4000, classes: int = 5):
    """Labels drawn from softmax(z), logits scale * z: the calibrating temperature is `scale`."""
    torch.manual_seed(0)
    z = torch.randn(n, classes) * 1.5
    y = torch.multinomial(torch.softmax(z, -1), 1).squeeze(1)
    return scale * z, y


def test_temperature_undoes_overconfidence_and_lowers_ece():
    logits, y = _overconfident(3.0)
    t = fit_temperature(logits, y)
    assert 2.7 < t < 3.3
    before = expected_calibration_error(torch.softmax(logits, -1).numpy(), y.numpy())
    after = expected_calibration_error(torch.softmax(logits / t, -1).numpy(), y.numpy())
    assert before > 0.1 and after < 0.03


def test_temperature_is_the_minimum_of_the_nll_also_below_one():
    """Under-confident logits (T < 1) and many classes: the fitted T is where the NLL over a fine grid is lowest."""
    logits, y = _overconfident(0.4, n=3000, classes=40)
    t = fit_temperature(logits, y)
    grid = torch.linspace(0.2, 0.8, 601)
    nll = torch.stack([torch.nn.functional.cross_entropy(logits / g, y) for g in grid])
    assert abs(t - float(grid[nll.argmin()])) < 0.002
    assert 0.36 < t < 0.44


def test_reliability_bins_count_every_text():
    logits, y = _overconfident(1.0)
    bins = reliability(torch.softmax(logits, -1).numpy(), y.numpy())
    assert sum(b["n"] for b in bins) == len(y)
    assert all(b["low"] <= b["confidence"] <= b["high"] for b in bins)


def test_folding_divides_the_logits_and_keeps_every_label():
    model = TRMVisionEncoder(encoder_config(core="none", line_chars=6, num_classes=5), toy_atlas()).eval()
    glyphs, lengths = torch.randint(1, 8, (6, 6)), torch.tensor([6, 5, 4, 3, 2, 1])
    with torch.no_grad():
        model.head.bias.add_(torch.randn(5))
        before = model(glyphs, lengths)["logits"]
        fold_temperature(model, 2.5)
        after = model(glyphs, lengths)["logits"]
    torch.testing.assert_close(after, before / 2.5)
    assert (after.argmax(1) == before.argmax(1)).all()
    assert np.isclose(expected_calibration_error(np.eye(3)[[0, 1, 2]], np.array([0, 1, 2])), 0.0)


def test_length_temperatures_divide_by_the_bin_of_each_length():
    from pixelpipe.core.reliability import LengthTemperatures

    lt = LengthTemperatures([1, 5, 10, 40], [4.0, 2.0, 1.5, 1.0])
    assert lt.of(np.array([0, 1, 4, 5, 9, 10, 39, 40, 500])).tolist() == [1.0, 4.0, 4.0, 2.0, 2.0, 1.5, 1.5, 1.0, 1.0]
    logits = np.ones((2, 3))
    np.testing.assert_allclose(lt.apply(logits, np.array([3, 60])), [[0.25] * 3, [1.0] * 3])
    cfg = {"metrics": {"calibration": {"by_length": {"edges": [1, 40], "temperatures": [3.0, 1.0]}}}}
    assert LengthTemperatures.from_config(cfg).of(np.array([2]))[0] == 3.0
    assert LengthTemperatures.from_config({"metrics": {"calibration": None}}) is None


def test_sized_windows_cut_every_text_to_the_asked_lengths():
    from pixelpipe.data.windows import sized_windows

    glyphs = torch.arange(1, 41).repeat(64, 1)
    lengths = torch.tensor([40] * 60 + [3, 7, 12, 40])
    out, m = sized_windows(glyphs, lengths, torch.Generator().manual_seed(0), 5, 9)
    assert ((m >= 5) & (m <= 9))[:60].all() and m[60] == 3 and (m[61:] >= 5).all()
    for row, n, full in zip(out, m, lengths):
        kept = row[:n]
        assert (kept[1:] - kept[:-1] == 1).all() and int(kept[-1]) <= int(full)  # one contiguous piece of the text
        assert (row[n:] == 0).all()


def test_short_windows_get_their_own_temperature():
    """A model trained on whole 4-glyph texts whose label shows in one glyph is as sure of a 2-glyph window, which
    often lacks that glyph: the shortest bin gets a temperature above 1, lengths past every text keep theirs."""
    from pixelpipe.train.calibrate import LENGTH_EDGES, fit_length_temperatures
    from tests._engine_utils import ToyImages, make_trainer

    data = ToyImages(256)
    trainer = make_trainer(data, batch_size=16, epochs=4)
    trainer.fit()
    found = fit_length_temperatures(trainer.model, ToyImages(256, seed=1), torch.device("cpu"), "fp32", 64, seed=0)
    assert found["edges"] == [*LENGTH_EDGES, 40] and found["temperatures"][-1] == 1.0
    assert len(found["ece_before"]) == len(found["ece_after"]) == len(LENGTH_EDGES)
    assert found["temperatures"][0] > 1.5


def test_only_the_deployed_model_fits_length_temperatures():
    """The student (what predict ships) gets the short texts' temperatures; the teacher, whose calibration only
    scales its distillation targets, gets its one temperature without the six passes over val they cost."""
    from pixelpipe.train.calibrate import calibrate
    from pixelpipe.train.settings import StudentSettings, TeacherSettings
    from tests._engine_utils import ToyImages, make_trainer

    assert StudentSettings.DEPLOYED and not TeacherSettings.DEPLOYED
    trainer = make_trainer(ToyImages(64), batch_size=16, epochs=1)
    trainer.fit()
    val = ToyImages(64, seed=1)
    one = calibrate(trainer.model, val, torch.device("cpu"), "fp32", 32, 2, seed=0)
    assert one.by_length is None and one.temperature > 0 and one.samples == 128
    both = calibrate(trainer.model, val, torch.device("cpu"), "fp32", 32, 2, seed=0, by_length=val)
    assert both.by_length is not None and len(both.by_length["temperatures"]) == 7
