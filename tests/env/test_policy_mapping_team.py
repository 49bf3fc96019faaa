"""``policy_mapping`` in a real PettingZoo env (MPE simple_spread from mpe2): a BC job with one shared module for
every agent trains one module and evaluates the team with it, ``evaluate`` reproduces that, and the env check
refuses env agents the mapping leaves without a module."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from offlinerl.env.env_check import EnvMismatchError, check_team_env
from offlinerl.trusted import ENV_PACKAGES_VAR

pytest.importorskip("mpe2")

from tests.env.spread import AGENTS, KWARGS, SPREAD
from tests.env.spread import run_cli as _run


def test_the_env_check_maps_every_env_agent():
    from gymnasium.spaces import Box, Discrete

    obs, act = Box(-np.inf, np.inf, (18,), np.float32), Discrete(5)
    check_team_env(SPREAD, obs, act, ["shared"], KWARGS, policy_mapping="shared")
    check_team_env(SPREAD, obs, act, ["lead", "rest"], KWARGS, policy_mapping={"agent_0": "lead", "*": "rest"})
    with pytest.raises(EnvMismatchError, match=r"the agents \['agent_2'\] match no pattern of policy_mapping "
                                               r"\['agent_\[01\]'\]"):
        check_team_env(SPREAD, obs, act, ["a"], KWARGS, policy_mapping={"agent_[01]": "a"})
    with pytest.raises(EnvMismatchError, match="maps the agent agent_0 to the module 'lead', which is not trained"):
        check_team_env(SPREAD, obs, act, ["rest"], KWARGS, policy_mapping={"agent_0": "lead", "*": "rest"})


@pytest.mark.usefixtures("ray_session")
def test_a_shared_module_trains_on_every_agent_and_acts_for_the_team(tmp_path, capsys, monkeypatch):
    data = tmp_path / "spread"
    code, _, err = _run(capsys, "collect", "--env", SPREAD, "--env-kwargs", json.dumps(KWARGS), "--episodes", 4,
                        "--seed", 1, "-o", data, "--no-progress")
    assert code == 0, err
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data), "stop": {"iterations": 1},
        "config": {"policy_mapping": "shared", "updates_per_iteration": 10, "train_batch_size": 16,
                   "model": {"hidden": [16]}, "normalize_observations": True,
                   "evaluation": {"episodes": 2, "interval": 1}}}))
    monkeypatch.setenv(ENV_PACKAGES_VAR, "mpe2")
    code, out, err = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 0, out + err
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    agents = [last[f"eval/{a}/return_mean"] for a in AGENTS]
    assert last["eval/return_mean"] == pytest.approx(sum(agents), rel=1e-6)
    ckpt = tmp_path / "run" / "checkpoints" / "final"
    meta = json.loads((ckpt / "algorithm.json").read_text())
    assert meta["module_ids"] == ["shared"] and meta["config"]["policy_mapping"] == "shared"
    # one module's statistics, fitted on every agent's 4 x 10 steps
    assert meta["connector_state"]["NormalizeObservations"]["count"] == 3 * 4 * 10
    code, out, err = _run(capsys, "evaluate", ckpt, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["eval/return_mean"] == pytest.approx(last["eval/return_mean"], rel=1e-9)
    assert [result[f"eval/{a}/return_mean"] for a in AGENTS] == pytest.approx(agents, rel=1e-9)
    # OPE of the shared module: every agent's rows are its rows (the checkpoint's mapping), one episode per agent
    from offlinerl.evaluation.ope.fqe import FQEConfig
    from offlinerl.evaluation.ope.run import OPEConfig, ope_checkpoints

    report = ope_checkpoints([ckpt], data, OPEConfig(methods=("wis",), fqe=FQEConfig(num_updates=10)))
    assert report["modules"][0]["module_id"] == "shared" and report["modules"][0]["episodes"] == 12
    assert [m["module_id"] for m in report["results"][0]["modules"]] == ["shared"]
