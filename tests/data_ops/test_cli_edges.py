"""What an outside probe of ``offlinerl data`` found: inputs without rows or with a foreign file, non-finite and
negative numbers, one path given twice, Ctrl-C and a closed stdout. Each is one line (no traceback), the right
exit code, and nothing written."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

from offlinerl.cli import main
from offlinerl.data_ops.expr import parse
from offlinerl.data_ops.select import WHERE_NAMES
from offlinerl.episodes import load_episodes
from tests.data_ops.builders import base, episode, write


@pytest.fixture(scope="module")
def data(tmp_path_factory, ray_session):
    root = tmp_path_factory.mktemp("edges")
    good = base(root / "base")
    no_files = root / "no-files"  # dataset.json, and the parquet files gone
    no_files.mkdir()
    shutil.copy(good / "dataset.json", no_files)
    no_rows = root / "no-rows"  # parquet files of no rows
    no_rows.mkdir()
    shutil.copy(good / "dataset.json", no_rows)
    pq.write_table(pq.read_table(good / "part-00000.parquet").slice(0, 0), no_rows / "part-00000.parquet")
    foreign = root / "foreign"  # an extra file of another dataset (float64 observations)
    shutil.copytree(good, foreign)
    other = write(root / "other", [episode(0)], obs_space=gym.spaces.Box(-100.0, 100.0, (2,), np.float64))
    shutil.copy(other / "part-00000.parquet", foreign / "part-99999.parquet")
    return {"base": good, "no-files": no_files, "no-rows": no_rows, "foreign": foreign, "root": root}


def _refused(capsys, argv: list[str], message: str, code: int = 2) -> str:
    assert main(["data", *argv]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert message in err, err
    return err


_OPS = [["filter", "{d}", "--top", "1", "-o", "{out}"], ["sample", "{d}", "--episodes", "1", "-o", "{out}"],
        ["split", "{d}", "--holdout", "0.5", "-o", "{out}"], ["mix", "{base}", "{d}", "-o", "{out}"],
        ["relabel", "{d}", "--scale", "2", "-o", "{out}"], ["dedup", "{d}", "-o", "{out}"],
        ["stats", "{d}", "-o", "{out}"]]


@pytest.mark.parametrize("which, message", [("no-files", "{d}: has no parquet files (only its dataset.json)"),
                                            ("no-rows", "{d}: its parquet files hold no episodes")])
@pytest.mark.parametrize("argv", _OPS, ids=[a[0] for a in _OPS])
def test_a_dataset_without_episodes_is_refused_by_every_op(data, tmp_path, capsys, which, message, argv):
    # dedup and relabel wrote a dataset of 0 episodes (exit 0); stats died with KeyError 'first'
    fill = {"d": str(data[which]), "base": str(data["base"]), "out": str(tmp_path / "out")}
    _refused(capsys, [a.format(**fill) for a in argv], message.format(**fill))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["filter", "{d}", "--bottom", "1", "-o", "{out}"], ["stats", "{d}"],
                                  ["dedup", "{d}", "-o", "{out}"]])
def test_a_file_of_other_columns_is_named_before_any_pass(data, tmp_path, capsys, argv):
    # was a ~58-line Ray traceback (ArrowTypeError) from the writing tasks
    fill = {"d": str(data["foreign"]), "out": str(tmp_path / "out")}
    err = _refused(capsys, [a.format(**fill) for a in argv], f"{data['foreign']}/part-99999.parquet: column 'obs': "
                   "expected list<fixed_size_list<float>[2]>, got list<fixed_size_list<double>[2]>")
    assert "not what" in err and "dataset.json declares" in err and "offlinerl validate" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["filter", "{d}", "--max-return", "inf", "-o", "{out}"], "filter: --max-return must be a finite number, got inf"),
    (["filter", "{d}", "--min-return", "nan", "-o", "{out}"], "filter: --min-return must be a finite number, got nan"),
    (["relabel", "{d}", "--clip=-inf,1", "-o", "{out}"], "relabel: --clip needs finite LO,HI"),
    (["relabel", "{d}", "--return-range", "inf", "-o", "{out}"], "--return-range must be a positive finite number"),
    (["sample", "{d}", "--episodes", "2", "--seed", "-1", "-o", "{out}"],
     "sample: --seed must be a non-negative integer, got -1"),
    (["split", "{d}", "--holdout", "0.5", "--seed", "-3", "-o", "{out}"], "split: --seed must be a non-negative"),
    (["mix", "{d}", "{d}", "--seed", "-1", "-o", "{out}"], "mix: --seed must be a non-negative integer"),
    (["mix", "{d}", "{d}", "--by", "steps", "-o", "{out}"], "mix: --by steps shares out --weights or --total"),
    (["mix", "{d}", "{d}", "--names", "a,b", "--weights", "1,1", "--total", "1", "-o", "{out}"],
     "mix: --total 1 is fewer episodes than the 2 inputs"),
    (["stats", "{d}", "-o", "{tmp}/card", "--png", "{tmp}/./card"], "are the same file; give each its own path"),
    (["filter", "{d}", "--where", "return", "-o", "{out}"], "--where: a predicate needs a comparison"),
    (["filter", "{d}", "--where", "length + 1", "-o", "{out}"], "this is not true or false: 'length + 1'"),
    (["filter", "{d}", "--where", "rewards", "-o", "{out}"], "'rewards' is a per-step column: use it inside an "
                                                             "aggregate, e.g. mean(rewards)"),
    (["filter", "{d}", "--where", "return ** 2 > 1", "-o", "{out}"],
     "--where: the operator ** is not allowed (allowed: numbers"),
    (["filter", "{d}", "--where", "return >", "-o", "{out}"], "--where: 'return >' is not a complete expression"),
    (["relabel", "{d}", "--terminal-when", "reward", "-o", "{out}"], "--terminal-when: a predicate needs a comparison"),
])
def test_bad_numbers_paths_and_predicates_are_refused_before_any_work(data, tmp_path, capsys, argv, message):
    # --max-return inf failed only at the end (JSON); nan was accepted; --seed -1 gave numpy's message; stats wrote
    # -o X and then failed on --png X; "return" kept every non-zero return
    fill = {"d": str(data["base"]), "out": str(tmp_path / "out"), "tmp": str(tmp_path)}
    err = _refused(capsys, [a.format(**fill) for a in argv], message.format(**fill))
    assert "column 0" not in err and "BinOp" not in err
    assert list(tmp_path.iterdir()) == []


def test_where_messages_quote_what_was_written():
    def err(text: str) -> str:
        with pytest.raises(ValueError) as exc:
            parse(text, names=WHERE_NAMES, columns=["rewards"], predicate=True, booleans=("terminated", "truncated"))
        return str(exc.value)

    assert err("return > 1 and x.y > 2") == ("--where: an attribute (x.y) is not allowed (allowed: numbers, 'strings', "
                                             "True/False, comparisons < <= > >= == !=, and/or/not, + - * /, abs(x), "
                                             "mean/sum/min/max/first/last(column) and name[INDEX]): 'x.y' in "
                                             "'return > 1 and x.y > 2'")
    assert err("first(rewards) % 2 == 0").startswith("--where: the operator % is not allowed")
    assert "'return > 1 and length'" in err("return > 1 and length") and "'length' in" in err("return > 1 and length")
    for ok in ("not terminated", "terminated and return > 2", "True", "return>1 and (length == 2 or truncated)"):
        parse(ok, names=WHERE_NAMES, columns=["rewards"], predicate=True, booleans=("terminated", "truncated"))


def test_ctrl_c_is_one_line_and_exit_130(data, tmp_path, capsys):
    # a real SIGINT while the command waits: reading --episodes from a FIFO that no one writes
    fifo = tmp_path / "ids"
    os.mkfifo(fifo)
    main_thread = threading.main_thread().ident
    timer = threading.Timer(1.0, signal.pthread_kill, (main_thread, signal.SIGINT))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        _refused(capsys, ["filter", str(data["base"]), "--episodes", str(fifo), "-o", str(tmp_path / "out")],
                 "offlinerl data filter: interrupted", code=130)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert not (tmp_path / "out").exists()


def test_a_closed_stdout_ends_quietly(data, capsys, monkeypatch):
    # `offlinerl data stats D | head -3` whose reader has gone: a BrokenPipeError traceback before
    read, write_end = os.pipe()
    os.close(read)
    with open(write_end, "w") as pipe:
        monkeypatch.setattr(sys, "stdout", pipe)
        assert main(["data", "stats", str(data["base"])]) == 141
        monkeypatch.undo()
    assert capsys.readouterr().err.strip() == ""


def test_counts_of_one_are_singular(data, tmp_path, capsys):
    assert main(["data", "filter", str(data["base"]), "--top", "1", "-o", str(tmp_path / "one")]) == 0
    out = capsys.readouterr().out
    assert "kept 1 of 10 episodes" in out and ": 1 episode, 2 steps, fingerprint" in out
    assert [e.id for e in load_episodes(tmp_path / "one")] == ["e9"]


def test_a_reward_function_that_raises_is_our_one_line_not_ray_datas_error_log(data, tmp_path, capsys):
    """Ray Data announces a failed task at ERROR, with a stack, before the command reports it; only our line stays.
    (Ray Data's handler writes to the stream it was given at import, so the records are watched where they pass.)"""
    import logging

    seen: list[logging.LogRecord] = []
    watcher = logging.Handler()
    watcher.emit = seen.append
    logging.getLogger("ray.data").addHandler(watcher)
    try:
        code = main(["data", "relabel", str(data["base"]), "--reward-fn", "tests.data_ops.rewards:raises", "-o",
                     str(tmp_path / "out")])
    finally:
        logging.getLogger("ray.data").removeHandler(watcher)
    err = capsys.readouterr().err
    assert code == 2 and "offlinerl data relabel: --reward-fn tests.data_ops.rewards:raises: raised RuntimeError" in err
    assert [r.getMessage()[:60] for r in seen if r.levelno >= logging.ERROR] == []
    assert not (tmp_path / "out").exists()
