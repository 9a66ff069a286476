"""How well the planner, scaled by time factors, predicts a run it did not see: fit the time factors on one finished run
(its results/plan.json and metrics), plan another run's config with them, and compare with that run's
measured jobs (issue 26's checks: a second default run with another seed; a run with 10x the rows).

    python bench/time_factors_check.py --fit runs/A --fit-config config.yaml runs/A.yaml \
        --check runs/B --config config.yaml runs/B.yaml

The calibrating run is planned again with this code (its published start-up and work), so the factors and the
prediction share one published model.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

from pixelpipe.config.resolve import deep_merge, load_config
from pixelpipe.plan.timefactors import TimeFactors, fit, machine_key
from pixelpipe.plan.workflow import plan_workflow
from pixelpipe.report.reports import load_metrics


def run_metrics(workdir: Path) -> list[dict]:
    return load_metrics(sorted(glob.glob(str(workdir / "results/metrics/*/*.json"))),
                        sorted(glob.glob(str(workdir / "benchmarks/*/*.tsv"))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", type=Path, default=None, help="workdir of the run that calibrates (none: the published model)")
    ap.add_argument("--check", type=Path, required=True, help="workdir of the run to predict")
    ap.add_argument("--fit-config", nargs="+", default=[], help="the calibrating run's config files, in order")
    ap.add_argument("--config", nargs="+", required=True, help="the checked run's config files, merged in order")
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument("--min-seconds", type=float, default=5.0, help="jobs shorter than this are listed, not judged")
    ap.add_argument("--out", type=Path, default=None, help="write the comparison as JSON")
    args = ap.parse_args()
    import yaml

    def config(files: list[str]) -> dict:
        merged: dict = {}
        for f in files:
            merged = deep_merge(merged, yaml.safe_load(Path(f).read_text()) or {})
        return load_config(None, merged)

    cfg = config(args.config)
    factors = {}
    if args.fit:
        plan_a = plan_workflow(config(args.fit_config), cores=args.cores, time_factors=TimeFactors(machine_key()))
        factors = fit(plan_a, run_metrics(args.fit), plan_a["run"]["machine_cores"])
    plan = plan_workflow(cfg, cores=args.cores, time_factors=TimeFactors(machine_key(), factors, str(args.fit)))
    planned = {s["key"]: s for s in plan["stages"]}
    rows, worst = [], 0.0
    for m in run_metrics(args.check):
        p = planned.get(m["key"])
        if not p:
            continue
        err = 100 * (p["wall_s"] - m["wall_s"]) / m["wall_s"]
        judged = m["wall_s"] >= args.min_seconds
        worst = max(worst, abs(err)) if judged else worst
        rows.append({"job": m["key"], "measured_s": round(m["wall_s"], 2), "predicted_s": round(p["wall_s"], 2),
                     "error_pct": round(err, 1), "judged": judged,
                     "shared": p["detail"]["time"]["contention"]})
        print(f"| {m['key']} | {m['wall_s']:.1f} s | {p['wall_s']:.1f} s | {err:+.1f} % | "
              f"x{p['detail']['time']['contention']:.2f} |{'' if judged else ' (< %g s)' % args.min_seconds}")
    print(f"worst error over jobs >= {args.min_seconds:g} s: {worst:.1f} %; predicted run {plan['run']['wall_s']} s")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "worst_pct": worst, "run": plan["run"]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
