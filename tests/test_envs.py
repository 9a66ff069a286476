"""The plan rule's conda env holds every distribution the planner loads (under --sdm conda a missing one
would turn the whole plan into an error)."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# Imported only when present: jsonschema's format checker loads idna if it is installed; the planner reads
# py3langid's language list when the optional benchmark dependency is installed (the evaluation compares with it).
OPTIONAL = {"idna", "py3langid"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _env_of(rule: str) -> Path:
    text = "\n".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk")))
    body = re.search(rf"^rule {rule}:\n(.*?)(?=^rule |\Z)", text, re.S | re.M).group(1)
    return REPO / "rules" / re.search(r'conda:\s*\n(?:\s*#.*\n)*\s*"([^"]+)"', body).group(1)


def _closure(names: set[str]) -> set[str]:
    """The distributions `names` pull in (their requirements, transitively, as installed here)."""
    seen, todo = set(), [_norm(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_norm(re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]) for r in reqs if "extra ==" not in r]
    return seen


def test_plan_env_has_what_the_planner_loads(tmp_path):
    code = ("import sys, json; from pixelpipe.config.resolve import load_config; from pixelpipe.plan.workflow import plan_workflow;"
            f"plan_workflow(load_config({str(REPO / 'tests' / 'configs' / 'tiny.yaml')!r}));"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    loaded = set(yaml.safe_load(out.stdout.strip().splitlines()[-1])) - set(sys.stdlib_module_names)
    dists = metadata.packages_distributions()
    needed = {_norm(d) for m in loaded for d in dists.get(m, [])} - {"pixelpipe"}
    env = yaml.safe_load(_env_of("plan").read_text())
    pins = [p for d in env["dependencies"] if isinstance(d, dict) for p in d["pip"]]
    listed = {_norm(re.split(r"[<>=!~\[]", p, maxsplit=1)[0]) for p in pins}
    missing = needed - _closure(listed) - OPTIONAL
    assert not missing, f"{_env_of('plan').name} lacks {sorted(missing)}, which the planner imports"
