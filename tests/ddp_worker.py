"""One rank of the gloo DDP tests (started by torchrun): train the toy Trainer, save what the test compares.

Usage: torchrun --standalone --nproc_per_node=N tests/ddp_worker.py OUT_DIR SPEC_JSON
Writes OUT_DIR/rank{r}.safetensors (final parameters) and OUT_DIR/rank{r}.json (loss curve, resolved).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from safetensors.torch import save_file

from pixelpipe.core import distributed
from tests._engine_utils import ToyImages, engine_settings, make_trainer, state


def main(out: Path, spec: dict) -> None:
    d = distributed.init("cpu")
    try:
        trainer = make_trainer(ToyImages(spec["n"]), batch_size=spec["batch"], epochs=spec["epochs"],
                               engine=engine_settings(grad_accum_steps=spec["accum"], loss_every_steps=1),
                               train=spec["train"], ckpt_dir=spec.get("ckpt"), every_steps=2, keep_last=100)
        result = trainer.fit()
        save_file(state(trainer.model) | {f"objective.{k}": v for k, v in state(trainer.objective).items()},
                  str(out / f"rank{d.rank}.safetensors"))
        (out / f"rank{d.rank}.json").write_text(json.dumps({"loss_curve": result.loss_curve,
                                                             "resolved": result.resolved}))
    finally:
        distributed.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.argv[2]))
