"""Parameter shapes of the encoder, from the model code itself (built on the meta device: no memory).

Files (safetensors, checkpoints, ONNX) and memory (weights, gradients, optimizer state) are sized from these.
"""

from __future__ import annotations

import functools
import math

from ..model.encoder import EncoderConfig


def _meta_model(cfg: EncoderConfig):
    """TRMVisionEncoder(cfg) on the meta device (no memory), built once per shape: the model code is
    the one source of its parameter shapes."""
    return _meta_model_cached(tuple(sorted(cfg.to_dict().items())))


@functools.lru_cache(maxsize=16)
def _meta_model_cached(items: tuple):
    import torch

    from ..model.encoder import TRMVisionEncoder

    with torch.device("meta"):
        return TRMVisionEncoder(EncoderConfig(**dict(items)))


def model_tensors(cfg: EncoderConfig) -> dict[str, tuple[tuple[int, ...], str, int]]:
    """state_dict names and shapes of TRMVisionEncoder(cfg)."""
    return {k: (tuple(v.shape), str(v.dtype).removeprefix("torch."), v.element_size())
            for k, v in _meta_model(cfg).state_dict().items()}


# Parameters no loss reaches: the teacher trains on logits, the student on logits and sketches, so
# children_proj gets no gradient, and AdamW creates no state for it (measured in the checkpoints).
UNTRAINED_PARAMS = ("children_proj.",)


def param_shapes(cfg: EncoderConfig, trained_only: bool = False) -> list[tuple[int, ...]]:
    """Trainable parameter shapes in the order the engine's param_groups lists them."""
    from ..train.optim import param_groups

    model = _meta_model(cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    return [tuple(p.shape) for g in param_groups([model], 0.0) for p in g["params"]
            if not (trained_only and names[id(p)].startswith(UNTRAINED_PARAMS))]


def parameter_count(cfg: EncoderConfig) -> int:
    """Parameters of TRMVisionEncoder(cfg) (what a loaded model's weights hold)."""
    return sum(int(math.prod(s)) for s in param_shapes(cfg))
