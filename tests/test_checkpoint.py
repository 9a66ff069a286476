import json

import torch
from safetensors.torch import load_file

from pixelpipe.model.checkpoint import (
    list_checkpoints,
    load_model,
    load_training_state,
    rotate_checkpoints,
    save_model,
    save_training_state,
)
from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder
from tests._engine_utils import encoder_config

CFG = encoder_config(line_chars=2, dim=8)


def _trained_optimizer(model):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.rand(2, 1, 16, 16))["logits"].sum().backward()
    opt.step()
    return opt


def test_rotation_keeps_exactly_k(tmp_path):
    model = TRMVisionEncoder(CFG)
    opt = _trained_optimizer(model)
    for step in (1, 2, 3, 4, 5):
        save_training_state(tmp_path, step, {"model": model}, opt, {})
        rotate_checkpoints(tmp_path, 3)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [3, 4, 5]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"step-{s}.{e}" for s in (3, 4, 5) for e in ("json", "safetensors")]


def test_incomplete_checkpoint_is_ignored(tmp_path):
    model = TRMVisionEncoder(CFG)
    save_training_state(tmp_path, 1, {"model": model}, _trained_optimizer(model), {})
    (tmp_path / "step-2.safetensors").write_bytes(b"partial")
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1]


def test_training_state_round_trip_without_pickle(tmp_path):
    torch.manual_seed(0)
    model = TRMVisionEncoder(CFG)
    opt = _trained_optimizer(model)
    path = save_training_state(tmp_path, 7, {"model": model}, opt, {"note": "x"})
    json.loads(path.read_text())  # plain JSON
    load_file(str(path.with_suffix(".safetensors")))  # plain safetensors
    fresh = TRMVisionEncoder(EncoderConfig(**CFG.to_dict()))
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    meta = load_training_state(path, {"model": fresh}, fresh_opt)
    assert meta["step"] == 7 and meta["note"] == "x"
    for a, b in zip(model.parameters(), fresh.parameters()):
        torch.testing.assert_close(a, b)
    sa, sb = opt.state_dict(), fresh_opt.state_dict()
    for idx in sa["state"]:
        torch.testing.assert_close(sa["state"][idx]["exp_avg"], sb["state"][idx]["exp_avg"])


def test_model_save_load(tmp_path):
    model = TRMVisionEncoder(CFG).eval()
    save_model(tmp_path, model, {"labels": ["a", "b", "c"]})
    loaded, cfg = load_model(tmp_path)
    x = torch.rand(1, 1, 16, 16)
    torch.testing.assert_close(model(x)["logits"], loaded.eval()(x)["logits"])
    assert cfg["labels"] == ["a", "b", "c"]
