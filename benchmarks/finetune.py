"""Does online fine-tuning win? Start, end, worst dip and two baselines per shipped pipeline.

For each offline pipeline P (``jobs/P.yaml``) with a fine-tuning pipeline
(``jobs/P-finetune.yaml``) and each seed, through the real CLI:

1. ``offlinerl train P.yaml --set config.seed=S``: the offline checkpoint (kept in ``--workdir``);
2. **fine-tune**: ``offlinerl finetune P-finetune.yaml --from`` it;
3. **offline continuation**: the same job with ``online.online_fraction=0`` and no gate
   (``online.promotion=always``): the same updates on the same schedule, the online experience
   collected but never learned from, and the learners' policy evaluated as it is;
4. **online from scratch**: the same job from a checkpoint of P after one update (untrained
   weights) with ``online.online_fraction=1``: the same algorithm and env steps, no offline
   transitions (the observation statistics still come from the dataset), and no critic warm-up
   (holding an untrained policy would only handicap it); a gated pipeline stays gated, so both
   spend the same env steps.

Every evaluation (``eval/return_mean`` in ``metrics.jsonl``) is normalised with the dataset's
card (0 = random, 100 = best behaviour level). The worst dip is the lowest evaluation during
fine-tuning minus the starting score. Results: one JSON line per (pipeline, seed, variant) in
``--out``; ``table`` prints the markdown table (mean ± std over seeds) and draws
return-vs-env-steps plots.

    PYTHONPATH=. python benchmarks/finetune.py run pendulum-iql --seeds 0,1,2 --workdir /tmp/ft
    PYTHONPATH=. python benchmarks/finetune.py table benchmarks/results/finetune.jsonl --plot-dir benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("finetune", "offline_continuation", "online_from_scratch")
SETS = {
    "finetune": [],
    "offline_continuation": ["online.online_fraction=0", "online.promotion=always"],
    "online_from_scratch": ["online.online_fraction=1", "online.mixing=fixed", "online.critic_warmup_iterations=0"],
}


def _offlinerl(*argv: str) -> float:
    """Run one CLI command (output to the console); its wall time in seconds."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "offlinerl", *argv, "--no-progress"], check=True, cwd=ROOT)
    return time.perf_counter() - t0


def _checkpoint(pipeline: str, seed: int, work: Path, untrained: bool) -> Path:
    run = work / f"{pipeline}-{'init' if untrained else 'offline'}-{seed}"
    final = run / "checkpoints" / "final"
    if not final.exists():
        extra = ["--set", "stop.updates=1", "--set", "stop.iterations=1", "--set", "config.updates_per_iteration=1"] \
            if untrained else []
        _offlinerl("train", f"jobs/{pipeline}.yaml", "--set", f"config.seed={seed}", *extra, "-o", str(run))
    return final


def _curve(run: Path, card: dict) -> list[list[float]]:
    """[env steps, updates, return, normalised] of every evaluation in ``metrics.jsonl``."""
    out = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        if m.get("eval/return_mean") is not None:
            ret = m["eval/return_mean"]
            score = 100 * (ret - card["random_return"]) / (card["best_return"] - card["random_return"])
            out.append([m.get("online/env_steps", 0.0), m.get("learner/updates", 0.0), ret, score])
    return out


def run(args: argparse.Namespace) -> None:
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    for pipeline in args.pipelines.split(","):
        dataset = _dataset(pipeline)
        card = json.loads((ROOT / dataset / "card.json").read_text())
        for seed in (int(s) for s in args.seeds.split(",")):
            for variant in args.variants.split(","):
                ckpt = _checkpoint(pipeline, seed, work, untrained=variant == "online_from_scratch")
                out = work / f"{pipeline}-{variant}-{seed}"
                if out.exists():
                    continue
                sets = [x for s in [f"config.seed={seed}", *SETS[variant], *args.set] for x in ("--set", s)]
                seconds = _offlinerl("finetune", f"jobs/{pipeline}-finetune.yaml", "--from", str(ckpt), *sets,
                                     "-o", str(out))
                result = json.loads((out / "result.json").read_text())
                curve = _curve(out, card)
                record = {"pipeline": pipeline, "variant": variant, "seed": seed, "overrides": args.set,
                          "env_steps": result.get("env_steps"), "updates": result.get("updates"),
                          "wall_s": round(seconds, 1), "curve": curve,
                          "start": curve[0][3], "end": curve[-1][3], "worst_dip": min(c[3] for c in curve) - curve[0][3]}
                with open(args.out, "a") as f:
                    f.write(json.dumps(record) + "\n")
                print(json.dumps({k: v for k, v in record.items() if k != "curve"}))


def _dataset(pipeline: str) -> str:
    import yaml

    return yaml.safe_load((ROOT / "jobs" / f"{pipeline}.yaml").read_text())["dataset"]


def _ms(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{statistics.mean(values):.1f}" + (f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else "")


def verdict(variants: dict[str, list[dict]], target: float = 95.0, max_dip: float = 10.0) -> str:
    """Issue 12's bar for one pipeline: every seed ends at >= ``target`` with no evaluation more than ``max_dip``
    below its start, and the mean end beats both baselines' mean ends (a tie at the ceiling of 100, where the
    task is solved, is reported as a tie)."""
    ft = variants.get("finetune", [])
    if not ft:
        return "—"
    fails, ties = [], []
    if min(r["end"] for r in ft) < target:
        fails.append(f"end < {target:g}")
    if min(r["worst_dip"] for r in ft) < -max_dip:
        fails.append(f"dip > {max_dip:g}")
    end = round(statistics.mean(r["end"] for r in ft), 1)  # compared as the table shows them
    for name in ("offline_continuation", "online_from_scratch"):
        base, label = variants.get(name, []), name.replace("_", " ")
        if not base:
            fails.append(f"no {label}")
        elif round(statistics.mean(r["end"] for r in base), 1) >= end:
            if end >= 100.0:
                ties.append(label)
            else:
                fails.append(f"{label} not beaten")
    if fails:
        return "fail: " + ", ".join(fails)
    return "pass" + (f" (tie with {', '.join(ties)} at 100)" if ties else "")


def table(args: argparse.Namespace) -> None:
    records = [json.loads(line) for line in Path(args.results).read_text().splitlines() if line.strip()]
    by = {}
    for r in records:
        by.setdefault(r["pipeline"], {}).setdefault(r["variant"], []).append(r)
    print("| pipeline | seeds | start | fine-tuned end | worst dip | offline continuation | online from scratch "
          "| env steps | wall s (fine-tune) | issue 12 bar |\n|---|---|---|---|---|---|---|---|---|---|")
    for pipeline, variants in by.items():
        ft = variants.get("finetune", [])
        print(f"| {pipeline} | {len(ft)} | {_ms([r['start'] for r in ft])} | {_ms([r['end'] for r in ft])} "
              f"| {_ms([r['worst_dip'] for r in ft])} | {_ms([r['end'] for r in variants.get('offline_continuation', [])])} "
              f"| {_ms([r['end'] for r in variants.get('online_from_scratch', [])])} "
              f"| {_ms([r['env_steps'] for r in ft])} | {_ms([r['wall_s'] for r in ft])} | {verdict(variants)} |")
    print("\nper seed (start → end, worst dip):")
    for pipeline, variants in by.items():
        for r in sorted(variants.get("finetune", []), key=lambda r: r["seed"]):
            print(f"- {pipeline} seed {r['seed']}: {r['start']:.1f} → {r['end']:.1f}, dip {r['worst_dip']:.1f}")
    if args.plot_dir:
        _plots(by, Path(args.plot_dir))


def _plots(by: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for pipeline, variants in by.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for variant, color in zip(VARIANTS, ("C0", "C1", "C2")):
            for i, r in enumerate(variants.get(variant, [])):
                steps = [c[0] for c in r["curve"]]
                ax.plot(steps, [c[3] for c in r["curve"]], color=color, alpha=0.8,
                        label=variant.replace("_", " ") if i == 0 else None)
        ax.axhline(100, color="grey", lw=0.5, ls=":")
        ax.set_xlabel("env steps")
        ax.set_ylabel("normalised return")
        ax.set_title(f"{pipeline}: fine-tuning vs baselines")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"finetune_{pipeline}.png", dpi=100)
        plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train, fine-tune and run the baselines; append JSON lines to --out")
    r.add_argument("pipelines", help="comma-separated offline pipeline names with a <name>-finetune.yaml")
    r.add_argument("--seeds", default="0,1,2")
    r.add_argument("--variants", default=",".join(VARIANTS))
    r.add_argument("--set", action="append", default=[], help="extra override for every fine-tuning job")
    r.add_argument("--workdir", required=True, help="run directories (reused: a finished run is not rerun)")
    r.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "finetune.jsonl"))
    t = sub.add_parser("table", help="markdown table (and plots) from the JSON lines")
    t.add_argument("results")
    t.add_argument("--plot-dir", default=None)
    args = p.parse_args()
    run(args) if args.cmd == "run" else table(args)


if __name__ == "__main__":
    main()
