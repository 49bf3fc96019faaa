"""``offlinerl.progress``: tqdm on a terminal, plain lines elsewhere (never carriage-return frames in a log),
nothing under ``--quiet``."""

from __future__ import annotations

import io
import logging

from offlinerl.progress import LineProgress, NoProgress, progress_bar


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_stream_that_is_not_a_terminal_gets_plain_periodic_lines():
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(total=3000, desc="bc cartpole-mixed", unit="upd", stream=out, interval_s=30, clock=clock)
    clock.t += 10
    bar.update(500)  # 10 s after the start: under the interval, no line
    clock.t += 20
    bar.set_postfix({"actor": "0.693", "eval": "128.6"})
    bar.update(1000)  # 30 s: a line
    clock.t += 30
    bar.update(1500)
    bar.close()  # the last line already said 3000/3000 with these metrics: not said twice
    bar.close()
    assert out.getvalue() == ("bc cartpole-mixed: 1500/3000 upd (50%), 50 upd/s, actor=0.693, eval=128.6\n"
                              "bc cartpole-mixed: 3000/3000 upd (100%), 50 upd/s, actor=0.693, eval=128.6\n")
    assert "\r" not in out.getvalue()


def test_the_closing_line_is_written_when_it_says_something_new():
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(total=10, desc="x", unit="it", stream=out, interval_s=30, clock=clock)
    clock.t += 30
    bar.update(4)  # a line at 4
    bar.update(6)  # under the interval: none
    bar.close()  # 10/10 is new
    assert out.getvalue() == "x: 4/10 it (40%), 0 it/s\nx: 10/10 it (100%), 0 it/s\n"


def test_progress_bar_picks_by_stream_and_quiet():
    assert isinstance(progress_bar(total=10, desc="x", unit="ep", stream=io.StringIO()), LineProgress)
    assert isinstance(progress_bar(total=10, desc="x", unit="ep", enabled=False), NoProgress)
    logger = logging.getLogger("offlinerl")
    before = logger.level
    logger.setLevel(logging.WARNING)  # what --quiet sets
    try:
        assert isinstance(progress_bar(total=10, desc="x", unit="ep", stream=io.StringIO()), NoProgress)
    finally:
        logger.setLevel(before)
