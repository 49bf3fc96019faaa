"""What the multi-agent tests share: MPE simple_spread (mpe2) at a tiny size, and the CLI run without a traceback."""

from __future__ import annotations

from offlinerl.cli import main

SPREAD = "pettingzoo:mpe2.simple_spread_v3"
KWARGS = {"N": 3, "max_cycles": 10}
AGENTS = ["agent_0", "agent_1", "agent_2"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``offlinerl ARGV``: exit code, stdout, stderr; never a traceback."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.out, captured.err
