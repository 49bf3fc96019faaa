"""Time from the command to the first update, where it goes, and the floor our dependencies set.

    PYTHONPATH=. python benchmarks/startup.py --rounds 3 --out benchmarks/results/startup.json

Measurements, alternated round by round so the machine's load hits them alike (each is its own fresh process):

- ``command``: ``offlinerl train JOB`` as a user runs it (500 updates, one 1-episode evaluation);
  ``first_update_s`` from its ``result.json`` (from the command's start to the end of the first update). An
  in-memory job with one local learner runs without Ray (``offlinerl.training.setup.ray_reason``).
- ``phases``: the same job's steps, timed one by one in a process of its own, as that command runs them without
  Ray (imports, the validation record, ``Algorithm(...)``: the pyarrow read and the learner build, the first update).
- ``ray_phases``: the same steps on the Ray path (``init_ray``, validation and the read through Ray Data,
  ``Algorithm(..., use_ray=True)``): what every job paid before the Ray-free start.
- ``baseline`` (with ``--baseline-code DIR``, e.g. a ``git worktree`` of an older commit): the Ray phases with that
  tree's code, for a before/after in the same rounds.
- ``floor``: what the dependencies alone take for the same start: import torch, build a 256x256 MLP and Adam, one
  update on a random batch; and ``ray_floor``, the same after importing and starting a local Ray. A job cannot
  start faster than the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PHASES = r'''
import sys, time, json
T0 = time.time()
marks = []
def mark(name): marks.append((name, time.time() - T0))
use_ray = sys.argv[1] == "ray"
import offlinerl.cli.train  # the command's own imports (argparse, the command modules)
try:
    from offlinerl.jobs.spec import load_job_spec
    from offlinerl.training.algorithm import Algorithm
except ImportError:  # a --baseline-code tree from before the jobs/ and training/ packages
    from offlinerl.algorithms.pipeline import load_pipeline as load_job_spec
    from offlinerl.algorithms.algorithm import Algorithm
from offlinerl.episodes.validate import require_valid
if use_ray:
    from offlinerl.ray_utils import init_ray, quiet_ray_data
    quiet_ray_data()
    mark("imports (torch, Ray, Ray Data, offlinerl)")
else:
    mark("imports (torch, offlinerl)")
spec, config = load_job_spec(sys.argv[2], sys.argv[3:])
if use_ray:
    init_ray()
    mark("init_ray (a local Ray)")
    require_valid(spec.dataset)
else:
    require_valid(spec.dataset, local=True)
mark("validation record")
kwargs = {"use_ray": use_ray} if "use_ray" in Algorithm.__init__.__code__.co_varnames else {}
algo = Algorithm(spec.algorithm, config, spec.dataset, validate_data=False, **kwargs)
mark("Algorithm(): the read + learner build")
algo.train()
mark("first update")
algo.stop()
print(json.dumps(marks))
'''

FLOOR = r'''
import sys, time, json
T0 = time.time()
import torch
marks = [["import torch", time.time() - T0]]
if sys.argv[1] == "ray":
    import ray
    marks.append(["import ray", time.time() - T0])
    ray.init(address="local", include_dashboard=False, logging_level=30, log_to_driver=False)
    marks.append(["ray.init", time.time() - T0])
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(3, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                          torch.nn.Linear(256, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x, y = torch.randn(256, 3), torch.randn(256, 1)
loss = ((net(x) - y) ** 2).mean()
opt.zero_grad(); loss.backward(); opt.step()
marks.append(["first update", time.time() - T0])
print(json.dumps(marks))
'''


def _python(code: str, *args: str, tree: Path = REPO) -> list:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tree)}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def command(job: str, overrides: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        subprocess.run([sys.executable, "-m", "offlinerl", "train", job, "-o", str(run), "--no-progress",
                        *[a for o in overrides for a in ("--set", o)]], cwd=REPO, check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        return json.loads((run / "result.json").read_text())["first_update_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job", "--pipeline", dest="job", default="jobs/cartpole-bc.yaml")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline-code", type=Path, help="also time the Ray phases with the code in this tree")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "startup.json"))
    args = p.parse_args()
    overrides = ["stop.updates=500", "config.updates_per_iteration=500", "config.evaluation.interval=0",
                 "config.evaluation.episodes=1"]
    phase_args = [args.job, *overrides, "config.updates_per_iteration=1"]  # "first update": one update
    rounds = []
    for i in range(args.rounds):
        r = {"command_first_update_s": command(args.job, overrides),
             "phases": _python(PHASES, "local", *phase_args), "ray_phases": _python(PHASES, "ray", *phase_args),
             "floor": _python(FLOOR, "local"), "ray_floor": _python(FLOOR, "ray")}
        if args.baseline_code:
            r["baseline_phases"] = _python(PHASES, "ray", *phase_args, tree=args.baseline_code.resolve())
        rounds.append(r)
        print(f"round {i + 1}: command {r['command_first_update_s']:.1f} s | "
              + " | ".join(f"{k} " + ", ".join(f"{n} {t:.1f}" for n, t in r[k])
                           for k in ("phases", "ray_phases", "baseline_phases", "floor", "ray_floor") if k in r),
              flush=True)
    med = statistics.median(r["command_first_update_s"] for r in rounds)
    floor = statistics.median(r["floor"][-1][1] for r in rounds)
    ray_path = statistics.median(r["ray_phases"][-1][1] for r in rounds)
    out = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
           "job": args.job, "overrides": overrides, "baseline_code": str(args.baseline_code or ""),
           "rounds": rounds, "median_command_first_update_s": med, "median_floor_s": floor,
           "median_ray_path_first_update_s": ray_path}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"median: command to first update {med:.1f} s (the same job's steps through Ray: {ray_path:.1f} s); "
          f"dependencies' floor {floor:.1f} s ({med / floor:.2f}x)")


if __name__ == "__main__":
    main()
