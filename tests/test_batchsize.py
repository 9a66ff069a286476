"""batch_size: auto and the out-of-memory fallback, with injected and with real (CPU RSS) measurements."""

from __future__ import annotations

import pytest
import torch

from pixelpipe.train.batchsize import CPU_MAX_BATCH, find_batch_size, make_measure
from pixelpipe.train.distill import ClassificationObjective
from pixelpipe.train.run import resolve_batch_size
from tests._engine_utils import ToyImages, engine_settings, make_trainer, state, tiny_model, train_settings

MiB = 2**20
CPU = torch.device("cpu")


def _find(measure, budget, max_batch=None, cpu_cap=10**9, **engine):
    """Injected measurement and budget: nothing runs, so any device logic is exercised on CPU."""
    return find_batch_size(tiny_model(), ClassificationObjective(), None, engine_settings(**engine), CPU,
                           max_batch=max_batch, log=lambda m: None, measure=measure, budget_bytes=budget,
                           cpu_cap=cpu_cap)


class Recorder:
    """A fake measurement: bytes = cost(micro), or an OOM error above `oom_above`."""

    def __init__(self, cost, oom_above=None):
        self.cost, self.oom_above, self.calls = cost, oom_above, []

    def __call__(self, micro):
        self.calls.append(micro)
        if self.oom_above is not None and micro > self.oom_above:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return int(self.cost(micro))


def test_linear_cost_fills_the_budget_minus_margin():
    m = Recorder(lambda b: 100 * MiB + 2 * MiB * b)
    r = _find(m, 1000 * MiB)
    ideal = (1000 - 100) // 2  # 450 samples fit exactly
    assert m(r.micro_batch) <= 1000 * MiB
    assert 0.85 * ideal <= r.micro_batch <= 0.95 * ideal + 1
    assert r.per_sample_bytes == pytest.approx(2 * MiB) and r.fixed_bytes == pytest.approx(100 * MiB)
    assert r.predicted_micro == ideal and r.confirmed_micro == 448 and r.batch_size == r.micro_batch
    assert m.calls[:2] == [4, 16] and 448 in m.calls


def test_superlinear_cost_is_caught_by_the_confirmation_steps():
    cost = lambda b: 50 * MiB + MiB * b + 0.02 * MiB * b * b  # noqa: E731  (attention-like growth)
    m = Recorder(cost)
    r = _find(m, 1000 * MiB)
    assert r.predicted_micro > 300 and cost(r.predicted_micro) > 1000 * MiB  # the line alone would overshoot
    assert cost(r.micro_batch) <= 1000 * MiB
    assert r.micro_batch >= 100  # exact answer ~196: backing off must not collapse to the probes
    assert any(mb > 0 and cost(mb) > 1000 * MiB for mb in m.calls)


def test_real_out_of_memory_errors_are_bisected():
    m = Recorder(lambda b: 1000 + b, oom_above=100)  # cost looks negligible, the device disagrees
    r = _find(m, 10 * MiB, max_batch=4096)
    assert 50 <= r.micro_batch <= 100
    assert any(p[1] == -1 for p in r.probes)


def test_caps_and_accumulation():
    cheap = Recorder(lambda b: b)
    r = _find(cheap, 10**12, max_batch=64, grad_accum_steps=4)
    assert (r.micro_batch, r.batch_size, r.capped_by) == (16, 64, "max_batch")
    r = _find(Recorder(lambda b: b), 10**12, cpu_cap=CPU_MAX_BATCH)
    assert r.batch_size == CPU_MAX_BATCH and r.capped_by == "cpu_cap"


def test_budget_too_small_names_the_problem():
    with pytest.raises(RuntimeError, match="does not fit"):
        _find(Recorder(lambda b: 100 * MiB * b), 50 * MiB)


def test_real_cpu_measurement_fits_and_leaves_the_model_alone():
    """Real forward+backward on CPU, measured as growth of the peak resident set."""
    model = tiny_model(dim=64, heads=4, lines=2, line_chars=8, mlp_ratio=2.0)
    objective = ClassificationObjective()
    g = torch.Generator().manual_seed(0)

    def sample_batch(b):
        return {"glyphs": torch.randint(0, 8, (b, 16), generator=g), "length": torch.full((b,), 16),
                "label": torch.randint(0, 3, (b,), generator=g)}

    before, rng = state(model), torch.get_rng_state()
    engine = engine_settings()
    budget = 160 * MiB
    r = find_batch_size(model, objective, sample_batch, engine, CPU, max_batch=4096, log=lambda m: None,
                        budget_bytes=budget)
    assert r.per_sample_bytes > 50_000  # activations of 2 x (1 + 8) tokens x 64 dims x 6 recursive calls
    assert 16 <= r.micro_batch < CPU_MAX_BATCH and r.capped_by is None
    assert r.confirmed_peak_bytes <= budget
    peak = make_measure(model, objective, sample_batch, engine, CPU)(r.micro_batch)
    assert peak <= budget * 1.1  # re-measured independently (allocator noise allowed)
    after = state(model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(rng, torch.get_rng_state())
    assert all(p.grad is None for p in model.parameters())


class OOMAbove(ClassificationObjective):
    """Raises the CUDA out-of-memory error whenever a micro-batch is larger than `limit`."""

    def __init__(self, limit):
        super().__init__()
        self.limit, self.seen = limit, []

    def forward(self, model, batch):
        self.seen.append(len(batch["label"]))
        if len(batch["label"]) > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return super().forward(model, batch)


def test_oom_fallback_halves_micro_and_keeps_the_effective_batch(tmp_path):
    data = ToyImages(64)
    obj = OOMAbove(limit=4)
    t = make_trainer(data, batch_size=16, epochs=2, objective=obj, ckpt_dir=tmp_path, every_steps=3)
    r = t.fit()
    assert (t.micro, t.accum, t.oom_fallbacks) == (4, 4, 2)
    assert r.resolved["micro_batch"] * r.resolved["grad_accum_steps"] == 16 and r.resolved["oom_fallbacks"] == 2
    assert r.steps == 8 and r.samples == 8 * 16
    assert obj.seen[:3] == [16, 8, 4] and max(obj.seen[3:]) == 4
    # Same samples per step, same effective batch: the same training as accumulating 4 x 4 from the start.
    ref = make_trainer(data, batch_size=16, epochs=2, engine=engine_settings(grad_accum_steps=4))
    ref.fit()
    for (n, a), b in zip(t.model.named_parameters(), ref.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=2e-5, msg=n)
    # A resumed run keeps the smaller micro-batch instead of hitting the error again.
    again = make_trainer(data, batch_size=16, epochs=2, objective=OOMAbove(limit=4), ckpt_dir=tmp_path)
    assert again.maybe_resume() and (again.micro, again.accum) == (4, 4)


def test_oom_with_an_odd_micro_batch_and_at_one():
    t = make_trainer(ToyImages(24), batch_size=12, objective=OOMAbove(limit=2),
                     engine=engine_settings(grad_accum_steps=4))  # micro 3: -> 1 (largest divisor of 12 <= 1.5)
    t.fit()
    assert (t.micro, t.accum, t.oom_fallbacks) == (1, 12, 1)
    t = make_trainer(ToyImages(16), batch_size=2, objective=OOMAbove(limit=0))
    with pytest.raises(RuntimeError, match="cannot be halved"):
        t.fit()


def test_auto_keeps_the_checkpoint_batch_size_on_resume(tmp_path):
    make_trainer(ToyImages(32), batch_size=8, epochs=0.5, ckpt_dir=tmp_path).fit()
    bs, search = resolve_batch_size(train_settings(batch_size="auto"), tiny_model(), ClassificationObjective(),
                                    None, engine_settings(), CPU, 32, lambda m: None, ckpt_dir=tmp_path)
    assert bs == 8 and search["from_checkpoint"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_real_cuda_search_fits_memory_target():
    dev = torch.device("cuda")
    model, objective = tiny_model(dim=128, heads=4), ClassificationObjective()

    def sample_batch(b):
        return {"image": torch.randint(0, 255, (b, 1, 16, 32), dtype=torch.uint8),
                "label": torch.randint(0, 3, (b,))}

    engine = engine_settings(precision="bf16", memory_target=0.05)
    r = find_batch_size(model, objective, sample_batch, engine, dev, max_batch=1 << 20, log=print)
    total = torch.cuda.get_device_properties(0).total_memory
    assert r.confirmed_peak_bytes <= 0.05 * total
    assert make_measure(model, objective, sample_batch, engine, dev)(r.micro_batch) <= 0.05 * total
