import math

import torch
from torch import nn

from pixelpipe.train.distill import DistillationObjective, distillation_loss
from pixelpipe.train.settings import DistillSettings


def _inputs(b=6, k=2, ds=4, dt=8, c=5):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(b, c, generator=g), torch.randn(b, k, ds, generator=g), torch.randn(b, c, generator=g),
            torch.randn(b, k, dt, generator=g), torch.randint(0, c, (b,), generator=g))


def test_only_ce_when_other_weights_are_zero():
    s_log, s_sk, t_log, t_sk, y = _inputs()
    loss, _ = distillation_loss(s_log, s_sk, t_log, t_sk, y, nn.Linear(4, 8), 2.0, 1.0, 0.0, 0.0)
    torch.testing.assert_close(loss, nn.functional.cross_entropy(s_log, y))


def test_transfer_rows_add_no_cross_entropy_but_their_soft_targets():
    """student.distill.transfer: rows without their label (labelled False) add the KL and the sketch term only; the
    cross-entropy is the mean over the labelled rows (0, not NaN, for a batch with none)."""
    s_log, s_sk, t_log, t_sk, y = _inputs()
    adapter, mask = nn.Linear(4, 8), torch.tensor([True, False, True, True, False, False])
    everything, logs = distillation_loss(s_log, s_sk, t_log, t_sk, y, adapter, 2.0, 1.0, 1.0, 0.5)
    every = torch.ones(6, dtype=bool)
    same, _ = distillation_loss(s_log, s_sk, t_log, t_sk, y, adapter, 2.0, 1.0, 1.0, 0.5, 0.0, every)
    torch.testing.assert_close(same, everything)
    _, part = distillation_loss(s_log, s_sk, t_log, t_sk, y, adapter, 2.0, 1.0, 1.0, 0.5, 0.1, mask)
    torch.testing.assert_close(part["ce"], nn.functional.cross_entropy(s_log[mask], y[mask], label_smoothing=0.1))
    torch.testing.assert_close(part["kl"], logs["kl"])
    loss, none = distillation_loss(s_log, s_sk, t_log, t_sk, y, adapter, 2.0, 1.0, 1.0, 0.5, 0.0, ~every)
    assert none["ce"].item() == 0.0 and torch.isfinite(loss)


def test_kl_vanishes_when_student_matches_teacher_and_scales_with_t_squared():
    s_log, s_sk, _, t_sk, y = _inputs()
    _, logs = distillation_loss(s_log, s_sk, s_log.clone(), t_sk, y, nn.Linear(4, 8), 3.0, 1.0, 1.0, 0.5)
    assert abs(logs["kl"].item()) < 1e-6
    t_log = s_log + torch.randn_like(s_log)
    _, l1 = distillation_loss(s_log, s_sk, t_log, t_sk, y, nn.Linear(4, 8), 1.0, 1.0, 1.0, 0.5)
    manual = nn.functional.kl_div(s_log.log_softmax(-1), t_log.softmax(-1), reduction="batchmean")
    assert math.isclose(l1["kl"].item(), manual.item(), rel_tol=1e-5)


def test_sketch_term_is_one_minus_cosine_through_the_adapter():
    s_log, s_sk, t_log, _, y = _inputs(ds=8)
    adapter = nn.Linear(8, 8)
    with torch.no_grad():
        adapter.weight.copy_(torch.eye(8))
        adapter.bias.zero_()
    loss, logs = distillation_loss(s_log, s_sk, t_log, 2 * s_sk, y, adapter, 2.0, 0.0, 0.0, 1.0)
    assert abs(loss.item()) < 1e-6 and abs(logs["sketch_cos"].item() - 1) < 1e-6


def test_objective_trains_the_adapter():
    class Fake(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(1))

        def forward(self, glyphs, lengths, image_glyphs=None):
            b = glyphs.shape[0]
            return {"logits": self.w * torch.ones(b, 5), "sketches": self.w * torch.ones(b, 2, 4)}

    obj = DistillationObjective(4, 8, DistillSettings(2.0, 1.0, 1.0, 1.0, False), 0.0)
    _, _, t_log, t_sk, y = _inputs()
    loss, _ = obj(Fake(), {"glyphs": torch.zeros(6, 4, dtype=torch.long), "length": torch.full((6,), 4), "label": y, "teacher_logits": t_log, "teacher_sketches": t_sk})
    loss.backward()
    assert obj.adapter.weight.grad is not None and obj.adapter.weight.grad.abs().sum() > 0
    # a batch with the transfer set's `labelled` column: the objective hands it to the loss
    logits = torch.randn(6, 5, generator=torch.Generator().manual_seed(1))

    class Fixed(nn.Module):
        def forward(self, glyphs, lengths, image_glyphs=None):
            return {"logits": logits, "sketches": torch.ones(6, 2, 4)}

    mask = torch.tensor([True, True, False, False, True, False])
    batch = {"glyphs": torch.zeros(6, 4, dtype=torch.long), "length": torch.full((6,), 4), "label": y,
             "teacher_logits": t_log, "teacher_sketches": t_sk}
    _, every = obj(Fixed(), batch)
    _, part = obj(Fixed(), {**batch, "labelled": mask})
    torch.testing.assert_close(every["ce"], nn.functional.cross_entropy(logits, y))
    torch.testing.assert_close(part["ce"], nn.functional.cross_entropy(logits[mask], y[mask]))
    assert not torch.isclose(part["ce"], every["ce"])
