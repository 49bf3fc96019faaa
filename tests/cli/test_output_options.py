"""``--quiet`` / ``-v`` / ``--log-level`` exist on every command (and every sub-command, e.g. ``convert minari``)."""

from __future__ import annotations

import argparse

from offlinerl.cli import build_parser, main


def _leaves(parser: argparse.ArgumentParser, name: str):
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not nested:
        yield name, parser
        return
    for child_name, child in nested[0].choices.items():
        yield from _leaves(child, f"{name} {child_name}".strip())


def test_every_command_has_the_output_options():
    leaves = dict(_leaves(build_parser(), ""))
    assert {"train", "validate", "ope", "convert minari", "finetune", "inspect"} <= set(leaves)
    for name, parser in leaves.items():
        options = {s for a in parser._actions for s in a.option_strings}
        assert {"--quiet", "-q", "--verbose", "-v", "--log-level"} <= options, name


def test_the_flags_parse_where_a_user_puts_them():
    args = build_parser().parse_args(["validate", "-v", "datasets/cartpole-mixed", "--log-level", "WARNING"])
    assert (args.verbose, args.log_level, args.quiet) == (1, "warning", False)


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(tmp_path, capsys):
    """A command without a Ctrl-C handler of its own (here convert table, waiting on a spec that is a FIFO no one
    writes) ends in one line and exit 130, not a traceback."""
    import os
    import signal
    import threading

    (tmp_path / "steps.csv").write_text("episode,t,obs,action,reward,done\n")
    os.mkfifo(tmp_path / "spec.yaml")
    timer = threading.Timer(1.0, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        assert main(["convert", "table", str(tmp_path / "steps.csv"), "--spec", str(tmp_path / "spec.yaml"), "-o",
                     str(tmp_path / "out")]) == 130
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err.strip().splitlines()[-1] == "offlinerl convert table: interrupted"
    assert not (tmp_path / "out").exists()


def test_a_closed_stdout_ends_any_command_quietly_with_exit_141(capsys, monkeypatch):
    """`offlinerl inspect D | head -1` whose reader has gone: a BrokenPipeError traceback before (only the data ops
    had their own handler); now any command ends as a C tool killed by SIGPIPE would, 128 + 13."""
    import os
    import sys

    read, write_end = os.pipe()
    os.close(read)
    with open(write_end, "w") as pipe:
        monkeypatch.setattr(sys, "stdout", pipe)
        assert main(["inspect", "datasets/cartpole-mixed", "-q"]) == 141
        monkeypatch.undo()
    assert capsys.readouterr().err.strip() == ""
