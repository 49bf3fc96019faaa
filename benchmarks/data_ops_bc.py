"""Filtered BC: ``offlinerl data filter --top 10%`` then the shipped BC job, against the same job on the whole set.

    PYTHONPATH=. python benchmarks/data_ops_bc.py run --seeds 0 1 2 --work /tmp/data-ops-bc
    PYTHONPATH=. python benchmarks/data_ops_bc.py table benchmarks/results/data_ops_bc.jsonl

For each of ``jobs/cartpole-bc.yaml`` and ``jobs/pendulum-bc.yaml`` (their model, lr, batch, 3,000 updates and
evaluation) it writes the top-10% dataset once with ``offlinerl data filter`` and runs ``offlinerl train`` on
both datasets per seed (``--set dataset=... --set config.seed=S``); ``--rank-by EXPR`` adds the top share ranked
by that episode expression (``--only pendulum --rank-by "last(rewards)"``: the episodes that end upright). Each run appends one JSON line: job,
variant, seed, the dataset's fingerprint, the final evaluation return and its normalised score on the whole
dataset's scale (0 = random, 100 = best level; ``offlinerl.scoring``), and the wall time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = {"cartpole": ("jobs/cartpole-bc.yaml", "datasets/cartpole-mixed"),
        "pendulum": ("jobs/pendulum-bc.yaml", "datasets/pendulum-mixed")}


def _cli(*args: str, attempts: int = 1, clean: Path | None = None) -> None:
    """Run ``offlinerl ARGS``; on a busy machine Ray may time out starting, so up to ``attempts`` times
    (``clean``: the run directory a failed attempt left, removed before the next)."""
    for attempt in range(attempts):
        if subprocess.run([sys.executable, "-m", "offlinerl", *args], cwd=ROOT, stdout=subprocess.DEVNULL).returncode == 0:
            return
        if clean is not None:
            shutil.rmtree(clean, ignore_errors=True)
    raise SystemExit(f"offlinerl {' '.join(args)} failed {attempts} time(s)")


def _done(out: Path) -> set[tuple[str, str, int]]:
    if not out.exists():
        return set()
    return {(r["job"], r["variant"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())}


def run(seeds: list[int], work: Path, out: Path, top: str, only: list[str], rank_by: str | None) -> None:
    from offlinerl.scoring import score_for_dataset

    work.mkdir(parents=True, exist_ok=True)
    done = _done(out)  # a rerun continues where a stopped one ended
    for name, (job, dataset) in JOBS.items():
        if only and name not in only:
            continue
        filtered = work / f"{name}-top"
        if not filtered.exists():
            _cli("data", "filter", dataset, "--top", top, "-o", str(filtered))
        variants = [("whole", str(ROOT / dataset)), (f"top {top}", str(filtered))]
        if rank_by:
            ranked = work / f"{name}-top-{''.join(c for c in rank_by if c.isalnum())}"
            if not ranked.exists():
                _cli("data", "filter", dataset, "--top", top, "--rank-by", rank_by, "-o", str(ranked))
            variants.append((f"top {top} by {rank_by}", str(ranked)))
        for seed in seeds:
            for variant, data in variants:
                if (job, variant, seed) in done:
                    continue
                run_dir = work / f"{name}-{variant.replace(' ', '').replace('%', 'pct')}-s{seed}"
                shutil.rmtree(run_dir, ignore_errors=True)
                started = time.time()
                _cli("train", job, "--set", f"dataset={data}", "--set", f"config.seed={seed}", "-o", str(run_dir),
                     "--no-progress", attempts=3, clean=run_dir)
                result = json.loads((run_dir / "result.json").read_text())
                final = result["final_eval_return"]
                row = {"job": job, "variant": variant, "seed": seed, "dataset": data,
                       "dataset_fingerprint": result.get("dataset_fingerprint"), "final_return": final,
                       "score": score_for_dataset(final, str(ROOT / dataset)), "wall_s": round(time.time() - started, 1)}
                with open(out, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


def table(paths: list[str]) -> str:
    rows: dict[tuple[str, str], list[dict]] = {}
    for p in paths:
        for line in Path(p).read_text().splitlines():
            r = json.loads(line)
            rows.setdefault((r["job"], r["variant"]), []).append(r)
    lines = ["| job | data | seeds | final return | normalised score | wall s per run |", "|---|---|---|---|---|---|"]
    for (job, variant), rs in sorted(rows.items()):
        ret = [r["final_return"] for r in rs]
        score = [r["score"] for r in rs]
        sd = lambda xs: statistics.pstdev(xs) if len(xs) > 1 else 0.0  # noqa: E731
        lines.append(f"| {job} | {variant} | {len(rs)} | {statistics.mean(ret):.1f} ± {sd(ret):.1f} | "
                     f"{statistics.mean(score):.1f} ± {sd(score):.1f} | {statistics.mean(r['wall_s'] for r in rs):.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--work", type=Path, default=Path("/tmp/data-ops-bc"))
    r.add_argument("--top", default="10%")
    r.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "data_ops_bc.jsonl")
    r.add_argument("--only", nargs="*", default=[], choices=sorted(JOBS), help="run only these jobs")
    r.add_argument("--rank-by", help="also the top share ranked by this (filter --rank-by), e.g. 'last(rewards)'")
    t = sub.add_parser("table")
    t.add_argument("results", nargs="+")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args.seeds, args.work, args.out, args.top, args.only, args.rank_by)
    else:
        print(table(args.results))


if __name__ == "__main__":
    main()
