"""The hardware profiles (`hardware.profile`): profiles.yaml, beside the schema, read once per process.

A profile is a partial config: the keys whose defaults pay on one kind of machine. `resolve_config` merges the
chosen profile under the user's keys and over the schema's defaults; which profile `auto` picks is
`pixelpipe.core.hardware.auto_profile`'s call.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

PROFILES_PATH = Path(__file__).resolve().parent / "profiles.yaml"  # ships with the package


@functools.lru_cache(maxsize=None)
def _read_profiles() -> dict[str, dict]:
    return yaml.safe_load(PROFILES_PATH.read_text(encoding="utf-8"))


def load_profiles() -> dict[str, dict]:
    """Every profile by name, as nested config sections (a fresh copy: YAML aliases share objects)."""
    return copy.deepcopy(_read_profiles())


def load_profile(name: str) -> dict:
    """One profile's config sections (a fresh copy)."""
    return copy.deepcopy(_read_profiles()[name])
