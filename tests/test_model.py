import pytest
import torch

from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder, checksum_bits, flops_per_sample
from tests._engine_utils import encoder_config

CFG = encoder_config(H_cycles=2, L_cycles=2, num_capsules=3, num_classes=5)


def test_output_shapes():
    model = TRMVisionEncoder(CFG).eval()
    out = model(torch.randint(0, 256, (4, 1, 16, 32), dtype=torch.uint8))
    assert out["logits"].shape == (4, 5)
    assert out["sketches"].shape == (4, 3, 16)
    assert out["children"].shape == (4, 3, 4, 16)
    assert out["checksum_logits"].shape == (4, 3, 32)
    assert checksum_bits(out["checksum_logits"]).dtype == torch.bool


def test_uint8_and_float_inputs_agree():
    model = TRMVisionEncoder(CFG).eval()
    x = torch.randint(0, 256, (2, 1, 16, 32), dtype=torch.uint8)
    torch.testing.assert_close(model(x)["logits"], model(x.float() / 255)["logits"])


def test_grad_free_cycles_keep_forward_and_cut_graph():
    torch.manual_seed(0)
    model = TRMVisionEncoder(CFG).train()
    x = torch.rand(2, 1, 16, 32)
    ref = model(x)["logits"]
    model.grad_free_cycles = True
    out = model(x)["logits"]
    torch.testing.assert_close(ref, out)
    out.sum().backward()
    assert model.core.blocks[0].qkv.weight.grad is not None  # the last cycle still trains the core


def test_checksums_are_stable_for_similar_sketches():
    model = TRMVisionEncoder(CFG).eval()
    s = torch.randn(1, 3, 16)
    a = checksum_bits(s @ model.checksum_planes)
    b = checksum_bits((s + 1e-4 * torch.randn_like(s)) @ model.checksum_planes)
    assert (a == b).float().mean() > 0.95


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="stem"):
        TRMVisionEncoder(encoder_config(stem="patch"))
    with pytest.raises(ValueError, match="heads"):
        TRMVisionEncoder(encoder_config(dim=10, heads=3))
    with pytest.raises(ValueError, match="mixer_kernel"):
        TRMVisionEncoder(encoder_config(mixer_kernel=2))


@pytest.mark.parametrize("stem,lines", [("pair", 1), ("cell", 1), ("pair", 2)])
def test_one_token_per_cell_and_pairs_see_the_next_cell(stem, lines):
    """Tokens line up with characters: token k depends on cell k (and, with the pair stem, on cell k+1) only."""
    cfg = encoder_config(stem=stem, lines=lines, line_chars=4, mixer_kernel=0)
    model = TRMVisionEncoder(cfg).eval()
    x = torch.zeros(1, 1, cfg.image_height, cfg.image_width)
    base, _ = model.stem(x)
    assert base.shape == (1, cfg.num_tokens, cfg.dim) == (1, 4 * lines, 16)
    x[..., 0:16, 8:16] = 1.0  # ink in cell 1 of line 0
    moved = (model.stem(x)[0] - base).abs().sum(-1)[0] > 0
    expected = [False, True, False, False] if stem == "cell" else [True, True, False, False]
    assert moved.tolist()[:4] == expected and not moved[4:].any()


def test_positions_are_a_switch():
    assert TRMVisionEncoder(encoder_config(positions=True)).pos_embed.shape == (1, 4, 16)
    assert TRMVisionEncoder(encoder_config(positions=False)).pos_embed is None


def test_flops_grow_with_recursion():
    more = EncoderConfig(**{**CFG.to_dict(), "H_cycles": 4})
    assert flops_per_sample(more) > flops_per_sample(CFG)
