"""``offlinerl`` command line. Each command lives in its own module with a
``register(subparsers)`` function; the command itself calls one library function."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import sys
import time
from typing import Iterator

from offlinerl.cli.output import add_output_options, configured, log_level

__all__ = ["main", "build_parser", "STARTED_AT"]

STARTED_AT = time.time()
"""When the command started (this package's import, the first thing it does): jobs report the time from
here to their first update (``result.json``: ``first_update_s``)."""

#: Command modules under ``offlinerl.cli``, in ``--help`` order.
COMMANDS = ("validate", "inspect", "data", "convert", "export", "train", "evaluate", "ope", "collect", "finetune", "sweep",
            "benchmark")
#: Commands that never make an env (no ``--env-package``).
NO_ENV_COMMANDS = ("validate", "inspect", "data", "export", "ope")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offlinerl",
        description="Offline-first reinforcement learning on Ray Data and PyTorch: convert, validate, "
        "inspect and train on episode parquet datasets.",
    )
    parser.add_argument("--version", action="version", version=f"offlinerl {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"offlinerl.cli.{name}").register(sub)
    for name, command in sub.choices.items():
        if name not in NO_ENV_COMMANDS:
            _add_env_package_option(command)
        add_output_options(command)
    return parser


def _add_env_package_option(parser: argparse.ArgumentParser) -> None:
    """``--env-package NAME`` on ``parser`` and on every sub-command under it."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if nested:
        for child in nested[0].choices.values():
            _add_env_package_option(child)
        return
    parser.add_argument("--env-package", dest="env_packages", action="append", default=[], metavar="NAME",
                        help="trust the env package NAME (repeatable; also $OFFLINERL_ENV_PACKAGES): it is imported "
                        "before envs are made, so its ids are found, and ids NAME:Env-v0 read from files are made; "
                        "files never import a module otherwise (docs/safety.md)")


def _version() -> str:
    from offlinerl import __version__

    return __version__


#: A comma-separated list that starts with a negative number (``-1,1``, ``-0.5,2``): argparse takes it for an option.
_NEGATIVE_LIST = re.compile(r"-\.?\d[^,\s]*(,[^,\s]*)+")


def attach_negative_lists(argv: list[str]) -> list[str]:
    """``--clip -1,1`` as ``--clip=-1,1``: argparse reads a value that starts with ``-`` as an option unless it is a
    plain negative number, so a list like ``-1,1`` after an option was refused ("expected one argument"). No option
    name is a comma list, so such a token is attached to the option before it (not after ``--``)."""
    out: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            return out + argv[i:]
        prev = out[-1] if out else ""
        if prev.startswith("--") and "=" not in prev and _NEGATIVE_LIST.fullmatch(token):
            out[-1] = f"{prev}={token}"
        else:
            out.append(token)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(attach_negative_lists(sys.argv[1:] if argv is None else list(argv)))
    prefix = " ".join(["offlinerl", args.command] + ([args.format] if getattr(args, "format", None) else []))
    if getattr(args, "env_packages", None):
        from offlinerl.trusted import UntrustedNameError, allow_env_packages

        try:
            allow_env_packages(args.env_packages)
        except UntrustedNameError as exc:
            print(f"{prefix}: {exc}", file=sys.stderr)
            return 2
    level = log_level(args)
    if level > logging.INFO and hasattr(args, "no_progress"):
        args.no_progress = True
    with configured(level, prefix), _ray_address(getattr(args, "address", None)):
        try:
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        except BrokenPipeError:  # `| head`: the reader has gone, as a SIGPIPE would end a C tool (128 + 13)
            if not _stdout_closed():
                raise
            code = 141
        except KeyboardInterrupt:  # Ctrl-C where the command has no handler of its own: one line, not a traceback
            print(f"{prefix}: interrupted", file=sys.stderr)
            code = 130
        except Exception as exc:  # noqa: BLE001 - only a Ray failure is caught here; anything else is re-raised
            line = ray_failure_line(prefix, exc)
            if line is None:
                raise
            print(line, file=sys.stderr)
            code = 1
    if argv is None:  # the console command: Ray stops here, where a Ctrl-C is one line, not in an atexit traceback
        code = _stop_ray(prefix, code)
    return code


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (the BrokenPipeError was ours, not some socket's); then stdout
    points at /dev/null, so the interpreter's flush at exit finds no broken pipe to complain about."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(events & select.POLLERR for _, events in poller.poll(0)):
            return False
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor: nothing will flush to a pipe
        pass
    return True


def _stop_ray(prefix: str, code: int) -> int:
    """Shut down the Ray this process started or joined, if any; a Ctrl-C meanwhile ends with exit 130."""
    ray = sys.modules.get("ray")
    try:
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted while Ray shut down", file=sys.stderr)
        return 130
    return code


def ray_failure_line(prefix: str, exc: BaseException) -> str | None:
    """``PREFIX: Ray failed (...); what to do`` when ``exc`` is a Ray failure (``offlinerl.ray_utils.ray_failure``),
    ``PREFIX: <what to set>`` when the cluster refused this client's token: the one line a command prints for it
    instead of Ray's traceback; None for any other error."""
    from offlinerl.ray_utils import RayAuthError, RayFailure, ray_failure

    if isinstance(exc, RayAuthError):  # the cluster refused our token: the message says what to set
        return f"{prefix}: {exc}"
    failure = ray_failure(exc)
    return None if failure is None else f"{prefix}: {RayFailure(failure)}"


@contextlib.contextmanager
def _ray_address(address: str | None) -> Iterator[None]:
    """While the command runs, its ``--address`` is ``RAY_ADDRESS``: the library starts Ray lazily, deep inside
    (``offlinerl.ray_utils.init_ray``), and every such start joins that cluster."""
    if not address:
        yield
        return
    before = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = before


if __name__ == "__main__":
    sys.exit(main())
