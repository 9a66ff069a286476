"""How far a classifier's confidence is from its accuracy: expected calibration error and reliability bins.

Numpy only: training (temperature scaling), predict and the held-out evaluation of the deployed model use it.
"""

from __future__ import annotations

import numpy as np

ECE_BINS = 15


def reliability(probs: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> list[dict]:
    """Per equal-width confidence bin that holds texts: their number, mean confidence and accuracy (the
    reliability diagram's points)."""
    conf, right = probs.max(1), probs.argmax(1) == labels
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
    return [{"low": float(edges[b]), "high": float(edges[b + 1]), "n": int((which == b).sum()),
             "confidence": float(conf[which == b].mean()), "accuracy": float(right[which == b].mean())}
            for b in range(bins) if (which == b).any()]


def ece_of_bins(points: list[dict]) -> float:
    """Expected calibration error of reliability points: mean |accuracy - confidence| weighted by bin size."""
    total = sum(p["n"] for p in points)
    return float(sum(p["n"] * abs(p["accuracy"] - p["confidence"]) for p in points) / total) if total else float("nan")


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> float:
    """ECE in [0, 1] of probabilities [N, C] against labels [N]."""
    return ece_of_bins(reliability(probs, labels, bins)) if len(labels) else float("nan")


class LengthTemperatures:
    """One extra temperature per text-length bin, on top of the one folded into the head: a text shorter than
    any training text ("Ciao") is read with less evidence than the val split's texts and windows, and one
    temperature cannot say so. Bins start at `edges` (characters); logits of a text of n characters are divided
    by the temperature of the last edge <= n. Fitted by train/calibrate.py, carried in the model's config
    (metrics.calibration.by_length), applied by predict."""

    def __init__(self, edges: list[int], temperatures: list[float]) -> None:
        if len(edges) != len(temperatures) or list(edges) != sorted(edges):
            raise ValueError(f"length temperatures need one temperature per sorted edge: {edges}, {temperatures}")
        self.edges = np.asarray(edges, np.int64)
        self.temperatures = np.asarray(temperatures, np.float64)

    @classmethod
    def from_config(cls, config: dict) -> "LengthTemperatures | None":
        found = ((config.get("metrics") or {}).get("calibration") or {}).get("by_length")
        return cls(found["edges"], found["temperatures"]) if found else None

    def of(self, lengths: np.ndarray) -> np.ndarray:
        """The temperature of each length (1 below the first edge)."""
        k = np.searchsorted(self.edges, np.asarray(lengths, np.int64), side="right") - 1
        return np.where(k >= 0, self.temperatures[np.clip(k, 0, None)], 1.0)

    def apply(self, logits: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """`logits` [N, C] (float) divided in place by each text's temperature; returns them (no copy of a chunk)."""
        logits /= self.of(lengths)[:, None]
        return logits
