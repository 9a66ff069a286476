"""Config sections with the schema's defaults, for tests that build settings directly.

Settings classes have no defaults of their own (the schema is the one source), so a test
takes a resolved section and overrides what it is about.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from pixelpipe.config.resolve import load_config


@functools.lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    return load_config(None)


def defaults() -> dict[str, Any]:
    """The whole default config (cpu profile), a fresh copy."""
    return copy.deepcopy(_defaults())


def section(name: str, /, **overrides: Any) -> dict[str, Any]:
    """The default config section at a dotted path (e.g. 'student.distill'), with overrides."""
    node: Any = _defaults()
    for key in name.split("."):
        node = node[key]
    return {**copy.deepcopy(node), **overrides}
