"""stats (the card's numbers, the PNG) and the ``offlinerl data`` / ``inspect`` command lines: help, one-line
refusals with exit code 2 and nothing written, lineage shown."""

from __future__ import annotations

import json

import pytest

from offlinerl.cli import attach_negative_lists, main
from offlinerl.data_ops import MixConfig, StatsConfig, dataset_card, mix_datasets
from offlinerl.episodes import load_episodes
from tests.data_ops.builders import base, lengths


@pytest.fixture(scope="module")
def data(tmp_path_factory, ray_session):
    return base(tmp_path_factory.mktemp("stats") / "base")


def test_card_counts_sources_and_coverage(data):
    card = dataset_card(data, StatsConfig(bins=10))
    assert (card["episodes"], card["steps"], card["by"]) == (10, lengths(range(10)), "behavior_level")
    assert card["sources"]["0"]["episodes"] == card["sources"]["1"]["episodes"] == 5
    assert card["sources"]["1"]["return_mean"] == 5.0  # e1, e3, e5, e7, e9
    # obs[t] = [i, t]: over obs[:T], dim 0 spans 0..9 and dim 1 spans 0..3 -> every step its own cell
    assert card["coverage"]["unique_states"] == card["coverage"]["unique_state_actions"] == card["steps"]
    assert card["fingerprint"] == card["recorded_fingerprint"]


def test_coverage_counts_repeats_once(data, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    mixed = mix_datasets([data, copy], tmp_path / "mixed", MixConfig(source_column=None)).path
    card = dataset_card(mixed)
    assert card["steps"] == 2 * lengths(range(10)) and card["coverage"]["unique_state_actions"] == lengths(range(10))


def test_stats_cli_writes_json_and_png(data, tmp_path, capsys):
    out, png = tmp_path / "card.json", tmp_path / "card.png"
    assert main(["data", "stats", str(data), "-o", str(out), "--png", str(png)]) == 0
    text = capsys.readouterr().out
    assert "sources (first value of 'behavior_level')" in text and "state-action cells" in text
    assert json.loads(out.read_text())["episodes"] == 10
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["data", "stats", str(data), "-o", str(out)]) == 2  # exists: refused before any work
    assert "already exists" in capsys.readouterr().err


def test_filter_cli_and_inspect_shows_the_lineage(data, tmp_path, capsys):
    out = tmp_path / "top"
    assert main(["data", "filter", str(data), "--top", "20%", "-o", str(out)]) == 0
    assert "kept 2 of 10 episodes (return mean 4.5 -> 8.5)" in capsys.readouterr().out
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "lineage (2 step(s), oldest first):" in text and "filter(top=20%, rank_by=return)" in text


def test_a_negative_list_after_an_option_is_its_value(data, tmp_path, capsys):
    # the help's own example, --clip -1,1: argparse took "-1,1" for an option ("expected one argument")
    out = tmp_path / "r"
    assert main(["data", "relabel", str(data), "--scale", "2", "--shift", "-1", "--clip", "-0.5,10", "-o", str(out)]) == 0
    rewards = {e.id: e.rewards.tolist() for e in load_episodes(out)}
    assert rewards["e3"] == [5.0, -0.5] and rewards["e7"] == [10.0, -0.5, -0.5]   # 2r - 1, clipped
    assert attach_negative_lists(["--clip", "-1,1", "--weights", "-1e-3,2", "--shift", "-1", "--", "--x", "-1,2"]) \
        == ["--clip=-1,1", "--weights=-1e-3,2", "--shift", "-1", "--", "--x", "-1,2"]
    assert attach_negative_lists(["--clip=-1,1", "-o", "-1,1"]) == ["--clip=-1,1", "-o", "-1,1"]


@pytest.mark.parametrize("args, message", [
    (["filter", "{data}", "--top", "20%", "-o", "{data}"], "refusing to write here: it is an input"),
    (["filter", "{data}", "--where", "open('x')", "-o", "{out}"], "--where: only abs(x) and"),
    (["filter", "{data}", "--episodes", "{tmp}/missing.txt", "-o", "{out}"], "--episodes {tmp}/missing.txt: cannot be read"),
    (["filter", "{tmp}/nope", "--top", "1", "-o", "{out}"], "{tmp}/nope: not a dataset directory"),
    (["mix", "{data}", "-o", "{out}"], "give at least two input datasets"),
    (["split", "{data}", "--fractions", "a=0.5,b=0.6", "-o", "{out}"], "sum to 1"),
    (["relabel", "{data}", "--reward-fn", "os.system", "-o", "{out}"], "expected module:function"),
    (["sample", "{data}", "--episodes", "0", "-o", "{out}"], "--episodes must be >= 1"),
])
def test_refusals_are_one_line_exit_2_and_write_nothing(data, tmp_path, capsys, args, message):
    fill = {"data": str(data), "out": str(tmp_path / "out"), "tmp": str(tmp_path)}
    before = sorted(p.name for p in data.iterdir())
    assert main(["data", *(a.format(**fill) for a in args)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and message.format(**fill) in err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in data.iterdir()) == before


def test_help_lists_every_operation(capsys):
    with pytest.raises(SystemExit):
        main(["data", "--help"])
    text = capsys.readouterr().out
    assert all(op in text for op in ("filter", "sample", "split", "mix", "relabel", "dedup", "stats"))
