"""The closing lines of a run: teacher and student test accuracy."""

from __future__ import annotations

from pathlib import Path

from .io import read_json


def accuracy_summary(results_dir: str | Path) -> str:
    results_dir = Path(results_dir)
    lines = []
    for role in ("teacher", "student"):
        cfg = results_dir / role / "config.json"
        if cfg.exists():
            m = read_json(cfg).get("metrics", {})
            if m.get("test_accuracy") is not None:
                lines.append(f"  {role:8s} test accuracy {m['test_accuracy']:.4f}  "
                             f"({m.get('parameters', 0):,} parameters, trained in {m.get('train_wall_s', 0):.0f} s)")
    return "pixelpipe results:\n" + "\n".join(lines) if lines else ""
