"""One way to build a settings dataclass from its config section.

Defaults live only in the schema (`pixelpipe/config/schema.yaml`) and the hardware profiles
(`pixelpipe/config/profiles.yaml`), filled in by `pixelpipe.config.resolve.resolve_config`; a settings
class therefore has no defaults of its own and takes its section whole. A key the class does not know, or one
it needs but the section lacks, is an error naming the section, so a schema key
that no code reads, or a field the schema does not define, cannot go unnoticed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Self


class SectionError(ValueError):
    """A config section whose keys do not match the settings class that reads it."""


def check_keys(section: Mapping[str, Any], names: Sequence[str], where: str) -> None:
    """Raise SectionError unless `section` has exactly the keys `names` (`where` names the section and reader)."""
    unknown = sorted(set(section) - set(names))
    missing = [n for n in names if n not in section]
    if unknown or missing:
        parts = ([f"unknown key(s) {unknown}"] if unknown else []) + ([f"missing key(s) {missing}"] if missing else [])
        raise SectionError(f"config section {where}: {'; '.join(parts)} "
                           "(build it from a config resolved by pixelpipe.config.resolve.load_config)")


class Section:
    """Mixin for dataclasses built from one config section by `from_section`."""

    SECTION = "?"  # the section's dotted name, for messages

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> Self:
        """Build from a complete section: unknown and missing keys are errors (no silent defaults, no dropped keys)."""
        names = cls.section_keys()
        check_keys(section, names, f"'{cls.SECTION}' for {cls.__name__}")
        return cls(**{n: section[n] for n in names})

    @classmethod
    def section_keys(cls) -> list[str]:
        """The config keys this class reads: its init fields."""
        return [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]

    def to_section(self) -> dict[str, Any]:
        """The section this was built from (`from_section`'s inverse): its keys and their values."""
        return {n: getattr(self, n) for n in self.section_keys()}


class CellGrid:
    """Geometry of a glyph-aligned image, shared by the render settings and the encoder config (both carry
    `lines`, `line_chars`, `cell_height` and `cell_width`): `lines` x `line_chars` cells of one character."""

    @property
    def image_height(self) -> int:
        return self.lines * self.cell_height

    @property
    def image_width(self) -> int:
        return self.line_chars * self.cell_width

    @property
    def cells(self) -> int:
        """Characters (grapheme clusters) an image holds; longer texts are truncated to this many."""
        return self.lines * self.line_chars


@dataclasses.dataclass(frozen=True)
class CheckpointSettings(Section):
    """A training role's checkpoint policy (`teacher.checkpoint`, `student.checkpoint`): the Trainer saves one every
    `every_steps` optimizer steps and at the end, keeping the newest `keep_last`; the planner sizes the checkpoint
    directory from the same section."""

    SECTION = "{role}.checkpoint"

    keep_last: int
    every_steps: int


@dataclasses.dataclass(frozen=True)
class HardwareSettings(Section):
    """The `hardware:` section of a resolved config: the profile whose defaults it was resolved with ('auto' already
    replaced by the detected one; the trained models' config.json records it) and the device ('auto', 'cpu',
    'cuda')."""

    SECTION = "hardware"

    profile: str
    device: str
