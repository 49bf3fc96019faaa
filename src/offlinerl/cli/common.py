"""Options shared by the commands that run a job from a job file (train, finetune), and ``--device`` (train,
finetune, evaluate, ope)."""

from __future__ import annotations

import argparse
import os

__all__ = ["add_job_options", "add_address_option", "add_env_kwargs_option", "add_device_option", "device_problem",
           "overwrite_help"]

ADDRESS_HELP = "Ray cluster address to join (default: $RAY_ADDRESS, else start a local Ray; docs/scaling.md)"


def add_address_option(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """``--address`` (``dest="address"``): the Ray cluster the command joins. ``offlinerl.cli.main`` sets
    ``RAY_ADDRESS`` to it while the command runs, so every ``init_ray()`` inside the library joins it."""
    parser.add_argument("--address", *aliases, dest="address", default=None, metavar="ADDR", help=ADDRESS_HELP)


def _kwargs(text: str) -> dict:
    from offlinerl.config_io import NestingError, plain_json

    try:
        value = plain_json(text)
    except (ValueError, NestingError) as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, e.g. '{{\"max_episode_steps\": 200}}', got {text!r}")
    return value


def _device(text: str) -> str:
    from offlinerl.core.devices import DEVICE_PATTERN

    if DEVICE_PATTERN.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device: use cpu, cuda or cuda:N")
    return text


def add_device_option(parser: argparse.ArgumentParser, what: str, default: str = "the CPU") -> None:
    """``--device DEVICE`` (``dest="device"``, default None: unchanged behaviour): ``cpu``, ``cuda`` or ``cuda:N``;
    ``what`` says what runs there, ``default`` where it runs without the option."""
    parser.add_argument("--device", type=_device, default=None, metavar="DEVICE",
                        help=f"cpu, cuda or cuda:N: where {what} (default: {default}; docs/scaling.md, GPU)")


def device_problem(device: str | None, *, learners: bool = False) -> str | None:
    """Why ``--device`` cannot run here (``offlinerl.jobs.preflight.check_device``'s line), None when it can or is
    not given. ``learners``: a training job, whose learners may run on a cluster's nodes when it joins one
    (``--address`` or ``$RAY_ADDRESS``); the job's preflight then checks its in-process learner only."""
    from offlinerl.config_io import ConfigError
    from offlinerl.jobs.preflight import check_device

    if learners and os.environ.get("RAY_ADDRESS"):
        return None
    try:
        check_device(device)
    except ConfigError as exc:
        return str(exc)
    return None


def add_env_kwargs_option(parser: argparse.ArgumentParser) -> None:
    """``--env-kwargs JSON`` (``dest="env_kwargs"``, default None): ``gymnasium.make`` keyword arguments."""
    parser.add_argument("--env-kwargs", type=_kwargs, default=None, metavar="JSON",
                        help="gymnasium.make keyword arguments as a JSON object, e.g. '{\"max_episode_steps\": 200}' "
                        "(default: the recorded task's, when the env is the one the data or checkpoint names)")


def add_job_options(parser: argparse.ArgumentParser, set_example: str) -> None:
    """``--set``, ``--output``, ``--address``, ``--no-progress`` and ``--skip-validation``; ``set_example`` shows a
    dotted key."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a job-file value by dotted key, e.g. {set_example} (repeatable)")
    parser.add_argument("--output", "-o", help="run directory to create (default: <output>/<name>-<UTC time>)")
    add_address_option(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--skip-validation", action="store_true",
                        help="do not validate the dataset before training (for data you already ran "
                        "`offlinerl validate` on); by default a dataset with errors stops the job before it starts")


def overwrite_help(kind: str = "dataset", marker: str = "dataset.json", target: str = "the output") -> str:
    """``--help`` of ``--overwrite`` for a command writing a ``kind`` recognised by its ``marker`` file."""
    return (f"replace {target} if it is an existing {kind} (a directory holding {marker}) or an empty "
            "directory; never a file, another non-empty directory, an input of this command, or a directory "
            "holding or inside one (exit 2, nothing changed; see docs/safety.md)")
