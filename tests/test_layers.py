"""The package's folders are its architecture: each layer imports only itself and the layers before it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pixelpipe"
LAYERS = ("core", "config", "data", "model", "train", "deploy", "evaluate", "plan", "report")
ENTRY_POINTS = {"predict", "workflow_job"}  # top-level modules: they may import any layer, no layer imports them


def imported_subpackages(source: str, here: tuple[str, ...]) -> set[str]:
    """The first component under `pixelpipe` of every module imported by `source`, a module in the
    subpackage `here` (("train",) for pixelpipe/train/x.py); "" stands for the package root."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here[: len(here) - (node.level - 1)])
            parts = base + (node.module.split(".") if node.module else [])
            found |= {parts[0]} if parts else {n.name for n in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pixelpipe":
            rest = node.module.split(".")[1:]
            found |= {rest[0]} if rest else {n.name for n in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "pixelpipe":
                    found.add(parts[1] if len(parts) > 1 else "")
    return found


def test_every_module_sits_in_a_layer_or_is_an_entry_point():
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    dirs = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert top == ENTRY_POINTS and dirs == set(LAYERS)


def test_layers_import_only_themselves_and_earlier_layers():
    bad = []
    for layer_index, layer in enumerate(LAYERS):
        allowed = set(LAYERS[: layer_index + 1]) | {""}
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            wrong = imported_subpackages(path.read_text(), path.relative_to(PACKAGE).parts[:-1]) - allowed
            bad += [f"{path.relative_to(PACKAGE)} imports pixelpipe.{w}" for w in sorted(wrong)]
    assert not bad, "imports against the layer order " + " -> ".join(LAYERS) + ":\n" + "\n".join(bad)


def test_the_layer_check_resolves_every_import_form():
    source = ("from ..train.engine import Trainer\nfrom . import io\nfrom .timing import Timer\n"
              "from pixelpipe.deploy import onnxmodel\nimport pixelpipe.report.reports\nimport pixelpipe\n")
    assert imported_subpackages(source, ("core",)) == {"train", "core", "deploy", "report", ""}
