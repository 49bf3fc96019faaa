"""``--quiet`` / ``-v`` / ``--log-level`` exist on every command (and every sub-command, e.g. ``convert minari``)."""

from __future__ import annotations

import argparse

from offlinerl.cli import build_parser


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
