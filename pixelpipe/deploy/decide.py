""""Can't tell": when the evidence does not single out one language, say so instead of guessing.

A calibrated model's top probability is how often such an answer is right. Below
`threshold` the answer is not a language: if the probability mass of a group of
confusable languages the registry knows (bs/hr/sr/sr-Latn, ms/id, nb/nn/da, ...)
that holds the top label reaches the threshold, the answer is that group with its
summed probability (as heliport answers `hbs`); otherwise no language, reason
`undecided` (as lingua answers None). Numpy only: predict, the evaluation and
the tests share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

UNDECIDED = "undecided"
# The answers given are >= 99 % right under 20 characters on the held-out sets at this threshold while most are
# answered (docs/benchmarks.md, "Can't tell"; results/eval/evaluation.md lists the trade-off per length bucket).
DEFAULT_THRESHOLD = 0.95
THRESHOLDS = (0.0, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99)  # the evaluation's trade-off table


def confusable_groups(labels: Sequence[str]) -> dict[str, list[str]]:
    """The registry's confusable groups with two or more of `labels` (a user corpus's labels: none)."""
    from ..data.languages import registry  # json only: predict starts without pandas

    groups: dict[str, list[str]] = {}
    for code, entry in registry().items():
        for g in entry.get("groups", []):
            if code in labels:
                groups.setdefault(g, []).append(code)
    return {g: members for g, members in sorted(groups.items()) if len(members) >= 2}


@dataclass
class Decisions:
    """Per text: the label index (-1 when undecided), the group name (or None) and the answer's probability."""

    label: np.ndarray
    group: list[str | None]
    probability: np.ndarray

    @property
    def answered(self) -> np.ndarray:
        """A language or a group: an answer a user can act on."""
        return (self.label >= 0) | np.array([g is not None for g in self.group], bool)


class Decider:
    """The threshold and the groups of one model's labels, applied to probability rows."""

    def __init__(self, labels: Sequence[str], threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"the can't-tell threshold must be within [0, 1], got {threshold}")
        self.labels, self.threshold = list(labels), float(threshold)
        self.groups = confusable_groups(self.labels)
        index = {lab: i for i, lab in enumerate(self.labels)}
        self.names = list(self.groups)
        self.masks = np.zeros((len(self.names), len(self.labels)), bool)  # [groups, labels]
        for k, members in enumerate(self.groups.values()):
            self.masks[k, [index[m] for m in members]] = True

    def decide(self, probs: np.ndarray, threshold: float | None = None) -> Decisions:
        """Decisions for probability rows [N, labels] (NaN rows: undecided, no group)."""
        t = self.threshold if threshold is None else threshold
        p = np.nan_to_num(np.asarray(probs, np.float64), nan=0.0)
        best = p.argmax(1) if p.size else np.zeros(0, int)
        top = p[np.arange(len(p)), best] if len(p) else np.zeros(0)
        sure = (top >= t) & (top > 0)
        label = np.where(sure, best, -1)
        prob = top.copy()
        group: list[str | None] = [None] * len(p)
        if len(self.names) and (~sure).any():
            mass = p @ self.masks.T  # [N, groups]
            holds = self.masks[:, best].T & (mass >= t) & ~sure[:, None]  # groups holding the top label, enough mass
            size = self.masks.sum(1)
            # the smallest such group, then the most probable
            rank = np.where(holds, size[None, :] * 2.0 - mass, np.inf)
            pick = rank.argmin(1)
            for i in np.flatnonzero(holds.any(1)):
                group[i] = self.names[pick[i]]
                prob[i] = mass[i, pick[i]]
        return Decisions(label, group, prob)

    def members(self, group: str) -> list[str]:
        return self.groups[group]


def selective_accuracy(decider: Decider, probs: np.ndarray, truth: np.ndarray,
                       thresholds: Sequence[float] = THRESHOLDS) -> list[dict]:
    """Per threshold: the share of texts answered (a language or a group), the accuracy of those answers (a group
    is right when it holds the true language) and the share answered with a group; `truth` are label indices."""
    rows = []
    for t in thresholds:
        d = decider.decide(probs, t)
        right = d.label == truth
        for i, g in enumerate(d.group):
            if g is not None:
                right[i] = decider.labels[truth[i]] in decider.groups[g]
        answered = d.answered
        n = len(truth)
        rows.append({"threshold": t, "texts": n, "answered": float(answered.mean()) if n else float("nan"),
                     "accuracy": float(right[answered].mean()) if answered.any() else float("nan"),
                     "groups": float(np.mean([g is not None for g in d.group])) if n else float("nan")})
    return rows
