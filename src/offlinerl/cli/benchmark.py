"""``offlinerl benchmark SUITE``: every (dataset, algorithm, seed) of a suite, and one table of normalised scores."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from offlinerl.benchmark import SIZES
from offlinerl.cli.common import add_address_option

__all__ = ["register"]

EPILOG = """examples:
  offlinerl benchmark classic --algorithms bc,iql --seeds 0,1,2
  offlinerl benchmark maze2d --size small --algorithms bc,td3bc,cql,iql,rebrac --seeds 0,1,2 --updates 100000
  offlinerl benchmark locomotion --size small --seeds 0,1,2 --updates 100000
  offlinerl benchmark locomotion --seeds 0-2 --vectorize --algorithms bc,td3bc,iql
  offlinerl benchmark locomotion --algorithms rebrac,cql --set config.precision=bf16
  offlinerl benchmark --resume benchmarks/runs/maze2d-20261203T120000Z
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "benchmark", help="run a benchmark suite: every dataset x algorithm x seed, one table of normalised scores",
        description="Run every (dataset, algorithm, seed) of SUITE with the family's recipe (a job file with the "
        "published hyper-parameters) as sweep trials, then write scores.md / scores.csv / scores.json (final "
        "normalised score, mean ± std over seeds, beside the published numbers; the interquartile mean with a "
        "stratified bootstrap 95% interval) and curves.png. Generated datasets are made on demand "
        "(docs/benchmark.md).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", nargs="?", help="suite name: classic, maze2d, locomotion (not with --resume)")
    p.add_argument("--algorithms", metavar="A1,A2,...",
                   help="algorithms (default: the suite's; one given twice runs once)")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="seeds, one run each: 0,1,2 or a range 0-2 (default: 0; at most 1,000)")
    p.add_argument("--vectorize", action="store_true",
                   help="train each (dataset, algorithm)'s seeds (consecutive, e.g. --seeds 0-2) as one vectorised "
                        "job (config.num_seeds; the README's 'Vectorised seeds'); a pair whose job cannot be "
                        "vectorised runs its seeds one by one")
    p.add_argument("--datasets", metavar="D1,D2,...",
                   help="a subset of the suite's datasets (default: all; one given twice runs once)")
    p.add_argument("--size", default=None, choices=SIZES,
                   help="size of generated datasets: tiny, small or full (default: small); refused for suites whose "
                        "datasets are all shipped (classic)")
    p.add_argument("--updates", type=int, default=None, metavar="N",
                   help="gradient updates per run (default: each recipe's budget)")
    p.add_argument("--eval-episodes", type=int, default=None, metavar="N",
                   help="episodes per evaluation (default: each recipe's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe value in every run, after the recipe's own and the dataset's settings, "
                        "e.g. config.precision=bf16 (repeatable; the table states it)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="where generated datasets are kept (default: OUT/data); refused, like --size, where none "
                        "is generated")
    p.add_argument("--output", "-o", help="benchmark directory to create (default: benchmarks/runs/<suite>-<UTC time>)")
    p.add_argument("--resume", metavar="BENCH_DIR", help="continue the benchmark in BENCH_DIR")
    p.add_argument("--max-concurrent", type=int, default=None, metavar="N",
                   help="trials at a time per sweep, at least 1 (default: what the cluster's CPUs hold)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress lines (one per step and per finished run; a running run's updates, rate, time left "
                        "and last evaluation at most once a minute)")
    add_address_option(p)
    p.set_defaults(func=run)


def _list(text: str | None) -> list[str]:
    """The comma-separated names in ``text``, each once, in the order first given."""
    return list(dict.fromkeys(t.strip() for t in (text or "").split(",") if t.strip()))


#: Options that describe a new run: a resumed benchmark keeps its own (benchmark.json).
_SPEC_OPTIONS = {"algorithms": "--algorithms", "seeds": "--seeds", "vectorize": "--vectorize",
                 "datasets": "--datasets", "size": "--size", "updates": "--updates",
                 "eval_episodes": "--eval-episodes", "overrides": "--set", "output": "-o"}


def run(args: argparse.Namespace) -> int:
    from offlinerl.config_io import ConfigError
    from offlinerl.algorithms.registry import algorithm_names
    from offlinerl.benchmark.run import BenchmarkSpec, run_benchmark, wall_time_text
    from offlinerl.benchmark.suites import get_suite
    from offlinerl.jobs.sweep.plan import parse_seeds

    if (args.suite is None) == (args.resume is None):
        print("offlinerl benchmark: give a SUITE, or --resume BENCH_DIR (not both)", file=sys.stderr)
        return 2
    given = [flag for dest, flag in _SPEC_OPTIONS.items() if getattr(args, dest) not in (None, [], "")
             and getattr(args, dest) is not False]
    if args.resume and given:
        print(f"offlinerl benchmark: a resumed benchmark keeps its settings; drop {'/'.join(given)}", file=sys.stderr)
        return 2
    if args.max_concurrent is not None and args.max_concurrent < 1:
        print(f"offlinerl benchmark: --max-concurrent must be >= 1, got {args.max_concurrent} (leave it out for "
              "what the cluster's CPUs hold)", file=sys.stderr)
        return 2
    log = (lambda s: None) if args.no_progress else print
    try:
        if args.resume:
            summary = run_benchmark(args.resume, None, data_dir=args.data_dir, max_concurrent=args.max_concurrent,
                                    address=args.address, log=log)
        else:
            suite = get_suite(args.suite)
            algorithms = _list(args.algorithms) or list(suite.algorithms)
            unknown = [a for a in algorithms if a not in algorithm_names()]
            if unknown:
                raise ConfigError(f"--algorithms: unknown {unknown[0]!r} (known: {', '.join(algorithm_names())})")
            seeds = parse_seeds(args.seeds or "0")
            datasets = _list(args.datasets) or [d.name for d in suite.datasets]
            if all(suite.dataset(name).shipped is not None for name in datasets):
                for flag, value in (("--size", args.size), ("--data-dir", args.data_dir)):
                    if value is not None:
                        raise ConfigError(f"{flag}: the {suite.name} suite's datasets are shipped in this checkout, "
                                          f"none is generated; drop {flag}")
            spec = BenchmarkSpec(suite=suite.name, algorithms=algorithms, seeds=seeds, datasets=datasets,
                                 size=args.size or "small", updates=args.updates, eval_episodes=args.eval_episodes,
                                 vectorize=args.vectorize, overrides=args.overrides)
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            out = Path(args.output or Path("benchmarks") / "runs" / f"{suite.name}-{stamp}")
            summary = run_benchmark(out, spec, data_dir=args.data_dir, max_concurrent=args.max_concurrent,
                                    address=args.address, log=log)
    except (ConfigError, KeyError) as exc:
        print(f"offlinerl benchmark: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:  # an output that exists or cannot be made, a dataset that cannot be read
        print(f"offlinerl benchmark: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("offlinerl benchmark: interrupted; continue with  offlinerl benchmark --resume BENCH_DIR", file=sys.stderr)
        return 130
    root = Path(args.resume or out)
    print((root / "scores.md").read_text().rstrip())
    print(f"benchmark directory: {root}  (scores.md, scores.csv, scores.json, curves.png, sweeps/); "
          f"{wall_time_text(summary)}")
    missing = [k for k, c in summary["cells"].items() if not c["runs"] and not c["skipped"]]
    if missing:
        print(f"offlinerl benchmark: no finished run for {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0
