"""Running a sweep's trials: each trial is an ``offlinerl train`` process inside a Ray Tune trial
(``trial_trainable``), and ``run_sweep`` / ``resume_sweep`` are the driver that validates every pending
trial's dataset, schedules the trials with Tune and writes the summary (``offlinerl.jobs.sweep.summary``).

One process at a time works in a trial's run directory: the trial holds ``trials/<name>.lock`` (``flock``) from
before it looks at its run directory until its ``offlinerl train`` process has exited - the process inherits the
lock, so it is held even where the Tune worker dies first. A killed sweep's driver takes its Tune workers with it
only when Ray reaps them, and each train process only when its worker is gone; a resumed trial therefore waits
for that lock (:data:`LOCK_WAIT_S`) instead of starting a second job beside one still writing checkpoints and
``metrics.jsonl`` into the same directory."""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import ConfigError
from offlinerl.episodes.atomic import OutputWriteError, check_output_place, replace_file
from offlinerl.jobs.sweep.plan import SWEEP_FILE, TRIALS, SweepSpec
from offlinerl.jobs.sweep.summary import summarize
from offlinerl.trusted import ENV_PACKAGES_VAR, allowed_env_packages, split_packages

__all__ = ["trial_trainable", "default_max_concurrent", "check_trial_resources", "run_sweep", "resume_sweep",
           "NotVectorizable", "progress_line"]

_METRIC_POLL_S = 1.0
PROGRESS_EVERY_S = 60.0  # a running trial's progress line on the driver at most this often
#: Longest a trial waits for an earlier process of it (a killed sweep's, still being stopped) to let go of its run
#: directory before it fails, naming the lock.
LOCK_WAIT_S = 300.0


# -- one trial (runs inside a Ray Tune worker) ------------------------------------------------------------------

def _trial_command(spec: dict[str, Any], run: Path) -> list[str]:
    """``offlinerl train`` for a fresh trial, ``train --resume`` for one with a checkpoint (whose config.yaml
    holds its tracking group already); a fresh trial's W&B / MLflow runs are grouped by ``spec["group"]``."""
    base = [sys.executable, "-m", "offlinerl", "train", "--no-progress"]
    if _resumes(run):
        return [*base, "--resume", str(run)]
    if run.exists():  # stopped before its first checkpoint, or a vectorised run: ours (inside trials/), start again
        shutil.rmtree(run)
    sets = [a for o in spec["overrides"] for a in ("--set", o)]
    if spec.get("group"):
        sets += ["--set", f"logging.group={json.dumps(spec['group'])}"]
    return [*base, spec["job"], "-o", str(run), "--skip-validation", *sets]


def _resumes(run: Path) -> bool:
    """Whether the trial's ``offlinerl train`` resumes ``run`` (it holds a job's config and a checkpoint); else it
    starts afresh from the sweep's job file (an interrupted vectorised run's seeds, for one, start again)."""
    from offlinerl.jobs.run_dir import latest_checkpoint

    return (run / "config.yaml").is_file() and latest_checkpoint(run) is not None


def _needs_ray(spec: dict[str, Any], run: Path) -> bool:
    """Whether the trial's ``offlinerl train`` needs this Ray cluster (``training.setup.job_ray_reason``: remote
    learners, streaming data): an in-memory job with one learner in the process runs without Ray, where Tune placed
    the trial. Anything that cannot be read here joins, as before."""
    from offlinerl.episodes.info import read_info
    from offlinerl.jobs.spec import load_job_run, load_job_spec
    from offlinerl.training.setup import job_ray_reason

    workdir = Path(spec["workdir"])
    try:
        if _resumes(run):  # the config the command will run: the kept run's, else the job file's
            job, config, _ = load_job_run(run)
        else:
            job, config = load_job_spec(workdir / spec["job"], spec["overrides"])
        dataset = Path(job.dataset)
        return job_ray_reason(config, None, read_info(dataset if dataset.is_absolute() else workdir / dataset)) is not None
    except Exception:  # noqa: BLE001 - the train process reports the problem itself; joining changes nothing there
        return True


def _die_with_parent() -> None:
    """In the trial's ``offlinerl train`` process (Linux): be stopped when the Tune worker running it dies (a killed
    sweep must leave no job writing into its run directory)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextmanager
def _trial_lock(run: Path) -> Iterator[int]:
    """Hold ``trials/<name>.lock`` (an exclusive ``flock``) for the block; yields its descriptor, which the trial's
    train process inherits. Waits up to :data:`LOCK_WAIT_S` for an earlier holder to exit; ``RuntimeError`` after."""
    path = run.with_name(f"{run.name}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"trial {run.name}: an earlier process of it still holds {path} after "
                                       f"{LOCK_WAIT_S:.0f} s (a killed sweep's trial still running?); stop it, then "
                                       "resume the sweep") from None
                time.sleep(0.2)
        yield fd
    finally:
        os.close(fd)


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
    from ray import tune

    spec = config["trial"]
    run = Path(spec["run_dir"])
    result_file = run / "result.json"
    with _trial_lock(run) as lock:  # no earlier process of this trial is left in its run directory
        if not result_file.is_file():
            _run_trial(spec, run, lock)
    result = json.loads(result_file.read_text())
    tune.report(_tune_metrics({k: v for k, v in result.items() if isinstance(v, (int, float)) or v is None},
                              done=True))


def _run_trial(spec: dict[str, Any], run: Path, lock: int) -> None:
    """Run (or resume) the trial's ``offlinerl train`` process to its end, reporting each new ``metrics.jsonl``
    record to Tune; the process inherits the trial's ``lock`` (``_trial_lock``)."""
    import ray
    from ray import tune

    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    if _needs_ray(spec, run):  # else it runs in its own process, as `offlinerl train` would: no join, no Ray Data
        env["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
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
                                preexec_fn=_die_with_parent, pass_fds=(lock,))
        try:
            while True:
                done = proc.poll() is not None
                records, cursor = _new_records(run / spec.get("metrics", "metrics.jsonl"), cursor)
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
    if proc.returncode != 0 or not (run / "result.json").is_file():
        tail = Path(f"{run}.log").read_text(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"trial {run.name}: offlinerl train exited {proc.returncode}: " + " | ".join(tail))


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


def check_trial_resources(cpus_per_trial: float, address: str | None = None) -> None:
    """``ConfigError`` (naming ``--cpus-per-trial``) unless a trial's reservation of ``cpus_per_trial`` CPUs is a
    positive number that some node can hold: Tune would otherwise wait for it forever. With Ray running in this
    process, the largest live node of its cluster; else, without an address (``address`` or ``$RAY_ADDRESS``), the
    CPUs the local Ray will start with; else nothing more yet (``run_sweep`` checks again once it has joined)."""
    if not math.isfinite(cpus_per_trial) or cpus_per_trial <= 0:
        raise ConfigError(f"--cpus-per-trial must be a positive number, got {cpus_per_trial:g}")
    import ray

    if ray.is_initialized():
        nodes = [float(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        largest, total = max(nodes, default=0.0), sum(nodes)
        if cpus_per_trial > largest:
            where = (f"the Ray cluster's largest node has {largest:g} CPUs ({total:g} in all, {len(nodes)} nodes)"
                     if len(nodes) > 1 else f"the Ray cluster has {largest:g} CPUs")
            raise ConfigError(f"--cpus-per-trial {cpus_per_trial:g}: {where}, so no trial could ever be scheduled; "
                              f"give at most {largest:g}")
    elif not (address or os.environ.get("RAY_ADDRESS")):
        from offlinerl.ray_utils import local_cpus

        local = local_cpus(None)
        if cpus_per_trial > local:
            raise ConfigError(f"--cpus-per-trial {cpus_per_trial:g}: the local Ray starts with {local} CPUs (this "
                              f"machine's), so no trial could ever be scheduled; give at most {local}")


def default_max_concurrent(config: AlgorithmConfig, cpus_per_trial: float, cpus: float | None = None) -> int:
    """Trials that fit at once on ``cpus`` (default: the Ray cluster's) with one CPU left per trial for its Ray Data
    tasks and its learners' CPUs."""
    learners = config.num_learners * config.num_cpus_per_learner
    return max(1, int((_cluster_cpus() if cpus is None else cpus) // (cpus_per_trial + learners + 1)))


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
    ``sweep_dir`` holding a symbolic link to outside it is a ``RunDirError`` before anything is written, and so is
    a ``cpus_per_trial`` no node can hold a ``ConfigError`` (:func:`check_trial_resources`: before Ray starts for
    a local Ray, right after joining for a cluster).
    """
    from ray import tune

    from offlinerl.jobs.spec import load_job_spec
    from offlinerl.jobs.run_dir import resolve_resumed
    from offlinerl.ray_utils import init_ray

    check_trial_resources(cpus_per_trial, address)  # before anything: a trial no node can hold waits forever
    root = Path(sweep_dir)
    new = spec is not None
    if not new:  # a handed-over sweep directory: nothing in it may lead outside (before anything is written)
        resolve_resumed(root, "sweep directory")
        spec = SweepSpec.from_file(root / SWEEP_FILE)
    elif root.exists() and (not root.is_dir() or any(root.iterdir())):
        hint = "; to continue that sweep use --resume" if (root / SWEEP_FILE).is_file() else ""
        raise FileExistsError(f"{root} exists and is not empty; choose another --output{hint}")
    cwd = os.getcwd()
    os.chdir(spec.workdir)  # the job file's relative paths, as the trials will see them
    try:  # every trial's config is valid before anything is written (a wrong key or value: ConfigError)
        configs = {t.name: load_job_spec(spec.job, t.overrides) for t in spec.trials}
    finally:
        os.chdir(cwd)
    datasets = {name: _absolute(job.dataset, spec.workdir) for name, (job, _) in configs.items()}
    if spec.vectorize:  # each point's seeds as one num_seeds job: refused before anything is written if it cannot
        _check_vectorizable(spec, configs, datasets)
    if new:  # never /, home or the current directory, the job file or a dataset, nor inside a dataset or checkpoint
        check_output_place(root, inputs=[spec.job, *datasets.values()])
    init_ray(address)
    check_trial_resources(cpus_per_trial, address)  # the cluster just joined: before anything is written
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
    invalid: dict[str, str] = {}
    if pending and not skip_validation:  # each trial's own dataset, before any trial starts (the trials skip it)
        for name, (line, report) in _invalid_datasets({t.name: datasets[t.name] for t in pending}).items():
            where = next(t.group or t.name for t in pending if t.name == name)
            _append_log(root / TRIALS / f"{where}.log", f"offlinerl sweep: trial {name} not run: {report}\n")
            log(f"trial {name}: not run: {line}")
            invalid[name] = line
        pending = [t for t in pending if t.name not in invalid]
    if pending:
        concurrent = max_concurrent or default_max_concurrent(configs[pending[0].name][1], cpus_per_trial)
        jobs = _vectorized_jobs(spec, pending) if spec.vectorize else [(t.name, t.overrides, None, t.name)
                                                                        for t in pending]
        what = f" as {len(jobs)} vectorised job(s)" if spec.vectorize else ""
        # the progress counts Tune's trials: a vectorised job per point, else one per trial
        total_jobs = len({t.group or t.name for t in spec.trials}) if spec.vectorize else len(spec.trials)
        log(f"sweep {root}: {len(pending)} of {len(spec.trials)} trials to run{what}, {concurrent} at a time, "
            f"{cpus_per_trial:g} CPU each (Ray cluster: {_cluster_cpus():g} CPUs)")
        # The env packages this process trusts (its --env-package, environment and settings file; never sweep.json)
        # go to the trials explicitly: Ray's workers may have started before the allow-list was set.
        packages = sorted(allowed_env_packages())
        # Every trial logs where its job file says (its logging: block), grouped by the sweep: the job file's
        # logging.group, else the sweep directory's name (W&B group, MLflow tag offlinerl.group).
        params = [{"name": name, "overrides": overrides, "job": spec.job, "workdir": spec.workdir,
                   "run_dir": str((root / TRIALS / name).resolve()), "env_packages": packages,
                   "group": configs[trial][0].logging.group or root.resolve().name,
                   **({"metrics": metrics} if metrics else {})} for name, overrides, metrics, trial in jobs]
        budgets = {name: configs[trial][0].stop.updates for name, _, _, trial in jobs}  # for the progress lines
        # Our run directories hold every metric: no Tune loggers (TensorBoard, CSV, JSON), no Tune console table.
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        # Ctrl-C is ours: Tune's own handler ended the run quietly and returned, so a benchmark went on to its next
        # sweep and a sweep printed a summary; the KeyboardInterrupt now reaches the command (exit 130, --resume)
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        attempt = 1 + sum(1 for p in (root / "tune").glob("attempt-*")) if (root / "tune").is_dir() else 1
        tuner = tune.Tuner(
            tune.with_resources(trial_trainable, {"cpu": cpus_per_trial}),
            param_space={"trial": tune.grid_search(params)},
            tune_config=tune.TuneConfig(max_concurrent_trials=concurrent,
                                        trial_name_creator=lambda t: t.config["trial"]["name"],
                                        trial_dirname_creator=lambda t: t.config["trial"]["name"]),
            run_config=tune.RunConfig(storage_path=str((root / "tune").resolve()), name=f"attempt-{attempt}",
                                      failure_config=tune.FailureConfig(max_failures=1), verbose=0,
                                      callbacks=[_announcer(total_jobs, total_jobs - len(jobs), log, budgets)]),
        )
        # Tune's result grid looks for its own loggers' files, which are off: not a problem worth a warning.
        logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
        tuner.fit()
    summary = summarize(root, spec)
    summary["failed"] = [t.name for t in spec.trials if not (root / TRIALS / t.name / "result.json").is_file()]
    summary["invalid"] = invalid
    return summary


def _vectorized_jobs(spec: SweepSpec, pending: list[Any]) -> list[tuple[str, list[str], str, str]]:
    """(group, overrides, the first seed's metrics.jsonl, the first seed's trial name) of each grid point with a
    pending seed: the point's every seed trains again in one ``num_seeds`` job (a vectorised job resumes no seed
    from a checkpoint)."""
    out = []
    for group in dict.fromkeys(t.group for t in pending):
        trials = [t for t in spec.trials if t.group == group]
        first = trials[0]
        sets = [o for o in first.overrides if o != f"config.seed={first.seed}"]
        out.append((group, [*sets, f"config.seed={first.seed}", f"config.num_seeds={len(trials)}"],
                    f"seed-{first.seed}/metrics.jsonl", first.name))
    return out


class NotVectorizable(ConfigError):
    """A ``--vectorize`` sweep whose grid point cannot train its seeds as one ``num_seeds`` job (raised before
    anything is written; ``reason`` says why)."""

    def __init__(self, trial: str, reason: str) -> None:
        super().__init__(f"--vectorize: trial {trial}: {reason}")
        self.reason = reason


def _check_vectorizable(spec: SweepSpec, configs: dict[str, Any], datasets: dict[str, Path]) -> None:
    """``NotVectorizable`` when a grid point's job cannot train its seeds as one vectorised job (its trial joins no
    cluster: ``_needs_ray`` is false for it)."""
    import dataclasses

    from offlinerl.jobs.vectorized import vectorize_problem

    for t in {t.group: t for t in spec.trials}.values():  # a point's seeds differ in config.seed only
        job, config = configs[t.name]
        problem = vectorize_problem(job.algorithm, dataclasses.replace(config, num_seeds=2), str(datasets[t.name]))
        if problem is not None:
            raise NotVectorizable(t.name, problem)


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


def progress_line(name: str, record: dict[str, Any], budget: int | None = None) -> str | None:
    """One line on a running trial from its latest ``metrics.jsonl`` record: updates (of ``budget``), rate, the
    time left at that rate, the last evaluation; None for a record without updates."""
    updates = record.get("learner/updates")
    if not isinstance(updates, (int, float)):
        return None
    parts = [f"{updates:,.0f}" + (f" / {budget:,}" if budget else "") + " updates"]
    rate = record.get("perf/updates_per_s")
    if isinstance(rate, (int, float)) and rate > 0:
        parts.append(f"{rate:,.1f} upd/s")
        if budget and budget > updates:
            parts.append(f"~{(budget - updates) / rate / 60:.0f} min left")
    ret = record.get("eval/return_mean")
    if isinstance(ret, (int, float)):
        parts.append(f"eval return {ret:.1f}")
    return f"  {name}: " + ", ".join(parts)


def _announcer(total: int, done: int, log: Callable[[str], None], budgets: dict[str, int | None]) -> Any:
    """A Tune callback that logs on the driver one line per finished trial and, for a trial that runs long, a
    progress line at most every ``PROGRESS_EVERY_S`` (``budgets``: each job's ``stop.updates``; built here: Tune is
    imported lazily)."""
    from ray.tune import Callback

    class Announce(Callback):
        """One line per finished trial on the driver, and a running trial's progress now and then."""

        def __init__(self, total: int, done: int, log: Callable[[str], None]) -> None:
            self.total, self.done, self.log = total, done, log
            self.last: dict[str, float] = {}  # trial name -> when its last progress line was logged

        def on_trial_start(self, iteration, trials, trial, **info):
            self.last[trial.config["trial"]["name"]] = time.monotonic()

        def on_trial_result(self, iteration, trials, trial, result, **info):
            name = trial.config["trial"]["name"]
            now = time.monotonic()
            if result.get("offlinerl_done") or now - self.last.get(name, now) < PROGRESS_EVERY_S:
                return
            line = progress_line(name, result, budgets.get(name))
            if line is not None:
                self.last[name] = now
                self.log(line)

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.done += 1
            r = trial.last_result or {}
            ret = r.get("final_eval_return", r.get("final_eval_return_mean"))
            what = f"final return {ret:.1f}" if isinstance(ret, (int, float)) else "finished"
            self.log(f"[{self.done}/{self.total}] {trial.config['trial']['name']}: {what}")

        def on_trial_error(self, iteration, trials, trial, **info):
            self.done += 1
            self.log(f"[{self.done}/{self.total}] {trial.config['trial']['name']}: FAILED "
                     f"(see {trial.config['trial']['run_dir']}.log)")

    return Announce(total, done, log)
