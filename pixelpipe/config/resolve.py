"""Load, complete and validate a pixelpipe config.

One function, `resolve_config`, is used by the Snakefile and by every
command-line entry point, so the workflow and `python -m pixelpipe.*` see the
same values: user keys win, then the hardware profile (profiles.yaml), then schema defaults (schema.yaml).
Errors name the offending key before any job runs.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..core.cli import UserError
from ..core.hardware import auto_profile, probe_device
from .profiles import load_profile, load_profiles

SCHEMA_PATH = Path(__file__).resolve().parent / "schema.yaml"  # ships with the package


RUNTIME_PREFIX = "engine_"  # the Snakemake resource that carries a runtime-only engine switch


@functools.lru_cache(maxsize=None)
def section_properties(section: str) -> dict:
    """The schema's `properties` of one top-level section (read once per process)."""
    return load_schema()["properties"][section]["properties"]


@functools.lru_cache(maxsize=None)
def runtime_keys(section: str = "engine") -> tuple[str, ...]:
    """The switches of `section` marked `x-runtime: true` in the schema: they cannot change what a run
    computes, so they stay out of Snakemake params (no rerun) and out of run fingerprints.

    ddp_processes and nodes are two: the processes together see the samples, windows and steps of one process
    (only float summation order differs, as with threads), so a checkpoint resumes at any process count.
    Snakemake resources are integers, so a runtime key must be an integer or a boolean.
    """
    props = section_properties(section)
    keys = tuple(k for k, v in props.items() if v.get("x-runtime"))
    odd = [k for k in keys if props[k].get("type") not in ("integer", "boolean")]
    if odd:
        raise TypeError(f"x-runtime keys must be integer or boolean (Snakemake resources): {section}.{odd}")
    return keys


def output_affecting(engine_cfg: dict) -> dict:
    """The engine switches that can change what training produces (Snakemake params, run fingerprints)."""
    runtime = runtime_keys()
    return {k: v for k, v in engine_cfg.items() if k not in runtime}


def runtime_resources(engine_cfg: dict, keys: tuple[str, ...] | None = None) -> dict[str, int]:
    """Runtime-only engine switches as integer Snakemake resources (`engine_threads=4`): declared by the
    rule, read by its script, and, unlike params, never a reason to rerun a job."""
    keys = keys or runtime_keys()
    wrong = sorted(set(keys) - set(runtime_keys()))
    if wrong:  # an output-affecting switch passed as a resource would never rerun the job
        raise ValueError(f"engine {wrong} change outputs: pass them as params, not resources")
    return {RUNTIME_PREFIX + k: int(engine_cfg[k]) for k in keys}


def runtime_switches(resources: Any, keys: tuple[str, ...] | None = None) -> dict:
    """The runtime-only engine switches a job declared as resources, with their schema types back."""
    props = section_properties("engine")
    switches = {}
    for key in keys or runtime_keys():
        value = getattr(resources, RUNTIME_PREFIX + key)
        switches[key] = bool(value) if props[key]["type"] == "boolean" else int(value)
    return switches


def engine_section(params_engine: dict, resources: Any) -> dict:
    """A training rule's whole engine section: its params (output-affecting) plus its resources (runtime)."""
    return {**params_engine, **runtime_switches(resources)}


class ConfigError(UserError):
    """A config that cannot run; the message names the key."""


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def deep_merge(base: dict, override: dict) -> dict:
    """Recursively merge `override` into a copy of `base` (override wins)."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _fill_defaults(schema: dict, instance: Any, root: dict) -> Any:
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        schema = {**root["definitions"][name], **{k: v for k, v in schema.items() if k != "$ref"}}
    if isinstance(instance, dict) and "properties" in schema:
        for key, sub in schema["properties"].items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                instance[key] = _fill_defaults(sub, instance[key], root)
    return instance


_WORDS = {"true": True, "True": True, "false": False, "False": False, "null": None, "None": None}


def _readings(text: str) -> list:
    """The typed values a string may stand for: null, a boolean, an integer, a number."""
    readings = [_WORDS[text]] if text in _WORDS else []
    for parse in (int, float):
        try:
            readings.append(parse(text))
        except ValueError:
            pass
    return readings


def _accepts(schema: dict, value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def coerce_strings(value: Any, schema: dict, root: dict) -> Any:
    """`value` with every string the schema rejects as it is replaced by its first reading the schema
    accepts (else the first of the schema's type, so a bound, not the type, is what validation reports).

    Snakemake passes nested `--config` values as strings (`student={'train': {'lr': 0.01}}` arrives as
    `{'lr': '0.01'}`), and YAML reads `1e-3` as one. A string the schema accepts is never changed, and
    one no reading fits stays for validation to name.
    """
    if "$ref" in schema:
        schema = root["definitions"][schema["$ref"].split("/")[-1]]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: coerce_strings(v, props[k], root) if k in props else v for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce_strings(v, schema["items"], root) for v in value]
    if not isinstance(value, str) or _accepts(schema, value):
        return value
    readings = _readings(value)
    fits = [r for r in readings if _accepts(schema, r)]
    fits = fits or [r for r in readings if "type" in schema and _accepts({"type": schema["type"]}, r)]
    return fits[0] if fits else value


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


def validate_schema(cfg: dict, schema: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"config key '{_key_path(e)}': {e.message}" for e in errors]
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines))


def _check_consistency(cfg: dict) -> None:
    problems = []
    splits = cfg["corpus"]["splits"]
    if abs(sum(splits.values()) - 1.0) > 1e-6:
        problems.append(f"corpus.splits must sum to 1, got {sum(splits.values()):.4f}")
    if cfg["corpus"]["min_chars"] > cfg["corpus"]["max_chars"]:
        problems.append("corpus.min_chars must be <= corpus.max_chars")
    r = cfg["render"]
    if r["font_size"] > r["cell_height"]:
        problems.append(f"render.font_size ({r['font_size']}) must be <= render.cell_height ({r['cell_height']})")
    for role in ("teacher", "student"):
        m = cfg[role]["model"]
        if m["mixer_kernel"] % 2 == 0 and m["mixer_kernel"]:
            problems.append(f"{role}.model.mixer_kernel ({m['mixer_kernel']}) must be odd (or 0 = off)")
        if m["dim"] % m["heads"]:
            problems.append(f"{role}.model.dim ({m['dim']}) must be divisible by {role}.model.heads ({m['heads']})")
        bs = cfg[role]["train"]["batch_size"]
        acc, procs, nodes = (cfg["engine"][k] for k in ("grad_accum_steps", "ddp_processes", "nodes"))
        if bs != "auto" and bs % (acc * procs * nodes):
            problems.append(f"{role}.train.batch_size ({bs}) must be divisible by engine.grad_accum_steps ({acc}) "
                            f"x engine.ddp_processes ({procs})" + (f" x engine.nodes ({nodes})" if nodes > 1 else ""))
    if cfg["student"]["model"]["num_capsules"] != cfg["teacher"]["model"]["num_capsules"]:
        problems.append("student.model.num_capsules must equal teacher.model.num_capsules (sketches are aligned per capsule)")
    if "train" not in cfg["encode"]["splits"]:
        problems.append("encode.splits must include 'train' (the student distils from it)")
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


def resolve_config(user_cfg: dict | None) -> dict:
    """User config -> complete, validated config with the hardware profile applied."""
    schema = load_schema()
    user_cfg = coerce_strings(copy.deepcopy(user_cfg or {}), schema, schema)  # command-line strings, typed
    validate_schema(user_cfg, schema)  # structure and types of what the user wrote
    requested = user_cfg.get("hardware", {}).get("profile", "cpu")
    profile = auto_profile(probe_device(user_cfg.get("hardware", {}).get("device", "auto"))) if requested == "auto" else requested
    cfg = deep_merge(load_profile(profile), user_cfg)
    cfg.setdefault("hardware", {})["profile"] = profile
    cfg = _fill_defaults(schema, cfg, schema)
    validate_schema(cfg, schema)
    _check_consistency(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: dict | None = None) -> dict:
    user = read_config_file(path) if path else {}
    return resolve_config(deep_merge(user, overrides or {}))


def read_config_file(path: str | Path) -> dict:
    """A config file's sections; ConfigError naming the file when it is missing, unreadable, not YAML or not a
    mapping, so every command that takes --config answers in one line instead of a traceback."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read: {err.strerror or err}") from None
    try:
        user = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"config file {path} is not valid YAML{where}: {getattr(err, 'problem', None) or err}") \
            from None
    if user is not None and not isinstance(user, dict):
        raise ConfigError(f"config file {path} must be a mapping of sections (corpus:, render:, ...), "
                          f"not a {type(user).__name__}")
    return user or {}


_UNSET = object()  # a key a schema row has no default for, or a profile does not set


def _schema_rows(schema: dict, root: dict, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """(dotted key, type, schema default or _UNSET, description) of every leaf key, in schema order."""
    rows = []
    for key, sub in schema.get("properties", {}).items():
        if "$ref" in sub:
            sub = {**root["definitions"][sub["$ref"].split("/")[-1]], **{k: v for k, v in sub.items() if k != "$ref"}}
        path = f"{prefix}{key}"
        if sub.get("type") == "object" and "properties" in sub and key != "splits":
            rows += _schema_rows(sub, root, path + ".")
            continue
        if "enum" in sub:
            kind = " \\| ".join(str(v) for v in sub["enum"])
        elif "oneOf" in sub:
            kind = " or ".join(s.get("type", repr(s.get("const"))) for s in sub["oneOf"])
        else:
            t = sub.get("type", "object")
            kind = " or ".join(t) if isinstance(t, list) else t
        note = " *Runtime only: reaches the jobs as a resource, changing it reruns nothing.*" if sub.get("x-runtime") else ""
        rows.append((path, kind, sub.get("default", _UNSET), sub.get("description", "") + note))
    return rows


def json_compact(value: Any) -> str:
    import json

    return json.dumps(value, separators=(", ", ": "))


def _lookup(section: dict, path: str) -> Any:
    """The value at a dotted key of nested sections, or _UNSET."""
    for part in path.split("."):
        if not isinstance(section, dict) or part not in section:
            return _UNSET
        section = section[part]
    return section


def _same(a: Any, b: Any) -> bool:
    """Equal as config values (4 == 4.0, but not True == 1)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _cell(value: Any) -> str:
    return "" if value is _UNSET else "`" + json_compact(value) + "`"


def schema_markdown() -> str:
    """The README's config table, generated from the schema and the profiles so neither can drift from it: each key's
    schema default, and in a column per profile the value that profile gives it where that differs."""
    schema = load_schema()
    profiles = load_profiles()
    lines = ["| key | type | schema default | " + " | ".join(f"`{p}`" for p in profiles) + " | description |",
             "| --- | --- | --- | " + "--- | " * len(profiles) + "--- |"]
    for key, kind, default, desc in _schema_rows(schema, schema):
        by_profile = [_lookup(p, key) for p in profiles.values()]
        cells = [_cell(_UNSET if _same(v, default) else v) for v in by_profile]
        lines.append(f"| `{key}` | {kind} | {_cell('' if default is _UNSET else default)} | "
                     + " | ".join(cells) + f" | {desc} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m pixelpipe.config`: resolve a config, or print (or write into the README) the config table."""
    import json
    import re

    from ..core.cli import ArgumentParser, fail

    ap = ArgumentParser(prog="python -m pixelpipe.config", description="Resolve a config or print the config table.")
    ap.add_argument("--config", help="config file to resolve and print as JSON")
    ap.add_argument("--markdown", action="store_true",
                    help="print the README config table (schema.yaml's defaults and profiles.yaml's values)")
    ap.add_argument("--update-readme", metavar="README", help="rewrite the table between the config-table markers")
    args = ap.parse_args(argv)
    if args.update_readme:
        readme = Path(args.update_readme)
        block = "<!-- config-table:start -->\n" + schema_markdown() + "\n<!-- config-table:end -->"
        try:
            readme.write_text(re.sub(r"<!-- config-table:start -->.*<!-- config-table:end -->", lambda _: block,
                                     readme.read_text(), flags=re.S))
        except OSError as err:
            return fail(f"--update-readme {readme}: {err.strerror or err}")
    elif args.markdown:
        print(schema_markdown())
    else:
        try:
            print(json.dumps(load_config(args.config), indent=2))
        except ConfigError as err:
            return fail(f"pixelpipe: {err}")
    return 0
