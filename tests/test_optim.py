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
