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
