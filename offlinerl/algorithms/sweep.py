"""Sweeps: a grid of pipeline overrides × seeds, each point-and-seed one training job, run as Ray Tune trials.

    SWEEP/
        sweep.json            what was asked (pipeline, overrides, grid, seeds) and every trial's overrides
        trials/<name>/        one run directory per trial, exactly what ``offlinerl train`` writes
        trials/<name>.log     the trial's output
        trials/<name>.json    how and where it ran: one entry per attempt (Ray node, command, exit code)
        tune/                 Ray Tune's own experiment files (offlinerl never reads them back)
        summary.csv           per grid point: trials, mean and std of the final / best return and score
        summary.md            the same as a table
        summary.json          the same rows, the best grid point and the Ray nodes each trial ran on
        sweep.png             evaluation return against updates, mean ± std over seeds, one line per grid point

Ray Tune schedules the trials (``max_concurrent`` at a time, ``cpus_per_trial`` reserved for each, on
any node of the cluster it joins) and collects their metrics as they train. Each trial is an
``offlinerl train`` process joined to the same Ray cluster: a job of its own, so its Ray Data tasks
and learner actors are scheduled by Ray like any job's (not squeezed into the trial's reservation),
and it writes and resumes its run directory exactly as a single job does. A trial that fails is
retried once by Tune from its newest checkpoint (``train --resume``); ``resume_sweep`` continues an
interrupted sweep the same way, trial by trial, and reads only files of ours (JSON and our
checkpoints), never Tune's pickled experiment state.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from offlinerl.config_io import ConfigError, parse_override
from offlinerl.config_io import to_finite_json
from offlinerl.episodes.atomic import OutputWriteError, check_output_place, replace_file
from offlinerl.settings_file import plain_json
from offlinerl.trusted import ENV_PACKAGES_VAR, allowed_env_packages, split_packages

__all__ = ["SweepSpec", "Trial", "parse_grid", "plan_trials", "run_sweep", "resume_sweep", "summarize", "SWEEP_FILE"]

SWEEP_FILE = "sweep.json"
TRIALS = "trials"
_METRIC_POLL_S = 1.0
_SAFE_NAME = re.compile(r"[A-Za-z0-9._+-]+")


@dataclass(frozen=True)
class Trial:
    """One training job of the sweep."""

    name: str
    """Directory name under ``trials/`` (grid values and seed, file-name safe)."""
    point: dict[str, Any]
    """The grid point: dotted key -> value (the seed excluded)."""
    seed: int | None
    """``config.seed`` of this trial (None: the pipeline's own)."""
    overrides: list[str]
    """``--set`` overrides of this trial: the sweep's, then the grid point's, then the seed."""


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """What a sweep runs (``sweep.json``)."""

    pipeline: str
    """The pipeline file (absolute path)."""
    workdir: str
    """The directory the sweep was started in (relative paths of the pipeline resolve from there)."""
    overrides: list[str]
    """``--set`` overrides applied to every trial."""
    grid: dict[str, list[Any]]
    """Dotted key -> the values to try; the trials are the Cartesian product."""
    seeds: list[int]
    """Seeds per grid point (empty: one trial per point, with the pipeline's seed)."""
    trials: list[Trial]
    """Every trial, in order."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_file(cls, path: Path) -> "SweepSpec":
        try:
            data = plain_json(path.read_text())
            trials = [Trial(**t) for t in data.pop("trials")]
            spec = cls(**data, trials=trials)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"{path}: not a sweep description ({exc})") from None
        names = [t.name for t in trials]
        bad = [n for n in names if not isinstance(n, str) or not _SAFE_NAME.fullmatch(n) or n in (".", "..")]
        if bad or len(set(names)) != len(names):  # a trial directory is deleted and rewritten: never outside trials/
            raise ConfigError(f"{path}: trial names must be unique plain file names, got {bad or names}")
        return spec


def _split_values(text: str) -> list[str]:
    """``"1,3,[64,64]"`` -> ``["1", "3", "[64,64]"]``: commas inside brackets stay."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [v.strip() for v in out]


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["config.beta=1,3,10"]`` -> ``{"config.beta": [1, 3, 10]}`` (values parsed as ``--set`` parses them)."""
    grid: dict[str, list[Any]] = {}
    for text in items:
        if "=" not in text:
            raise ConfigError(f"--grid expects KEY=V1,V2,..., got {text!r}")
        key, raw = text.split("=", 1)
        key = key.strip()
        values = [v for v in _split_values(raw) if v]
        if not key or not values:
            raise ConfigError(f"--grid {text!r}: give a key and at least one value")
        if key in grid:
            raise ConfigError(f"--grid {key}: given twice")
        if key == "config.seed":
            raise ConfigError("--grid config.seed: give seeds with --seeds")
        grid[key] = [parse_override(f"{key}={v}")[1] for v in values]
    return grid


def _slug(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return re.sub(r"[^A-Za-z0-9.+-]+", "", text.replace(",", "-")) or "_"


def plan_trials(grid: dict[str, list[Any]], seeds: Sequence[int], overrides: Sequence[str] = ()) -> list[Trial]:
    """The Cartesian product of the grid's values, each with every seed (grid order, then seed order)."""
    points: list[dict[str, Any]] = [{}]
    for key, values in grid.items():
        points = [{**p, key: v} for p in points for v in values]
    trials = []
    for point in points:
        point_parts = [f"{k.removeprefix('config.')}-{_slug(v)}" for k, v in point.items()]
        for seed in (list(seeds) or [None]):
            parts = point_parts + ([f"seed-{seed}"] if seed is not None else [])
            name = f"{len(trials):03d}_" + "_".join(parts) if parts else f"{len(trials):03d}"
            sets = [*overrides, *(f"{k}={json.dumps(v)}" for k, v in point.items())]
            sets += [f"config.seed={seed}"] if seed is not None else []
            trials.append(Trial(name=name, point=point, seed=seed, overrides=sets))
    return trials


# -- one trial (runs inside a Ray Tune worker) ------------------------------------------------------------------


def _trial_command(spec: dict[str, Any], run: Path) -> list[str]:
    """``offlinerl train`` for a fresh trial, ``train --resume`` for one with a checkpoint."""
    from offlinerl.algorithms.run_dir import latest_checkpoint

    base = [sys.executable, "-m", "offlinerl", "train", "--no-progress"]
    if (run / "config.yaml").is_file() and latest_checkpoint(run) is not None:
        return [*base, "--resume", str(run)]
    if run.exists():  # started but stopped before its first checkpoint: ours (inside trials/), start again
        shutil.rmtree(run)
    sets = [a for o in spec["overrides"] for a in ("--set", o)]
    return [*base, spec["pipeline"], "-o", str(run), "--skip-validation", *sets]


def _die_with_parent() -> None:
    """In the trial's ``offlinerl train`` process (Linux): be stopped when the Tune worker running it dies (a killed
    sweep must leave no job writing into its run directory)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _new_records(path: Path, cursor: tuple[int, int]) -> tuple[list[dict[str, Any]], tuple[int, int]]:
    """Complete ``metrics.jsonl`` lines past ``cursor`` (inode, bytes read); a resumed job replaces the file (a
    new inode), which is then read from its start."""
    try:
        inode = path.stat().st_ino
        with path.open("rb") as f:
            f.seek(cursor[1] if inode == cursor[0] else 0)
            data = f.read()
    except FileNotFoundError:
        return [], cursor
    start = cursor[1] if inode == cursor[0] else 0
    end = data.rfind(b"\n") + 1
    records = []
    for line in data[:end].splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return records, (inode, start + end)


def trial_trainable(config: dict[str, Any]) -> None:
    """The Ray Tune function trainable of one trial: runs (or resumes) its ``offlinerl train`` process joined to
    this Ray cluster and reports each ``metrics.jsonl`` record to Tune, then the trial's ``result.json``."""
    import ray
    from ray import tune

    spec = config["trial"]
    run = Path(spec["run_dir"])
    result_file = run / "result.json"
    if not result_file.is_file():
        env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
        if spec.get("env_packages"):
            env[ENV_PACKAGES_VAR] = ",".join(sorted({*spec["env_packages"], *split_packages(env.get(ENV_PACKAGES_VAR))}))
        command = _trial_command(spec, run)
        attempt = {"node": ray.get_runtime_context().get_node_id(), "command": command[1:], "exit": None}
        _record_attempt(run, attempt)
        cursor = (-1, 0)
        with open(f"{run}.log", "ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
            proc = subprocess.Popen(command, cwd=spec["workdir"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=_die_with_parent)
            try:
                while True:
                    done = proc.poll() is not None
                    records, cursor = _new_records(run / "metrics.jsonl", cursor)
                    for record in records:
                        tune.report(_tune_metrics(record))
                    if done:
                        break
                    time.sleep(_METRIC_POLL_S)
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=30)
        _record_attempt(run, {**attempt, "exit": proc.returncode}, replace_last=True)
        if proc.returncode != 0 or not result_file.is_file():
            tail = Path(f"{run}.log").read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"trial {run.name}: offlinerl train exited {proc.returncode}: " + " | ".join(tail))
    result = json.loads(result_file.read_text())
    tune.report(_tune_metrics({k: v for k, v in result.items() if isinstance(v, (int, float)) or v is None},
                              done=True))


def _record_attempt(run: Path, attempt: dict[str, Any], replace_last: bool = False) -> None:
    """Append (or complete) an attempt in ``trials/<name>.json``."""
    path = run.with_name(f"{run.name}.json")
    attempts = json.loads(path.read_text())["attempts"] if path.is_file() else []
    attempts = attempts[:-1] if replace_last and attempts else attempts
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"attempts": [*attempts, attempt]}, indent=2) + "\n")
    os.replace(tmp, path)


def _tune_metrics(record: dict[str, Any], done: bool = False) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out["offlinerl_done"] = done
    return out


# -- the sweep (the driver) ---------------------------------------------------------------------------------------


def _cluster_cpus() -> float:
    import ray

    return float(ray.cluster_resources().get("CPU", 0))


def default_max_concurrent(config: Any, cpus_per_trial: float) -> int:
    """Trials that fit at once with one CPU left per trial for its Ray Data tasks and its learners' CPUs."""
    learners = config.num_learners * config.num_cpus_per_learner
    return max(1, int(_cluster_cpus() // (cpus_per_trial + learners + 1)))


def run_sweep(
    sweep_dir: str | Path,
    spec: SweepSpec | None,
    *,
    max_concurrent: int | None = None,
    cpus_per_trial: float = 1.0,
    address: str | None = None,
    skip_validation: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the trials of ``spec`` in ``sweep_dir`` (new), or with ``spec=None`` those of the sweep already there
    that have no ``result.json`` yet; write the summary. Returns ``summarize``'s dict plus ``failed`` (the trials
    without a result) and ``invalid`` (trial -> why its dataset failed validation: those were not run).

    Before any trial starts, each pending trial's dataset is validated (unless ``skip_validation``); a resumed
    ``sweep_dir`` holding a symbolic link to outside it is a ``RunDirError`` before anything is written.
    """
    from ray import tune

    from offlinerl.algorithms.pipeline import load_pipeline
    from offlinerl.algorithms.run_dir import resolve_resumed
    from offlinerl.ray_utils import init_ray

    root = Path(sweep_dir)
    new = spec is not None
    if not new:  # a handed-over sweep directory: nothing in it may lead outside (before anything is written)
        resolve_resumed(root, "sweep directory")
        spec = SweepSpec.from_file(root / SWEEP_FILE)
    elif root.exists() and (not root.is_dir() or any(root.iterdir())):
        hint = "; to continue that sweep use --resume" if (root / SWEEP_FILE).is_file() else ""
        raise FileExistsError(f"{root} exists and is not empty; choose another --output{hint}")
    cwd = os.getcwd()
    os.chdir(spec.workdir)  # the pipeline's relative paths, as the trials will see them
    try:  # every trial's config is valid before anything is written (a wrong key or value: ConfigError)
        configs = {t.name: load_pipeline(spec.pipeline, t.overrides) for t in spec.trials}
    finally:
        os.chdir(cwd)
    datasets = {name: _absolute(pipeline.dataset, spec.workdir) for name, (pipeline, _) in configs.items()}
    if new:  # never /, home or the current directory, the pipeline or a dataset, nor inside a dataset or checkpoint
        check_output_place(root, inputs=[spec.pipeline, *datasets.values()])
    try:
        if new:
            root.mkdir(parents=True, exist_ok=True)
            replace_file(root / SWEEP_FILE, spec.to_json())
        (root / TRIALS).mkdir(exist_ok=True)
    except OutputWriteError:
        raise
    except OSError as exc:
        raise OutputWriteError.from_os_error(exc, root, "no trial was started") from exc
    pending = [t for t in spec.trials if not (root / TRIALS / t.name / "result.json").is_file()]
    init_ray(address)
    invalid: dict[str, str] = {}
    if pending and not skip_validation:  # each trial's own dataset, before any trial starts (the trials skip it)
        for name, (line, report) in _invalid_datasets({t.name: datasets[t.name] for t in pending}).items():
            _append_log(root / TRIALS / f"{name}.log", f"offlinerl sweep: trial {name} not run: {report}\n")
            log(f"trial {name}: not run: {line}")
            invalid[name] = line
        pending = [t for t in pending if t.name not in invalid]
    if pending:
        concurrent = max_concurrent or default_max_concurrent(configs[pending[0].name][1], cpus_per_trial)
        log(f"sweep {root}: {len(pending)} of {len(spec.trials)} trials to run, {concurrent} at a time, "
            f"{cpus_per_trial:g} CPU each (Ray cluster: {_cluster_cpus():g} CPUs)")
        # The env packages this process trusts (its --env-package, environment and settings file; never sweep.json)
        # go to the trials explicitly: Ray's workers may have started before the allow-list was set.
        packages = sorted(allowed_env_packages())
        params = [{"name": t.name, "overrides": t.overrides, "pipeline": spec.pipeline, "workdir": spec.workdir,
                   "run_dir": str((root / TRIALS / t.name).resolve()), "env_packages": packages} for t in pending]
        # Our run directories hold every metric: no Tune loggers (TensorBoard, CSV, JSON), no Tune console table.
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        attempt = 1 + sum(1 for p in (root / "tune").glob("attempt-*")) if (root / "tune").is_dir() else 1
        tuner = tune.Tuner(
            tune.with_resources(trial_trainable, {"cpu": cpus_per_trial}),
            param_space={"trial": tune.grid_search(params)},
            tune_config=tune.TuneConfig(max_concurrent_trials=concurrent,
                                        trial_name_creator=lambda t: t.config["trial"]["name"],
                                        trial_dirname_creator=lambda t: t.config["trial"]["name"]),
            run_config=tune.RunConfig(storage_path=str((root / "tune").resolve()), name=f"attempt-{attempt}",
                                      failure_config=tune.FailureConfig(max_failures=1), verbose=0,
                                      callbacks=[_announcer(len(spec.trials), len(spec.trials) - len(pending), log)]),
        )
        # Tune's result grid looks for its own loggers' files, which are off: not a problem worth a warning.
        logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
        tuner.fit()
    summary = summarize(root, spec)
    summary["failed"] = [t.name for t in spec.trials if not (root / TRIALS / t.name / "result.json").is_file()]
    summary["invalid"] = invalid
    return summary


def _absolute(dataset: str, workdir: str) -> Path:
    return Path(dataset) if Path(dataset).is_absolute() else Path(workdir) / dataset


def _invalid_datasets(datasets: dict[str, Path]) -> dict[str, tuple[str, str]]:
    """Validate each trial's dataset as ``offlinerl train`` does (each distinct one once); trial name -> (the
    first problem in one line, the validator's report) for the trials whose dataset has errors."""
    from offlinerl.episodes.validate import InvalidDatasetError, require_valid

    found: dict[Path, tuple[str, str] | None] = {}
    for path in dict.fromkeys(datasets.values()):
        try:
            require_valid(path)
            found[path] = None
        except InvalidDatasetError as exc:
            first = next(iter(exc.report.failed), None)
            example = f": {first.examples[0].where()}: {first.examples[0].detail}" if first and first.examples else ""
            line = f"{path} failed validation ({first.name}{example})" if first else str(exc).splitlines()[0]
            found[path] = (line, str(exc))
    return {name: found[path] for name, path in datasets.items() if found[path] is not None}


def _append_log(path: Path, text: str) -> None:
    try:
        with path.open("a") as f:
            f.write(text)
    except OSError as exc:
        raise OutputWriteError.from_os_error(exc, path, "the trials that ran are kept") from exc


def resume_sweep(sweep_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Continue an interrupted sweep: finished trials are kept, the others resume from their newest checkpoint
    (or start again if they had none)."""
    root = Path(sweep_dir)
    if not (root / SWEEP_FILE).is_file():
        raise ConfigError(f"{root}: not a sweep directory (no {SWEEP_FILE})")
    return run_sweep(root, None, **kwargs)


def _announcer(total: int, done: int, log: Callable[[str], None]) -> Any:
    """A Tune callback that logs one line per finished trial on the driver (built here: Tune is imported lazily)."""
    from ray.tune import Callback

    class Announce(Callback):
        """One line per finished trial on the driver."""

        def __init__(self, total: int, done: int, log: Callable[[str], None]) -> None:
            self.total, self.done, self.log = total, done, log

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.done += 1
            r = trial.last_result or {}
            ret = r.get("final_eval_return")
            what = f"final return {ret:.1f}" if isinstance(ret, (int, float)) else "finished"
            self.log(f"[{self.done}/{self.total}] {trial.config['trial']['name']}: {what}")

        def on_trial_error(self, iteration, trials, trial, **info):
            self.done += 1
            self.log(f"[{self.done}/{self.total}] {trial.config['trial']['name']}: FAILED "
                     f"(see {trial.config['trial']['run_dir']}.log)")

    return Announce(total, done, log)


# -- the summary ---------------------------------------------------------------------------------------------------

_STATS = ("final_eval_return", "best_eval_return", "final_eval_normalized_score", "best_eval_normalized_score")


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and population standard deviation (None, None for no values)."""
    return (statistics.fmean(values), statistics.pstdev(values)) if values else (None, None)


def summarize(sweep_dir: str | Path, spec: SweepSpec) -> dict[str, Any]:
    """Group the finished trials by grid point: ``summary.csv``, ``summary.md``, ``sweep.png``; returns the rows."""
    root = Path(sweep_dir)
    points: dict[str, dict[str, Any]] = {}
    for t in spec.trials:
        key = json.dumps(t.point, sort_keys=True)
        row = points.setdefault(key, {"point": t.point, "trials": 0, "finished": 0, "results": [], "curves": []})
        row["trials"] += 1
        result_file = root / TRIALS / t.name / "result.json"
        if result_file.is_file():
            row["finished"] += 1
            row["results"].append(json.loads(result_file.read_text()))
            row["curves"].append(_eval_curve(root / TRIALS / t.name / "metrics.jsonl"))
    rows = []
    for row in points.values():
        out = {**{k: row["point"][k] for k in spec.grid}, "trials": row["trials"], "finished": row["finished"]}
        for stat in _STATS:
            values = [r[stat] for r in row["results"] if isinstance(r.get(stat), (int, float))]
            out[f"{stat}_mean"], out[f"{stat}_std"] = _mean_std(values)
        out["updates_mean"], _ = _mean_std([r["updates"] for r in row["results"]])
        out["train_time_s_mean"], _ = _mean_std([r["train_time_s"] for r in row["results"]])
        rows.append((out, row["curves"]))
    table = [r for r, _ in rows]
    _write_csv(root / "summary.csv", table)
    replace_file(root / "summary.md", _markdown(table, list(spec.grid)))
    _plot(root / "sweep.png", rows, list(spec.grid), Path(spec.pipeline).stem)
    best = max((r for r in table if r["final_eval_return_mean"] is not None),
               key=lambda r: r["final_eval_return_mean"], default=None)
    nodes = {}
    for t in spec.trials:
        attempts = root / TRIALS / f"{t.name}.json"
        nodes[t.name] = [a["node"] for a in json.loads(attempts.read_text())["attempts"]] if attempts.is_file() else []
    out = {"rows": table, "best": best, "keys": list(spec.grid), "trial_nodes": nodes, "sweep_dir": str(root)}
    replace_file(root / "summary.json", json.dumps(to_finite_json(out), indent=2) + "\n")
    return out


def _eval_curve(path: Path) -> list[tuple[float, float]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r.get("eval/return_mean"), (int, float)):
            out.append((float(r["learner/updates"]), float(r["eval/return_mean"])))
    return out


def _write_csv(path: Path, table: list[dict[str, Any]]) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(table[0]) if table else ["trials"])
    writer.writeheader()
    for row in table:
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    replace_file(path, text.getvalue())


def _fmt(mean: float | None, std: float | None) -> str:
    return "–" if mean is None else f"{mean:.1f} ± {std:.1f}"


def _markdown(table: list[dict[str, Any]], keys: list[str]) -> str:
    scored = any(r["final_eval_normalized_score_mean"] is not None for r in table)
    head = [*keys, "seeds", "final return", "best return"] + (["final score", "best score"] if scored else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        cells = [json.dumps(r[k]) if not isinstance(r[k], str) else r[k] for k in keys]
        cells += [f"{r['finished']}/{r['trials']}", _fmt(r["final_eval_return_mean"], r["final_eval_return_std"]),
                  _fmt(r["best_eval_return_mean"], r["best_eval_return_std"])]
        if scored:
            cells += [_fmt(r["final_eval_normalized_score_mean"], r["final_eval_normalized_score_std"]),
                      _fmt(r["best_eval_normalized_score_mean"], r["best_eval_normalized_score_std"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nmean ± std over the finished seeds of each grid point\n"


def _plot(path: Path, rows: list[tuple[dict[str, Any], list[list[tuple[float, float]]]]], keys: list[str],
          title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4))
    for row, curves in rows:
        curves = [c for c in curves if c]
        if not curves:
            continue
        n = min(len(c) for c in curves)  # seeds evaluated at the same updates (same pipeline)
        x = np.array([p[0] for p in curves[0][:n]])
        y = np.array([[p[1] for p in c[:n]] for c in curves])
        label = ", ".join(f"{k.removeprefix('config.')}={row[k]}" for k in keys) or "pipeline"
        ax.plot(x, y.mean(0), marker="o", label=f"{label} ({len(curves)} seeds)")
        ax.fill_between(x, y.mean(0) - y.std(0), y.mean(0) + y.std(0), alpha=0.2)
    ax.set(xlabel="gradient updates", ylabel="evaluation return", title=f"sweep of {title}: mean ± std over seeds")
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=90)
    plt.close(fig)
    replace_file(path, png.getvalue())
