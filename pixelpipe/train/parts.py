"""Forward time by model part (embed / recursion / capsules / head) during training.

The profiler's record_function labels give the same split but cost a trace;
these module hooks cost two timestamps per part per micro-batch, so every
training run can report them. Only training forwards are timed: evaluation
runs without grad, and activation-checkpoint recomputation runs outside the
top-level forward (both would blur the table).
"""

from __future__ import annotations

from torch import nn

from ..core.timing import ComponentTimer

# model attribute -> part name (the record_function labels in model/encoder.py)
PARTS = {"stem": "embed", "core": "recursion", "capsules": "capsules", "sketch_norm": "capsules",
         "children_proj": "capsules", "head_norm": "head", "head": "head"}


class PartTimer:
    def __init__(self, model: nn.Module, device):
        self.timer = ComponentTimer(device)
        self.active = False
        self.handles = []
        self.handles.append(model.register_forward_pre_hook(lambda m, a: self._set(m.training)))
        self.handles.append(model.register_forward_hook(lambda m, a, o: self._set(False)))
        for attr, part in PARTS.items():
            mod = getattr(model, attr, None)
            if mod is None:
                continue
            self.handles.append(mod.register_forward_pre_hook(lambda m, a, part=part: self._begin(part)))
            self.handles.append(mod.register_forward_hook(lambda m, a, o: self._end()))

    def _set(self, on: bool) -> None:
        self.active = on

    def _begin(self, part: str) -> None:
        if self.active:
            self.timer.start(part)

    def _end(self) -> None:
        if self.active:
            self.timer.stop()

    def summary(self) -> dict:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        return self.timer.summary()
