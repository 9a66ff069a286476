"""How far a classifier's confidence is from its accuracy: expected calibration error and reliability bins.

Numpy only: training (temperature scaling) and the held-out evaluation of the deployed model both use it.
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
