"""LazyAdamW: AdamW on dense gradients, SparseAdam's lazy row update on sparse ones, in one optimizer."""

import torch

from pixelpipe.train.optim import LazyAdamW


def _steps(make_opt, sparse: bool, steps: int = 5) -> torch.Tensor:
    torch.manual_seed(0)
    table = torch.nn.Embedding(20, 4, sparse=sparse)
    linear = torch.nn.Linear(4, 3)
    opt = make_opt(table, linear)
    for step in range(steps):
        ids = torch.tensor([[step % 20, 3, 3], [7, 8, (2 * step) % 20]])
        loss = linear(table(ids).mean(1)).pow(2).sum()
        for o in opt:
            o.zero_grad()
        loss.backward()
        for o in opt:
            o.step()
    return torch.cat([table.weight.detach().flatten(), linear.weight.detach().flatten()])


def test_dense_gradients_follow_adamw():
    ref = _steps(lambda t, lin: [torch.optim.AdamW([*t.parameters(), *lin.parameters()], lr=0.01, betas=(0.9, 0.95),
                                                   weight_decay=0.1)], sparse=False)
    got = _steps(lambda t, lin: [LazyAdamW([*t.parameters(), *lin.parameters()], lr=0.01, betas=(0.9, 0.95),
                                           weight_decay=0.1)], sparse=False)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)


def test_sparse_rows_follow_sparse_adam_and_untouched_rows_stay():
    ref = _steps(lambda t, lin: [torch.optim.SparseAdam(list(t.parameters()), lr=0.01, betas=(0.9, 0.95)),
                                 torch.optim.AdamW(lin.parameters(), lr=0.01, betas=(0.9, 0.95), weight_decay=0.0)],
                 sparse=True)
    got = _steps(lambda t, lin: [LazyAdamW([*t.parameters(), *lin.parameters()], lr=0.01, betas=(0.9, 0.95))],
                 sparse=True)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)
    torch.manual_seed(0)
    untouched = torch.nn.Embedding(20, 4).weight.detach()
    touched = {s % 20 for s in range(5)} | {3, 7, 8} | {(2 * s) % 20 for s in range(5)}
    rows = [r for r in range(20) if r not in touched]
    torch.testing.assert_close(got[: 80].reshape(20, 4)[rows], untouched[rows])


def test_state_round_trips_through_state_dict():
    table = torch.nn.Embedding(10, 2, sparse=True)
    opt = LazyAdamW(table.parameters(), lr=0.1)
    table(torch.tensor([1, 2])).sum().backward()
    opt.step()
    again = LazyAdamW(table.parameters(), lr=0.1)
    again.load_state_dict(opt.state_dict())
    state = again.state[table.weight]
    assert float(state["step"]) == 1 and state["exp_avg"].shape == (10, 2)


def test_the_tables_learn_at_their_own_scale_of_the_rate_on_the_same_schedule():
    """train.table_lr_scale: the n-gram tables' group runs at scale x lr, warm-up and cosine applied to every group
    alike; at scale 1 the update is the one-group recipe's, number for number."""
    from pixelpipe.model.ngrams import GlyphNgrams
    from pixelpipe.train.optim import lr_lambda, make_optimizer, param_groups

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ngrams = GlyphNgrams(orders=2, bucket_bits=6, dim=4, pixels=4)
            self.ngrams.table.sparse = True
            self.head = torch.nn.Linear(4, 3)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.ngrams.table(ids).mean(1)).pow(2).sum()

    def run(scale: float) -> tuple[list[float], torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        model = Model()
        start = model.ngrams.table.weight.detach().clone()
        opt, sched = make_optimizer([model], 0.01, 0.05, 0.5, 4, table_lr_scale=scale)
        rates = []
        for step in range(4):
            opt.zero_grad()
            model(torch.tensor([[1, 2, 3], [4, 5, step]])).backward()
            opt.step()
            sched.step()
            rates.append([g["lr"] for g in opt.param_groups])
        return rates, model.ngrams.table.weight.detach() - start, model.head.weight.detach().clone()

    rates, moved, head = run(5.0)
    assert all(abs(r[2] - 5 * r[0]) < 1e-12 and r[0] == r[1] for r in rates) and rates[0][2] == 0.05
    one_rates, one_moved, one_head = run(1.0)
    assert moved.abs().sum() > 3 * one_moved.abs().sum()
    torch.manual_seed(0)
    model = Model()
    opt = LazyAdamW(param_groups([model], 0.05), lr=0.01, betas=(0.9, 0.95))  # the tables among the no-decay group
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(4, 2))
    start = model.ngrams.table.weight.detach().clone()
    for step in range(4):
        opt.zero_grad()
        model(torch.tensor([[1, 2, 3], [4, 5, step]])).backward()
        opt.step()
        sched.step()
    torch.testing.assert_close(model.ngrams.table.weight.detach() - start, one_moved)
    torch.testing.assert_close(model.head.weight.detach(), one_head)
