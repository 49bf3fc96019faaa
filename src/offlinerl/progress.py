"""Progress bars that suit where the output goes: a tqdm bar on a terminal, plain periodic lines in a log.

A log file or a CI console is not a terminal: tqdm's carriage-return frames end up there as one long line, or
as hundreds. :func:`progress_bar` draws tqdm only when its stream is a TTY; otherwise it writes one line every
``interval_s`` seconds and one when it closes, e.g.::

    train bc cartpole-mixed: 1500/3000 upd (50%), 412 upd/s, actor=0.693, eval=128.6

No bar at all when it is disabled, or when the ``offlinerl`` logger is set above INFO (``--quiet``).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Callable, Mapping, TextIO

__all__ = ["progress_bar", "quiet", "LineProgress", "NoProgress"]


def quiet() -> bool:
    """Whether the ``offlinerl`` logger was set above INFO (``--quiet``, ``--log-level warning``): no progress."""
    level = logging.getLogger("offlinerl").level
    return level > logging.INFO


class NoProgress:
    """A bar that draws nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "NoProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LineProgress(NoProgress):
    """Plain lines for a stream that is not a terminal: one every ``interval_s`` seconds, one at ``close``."""

    def __init__(self, *, total: int | None, desc: str, unit: str, initial: int = 0, stream: TextIO,
                 interval_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.stream, self.interval_s, self.clock = stream, interval_s, clock
        self.start = self.last = clock()
        self.start_n = initial
        self.postfix: dict[str, str] = {}
        self.closed = False
        self.printed: tuple[int, dict[str, str]] | None = None  # what the last line said (count, postfix)

    def _line(self) -> str:
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        parts = [f"{done} {self.unit}" + (f" ({self.n / self.total:.0%})" if self.total else "")]
        elapsed = self.clock() - self.start
        if elapsed > 0:
            parts.append(f"{(self.n - self.start_n) / elapsed:.0f} {self.unit}/s")
        parts += [f"{k}={v}" for k, v in self.postfix.items()]
        return f"{self.desc}: " + ", ".join(parts)

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.interval_s:
            self.last = now
            self._print()

    def set_postfix(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.postfix = {str(k): str(v) for k, v in {**(values or {}), **kwargs}.items()}

    def _print(self) -> None:
        self.printed = (self.n, dict(self.postfix))
        print(self._line(), file=self.stream, flush=True)

    def close(self) -> None:
        """The closing line, unless the last periodic line already said the same count and metrics."""
        if not self.closed:
            self.closed = True
            if self.printed != (self.n, self.postfix):
                self._print()


def progress_bar(*, total: int | None, desc: str, unit: str, initial: int = 0, enabled: bool = True,
                 stream: TextIO | None = None, interval_s: float = 30.0, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on ``stream`` (default stderr) when it is a terminal, :class:`LineProgress` when it is not,
    :class:`NoProgress` when not ``enabled`` or :func:`quiet`. All three have ``update``, ``set_postfix``,
    ``close`` and work as context managers."""
    if not enabled or quiet():
        return NoProgress()
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        return LineProgress(total=total, desc=desc, unit=unit, initial=initial, stream=stream, interval_s=interval_s)
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit=unit, desc=desc, file=stream, **tqdm_kwargs)
