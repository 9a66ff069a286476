"""Reading Debian's machine-readable copyright files: every shipped text must carry a license its package states
for the very file it came from."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path


def dep5_licenses(copyright_text: str) -> list[tuple[list[str], str]]:
    """(globs, license) stanzas of a machine-readable Debian copyright file, in file order (last match wins)."""
    stanzas = []
    for block in re.split(r"\n\s*\n", copyright_text):
        files = re.search(r"^Files:(.*(?:\n[ \t].*)*)", block, re.MULTILINE)
        lic = re.search(r"^License:\s*(\S.*)$", block, re.MULTILINE)
        if files and lic:
            stanzas.append((files.group(1).split(), lic.group(1).strip()))
    return stanzas


def dep5_license(path: str, stanzas: list[tuple[list[str], str]]) -> str:
    """The license a DEP-5 copyright file gives one source path."""
    found = ""
    for globs, lic in stanzas:
        if any(fnmatch.fnmatchcase(path, g) for g in globs):
            found = lic
    return found


_GPL2_PLUS = {"gpl-2+", "gpl-2.0+", "gpl-2.0-or-later", "gpl-2-or-later", "gpl2+", "gplv2+"}


def gpl2_plus(expression: str) -> bool:
    """Whether a DEP-5 license expression lets us take the text under GPL-2.0-or-later."""
    return any(alt.strip().lower() in _GPL2_PLUS for alt in re.split(r"\s+or\s+", expression, flags=re.IGNORECASE))


def package_copyright(root: Path, package: str) -> str:
    """An unpacked package's copyright file (a symlink resolved inside the package; not UTF-8: Latin-1)."""
    path = root / f"usr/share/doc/{package}/copyright"
    if path.is_symlink():
        target = Path(path.readlink())
        path = (root / target.relative_to("/")) if target.is_absolute() else (path.parent / target)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


COMMON_LICENSE_TEXTS = {name: f"/usr/share/common-licenses/{name}" for name in
                        ("GPL-2", "GPL-3", "LGPL-2", "LGPL-2.1", "LGPL-3", "Apache-2.0", "BSD", "CC0-1.0")}
