"""The checks a job can make before Ray starts (well under a second): refusals that used to come only after
10-30 s of ``ray.init``, and notes when a stop condition will be rounded or the data were made with another
simulator than this machine's.

``preflight`` reads only ``dataset.json``, the dataset's ``card.json`` (for that note) and the config; it never
starts Ray, builds a model or reads the data. What it refuses, it refuses with the same one-line error the job
would have raised later:

- the dataset is not a directory (``DatasetInfoError``; a directory whose ``dataset.json`` is missing or broken is
  left to the validator, which reports all that is wrong with it);
- ``--output`` already holds something, is a file, or lies where no writer may write, e.g. inside the dataset
  (``RunDirError``, the checks of :func:`offlinerl.jobs.run_dir.new_run_dir`);
- the algorithm cannot train on the dataset's action space, e.g. TD3+BC on Discrete actions (the algorithm's
  own ``learner_connectors`` check, a ``ConfigError``);
- (a note, not a refusal) a dataset whose card records other MuJoCo / gymnasium versions than this machine's;
- GPUs asked for (``config.num_gpus_per_learner > 0``) where torch sees no CUDA device, for learners that run on
  this machine (a ``ConfigError``; the job used to train on the CPU without a word), and a ``config.device``
  (``--device``) of ``cuda`` or ``cuda:N`` that torch here cannot run on (:func:`check_device`, which ``evaluate``
  and ``ope`` call for their ``--device`` too).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import ConfigError
from offlinerl.episodes.info import DatasetInfoError, read_info
from offlinerl.jobs.run_dir import check_new_run_dir
from offlinerl.jobs.spec import StopConfig

__all__ = ["preflight", "check_gpus", "check_device", "check_local_gpus", "stop_note", "planned_updates",
           "note_cached_validation", "simulator_note"]

_LOG = logging.getLogger("offlinerl.jobs")


def note_cached_validation(dataset: str | Path, validation: object) -> None:
    """Say (an info line: not under ``--quiet``) that ``dataset`` passed validation before and was not read again."""
    if validation is not None and getattr(validation, "cached", False):
        _LOG.info("%s: unchanged since it passed validation, not read again (offlinerl validate re-checks it)",
                  dataset)


def preflight(dataset: str | Path, config: AlgorithmConfig, stop: StopConfig, *, run_dir: str | Path | None,
              resuming: bool, log: Callable[[str], None], address: str | None = None) -> None:
    """Refuse what is wrong with a job before Ray starts (see the module's docstring); log a stop-rounding note.

    ``address`` (or ``$RAY_ADDRESS``): the cluster the job joins. Its remote learners
    (``config.num_learners >= 1``) run on the cluster's nodes, whose GPUs this machine cannot see, so the GPU
    check is made only for learners on this machine (no address, or ``num_learners = 0``)."""
    if not Path(dataset).is_dir():
        raise DatasetInfoError(f"{dataset}: not a dataset directory")
    try:
        info = read_info(dataset)
    except DatasetInfoError:
        info = None  # the validator, next, reports everything wrong with it (and --skip-validation still refuses it)
    if run_dir is not None and not resuming:  # --output; a default run directory is new (a time stamp in its name)
        check_new_run_dir(Path(run_dir), inputs=[dataset])
    if info is not None and (not info.module_ids or len(info.module_ids) == 1):  # one module: the dataset's spaces are its spaces
        config.learner_connectors(info.observation_space, info.action_space)
    check_local_gpus(config.num_gpus_per_learner, config.num_learners, address, config.device)
    for note in (None if resuming else stop_note(stop, config.updates_per_iteration), simulator_note(dataset)):
        if note:
            log(note)


def simulator_note(dataset: str | Path) -> str | None:
    """A note when the dataset's card says it was made with other simulation packages than this machine's
    (:func:`offlinerl.episodes.software.simulator_note`): its evaluations would run another simulation."""
    from offlinerl.episodes.software import simulator_note as note
    from offlinerl.scoring import CardError, load_card

    try:
        card = load_card(dataset)
    except CardError:  # the job's scoring reports a broken card itself
        return None
    return note(str(dataset), card)


def check_local_gpus(per_learner: float, num_learners: int, address: str | None, device: str | None = None) -> None:
    """:func:`check_gpus` and :func:`check_device` for learners that run on this machine: all of them without an
    address (or ``$RAY_ADDRESS``), the in-process one (``num_learners = 0``) with one; a cluster's remote learners
    run on nodes whose GPUs this machine cannot see."""
    if not (address or os.environ.get("RAY_ADDRESS")) or num_learners == 0:
        check_device(device)
        check_gpus(per_learner)


def check_device(device: str | None) -> None:
    """A ``ConfigError`` naming ``--device DEVICE`` when it is ``cuda`` or ``cuda:N`` and torch sees no CUDA device,
    or fewer than N + 1."""
    from offlinerl.core.devices import cuda_count, is_cuda

    if not is_cuda(device):
        return
    import torch

    count = cuda_count()
    if count == 0:
        raise ConfigError(f"--device {device}: no CUDA device is available (torch {torch.__version__} sees 0); "
                          "use --device cpu")
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ConfigError(f"--device {device}: torch {torch.__version__} sees {count} CUDA device"
                          f"{'s' * (count != 1)} (cuda:0{f' to cuda:{count - 1}' if count > 1 else ''}); "
                          "use one of them, or --device cpu")


def check_gpus(per_learner: float) -> None:
    """A ``ConfigError`` when ``per_learner`` GPUs are asked for and torch sees no CUDA device."""
    if per_learner <= 0:
        return
    import torch

    from offlinerl.core.devices import cuda_count

    if cuda_count() == 0:
        raise ConfigError(f"config.num_gpus_per_learner: {per_learner:g} GPU(s) per learner asked for, but torch "
                          f"{torch.__version__} sees no CUDA device (a CPU build, or no GPU here); set it to 0 to "
                          "train on the CPU")


def stop_note(stop: StopConfig, updates_per_iteration: int) -> str | None:
    """What will run when ``stop.updates`` is not a whole number of iterations (None when it is, or unset): a job
    stops only between iterations, so it runs up to the next multiple of ``updates_per_iteration``."""
    if stop.updates is None or stop.updates % updates_per_iteration == 0:
        return None
    iterations = -(-stop.updates // updates_per_iteration)
    runs = iterations * updates_per_iteration
    if stop.iterations is not None and stop.iterations < iterations:
        return None  # stop.iterations comes first, and it is exact
    return (f"note: stop.updates={stop.updates} is not a multiple of config.updates_per_iteration="
            f"{updates_per_iteration}; a job stops only between iterations, so this one runs {runs} updates "
            f"({iterations} iteration{'s' * (iterations != 1)}). Set stop.updates={runs} (or "
            f"config.updates_per_iteration to a divisor of {stop.updates}) to silence this note")


def planned_updates(stop: StopConfig, updates_per_iteration: int) -> int | None:
    """The updates a job runs when its update or iteration stop ends it: ``stop.updates`` rounded up to whole
    iterations, or ``stop.iterations`` iterations, whichever comes first; None when neither is set."""
    counts = [-(-stop.updates // updates_per_iteration) * updates_per_iteration] if stop.updates else []
    if stop.iterations:
        counts.append(stop.iterations * updates_per_iteration)
    return min(counts) if counts else None
