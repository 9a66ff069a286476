"""How well a model's predicted probabilities match its accuracy on the clean held-out texts (ECE, reliability
bins), pooled and per length bucket, and what the can't-tell threshold trades there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..core.reliability import ece_of_bins, reliability
from ..deploy.decide import DEFAULT_THRESHOLD, Decider, selective_accuracy

CALIBRATION_BUCKETS = (("<20", 1, 19), ("20-40", 20, 40), (">40", 41, 1 << 30), ("all", 1, 1 << 30))


def heldout_calibration(proba: Callable[[list[str]], np.ndarray], labels: Sequence[str],
                        sets: dict[str, pd.DataFrame]) -> dict:
    """How well the probabilities of a model (`proba`: texts -> [N, classes], NaN rows for texts it cannot
    classify) match its accuracy on the clean held-out texts of every set, pooled and per length bucket (ECE and
    the reliability bins), and what the can't-tell threshold trades: share answered against accuracy of the
    answers given, per bucket. Short texts are where a pooled ECE hides over-confidence."""
    texts = [t for df in sets.values() for t in df["text"]]
    index = {lab: i for i, lab in enumerate(labels)}
    truth = np.array([index[y] for df in sets.values() for y in df["label"]])
    lengths = np.array([len(re.sub(r"\s+", " ", t).strip()) for t in texts])
    probs = np.asarray(proba(texts), np.float64)
    ok = np.isfinite(probs).all(1)
    decider = Decider(labels)
    out: dict = {"threshold": DEFAULT_THRESHOLD, "groups": decider.groups, "buckets": {}}
    for name, lo, hi in CALIBRATION_BUCKETS:
        sel = ok & (lengths >= lo) & (lengths <= hi)
        if not sel.any():
            continue
        points = reliability(probs[sel], truth[sel])
        entry = {"texts": int(sel.sum()), "ece": ece_of_bins(points), "bins": points,
                 "selective": selective_accuracy(decider, probs[sel], truth[sel])}
        if name == "all":
            out.update(texts=entry["texts"], ece=entry["ece"], bins=points)
        out["buckets"][name] = entry
    return out
