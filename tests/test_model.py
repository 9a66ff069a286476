import pytest
import torch

from pixelpipe.model import EncoderConfig, TRMVisionEncoder, checksum_bits, flops_per_sample

CFG = EncoderConfig(image_height=16, image_width=32, channels=1, patch_size=8, dim=16, depth=1, heads=2,
                    H_cycles=2, L_cycles=2, num_capsules=3, num_classes=5)


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


def test_bad_geometry_is_rejected():
    with pytest.raises(ValueError, match="patch_size"):
        TRMVisionEncoder(EncoderConfig(image_height=20, image_width=32, patch_size=8))
    with pytest.raises(ValueError, match="heads"):
        TRMVisionEncoder(EncoderConfig(dim=10, heads=3))


def test_flops_grow_with_recursion():
    more = EncoderConfig(**{**CFG.to_dict(), "H_cycles": 4})
    assert flops_per_sample(more) > flops_per_sample(CFG)
