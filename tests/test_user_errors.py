"""What a user meets when something they wrote is wrong: a corpus file, a config, a command line. Each mistake
that can be seen before training is one line naming the file and the key (the corpus before any job, at
`snakemake -n`), never a traceback; the planner warns, under its header, about what this machine cannot hold."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pixelpipe.data.corpus import builtin_shortfall, planned_split_sizes
from pixelpipe.data.corpusfile import CorpusError
from tests._config_utils import section
from tests.workflow_utils import REPO, TINY, snakemake

# ---- corpus files: refused when the DAG is parsed ------------------------------------------------------------

GOOD = {"body": ["Guten Tag", "Bonjour", "Hello there", "Hola amigo", "Ciao bella", "Dobrý den", "Hej hej",
                 "Hallo Welt", "Salut", "Good day"],
        "lang": ["de", "fr", "en", "es", "it", "cs", "sv", "de", "fr", "en"],
        "part": ["train"] * 6 + ["val"] * 2 + ["test"] * 2}


def _write(tmp_path: Path, fmt: str, columns: dict[str, list]) -> Path:
    """A corpus file of `columns` (None = no value: an empty CSV field, a JSON null, a parquet null)."""
    path = tmp_path / f"corpus.{fmt}"
    df = pd.DataFrame(columns)
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in df.to_dict("records")))
    else:
        df.to_parquet(path, index=False)
    return path


SPLITS_80_10_10 = {"train": 0.8, "val": 0.1, "test": 0.1}  # a dozen rows still give val and test one each


def _cfg(path: Path, **kw) -> dict:
    return section("corpus", **{"path": str(path), "text_column": "body", "label_column": "lang",
                                "split_column": "part", "splits": SPLITS_80_10_10, **kw})


def _refusal(cfg: dict) -> str:
    with pytest.raises(CorpusError) as err:
        planned_split_sizes(cfg)
    message = str(err.value)
    assert "\n" not in message and cfg["path"] in message, message
    return message


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("key,wrong", [("text_column", "text"), ("label_column", "label"), ("split_column", "split")])
def test_a_missing_column_names_the_column_and_its_key(tmp_path, fmt, key, wrong):
    path = _write(tmp_path, fmt, GOOD)
    assert planned_split_sizes(_cfg(path)) == {"train": 6, "val": 2, "test": 2}
    message = _refusal(_cfg(path, **{key: wrong}))
    assert f"no column {wrong!r} (corpus.{key})" in message and "'body', 'lang', 'part'" in message


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_split_values_other_than_train_val_test_are_refused(tmp_path, fmt):
    parts = ["train"] * 6 + ["validation", None, "test", "test"]
    message = _refusal(_cfg(_write(tmp_path, fmt, {**GOOD, "part": parts})))
    assert "(corpus.split_column) has values ['', 'validation'] ('' = no value)" in message


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("labels,expected", [
    ([None] * 5 + ["NaN", "NA", "n/a", "null", "None"], "has no label in any of the 10 data rows"),
    (["de"] * 7 + [None, "NA", " "], "holds one class, 'de'; a classifier needs at least 2"),
])
def test_labels_that_cannot_train_a_classifier_are_refused(tmp_path, fmt, labels, expected):
    message = _refusal(_cfg(_write(tmp_path, fmt, {**GOOD, "lang": labels})))
    assert "label column 'lang' (corpus.label_column)" in message and expected in message


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_text_column_with_no_text_is_refused(tmp_path, fmt):
    message = _refusal(_cfg(_write(tmp_path, fmt, {**GOOD, "body": [None] * 5 + [" "] * 5})))
    assert "text column 'body' (corpus.text_column) is empty in all 10 data rows" in message


@pytest.mark.parametrize("columns,split_column,expected", [
    ({**GOOD, "part": ["train"] * 8 + ["val"] * 2}, "part", "split(s) test would have no rows"),
    ({k: v[:5] for k, v in GOOD.items()}, None, "split(s) val, test would have no rows"),  # 5 rows x 0.1 -> 0
])
def test_a_split_left_empty_is_refused(tmp_path, columns, split_column, expected):
    message = _refusal(_cfg(_write(tmp_path, "csv", columns), split_column=split_column))
    assert expected in message and "corpus.splits / corpus.split_column" in message


@pytest.mark.parametrize("fmt,header,lines", [("jsonl", [], ['{"body": "a", "lang": ', "[1, 2]", "not json"]),
                                              ("csv", ["body,lang"], ["a,b,c", "only one field", "x,y,z"])])
def test_a_file_none_of_whose_rows_parses_is_refused(tmp_path, fmt, header, lines):
    path = tmp_path / f"corpus.{fmt}"
    path.write_text("\n".join(header + lines * 4) + "\n")
    message = _refusal(_cfg(path, split_column=None))
    assert "(corpus.path): none of its " in message and "data rows can be parsed" in message


ONE_CLASS = {**GOOD, "part": ["train"] * 8 + ["val", "test"], "lang": ["x"] * 10}


@pytest.mark.parametrize("fmt,columns,change,expected", [
    ("csv", GOOD, {"text_column": "text"}, "has no column 'text' (corpus.text_column)"),
    ("parquet", GOOD, {"label_column": "label"}, "has no column 'label' (corpus.label_column)"),
    ("jsonl", GOOD, {"split_column": "lang"}, "split column 'lang' (corpus.split_column) has values"),
    ("parquet", ONE_CLASS, {}, "label column 'lang' (corpus.label_column) holds one class"),
])
def test_snakemake_dry_run_refuses_the_corpus_file_in_one_line(tmp_path, fmt, columns, change, expected):
    """The checks run when Snakemake parses the DAG: `snakemake -n` fails, naming the file and key, before any job."""
    path = _write(tmp_path, fmt, columns)
    corpus = {"path": str(path), "text_column": "body", "label_column": "lang", "split_column": "part", **change}
    proc = snakemake(tmp_path, "--dry-run", "train", overrides={"corpus": corpus}, check=False)
    out = proc.stdout + proc.stderr
    lines = [line for line in out.splitlines() if line.startswith("pixelpipe:")]
    assert proc.returncode != 0 and len(lines) == 1 and expected in lines[0] and str(path) in lines[0], out[-3000:]
    assert "Traceback" not in out and not (tmp_path / "results").exists()


def test_what_only_the_corpus_rule_sees_is_one_line_in_its_log(tmp_path):
    """Two labels and texts pass the parse-time checks, but the second label's only row has no text: after the bad
    row is dropped one class is left, which only the corpus rule can see. Its log says so in one line."""
    path = _write(tmp_path, "csv", {"body": ["Guten Tag", None, *["Hallo"] * 8], "lang": ["de", "fr", *["de"] * 8]})
    corpus = {"path": str(path), "text_column": "body", "label_column": "lang", "splits": SPLITS_80_10_10}
    assert sum(planned_split_sizes(section("corpus", **corpus)).values()) == 10
    proc = snakemake(tmp_path, "results/corpus/labels.json", overrides={"corpus": corpus}, check=False)
    log = (tmp_path / "logs/corpus/all.log").read_text()
    assert proc.returncode != 0 and "Traceback" not in proc.stdout + proc.stderr + log
    assert log.splitlines()[-1].endswith(f"ERROR: pixelpipe: corpus {path}: 1 class(es) ['de'] after dropping bad "
                                         "rows; bad rows dropped: {'empty text': 1} (corpus.on_bad_row); a classifier "
                                         "needs at least 2 (check corpus.label_column)")


def test_a_user_error_in_a_stage_is_one_log_line_and_exit_1(tmp_path):
    from pixelpipe.core.logs import stage_log

    with pytest.raises(SystemExit) as exit, stage_log(tmp_path / "job.log"):
        raise CorpusError("corpus file c.csv: what to change")
    assert exit.value.code == 1
    last = (tmp_path / "job.log").read_text().splitlines()[-1]
    assert last.endswith("ERROR: pixelpipe: corpus file c.csv: what to change")


# ---- corpus.num_samples beyond what the built-in corpus holds ---------------------------------------------

SHORT = {"sources": ["firefox", "mediawiki"], "languages": ["de", "fr"], "num_samples": 100_000_000}


def test_num_samples_beyond_the_builtin_corpus_is_one_warning_with_the_rows_used(tmp_path):
    corpus = section("corpus", path=None, **SHORT)
    rows = sum(planned_split_sizes(corpus).values())
    assert 1000 < rows < 100_000
    expected = (f"pixelpipe: warning: corpus.num_samples is 100,000,000, but the built-in corpus holds {rows:,} rows "
                f"for these corpus.languages and corpus.sources: using {rows:,}")
    proc = snakemake(tmp_path, "--dry-run", "train",
                     overrides={"corpus": SHORT, "render": {"shard_size": 1_000_000}})
    assert proc.stderr.count("pixelpipe: warning:") == 1 and expected in proc.stderr.splitlines(), proc.stderr[-2000:]
    fits = section("corpus", path=None, **{**SHORT, "num_samples": rows})
    assert builtin_shortfall(fits, planned_split_sizes(fits)) is None
    assert builtin_shortfall(_cfg(Path("c.csv"), num_samples=10**9), {"train": 8, "val": 1, "test": 1}) is None


# ---- the planner's header warnings -------------------------------------------------------------------------


def _plan_cli(monkeypatch, capsys, *args: str, memory: tuple[int, int], free: int) -> tuple[int, str, str]:
    from pixelpipe.plan import cli

    monkeypatch.setattr(cli, "machine_memory", lambda: memory)
    monkeypatch.setenv("PIXELPIPE_FREE_BYTES", str(free))
    code = cli.main(["--config", str(TINY), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _header(out: str, name: str) -> str:
    """The first figure of a header line ('peak RAM:       1.2 GiB (jobs ...' -> '1.2 GiB')."""
    return re.search(rf"^{name}:\s+([\d.]+ \w+)", out, re.M).group(1)


def test_plan_warns_under_its_header_with_the_headers_own_figures(monkeypatch, capsys, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "old.bin").write_bytes(b"\0" * 300_000)  # counted in the peak: the warning must still show the peak
    GiB = 2**30
    code, out, _ = _plan_cli(monkeypatch, capsys, "--results", str(results), memory=(2 * GiB, 2**20), free=1000)
    lines = out.splitlines()
    ram, disk = _header(out, "peak RAM"), _header(out, "peak disk")
    start = next(i for i, line in enumerate(lines) if line.startswith("sharing cores:")) + 1
    assert code == 1 and lines[start + 2] == "" and lines[start + 3].startswith("| stage |")  # right under the totals
    assert lines[start].startswith(f"WARNING:        peak RAM {ram} exceeds the 1.0 MiB of RAM available now (2.0 GiB")
    assert lines[start + 1].startswith(f"WARNING:        predicted disk peak {disk} (")
    assert "already in it" in lines[start + 1] and sum("WARNING" in line for line in lines) == 2


def test_plan_without_warnings_when_the_machine_holds_the_run(monkeypatch, capsys, tmp_path):
    code, out, err = _plan_cli(monkeypatch, capsys, "--results", str(tmp_path / "r"), memory=(2**40, 2**40),
                               free=2**40)
    assert code == 0 and "WARNING" not in out + err and "| train_teacher/teacher |" in out


def test_plan_json_carries_the_warnings(monkeypatch, capsys, tmp_path):
    code, out, err = _plan_cli(monkeypatch, capsys, "--json", "--results", str(tmp_path / "r"), memory=(2**40, 10**6),
                               free=2**40)
    plan = json.loads(out)
    assert code == 0 and len(plan["warnings"]) == 1 and plan["warnings"][0].startswith("peak RAM ")
    assert err == f"warning: {plan['warnings'][0]}\n"


@pytest.mark.parametrize("peak,largest,total,available,expected", [
    (8, 4, 16, 20, None),
    (8, 4, 16, 6, "peak RAM 8.0 GiB exceeds the 6.0 GiB of RAM available now (16.0 GiB in all); its largest job fits"),
    (256, 256, 23, 20, "peak RAM 256.0 GiB exceeds this machine's 23.0 GiB of RAM; its largest job alone needs 256.0"),
])
def test_ram_warning_names_total_or_available(peak, largest, total, available, expected):
    from pixelpipe.plan.cli import ram_warning

    GiB = 2**30
    plan = {"run": {"peak_host_bytes_concurrent": peak * GiB}, "peak_host_bytes": largest * GiB}
    warning = ram_warning(plan, total * GiB, available * GiB)
    assert warning == expected if expected is None else warning.startswith(expected)


# ---- command lines: one line, exit status 2 ---------------------------------------------------------------

CONFIGS = {  # file content -> what the one line says
    None: "config file {path} does not exist",
    "teacher: {train: {lr: [1\n": "config file {path} is not valid YAML at line 2, column 1",
    "- 1\n- 2\n": "config file {path} must be a mapping of sections (corpus:, render:, ...), not a list",
    "\xff\n": "config file {path} is not UTF-8 text (byte 0)",
    "teacher: {nope: 1}\n": "pixelpipe: invalid config:",
    "teacher: {train: {lr: -1}}\n": "pixelpipe: invalid config:",
}
MAINS = {"pixelpipe.plan": ("pixelpipe.plan.cli", "main"), "pixelpipe.config": ("pixelpipe.config.resolve", "main"),
         "pixelpipe.report.matrix": ("pixelpipe.report.matrix", "main"),
         "pixelpipe.predict": ("pixelpipe.predict", "run")}


def _call(capsys, module: str, *args: str) -> tuple[int, list[str], str]:
    """(exit status, stderr lines, stdout) of `python -m module args`, run in this process (what __main__ calls)."""
    import importlib

    mod, name = MAINS[module]
    try:
        code = getattr(importlib.import_module(mod), name)(list(args))
    except SystemExit as exit:  # argparse
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.err.splitlines(), captured.out


@pytest.mark.parametrize("content", list(CONFIGS))
@pytest.mark.parametrize("module", ["pixelpipe.plan", "pixelpipe.config", "pixelpipe.report.matrix"])
def test_a_bad_config_file_is_one_line_and_status_2(tmp_path, capsys, module, content):
    path = tmp_path / "my.yaml"
    if content is not None:
        path.write_bytes(content.encode("latin-1"))
    code, lines, out = _call(capsys, module, "--config", str(path))
    assert code == 2 and out == "" and lines[0].startswith("pixelpipe: ")
    assert CONFIGS[content].format(path=path) in lines[0]
    # one line, or the invalid-config style: the heading, then one line per offending key
    assert len(lines) == 1 or (lines[0] == "pixelpipe: invalid config:" and len(lines) == 2
                               and lines[1].startswith("  config key 'teacher"))


def test_a_corpus_file_the_workflow_refuses_is_refused_by_the_planner(tmp_path, capsys):
    path = _write(tmp_path, "csv", GOOD)
    config = tmp_path / "my.yaml"
    config.write_text(json.dumps({"corpus": {"path": str(path), "text_column": "text"}}))
    assert _call(capsys, "pixelpipe.plan", "--config", str(config))[:2] == (2, [
        f"pixelpipe: corpus file {path} has no column 'text' (corpus.text_column); columns present: "
        "['body', 'lang', 'part']"])


@pytest.mark.parametrize("module,args,expected", [
    ("pixelpipe.plan", ["--cores", "many"], "error: argument --cores: invalid int value: 'many'"),
    ("pixelpipe.plan", ["--cores", "0"], "error: --cores must be >= 1"),
    ("pixelpipe.plan", ["--bogus"], "error: unrecognized arguments: --bogus"),
    ("pixelpipe.plan", ["--config", str(TINY), "--time-factors", "{tmp}/broken.json"],
     "pixelpipe: time factors file {tmp}/broken.json cannot be read"),
    ("pixelpipe.config", ["--bogus"], "error: unrecognized arguments: --bogus"),
    ("pixelpipe.config", ["--update-readme", "{tmp}/no/README.md"], "error: --update-readme {tmp}/no/README.md: "),
    ("pixelpipe.report.matrix", ["--bogus"], "error: unrecognized arguments: --bogus"),
    ("pixelpipe.predict", ["hello"], "error: the following arguments are required: --model"),
    ("pixelpipe.predict", ["--model", "m.onnx", "--top", "x", "hi"], "error: argument --top: invalid int value: 'x'"),
    ("pixelpipe.predict", ["--model", "m.onnx", "--threads", "-1", "hi"], "error: --threads must be >= 0"),
    ("pixelpipe.predict", ["--model", "{tmp}/nope.onnx", "hi"], "error: model file not found: {tmp}/nope.onnx"),
])
def test_a_bad_argument_is_one_line_and_status_2(tmp_path, capsys, module, args, expected):
    (tmp_path / "broken.json").write_text("{not json")
    code, lines, _ = _call(capsys, module, *[a.format(tmp=tmp_path) for a in args])
    assert code == 2 and len(lines) == 1 and lines[0].startswith(expected.format(tmp=tmp_path)), lines


@pytest.mark.parametrize("module,args", [
    ("pixelpipe.plan", ["--config", "nope.yaml"]), ("pixelpipe.config", ["--config", "nope.yaml"]),
    ("pixelpipe.report.matrix", ["--config", "nope.yaml"]), ("pixelpipe.predict", ["--top", "x"]),
])
def test_python_dash_m_exits_2_with_one_line(tmp_path, module, args):
    """The entry points themselves (`python -m ...`), not only their main(): status 2, one line, no traceback."""
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(("pixelpipe: config file nope.yaml does not exist", "error: argument --top"))
