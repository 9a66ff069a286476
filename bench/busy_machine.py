"""Training speed on a busy machine: the run's teacher and student, idle and beside one CPU-bound process, with
OpenMP's waiting threads as libgomp leaves them (OMP_WAIT_POLICY unset: spin a while, then sleep), spinning
(ACTIVE) or sleeping (PASSIVE, what importing pixelpipe sets unless the user set it).

    PYTHONPATH=. python bench/busy_machine.py --run DIR [--seconds 15] [--out docs/sweeps/busy_machine.json]

DIR is a finished run's working directory (results/teacher, results/student, results/cache/train). Each
measurement is a fresh process, since libgomp reads the policy when torch loads it: it loads the role's trained
model (architecture and weights), takes the thread count a training job takes here (the job's 4 threads capped
at the machine's cores, core.device.configure_backends; --threads), and runs training steps (forward, cross-entropy, backward,
LazyAdamW: the engine's optimizer with sparse n-gram rows) on batches of the run's train cache, trimmed as the
engine trims them, for --seconds after 10 warm-up steps. 'busy' starts one `while True: pass` process beside it.
The figure is steps/s; the ratio busy / idle is what the issue asks to keep >= 0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

STEP = r"""
import json, sys
sys.path.insert(0, sys.argv[6])  # bench/, for train_step.py (torch loads there before pixelpipe)
from train_step import measure_steps
print(json.dumps(measure_steps(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
"""


POLICIES = ("unset", "ACTIVE", "PASSIVE")


def measure(run: Path, role: str, policy: str, busy: bool, seconds: float, batch: int, threads: int = 4) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}  # torch loads before pixelpipe below
    env.update({"PYTHONPATH": str(Path(__file__).resolve().parents[1]), **({} if policy == "unset" else
                                                                           {"OMP_WAIT_POLICY": policy})})
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        out = subprocess.run([sys.executable, "-c", STEP, str(run), role, str(seconds), str(batch), str(threads),
                              str(Path(__file__).resolve().parent)], env=env,
                             capture_output=True, text=True, check=True, timeout=600 + 20 * seconds)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return {"role": role, "policy": policy, "load": "busy" if busy else "idle", **json.loads(out.stdout)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a finished run's working directory")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--batch", type=int, default=64, help="the profiles' training batch")
    ap.add_argument("--threads", type=int, default=4, help="a training job's request (capped at the cores)")
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated, of " + ", ".join(POLICIES))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    policies = args.policies.split(",")
    rows = []
    for role in ("teacher", "student"):
        for policy in policies:
            for busy in (False, True):
                rows.append(measure(args.run, role, policy, busy, args.seconds, args.batch, args.threads))
                print(json.dumps(rows[-1]), flush=True)
    for role in ("teacher", "student"):
        for policy in policies:
            idle, busy = (next(r["steps_per_s"] for r in rows if (r["role"], r["policy"], r["load"]) == (role, policy, x))
                          for x in ("idle", "busy"))
            print(f"{role:8s} {policy:8s} idle {idle:6.1f} steps/s, busy {busy:6.1f} steps/s, busy/idle {busy / idle:.2f}")
    if args.out:
        args.out.write_text(json.dumps({"machine": os.uname().nodename, "cpus": os.cpu_count(), "seconds": args.seconds,
                                        "date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
