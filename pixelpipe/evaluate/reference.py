"""The reference the models are compared with: py3langid (an optional benchmark dependency, never a runtime one),
as a callable texts -> its labels, restricted to the languages it shares with the model or with all of its own.
Torch-free: the planner asks whether it is installed.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

# Our labels that py3langid spells otherwise (it has "no" for Norwegian Bokmal); a script or region subtag is
# dropped (zh-Hans and zh-Hant are both its "zh", sr-Latn its "sr").
REFERENCE_ALIASES = {"nb": "no"}


def reference_code(label: str) -> str:
    """py3langid's code for one of our labels."""
    base = label.split("-")[0]
    return REFERENCE_ALIASES.get(base, base)


class ReferenceScorer:
    """py3langid (an optional benchmark dependency): restricted to the languages it shares with the model (as its
    `set_languages`), or with all of its languages. It answers in its own codes; `label_key` maps a true label to
    the code that counts as right, and `known` lists the model's labels it can answer at all."""

    def __init__(self, labels: Sequence[str], restricted: bool) -> None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self.ident = LanguageIdentifier.from_model_file(MODEL_FILE)
        self.known = known_labels(labels, self.ident.nb_classes)
        if restricted:
            self.ident.set_languages(sorted({reference_code(lab) for lab in self.known}))
        self.label_key = reference_code

    def __call__(self, texts: list[str]) -> list[str]:
        return [self.ident.classify(t)[0] for t in texts]


def known_labels(labels: Sequence[str], codes: Collection[str]) -> list[str]:
    """The labels a reference answering in `codes` can answer at all."""
    return [lab for lab in labels if reference_code(lab) in codes]


def common_languages(known: Sequence[str], labels: Sequence[str]) -> Sequence[str] | None:
    """The languages every score is also counted over (scope "common"): those the reference knows, when it knows
    at least two of the model's labels and not all of them; None otherwise."""
    return known if 2 <= len(known) < len(labels) else None


def py3langid_scorer(labels: Sequence[str], restricted: bool = True) -> ReferenceScorer | None:
    """py3langid over `labels` (restricted to them, or with all its languages), or None when it is not installed
    or knows fewer than two of them."""
    try:
        scorer = ReferenceScorer(labels, restricted)
    except ImportError:
        return None
    return scorer if len(scorer.known) >= 2 else None


@functools.lru_cache(maxsize=1)
def reference_languages() -> frozenset[str]:
    """py3langid's language codes (empty when it is not installed): the planner sizes the evaluation's rows over
    the languages both know (0.5 s to load its model, once)."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        return frozenset()
    return frozenset(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes)


def compared_on_common(labels: Sequence[str]) -> bool:
    """Whether the evaluation also counts every score over the languages py3langid shares with the model."""
    return common_languages(known_labels(labels, reference_languages()), labels) is not None


def py3langid_installed() -> bool:
    """Whether the optional benchmark dependency is there (the evaluation scores it, the planner sizes it)."""
    import importlib.util

    return importlib.util.find_spec("py3langid") is not None
