"""``offlinerl ope``: help, the table and JSON report, and one-line refusals with exit 1."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.cli import main
from offlinerl.episodes import write_dataset
from tests.episodes.builders import make_episode
from tests.export.test_export_policy import write_untrained_checkpoint

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ope-cli")
    write_dataset([make_episode(i, OBS, ACT, steps=15, truncated=True) for i in range(6)], root / "data",
                  observation_space=OBS, action_space=ACT)
    return root / "data", write_untrained_checkpoint(root / "ckpt", OBS, ACT, "iql", True)


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main(["ope", *map(str, args)])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out, out.err


def test_help_names_methods_and_policies(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ope", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0
    for words in ("--dataset", "--method", "--out", "fqe", "wis", "pdis", "action_logp", "forward_inference",
                  "forward_exploration", "bootstrap"):
        assert words in text


def test_prints_a_table_and_writes_strict_json(capsys, inputs, tmp_path):
    data, ckpt = inputs
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--method", "fqe,wis", "--fqe-updates", "50",
                          "--resamples", "20", "--out", tmp_path / "r.json")
    assert code == 0, err
    assert "fqe" in out and "skipped: the dataset records no action_logp" in out
    report = json.loads((tmp_path / "r.json").read_text())
    fqe, wis = report["results"][0]["methods"]
    assert fqe["method"] == "fqe" and fqe["ci_low"] <= fqe["estimate"] <= fqe["ci_high"] and fqe["episodes"] == 6
    assert wis["estimate"] is None and wis["skipped"]


@pytest.mark.parametrize("case", ["missing-checkpoint", "not-a-dataset", "bad-method", "other-spaces"])
def test_bad_inputs_are_one_line(capsys, inputs, tmp_path, case):
    data, ckpt = inputs
    args = {"missing-checkpoint": [tmp_path / "nope", "--dataset", data],
            "not-a-dataset": [ckpt, "--dataset", tmp_path],
            "bad-method": [ckpt, "--dataset", data, "--method", "fqe,magic"],
            "other-spaces": [write_untrained_checkpoint(tmp_path / "c", gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
                                                        ACT, "bc", False), "--dataset", data]}[case]
    code, out, err = _run(capsys, *args)
    assert code == (2 if case == "bad-method" else 1)
    assert err.startswith("offlinerl ope: ") and err.count("\n") == 1 and not out


def test_holdout_scores_only_the_episodes_a_job_held_out(capsys, inputs, tmp_path):
    data, ckpt = inputs
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--method", "fqe", "--fqe-updates", "20", "--resamples",
                          "10", "--holdout", "0.34", "--holdout-seed", "3", "--out", tmp_path / "r.json")
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["methods"][0]["episodes"] == 2  # round(6·0.34)
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--holdout", "1.5")
    assert code == 2 and "data.holdout.fraction" in err and len(err.strip().splitlines()) == 1


def test_progress_per_checkpoint_and_method_and_flags_in_table_and_json(capsys, inputs, tmp_path):
    """Progress lines on stderr (per checkpoint, per method); FQE at 50 updates (5 backups) is flagged as not
    converged, with the criterion and the updates that would meet it, in the table and in the JSON."""
    data, ckpt = inputs
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--method", "fqe", "--fqe-updates", "50",
                          "--resamples", "20", "--out", tmp_path / "r.json")
    assert code == 0, err
    progress = [line for line in err.splitlines() if "starting Ray" not in line]
    assert [line.split(" in ")[0] for line in progress] == [
        f"offlinerl ope: checkpoint 1/1 {ckpt}: fqe on 6 episodes ...",
        "offlinerl ope:   fqe: fitting Q̂ (50 updates) ...",
        "offlinerl ope:   fqe: fitted",
        "offlinerl ope: checkpoint 1/1 done"]
    flag = ("FQE not converged: 5 backups reach 1 − γ^5 = 0.05 of the horizon (criterion: >= 0.95); "
            "use --fqe-updates 2990 or more")
    assert out.splitlines()[2].endswith(" !") and out.splitlines()[3] == f"  ! fqe: {flag}"
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["results"][0]["methods"][0]["flags"] == [flag]
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--method", "fqe", "--fqe-updates", "20",
                          "--resamples", "10", "--quiet")
    assert code == 0 and err == ""


def test_flags_name_the_range_the_ess_and_convergence():
    from offlinerl.evaluation.ope.run import flags

    pdis = {"method": "pdis", "estimate": 117.99, "episodes": 200, "ess": 40.0}
    assert flags(pdis, (0.0, 100.0), 0.99) == [
        "117.99 is outside the feasible range [0.00, 100.00] of discounted returns (the dataset's rewards / (1 − γ)): "
        "not a value any policy can have"]
    is_row = {"method": "is", "estimate": 0.0, "episodes": 200, "ess": 1.06}
    assert flags(is_row, (0.0, 100.0), 0.99) == [
        "low effective sample size: ESS 1.06 of 200 episodes (under 10% or 5): a few episodes' weights decide the "
        "estimate and its interval"]
    fqe = {"method": "fqe", "estimate": 59.0, "episodes": 200, "fqe/horizon_reached": 1 - 0.99 ** 100,
           "fqe/iterations": 100, "fqe/updates": 1000}
    assert flags(fqe, (0.0, 100.0), 0.99) == [
        "FQE not converged: 100 backups reach 1 − γ^100 = 0.63 of the horizon (criterion: >= 0.95); "
        "use --fqe-updates 2990 or more"]
    assert flags({**fqe, "fqe/horizon_reached": 1 - 0.99 ** 1000, "fqe/iterations": 1000, "fqe/updates": 10000},
                 (0.0, 100.0), 0.99) == []
