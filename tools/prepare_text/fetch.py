"""Registry downloads (Debian apt, npm, PyPI), each once into --work: a rerun reuses them, and the exact versions
they return are what sources.json records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FLUENT_WHEEL = "fluent.syntax==0.19.0"


def run(cmd: list[str], cwd: Path) -> str:
    """Run a command, fail loudly with its stderr."""
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"prepare_text: {' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def apt_fetch(package: str, work: Path) -> tuple[Path, str]:
    """Download one Debian package (once) and unpack it; returns (unpacked root, exact version)."""
    debs = work / "deb"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        run(["apt-get", "download", package], debs)
        found = sorted(debs.glob(f"{package}_*.deb"))
    deb = found[-1]
    version = run(["dpkg-deb", "-f", str(deb), "Version"], work).strip()
    root = work / "x" / package
    if not root.exists():
        run(["dpkg-deb", "-x", str(deb), str(root)], work)
    return root, version


def apt_packages(prefix: str, work: Path) -> list[str]:
    """Names of the Debian packages starting with prefix (apt-cache's index), sorted."""
    found = run(["apt-cache", "pkgnames", prefix], work).split()
    return sorted(p for p in found if p.startswith(prefix))


def npm_fetch(spec: str, work: Path) -> tuple[Path, str]:
    """npm pack one exact package version (once) and unpack it; returns (package dir, version)."""
    dest = work / "npm" / spec.replace("/", "_")
    if not (dest / "package" / "package.json").exists():
        dest.mkdir(parents=True, exist_ok=True)
        tgz = run(["npm", "pack", spec, "--silent"], dest).strip().splitlines()[-1]
        run(["tar", "xzf", tgz], dest)
    version = json.loads((dest / "package" / "package.json").read_text())["version"]
    return dest / "package", version


def fluent_syntax(work: Path):
    """fluent.syntax from PyPI, unpacked into work (the prep script's only non-stdlib parser)."""
    target = work / "pylib"
    if not (target / "fluent" / "syntax").exists():
        run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), FLUENT_WHEEL],
            work,
        )
    sys.path.insert(0, str(target))
    import fluent.syntax

    return fluent.syntax
