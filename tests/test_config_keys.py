"""Every schema key is read by code, and code reads no key the schema lacks.

A settings class (built by `from_section`) reads exactly its fields; the few keys the rules and
scripts read directly are listed in DIRECT_READS with the file that reads them. Adding a key
means adding it to the schema and to the code that uses it (a field, or a DIRECT_READS line).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pixelpipe.config.resolve import load_schema
from pixelpipe.config.settings import CheckpointSettings, HardwareSettings, SectionError
from pixelpipe.data.corpus import CorpusSettings
from pixelpipe.data.render import RenderSettings
from pixelpipe.deploy.quantize import QuantizeSettings
from pixelpipe.evaluate.sets import EvaluateSettings
from pixelpipe.model.encoder import EncoderConfig
from pixelpipe.train.baseline import BaselineSettings
from pixelpipe.train.matrix import MatrixSettings
from pixelpipe.train.settings import DistillSettings, EngineSettings, TrainSettings

ROOT = Path(__file__).resolve().parents[1]

# schema section -> the class whose from_section reads it whole
SECTION_READERS = {
    "hardware": HardwareSettings,
    "corpus": CorpusSettings,
    "render": RenderSettings,
    "engine": EngineSettings,
    "quantize": QuantizeSettings,
    "teacher.model": EncoderConfig,
    "student.model": EncoderConfig,
    "teacher.train": TrainSettings,
    "student.train": TrainSettings,
    "student.distill": DistillSettings,
    "teacher.checkpoint": CheckpointSettings,
    "student.checkpoint": CheckpointSettings,
    "evaluate": EvaluateSettings,
    "baseline": BaselineSettings,
    "benchmark_matrix": MatrixSettings,
}
# keys read one by one (by rules, scripts or the planner): key -> a file that reads it
DIRECT_READS = {
    "seed": "rules/corpus.smk",
    "render.shard_size": "rules/render.smk",
    "render.truncation_warning": "workflow_scripts/render.py",
    "encode.batch_size": "rules/encode.smk",
    "encode.splits": "rules/common.smk",
    "encode.views": "rules/encode.smk",
    "report.tolerance_pct": "workflow_scripts/report.py",
    "report.disk_preflight": "rules/common.smk",
    "report.cpu_gflops": "pixelpipe/plan/inputs.py",
    "report.gpu_tflops": "pixelpipe/plan/inputs.py",
    "time_factors.file": "rules/report.smk",
    "export.opset": "workflow_scripts/export_onnx.py",
    "export.parity_atol": "workflow_scripts/export_onnx.py",
    "export.max_label_mismatch": "workflow_scripts/export_onnx.py",
    "deploy_benchmark.batch_sizes": "workflow_scripts/deploy_benchmark.py",
    "deploy_benchmark.warmup": "workflow_scripts/deploy_benchmark.py",
    "deploy_benchmark.repeats": "workflow_scripts/deploy_benchmark.py",
    "deploy_benchmark.threads": "rules/deploy.smk",
}


def _resolve(sub: dict, root: dict) -> dict:
    if "$ref" in sub:
        return {**root["definitions"][sub["$ref"].split("/")[-1]], **{k: v for k, v in sub.items() if k != "$ref"}}
    return sub


def schema_sections(schema: dict) -> dict[str, dict]:
    """Every object of the schema with properties, by dotted path ('' = the top level)."""
    out, todo = {}, [("", schema)]
    while todo:
        path, node = todo.pop()
        out[path] = node
        for key, sub in node.get("properties", {}).items():
            sub = _resolve(sub, schema)
            if sub.get("type") == "object" and "properties" in sub and key != "splits":  # splits: one value
                todo.append((f"{path}.{key}".lstrip("."), sub))
    return out


def schema_leaves(schema: dict) -> set[str]:
    sections = schema_sections(schema)
    return {f"{path}.{key}".lstrip(".") for path, node in sections.items() for key in node["properties"]
            if f"{path}.{key}".lstrip(".") not in sections}


SCHEMA = load_schema()


@pytest.mark.parametrize("section", sorted(SECTION_READERS))
def test_settings_class_reads_exactly_its_schema_section(section):
    keys = set(schema_sections(SCHEMA)[section]["properties"])
    cls = SECTION_READERS[section]
    direct = {k.rsplit(".", 1)[1] for k in DIRECT_READS if k.rsplit(".", 1)[0] == section}
    assert set(cls.section_keys()) == keys - direct, (
        f"{cls.__name__} fields vs schema '{section}': only in code {sorted(set(cls.section_keys()) - keys)}, "
        f"only in schema {sorted(keys - direct - set(cls.section_keys()))}")


def test_every_schema_key_has_one_reader():
    leaves = schema_leaves(SCHEMA)
    by_class = {f"{s}.{k}" for s, cls in SECTION_READERS.items() for k in cls.section_keys()}
    assert not by_class & set(DIRECT_READS), "a key is listed both as a field and as a direct read"
    covered = by_class | set(DIRECT_READS)
    assert leaves - covered == set(), f"schema keys no code reads: {sorted(leaves - covered)}"
    assert covered - leaves == set(), f"keys read that the schema lacks: {sorted(covered - leaves)}"


@pytest.mark.parametrize("key", sorted(DIRECT_READS))
def test_direct_reads_are_really_read_there(key):
    text = (ROOT / DIRECT_READS[key]).read_text()
    assert f'"{key.rsplit(".", 1)[-1]}"' in text, f"{DIRECT_READS[key]} no longer reads {key}"


def test_code_reads_no_section_key_the_schema_lacks():
    """`x["section"]["key"]` anywhere in the package, rules and scripts names a schema key."""
    sections = schema_sections(SCHEMA)
    files = [*ROOT.glob("pixelpipe/**/*.py"), *ROOT.glob("rules/*.smk"), *ROOT.glob("workflow_scripts/*.py"),
             ROOT / "Snakefile"]
    bad = []
    for f in files:
        for a, b in re.findall(r'(?:config|cfg)\["(\w+)"\]\["(\w+)"\]', f.read_text()):
            if a in sections and a and b not in sections[a]["properties"]:
                bad.append(f"{f.relative_to(ROOT)}: {a}.{b}")
    assert not bad, f"keys read that the schema lacks: {bad}"


def test_from_section_rejects_unknown_and_missing_keys():
    from tests._config_utils import section

    with pytest.raises(SectionError, match=r"unknown key\(s\) \['nope'\]"):
        QuantizeSettings.from_section(section("quantize", nope=1))
    engine = section("engine")
    del engine["tf32"]
    with pytest.raises(SectionError, match=r"'engine'.*missing key\(s\) \['tf32'\]"):
        EngineSettings.from_section(engine)
    with pytest.raises(SectionError, match="unknown"):
        EncoderConfig.from_section({**section("student.model"), "width": 3}, section("render"), 2)
