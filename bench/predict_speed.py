"""pixelpipe's deployed model against py3langid on real short texts: texts/s, start-up, peak RSS, side by side.

Texts: the held-out interface strings (pixelpipe/data/text/gettext-ui.parquet, a catalog family no training
row comes from), `--per-language` of each of the model's languages it has, 15-120 characters, shuffled
(`--source udhr --max-chars 1000`: the evaluation's held-out prose instead). One thread
everywhere; pixelpipe's bytecode written first, as an install writes it. Measured in one run, alternating the
two tools `--repeats` times (medians reported):

  command     the whole command a user runs, start-up and model load included:
              `python -m pixelpipe.predict --model M --file F [--jsonl]` against a py3langid script that loads
              its model, restricts it to the model's languages it knows and classifies every line of F
  in-process  load once, classify the texts: Predictor.predict against LanguageIdentifier.classify per text
  start-up    the command on a one-line file (to the first prediction)
  peak RSS    of each command (os.wait4), at 1x and 10x the input (memory must not grow with the input)

py3langid is an optional benchmark dependency (`pip install py3langid==0.4.0`).

    python bench/predict_speed.py --model results/models/student.onnx --out docs/sweeps/predict_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PY3LANGID_SCRIPT = """
import sys
from py3langid.langid import MODEL_FILE, LanguageIdentifier
ident = LanguageIdentifier.from_model_file(MODEL_FILE)
ident.set_languages({langs!r})
out = sys.stdout
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        out.write(ident.classify(line.rstrip("\\n"))[0] + "\\n")
"""


def texts(per_language: int, labels: list[str], seed: int = 0, source: str = "gettext-ui",
          max_chars: int = 120) -> tuple[list[str], list[str]]:
    """`per_language` held-out texts (UI strings by default) of each of the model's languages the source has,
    15 to `max_chars` characters."""
    from pixelpipe.data.sources import load_source

    df = load_source(source)
    df = df[df["text"].str.len().between(15, max_chars) & df["label"].isin(labels)]
    rng = np.random.default_rng(seed)
    keep = [rng.permutation(idx)[:per_language] for _, idx in df.groupby("label").indices.items()]
    df = df.iloc[rng.permutation(np.concatenate(keep))]
    return df["text"].tolist(), df["label"].tolist()


# A small process that forks and execs the command and reports its peak RSS: a child forked from this
# benchmark would carry the benchmark's own pages into its high-water mark.
LAUNCHER = ("import os, sys\npid = os.fork()\nif pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n"
            "_, status, usage = os.wait4(pid, 0)\nsys.stderr.write(f'{status} {usage.ru_maxrss}\\n')")


def run_command(cmd: list[str], threads_env: dict) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, stdout) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *cmd], capture_output=True, text=True,
                          env={**os.environ, **threads_env})
    wall = time.perf_counter() - t0
    status, maxrss = proc.stderr.strip().splitlines()[-1].split()
    if status != "0":
        raise RuntimeError(f"{cmd[:4]} exited with status {status}")
    return wall, int(maxrss) * 1024, proc.stdout


def commands(model: str, path: Path, langs: list[str], jsonl: bool) -> dict[str, list[str]]:
    script = Path(path.parent, "py3langid_cli.py")
    script.write_text(PY3LANGID_SCRIPT.format(langs=langs))
    # forced choice (--threshold 0): scored like py3langid, which always answers a language; speed is the same
    pix = [sys.executable, "-m", "pixelpipe.predict", "--model", model, "--file", str(path), "--threads", "1",
           "--threshold", "0"]
    return {"pixelpipe": pix + (["--jsonl"] if jsonl else []), "py3langid": [sys.executable, str(script), str(path)]}


def in_process(model: str, items: list[str], langs: list[str], repeats: int) -> dict[str, float]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    from pixelpipe.deploy.predictor import Predictor

    predictor = Predictor(model, threads=1, threshold=0.0)  # as the commands: forced choice
    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    ident.set_languages(langs)
    runs = {"pixelpipe": lambda: predictor.predict(items), "py3langid": lambda: [ident.classify(t) for t in items]}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: len(items) / statistics.median(t) for name, t in times.items()}


def compile_package() -> None:
    """Write pixelpipe's bytecode first, as an installed package has it (pip compiles py3langid's at install): with
    PYTHONDONTWRITEBYTECODE set, or a source tree edited since its last import, every command would compile its
    modules again (16 ms a command for the 8 modules an edit left stale)."""
    import compileall

    import pixelpipe

    compileall.compile_dir(os.path.dirname(pixelpipe.__file__), quiet=1)


def measure(args: argparse.Namespace) -> dict:
    from pixelpipe.deploy.predictor import Predictor

    compile_package()
    from pixelpipe.evaluate.reference import ReferenceScorer, reference_code

    labels = Predictor(args.model).labels
    items, truth = texts(args.per_language, labels, source=args.source, max_chars=args.max_chars)
    # py3langid restricted to the model's languages it knows, in its codes (all 19 of the default)
    langs = sorted({reference_code(lab) for lab in ReferenceScorer(labels, restricted=False).known})
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        files = {"1x": Path(tmp, "texts.txt"), "10x": Path(tmp, "texts10.txt"), "one": Path(tmp, "one.txt")}
        files["1x"].write_text("\n".join(items) + "\n", encoding="utf-8")
        files["10x"].write_text("\n".join(items * 10) + "\n", encoding="utf-8")
        files["one"].write_text(items[0] + "\n", encoding="utf-8")
        result: dict = {"texts": len(items), "mean_chars": float(np.mean([len(t) for t in items])), "runs": {}}
        for size in ("1x", "10x", "one"):
            cmds = commands(args.model, files[size], langs, args.jsonl)
            walls: dict[str, list[float]] = {k: [] for k in cmds}
            rss: dict[str, int] = {}
            for _ in range(args.repeats if size != "10x" else 1):
                for name, cmd in cmds.items():
                    wall, peak, out = run_command(cmd, env)
                    walls[name].append(wall)
                    rss[name] = max(rss.get(name, 0), peak)
                    if size == "1x" and len(walls[name]) == 1:
                        result.setdefault("accuracy", {})[name] = accuracy(out, truth, args.jsonl and name == "pixelpipe")
            n = {"1x": len(items), "10x": 10 * len(items), "one": 1}[size]
            result["runs"][size] = {name: {"wall_s": statistics.median(w), "texts_per_s": n / statistics.median(w),
                                           "peak_rss_mb": rss[name] / 2**20} for name, w in walls.items()}
        result["in_process_texts_per_s"] = in_process(args.model, items, langs, args.repeats)
    return result


def accuracy(stdout: str, truth: list[str], jsonl: bool) -> float:
    lines = stdout.splitlines()
    labels = [json.loads(line).get("label") for line in lines] if jsonl else [line.split("\t")[0] for line in lines]
    return float(np.mean([a == b for a, b in zip(labels, truth)])) if len(labels) == len(truth) else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="results/models/student.onnx")
    ap.add_argument("--per-language", type=int, default=1200)
    ap.add_argument("--source", default="gettext-ui", choices=["gettext-ui", "udhr"],
                    help="the held-out source: UI strings, or UDHR prose (the evaluation's other set)")
    ap.add_argument("--max-chars", type=int, default=120, help="longest text taken (and at least 15 characters)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jsonl", action="store_true", help="pixelpipe writes JSON lines (default: its text lines)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    result = {"model": args.model, "machine": os.uname().nodename, "cores": os.cpu_count(),
              "load_average_before": os.getloadavg(), **measure(args), "load_average_after": os.getloadavg()}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
