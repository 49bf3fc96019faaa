"""``offlinerl benchmark``: every (dataset, algorithm, seed) of a suite as sweep trials, then one table of scores.

    BENCH/
        benchmark.json        what was asked: suite, size, algorithms, seeds, budget, the datasets' paths
        data/<name>-<size>/   generated datasets (shipped ones are read where they are)
        sweeps/<dataset>-<algorithm>/   one sweep per pair: the recipe, its seeds as trials (``offlinerl sweep``)
        scores.json           per run: final and best normalised score; per cell mean ± std; per algorithm the
                              family means and the IQM with its stratified-bootstrap 95% interval
        scores.csv, scores.md the table (beside the published numbers where the dataset mirrors a published one)
        curves.png            normalised evaluation score against updates, mean ± std over seeds

Each sweep is an ordinary sweep directory, so a run is inspected, resumed (``--resume BENCH`` resumes the
sweeps that did not finish) and re-summarised like any sweep.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from offlinerl.benchmark.suites import get_suite, published_family, published_scores
from offlinerl.config_io import ConfigError, plain_json, to_finite_json
from offlinerl.episodes.atomic import check_output_place, replace_file
from offlinerl.episodes.software import made_with_text, simulator_mismatch, simulator_note
from offlinerl.jobs.sweep.summary import mean_std, read_run
from offlinerl.scoring import bootstrap_ci, iqm, load_card, normalized_score
from offlinerl.trusted import allow_env_packages, load_config_file

__all__ = ["BenchmarkSpec", "run_benchmark", "summarize_benchmark", "wall_time_text", "learner_threads",
           "BENCHMARK_FILE"]

BENCHMARK_FILE = "benchmark.json"

#: ``--set`` keys that decide a run's CPUs themselves: the benchmark then leaves its learner's threads to them.
_CPU_KEYS = frozenset({"config.num_cpus_per_learner", "config.num_learners"})


@dataclass(frozen=True, kw_only=True)
class BenchmarkSpec:
    """What a benchmark run was asked to do (``benchmark.json``)."""

    suite: str
    """Suite name (``offlinerl.benchmark.suites.SUITES``)."""
    algorithms: list[str]
    """Algorithms, in table order."""
    seeds: list[int]
    """Seeds: one trial each per (dataset, algorithm)."""
    datasets: list[str]
    """The suite's datasets run (all by default)."""
    size: str = "small"
    """Size of generated datasets (``tiny``, ``small``, ``full``)."""
    updates: int | None = None
    """Gradient updates per run (None: each recipe's own budget)."""
    eval_episodes: int | None = None
    """Evaluation episodes per evaluation (None: each recipe's own)."""
    vectorize: bool = False
    """Each (dataset, algorithm)'s seeds (consecutive, two or more) train as one ``num_seeds`` job
    (``offlinerl sweep --vectorize``); a pair whose job cannot be vectorised runs its seeds as separate trials."""
    overrides: list[str] = field(default_factory=list)
    """``--set KEY=VALUE`` for every run, applied last (over the recipe, the dataset's own settings and the budget),
    e.g. ``config.precision=bf16``; the table states them."""

    def __post_init__(self) -> None:
        from offlinerl.config_io import parse_override
        from offlinerl.jobs.sweep.plan import plan_trials

        if not self.algorithms or not self.seeds or not self.datasets:
            raise ConfigError("benchmark: give at least one algorithm, seed and dataset")
        for text in self.overrides:
            keys, _ = parse_override(text)
            if not keys:
                raise ConfigError(f"--set {text!r}: empty key")
            owned = ".".join(keys[:2]) if keys[:2] == ["config", "seed"] else keys[0]
            if owned in ("dataset", "algorithm", "output", "config.seed"):
                raise ConfigError(f"--set {text!r}: the benchmark sets {owned} of every run itself "
                                  "(--datasets, --algorithms, --seeds)")
        if self.vectorize:
            plan_trials({}, self.seeds, vectorize=True)  # the seeds a vectorised job can take, or ConfigError
        if self.updates is not None and self.updates < 1:
            raise ConfigError(f"--updates must be >= 1, got {self.updates}")
        if self.eval_episodes is not None and self.eval_episodes < 1:
            raise ConfigError(f"--eval-episodes must be >= 1, got {self.eval_episodes}")


def _budget_overrides(recipe: Path, updates: int | None, eval_episodes: int | None) -> list[str]:
    """``--set`` values that run ``recipe`` for ``updates`` updates (iterations of at most that many) and
    evaluate with ``eval_episodes`` episodes."""
    out = []
    if updates is not None:
        data = load_config_file(recipe)
        per_iteration = int((data.get("config") or {}).get("updates_per_iteration", 1000))
        out += [f"stop.updates={updates}", "stop.iterations=null", "stop.wall_time_s=null", "stop.eval_return=null",
                f"config.updates_per_iteration={min(per_iteration, updates)}"]
    if eval_episodes is not None:
        out.append(f"config.evaluation.episodes={eval_episodes}")
    return out


def learner_threads(overrides: list[str], max_concurrent: int | None, cpus: float) -> tuple[int, int] | None:
    """``(runs at a time, torch threads of each run's learner)`` on a machine of ``cpus`` CPUs: the runs at once
    (``max_concurrent``, else the sweep's default for the recipes' in-process learners, one per two CPUs) share
    its CPUs. The recipes keep ``num_cpus_per_learner: 1``
    (what a job file on a shared machine should ask for), so one run at a time on 2 cores trained on one and left
    the other idle: ReBRAC's 1024-row updates run 1.9x faster on both. ``None`` when ``overrides`` set the
    learners' CPUs themselves (``_CPU_KEYS``)."""
    from offlinerl.algorithms.algorithm_config import AlgorithmConfig
    from offlinerl.config_io import parse_override
    from offlinerl.jobs.sweep.trials import default_max_concurrent

    if any(".".join(parse_override(text)[0]) in _CPU_KEYS for text in overrides):
        return None
    concurrent = max_concurrent or default_max_concurrent(AlgorithmConfig(), 1.0, cpus)  # in-process learners
    return concurrent, max(1, int(cpus // concurrent))


def _machine_cpus(address: str | None) -> float | None:
    """The CPUs the benchmark's runs share: the Ray already started in this process (a test session's), else
    what a local Ray would have; ``None`` on a cluster (``address``), whose nodes differ."""
    import ray

    from offlinerl.ray_utils import local_cpus

    if address is not None:
        return None
    return float(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else float(local_cpus(None))


def run_benchmark(out: str | Path, spec: BenchmarkSpec | None, *, data_dir: str | Path | None = None,
                  max_concurrent: int | None = None, address: str | None = None,
                  log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run ``spec`` into the new directory ``out`` (or, with ``spec=None``, continue the run in ``out``), then
    write and return the summary (:func:`summarize_benchmark`)."""
    from offlinerl.jobs.sweep import SWEEP_FILE, NotVectorizable, resume_sweep, run_sweep

    root = Path(out)
    if spec is None:
        if not (root / BENCHMARK_FILE).is_file():
            raise ConfigError(f"{root}: not a benchmark directory (no {BENCHMARK_FILE})")
        spec = _saved(root)[0]
    elif root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"{root} exists and is not empty; choose another --output, or --resume it")
    else:  # never /, home or the current directory, nor inside a dataset or checkpoint
        check_output_place(root)
        _check_recipes(spec)  # a --set no recipe takes: refused before anything is written
    suite = get_suite(spec.suite)
    entries = [suite.dataset(name) for name in spec.datasets]
    packages = sorted({d.env_package for d in entries if d.env_package})
    if packages:  # before Ray starts: its workers and the trials inherit the allow-list
        allow_env_packages(packages)
    root.mkdir(parents=True, exist_ok=True)
    started = time.time()  # the wall time reported includes making the datasets (data_time_s says how much)
    paths = {d.name: str(d.materialize(Path(data_dir) if data_dir else root / "data", spec.size, log=log).resolve())
             for d in entries}
    data_time = time.time() - started
    for name, path in paths.items():
        note = simulator_note(name, load_card(path))
        if note:  # a warning, not a progress line: said under --no-progress too
            logging.getLogger("offlinerl.benchmark").warning(note)
    replace_file(root / BENCHMARK_FILE, json.dumps({"spec": asdict(spec), "datasets": paths}, indent=2) + "\n")
    cpus = _machine_cpus(address)
    plan = None if cpus is None else learner_threads(spec.overrides, max_concurrent, cpus)
    threads: list[str] = []
    if plan is not None:  # new runs only: a resumed sweep keeps its trials' settings
        max_concurrent, n = plan
        threads = [f"config.num_cpus_per_learner={n}"]
        log(f"{max_concurrent} run(s) at a time on {cpus:g} CPUs: runs started now train on {n} torch thread(s) "
            "(--set config.num_cpus_per_learner=N to choose)")
    for d in entries:
        for algorithm in spec.algorithms:
            sweep_dir = root / "sweeps" / f"{d.name}-{algorithm}"
            try:
                recipe = d.recipe(algorithm)
            except FileNotFoundError as exc:
                log(f"{d.name} × {algorithm}: skipped ({exc})")
                continue
            t0 = time.time()
            if (sweep_dir / SWEEP_FILE).is_file():
                log(f"{d.name} × {algorithm}: resuming {sweep_dir}")
                resume_sweep(sweep_dir, max_concurrent=max_concurrent, address=address, log=log)
            else:
                own = d.recipe_overrides.get(algorithm, ())  # the published per-dataset settings
                overrides = [f"dataset={paths[d.name]}", *own, *_budget_overrides(recipe, spec.updates, spec.eval_episodes),
                             *threads, *spec.overrides]
                log(f"{d.name} × {algorithm}: {len(spec.seeds)} seed(s) with {recipe.name}"
                    + (f" ({', '.join([*own, *spec.overrides])})" if own or spec.overrides else "")
                    + (" as one vectorised job" if spec.vectorize else ""))
                try:
                    run_sweep(sweep_dir, _sweep(recipe, overrides, spec.seeds, spec.vectorize),
                              max_concurrent=max_concurrent, address=address, log=log)
                except NotVectorizable as exc:  # refused before anything was written: the seeds one by one
                    log(f"{d.name} × {algorithm}: seeds run as separate trials ({exc.reason})")
                    run_sweep(sweep_dir, _sweep(recipe, overrides, spec.seeds, False),
                              max_concurrent=max_concurrent, address=address, log=log)
            log(f"{d.name} × {algorithm}: done in {time.time() - t0:.0f} s")
    return summarize_benchmark(root, wall_time_s=round(time.time() - started, 1), data_time_s=round(data_time, 1))


def _saved(root: Path) -> tuple[BenchmarkSpec, dict[str, str]]:
    """The spec and the datasets' paths in ``root``'s ``benchmark.json``; ``ConfigError`` naming the file when it
    is not one of ours."""
    path = root / BENCHMARK_FILE
    try:
        saved = plain_json(path.read_text())
        spec, paths = BenchmarkSpec(**saved["spec"]), saved["datasets"]
        if not isinstance(paths, dict):
            raise TypeError("datasets is not a mapping")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:  # JSON syntax, a missing or mistyped field
        raise ConfigError(f"{path}: not a benchmark description ({type(exc).__name__}: {exc})") from None
    return spec, paths


def _check_recipes(spec: BenchmarkSpec) -> None:
    """``ConfigError`` unless some (dataset, algorithm) has a recipe and every recipe takes its dataset's own
    settings, the budget and the ``--set`` values (a wrong key, type or value), as each run would load it."""
    from offlinerl.jobs.spec import load_job_spec

    suite, pairs = get_suite(spec.suite), 0
    for d in (suite.dataset(name) for name in spec.datasets):
        for algorithm in spec.algorithms:
            try:
                recipe = d.recipe(algorithm)
            except FileNotFoundError:
                continue
            pairs += 1
            own = d.recipe_overrides.get(algorithm, ())
            try:
                load_job_spec(recipe, [*own, *_budget_overrides(recipe, spec.updates, spec.eval_episodes),
                                       *spec.overrides])
            except ConfigError as exc:
                raise ConfigError(f"{d.name} × {algorithm} ({recipe.name}): {exc}") from None
    if not pairs:
        raise ConfigError(f"no recipe for {', '.join(spec.algorithms)} on {', '.join(spec.datasets)} in the "
                          f"{suite.name} suite: nothing would run")


def _sweep(recipe: Path, overrides: list[str], seeds: list[int], vectorize: bool) -> Any:
    """The sweep of one (dataset, algorithm): the recipe with ``overrides``, one trial per seed."""
    from offlinerl.jobs.sweep.plan import SweepSpec, plan_trials

    return SweepSpec(job=str(recipe), workdir=os.getcwd(), overrides=overrides, grid={}, seeds=list(seeds),
                     trials=plan_trials({}, seeds, overrides, vectorize=vectorize), vectorize=vectorize)


# -- scores -----------------------------------------------------------------------------------------------------


def _runs(sweep_dir: Path, anchors: tuple[float, float]) -> list[dict[str, Any]]:
    """Per finished trial: seed, updates, wall time, final and best normalised score, the normalised curve;
    ``group``: the vectorised job the trial's seed trained in (None: a job of its own)."""
    from offlinerl.jobs.sweep.plan import SWEEP_FILE, SweepSpec

    if not (sweep_dir / SWEEP_FILE).is_file():
        return []
    runs = []
    for t in SweepSpec.from_file(sweep_dir / SWEEP_FILE).trials:
        trial = sweep_dir / "trials" / t.name
        if not (trial / "result.json").is_file():
            continue
        result = json.loads((trial / "result.json").read_text())
        if not isinstance(result.get("final_eval_return"), (int, float)):
            continue
        score = lambda r: normalized_score(r, *anchors)  # noqa: E731
        returns, notice = read_run(trial / "metrics.jsonl")
        curve = [(updates, score(ret)) for updates, ret in returns]
        best = result.get("best_eval_return")
        runs.append({"trial": t.name, "group": t.group, "updates": result.get("updates"),
                     "train_time_s": result.get("train_time_s"), "final": score(result["final_eval_return"]),
                     "best": score(best) if isinstance(best, (int, float)) else None, "curve": curve,
                     "notice": notice})
    return runs


def _train_time(runs: list[dict[str, Any]]) -> float:
    """The training time of ``runs``: a separate job's own, once per vectorised job (its seeds trained together)."""
    jobs: dict[Any, float] = {}
    for i, r in enumerate(runs):
        key = r["group"] if r["group"] is not None else i
        jobs[key] = max(jobs.get(key, 0.0), r["train_time_s"] or 0.0)
    return sum(jobs.values())


def summarize_benchmark(out: str | Path, wall_time_s: float | None = None,
                        data_time_s: float | None = None) -> dict[str, Any]:
    """Read every sweep of the run in ``out``; write ``scores.json``, ``scores.csv``, ``scores.md`` and
    ``curves.png``; return the summary (``cells``: per dataset and algorithm; ``algorithms``: the aggregates).
    ``wall_time_s``: this invocation's, making the datasets included; ``data_time_s``: that part of it.
    A cell of one finished run has no ``final_std`` (None): one seed gives no spread; an IQM from one run per
    dataset has no interval (``iqm_ci`` None) for the same reason."""
    root = Path(out)
    spec, paths = _saved(root)
    suite = get_suite(spec.suite)
    cells: dict[str, dict[str, Any]] = {}
    data: dict[str, dict[str, Any]] = {}
    for name in spec.datasets:
        d = suite.dataset(name)
        anchors = d.anchors(Path(paths[name]))
        card = load_card(paths[name]) or {}
        data[name] = {"path": paths[name], "data_sha256": card.get("data_sha256"), "made_with": card.get("made_with"),
                      "simulator_mismatch": simulator_mismatch(card)}
        published = published_scores(d.published_name)
        for algorithm in spec.algorithms:
            sweep_dir = root / "sweeps" / f"{name}-{algorithm}"
            runs = _runs(sweep_dir, anchors)
            mean, std = mean_std([r["final"] for r in runs])
            std = std if len(runs) > 1 else None  # one seed: no spread to report (not 0)
            cells[f"{name}/{algorithm}"] = {
                "dataset": name, "algorithm": algorithm, "skipped": not sweep_dir.is_dir(), "runs": runs,
                "final_mean": mean, "final_std": std,
                "best_mean": mean_std([r["best"] for r in runs if r["best"] is not None])[0],
                "published": published.get(algorithm), "published_name": d.published_name, "anchors": anchors,
                "updates": max((r["updates"] or 0 for r in runs), default=None),
                "train_time_s": _train_time(runs)}
    aggregates = {}
    for algorithm in spec.algorithms:
        by_task = {name: [r["final"] for r in cells[f"{name}/{algorithm}"]["runs"]] for name in spec.datasets}
        means = [cells[f"{name}/{algorithm}"]["final_mean"] for name in spec.datasets]
        complete = all(m is not None for m in means)
        point = low = high = None
        if any(by_task.values()):
            point, low, high = bootstrap_ci(by_task, iqm)
        # resampling seeds within each dataset: with one seed per dataset every replicate is the same run
        spread = any(len(v) > 1 for v in by_task.values())
        aggregates[algorithm] = {"mean": sum(means) / len(means) if complete else None,
                                 "iqm": point, "iqm_ci": [low, high] if point is not None and spread else None,
                                 "runs": sum(len(v) for v in by_task.values())}
    summary = {"suite": spec.suite, "size": spec.size, "updates": spec.updates, "eval_episodes": spec.eval_episodes,
               "generated": any(suite.dataset(name).shipped is None for name in spec.datasets), "seeds": spec.seeds,
               "overrides": list(spec.overrides), "datasets": spec.datasets, "data": data, "cells": cells,
               "algorithms": aggregates,
               "published_family": published_family(suite.datasets[0].family), "wall_time_s": wall_time_s,
               "data_time_s": data_time_s,
               "train_time_s": round(sum(c["train_time_s"] for c in cells.values()), 1),
               "runs": sum(len(c["runs"]) for c in cells.values())}
    replace_file(root / "scores.json", json.dumps(to_finite_json(summary), indent=2) + "\n")
    _write_csv(root / "scores.csv", cells)
    replace_file(root / "scores.md", scores_markdown(summary))
    _plot(root / "curves.png", summary)
    return summary


def _fmt(mean: float | None, std: float | None = None) -> str:
    if mean is None:
        return "–"
    return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"


def _fmt_iqm(agg: dict[str, Any]) -> str:
    """The IQM and its interval; ``[n/a]`` where there is no interval (one seed per dataset)."""
    if agg["iqm"] is None:
        return "–"
    ci = agg["iqm_ci"]
    return f"{agg['iqm']:.1f} " + ("[n/a]" if ci is None else f"[{ci[0]:.1f}, {ci[1]:.1f}]")


def wall_time_text(summary: dict[str, Any]) -> str:
    """``"123 s of wall time"``, and how much of it went to making the datasets where the summary knows."""
    data = summary.get("data_time_s")
    return (f"{summary['wall_time_s']:,.0f} s of wall time"
            + ("" if data is None or data < 0.5 else f", {data:,.0f} s of it making the datasets"))


def scores_markdown(summary: dict[str, Any]) -> str:
    """The table: a row per dataset (final normalised score, mean ± std over seeds; the published score in
    brackets), the mean over datasets, the IQM with its 95% interval, and the published family means."""
    algorithms = list(summary["algorithms"])
    budget = "recipe budgets" if summary["updates"] is None else f"{summary['updates']:,} updates"
    if summary.get("eval_episodes") is not None:
        budget += f", {summary['eval_episodes']:,} evaluation episodes"
    size = f"size {summary['size']}, " if summary.get("generated", True) else ""
    sets = "".join(f", `--set {o}`" for o in summary.get("overrides", ()))
    one_seed = len(summary["seeds"]) < 2
    spread = "mean over seeds (one seed: no ± std, no interval)" if one_seed else "mean ± std over seeds"
    lines = [f"Suite `{summary['suite']}` ({size}{budget}{sets}, "
             f"seeds {', '.join(map(str, summary['seeds']))}): final normalised score (0 = random, 100 = expert), "
             f"{spread}; [published] where the dataset mirrors a published one.", "",
             "| dataset | " + " | ".join(algorithms) + " |", "|---|" + "---:|" * len(algorithms)]
    for name in summary["datasets"]:
        row = []
        for algorithm in algorithms:
            cell = summary["cells"][f"{name}/{algorithm}"]
            text = _fmt(cell["final_mean"], cell["final_std"])
            if cell["published"] is not None:
                text += f" [{cell['published']:.1f}]"
            row.append(text)
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    agg = summary["algorithms"]
    lines.append("| **mean** | " + " | ".join(_fmt(agg[a]["mean"]) for a in algorithms) + " |")
    lines.append("| **IQM [95% CI]** | " + " | ".join(_fmt_iqm(agg[a]) for a in algorithms) + " |")
    published = summary["published_family"]
    if published:
        lines.append("| published family mean | " + " | ".join(_fmt(published.get(a)) for a in algorithms) + " |")
    wall = "" if summary["wall_time_s"] is None else f"; this invocation took {wall_time_text(summary)}"
    runs = f"{summary['runs']} run" + ("" if summary["runs"] == 1 else "s")
    lines += ["", f"{runs}, {summary['train_time_s']:,.0f} s of training in all (evaluation and "
              f"start-up excluded){wall}."]
    lines += ["", "The data (`data_sha256` from each card: the same digest, the same bytes):", ""]
    for name, record in (summary.get("data") or {}).items():
        digest = record["data_sha256"]
        made = made_with_text(record["made_with"])
        lines.append(f"- {name}: " + (f"`{digest[:16]}…`" if digest else "no digest")
                     + (", the software that made it not recorded" if made is None else f", made with {made}")
                     + "".join(f"; **not this machine's: {m}**" for m in record["simulator_mismatch"]))
    notices = [f"- {cell['algorithm']} on {cell['dataset']}, {run['trial']}: {run['notice']}"
               for cell in summary["cells"].values() for run in cell["runs"] if run.get("notice")]
    if notices:
        lines += ["", "What the jobs said:", "", *notices]
    return "\n".join(lines) + "\n"


def _write_csv(path: Path, cells: dict[str, dict[str, Any]]) -> None:
    keys = ["dataset", "algorithm", "final_mean", "final_std", "best_mean", "published", "updates", "train_time_s"]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=keys + ["runs"])
    writer.writeheader()
    for cell in cells.values():
        writer.writerow({**{k: cell[k] for k in keys}, "runs": len(cell["runs"])})
    replace_file(path, text.getvalue())


def _plot(path: Path, summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = summary["datasets"]
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        for algorithm in summary["algorithms"]:
            curves = [r["curve"] for r in summary["cells"][f"{name}/{algorithm}"]["runs"] if r["curve"]]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            x = np.array([p[0] for p in curves[0][:n]])
            y = np.array([[p[1] for p in c[:n]] for c in curves])
            # markers: a curve of one evaluation (a budget of one evaluation interval) is a point, not a line
            ax.plot(x, y.mean(0), marker="o", markersize=3,
                    label=f"{algorithm}: mean, band ± std over {len(curves)} seed(s)")
            ax.fill_between(x, y.mean(0) - y.std(0), y.mean(0) + y.std(0), alpha=0.2)
        for value, what, style in ((0, "random", ":"), (100, "expert", "--")):  # the card's random_return / best_return
            ax.axhline(value, color="grey", linestyle=style, linewidth=1, label=f"{value} = {what}")
        ax.set_title(name)
        ax.set_xlabel("updates")
        ax.set_ylabel("normalised score")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=100)
    plt.close(fig)
    replace_file(path, image.getvalue())
