"""``DatasetReadError``: malformed data met while turning episode rows into transitions.

Training normally validates its dataset first (:func:`offlinerl.episodes.validate.require_valid`);
a job started without that preflight still gets one readable line naming the
dataset and the first cause (a Ray task's remote traceback is reduced to its
root exception), not a traceback.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import Iterator

import pyarrow as pa

from offlinerl.ray_utils import RayFailure, ray_failure

__all__ = ["DatasetReadError", "reading", "root_cause", "unwrap_read_errors"]

#: ``SomeError: message`` lines of a remote traceback (Ray's own wrappers are skipped).
_EXCEPTION_LINE = re.compile(r"^(?!ray\.)([A-Za-z_][\w.]*(?:Error|Exception|Invalid)): (.+)$")


class DatasetReadError(ValueError):
    """The dataset's rows could not be turned into transitions; the message names the dataset and the cause."""


def root_cause(exc: BaseException) -> str:
    """``Type: message`` of the error that started it all (the first such line of a Ray task's remote traceback)."""
    text = str(exc)
    for line in text.splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if match and "UserCodeException" not in match.group(1):
            return f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2)}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _read_errors() -> tuple[type[BaseException], ...]:
    """What malformed data raises: Arrow's, the OS's and Python's errors, and a Ray task's where Ray was imported
    (a job that runs without Ray never imports it for this)."""
    errors: tuple[type[BaseException], ...] = (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError)
    rex = sys.modules.get("ray.exceptions")
    return errors if rex is None else (rex.RayTaskError, *errors)


@contextlib.contextmanager
def reading(path: str) -> Iterator[None]:
    """Turn the errors malformed data raises inside the block into one :class:`DatasetReadError` naming ``path``."""
    try:
        yield
    except DatasetReadError:
        raise
    except _read_errors() as exc:
        failure = ray_failure(exc)
        if failure is not None:  # Ray went away (e.g. a ConnectionError from its GCS): not the data's fault
            raise RayFailure(failure) from exc
        raise DatasetReadError(f"{path}: cannot read the dataset as training data ({root_cause(exc)}); "
                               f"`offlinerl validate {path}` names every file, row and problem") from exc


@contextlib.contextmanager
def unwrap_read_errors() -> Iterator[None]:
    """A :class:`DatasetReadError` raised in a learner actor (while streaming) as its one line, not as the
    ``RayTaskError`` that carries it with the actor's traceback."""
    try:
        yield
    except Exception as exc:
        rex = sys.modules.get("ray.exceptions")  # without Ray there is no actor error to unwrap
        if rex is None or not isinstance(exc, rex.RayTaskError):
            raise
        if isinstance(exc.cause, DatasetReadError):
            raise DatasetReadError(str(exc.cause)) from None
        raise
