"""The training engine on CPU: accumulation, checkpointing, exact resume, loader, compile fallback, profiler."""

from __future__ import annotations

import pytest
import torch

from pixelpipe.core.device import compile_model
from pixelpipe.train.distill import ClassificationObjective
from pixelpipe.train.engine import Trainer
from pixelpipe.train.sampling import StepBatchSampler, epoch_order
from tests._engine_utils import ToyImages, engine_settings, make_trainer, state, tiny_model


def _collate(ds, idx):
    return {k: torch.stack([ds[i][k] for i in idx]) for k in ("glyphs", "label", "length")}


def _grads(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


def test_accumulated_micro_batches_give_full_batch_gradients():
    data = ToyImages(32)
    k, b = 4, 4
    acc = make_trainer(data, batch_size=k * b, engine=engine_settings(grad_accum_steps=k))
    full = make_trainer(data, batch_size=k * b)
    assert acc.micro == b and acc.accum == k
    idx = list(range(k * b))
    for m in range(k):
        acc._micro_step(_collate(data, idx[m * b : (m + 1) * b]))
    full._micro_step(_collate(data, idx))
    ga, gf = _grads(acc), _grads(full)
    assert ga.keys() == gf.keys() and len(ga) > 10
    for n in gf:
        torch.testing.assert_close(ga[n], gf[n], rtol=1e-4, atol=1e-6, msg=n)


def test_accumulation_keeps_the_training_trajectory():
    data = ToyImages(48)
    a = make_trainer(data, batch_size=16, epochs=2, engine=engine_settings(grad_accum_steps=4))
    f = make_trainer(data, batch_size=16, epochs=2)
    ra, rf = a.fit(), f.fit()
    assert ra.steps == rf.steps == 6 and ra.samples == rf.samples == 96
    for (n, pa), pf in zip(a.model.named_parameters(), f.model.parameters()):
        torch.testing.assert_close(pa, pf, rtol=1e-4, atol=2e-5, msg=n)


def _loss_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(batch["glyphs"], batch["length"])["logits"], batch["label"])
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_activation_checkpointing_same_loss_and_gradients():
    data = ToyImages(8)
    batch = _collate(data, range(8))
    model = tiny_model().train()
    loss0, g0 = _loss_and_grads(model, batch)
    model.activation_checkpointing = True
    calls = []
    core_forward = model.core.forward
    model.core.forward = lambda x, mask: (calls.append(1), core_forward(x, mask))[1]
    loss1, g1 = _loss_and_grads(model, batch)
    # H_cycles * (L_cycles + 1) core calls in forward, recomputed once more in backward.
    assert len(calls) == 2 * 2 * (2 + 1)
    assert torch.equal(loss0, loss1)
    assert g0.keys() == g1.keys()
    for n in g0:
        torch.testing.assert_close(g0[n], g1[n], rtol=1e-5, atol=1e-7, msg=n)


def test_grad_free_cycles_same_forward_truncated_backward():
    data = ToyImages(8)
    batch = _collate(data, range(8))
    model = tiny_model().train()
    loss0, g0 = _loss_and_grads(model, batch)
    model.grad_free_cycles = True
    loss1, g1 = _loss_and_grads(model, batch)
    assert torch.equal(loss0, loss1)  # the TRM trick changes the gradient, not the function
    assert not torch.allclose(g0["core.blocks.0.qkv.weight"], g1["core.blocks.0.qkv.weight"])
    assert all(torch.isfinite(g).all() for g in g1.values())


def test_step_sampler_positions_and_micro_splits():
    n, batch, spe, total = 20, 4, 5, 12
    s = StepBatchSampler(n, batch, spe, total, seed=3)
    full = list(s)
    assert len(full) == len(s) == total
    for step, b in enumerate(full):
        epoch, in_epoch = divmod(step, spe)
        assert b == epoch_order(n, 3, epoch)[in_epoch * batch : (in_epoch + 1) * batch].tolist()
    s.set_position(7, 2)  # resumed at step 7 after an OOM fallback halved the micro-batch
    tail = list(s)
    assert len(tail) == len(s) == (total - 7) * 2
    assert [a + b for a, b in zip(tail[::2], tail[1::2])] == full[7:]
    with pytest.raises(ValueError):
        s.set_position(0, 3)


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("accum,augment", [(1, False), (2, True)])
def test_resume_after_interruption_is_bit_identical(tmp_path, monkeypatch, accum, augment):
    """With augmentation and random training windows (the second case) too: both are drawn from the step."""
    data = ToyImages(64)
    eng = dict(grad_accum_steps=accum, augment=augment)
    train = {"window_prob": 1.0, "window_min_chars": 2} if augment else {}
    ref = make_trainer(data, batch_size=8, epochs=2, engine=engine_settings(**eng), ckpt_dir=tmp_path / "ref",
                       every_steps=3, train=train)
    ref.fit()

    killed = make_trainer(data, batch_size=8, epochs=2, engine=engine_settings(**eng), ckpt_dir=tmp_path / "run",
                          every_steps=3, keep_last=2, train=train)
    original = Trainer._optimizer_step

    def dies_at_step_11(self):
        if self.step == 11:
            raise Interrupt("killed")
        original(self)

    monkeypatch.setattr(Trainer, "_optimizer_step", dies_at_step_11)
    with pytest.raises(Interrupt):
        killed.fit()
    monkeypatch.setattr(Trainer, "_optimizer_step", original)
    assert [p.name for p in sorted((tmp_path / "run").glob("*.json"))] == ["step-6.json", "step-9.json"]

    resumed = make_trainer(data, batch_size=8, epochs=2, engine=engine_settings(**eng), ckpt_dir=tmp_path / "run",
                           every_steps=3, keep_last=2, seed=0, train=train)
    result = resumed.fit()
    assert resumed.resumed_from == 9 and result.resolved["resumed_from_step"] == 9
    assert resumed.step == ref.step == 16
    a, b = state(ref.model), state(resumed.model)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert ref.scheduler.get_last_lr() == resumed.scheduler.get_last_lr()
    assert [h["epoch"] for h in result.history] == [1, 2]


def test_resume_refuses_a_different_batch_size(tmp_path):
    data = ToyImages(32)
    make_trainer(data, batch_size=8, epochs=0.5, ckpt_dir=tmp_path).fit()
    with pytest.raises(ValueError, match="batch_size"):
        make_trainer(data, batch_size=16, ckpt_dir=tmp_path).fit()


class PidObjective(ClassificationObjective):
    def __init__(self):
        super().__init__()
        self.pids: set[int] = set()

    def forward(self, model, batch):
        self.pids.update(batch.pop("pid").tolist())
        return super().forward(model, batch)


def test_one_loader_keeps_its_worker_across_epochs():
    data = ToyImages(16, with_pid=True)
    objective = PidObjective()
    trainer = make_trainer(data, batch_size=8, epochs=3, objective=objective,
                           engine=engine_settings(num_workers=1, persistent_workers=True))
    trainer.fit()
    assert len(trainer.history) == 3
    assert len(objective.pids) == 1  # a loader per epoch would have started three workers


@pytest.mark.parametrize("persistent", [True, False])
def test_repositioning_the_loader_keeps_persistent_workers(persistent):
    """After an OOM fallback the loader is re-iterated at a new position: persistent workers stay."""
    trainer = make_trainer(ToyImages(16, with_pid=True), batch_size=8, epochs=2,
                           engine=engine_settings(num_workers=1, persistent_workers=persistent))
    first = next(trainer._batches())
    trainer.step, trainer.micro, trainer.accum = 1, 4, 2
    second = next(trainer._batches())
    assert second["index"].tolist() == epoch_order(16, 0, 0)[8:12].tolist()
    assert (first["pid"][0] == second["pid"][0]).item() is persistent


def test_compile_falls_back_from_cuda_graphs_under_accumulation():
    logs = []
    model = tiny_model()
    with pytest.warns(UserWarning, match="CUDA graphs"):
        _, mode = compile_model(model, "reduce-overhead", 2, logs.append)
    assert mode == "default" and "WARNING" in logs[0]
    with pytest.warns(UserWarning):
        assert compile_model(model, "max-autotune", 4, logs.append)[1] == "max-autotune-no-cudagraphs"
    assert compile_model(model, "reduce-overhead", 1, logs.append)[1] == "reduce-overhead"
    same, mode = compile_model(model, "none", 4, logs.append)
    assert same is model and mode == "none"


def test_resolved_records_what_was_used():
    t = make_trainer(ToyImages(16), batch_size=8, engine=engine_settings(grad_accum_steps=2))
    r = t.fit().resolved
    assert r["precision"] == "fp32" and r["compile_mode"] == "none" and r["grad_scaler"] is False
    assert (r["batch_size"], r["micro_batch"], r["grad_accum_steps"]) == (8, 4, 2)
    assert r["engine"]["grad_accum_steps"] == 2 and r["total_steps"] == 2


def test_profiler_writes_trace_and_component_table(tmp_path):
    t = make_trainer(ToyImages(32), batch_size=8, engine=engine_settings(profiler=True), profile_dir=tmp_path)
    result = t.fit()
    assert (tmp_path / "trace.json").stat().st_size > 0
    assert {"data_wait", "h2d_augment", "forward", "backward", "optimizer"} <= set(result.components)
    table = (tmp_path / "timing.md").read_text()
    for name in ("data_wait", "forward", "backward", "optimizer", "encoder.recursion", "encoder.embed"):
        assert name in table


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
def test_checkpoints_need_the_configs_policy(tmp_path):
    """keep_last and every_steps have no defaults in code: the config's checkpoint section is their one source."""
    data = ToyImages(16)
    with pytest.raises(ValueError, match="keep_last and every_steps"):
        Trainer(tiny_model(), ClassificationObjective(), data, None, make_trainer(data).train, engine_settings(),
                torch.device("cpu"), ckpt_dir=tmp_path, log=lambda m: None)


@cuda
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_fit_on_cuda(precision):
    from pixelpipe.core.hardware import detect_device, native_bf16

    if precision == "bf16" and not native_bf16(detect_device("cuda")):
        pytest.skip("no native bf16")
    data = ToyImages(32)
    t = Trainer(tiny_model(), ClassificationObjective(), data, None, make_trainer(data).train,
                engine_settings(precision=precision, channels_last=True, augment=True), torch.device("cuda"),
                log=lambda m: None)
    r = t.fit()
    assert r.resolved["grad_scaler"] is (precision == "fp16")
    assert all(torch.isfinite(p).all() for p in t.model.parameters())
