"""``offlinerl ope`` of multi-agent data and checkpoints, per module (issue 25): each module is evaluated on its
own agent's rows with its own observation statistics. The exact equivalence: a module's rows of the per-module
report equal (every estimate, interval, ESS, FQE metric and flag) those of a single-agent OPE run on a dataset
made of that agent's rows alone, with a single-module checkpoint holding that module's weights and statistics.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from offlinerl.cli import main
from offlinerl.core import columns as C
from offlinerl.episodes import load_episodes, read_info, write_dataset
from offlinerl.evaluation.ope.fqe import FQEConfig
from offlinerl.evaluation.ope.run import OPEConfig, ope_checkpoints
from offlinerl.training.checkpoint import load_checkpoint, write_checkpoint
from tests.export.test_export_multi_module import AGENTS, EPISODES, STEPS, team_checkpoint, write_team_dataset
from tests.export.test_export_policy import write_untrained_checkpoint

FAST = ["--fqe-updates", "50", "--resamples", "20"]


def agent_dataset(team_data: Path, agent: str, path: Path) -> Path:
    """A single-agent dataset of ``agent``'s rows alone (``agent_id`` dropped)."""
    info = read_info(team_data)
    rows = [dataclasses.replace(e, agent_id=None) for e in load_episodes(team_data) if e.agent_id == agent]
    write_dataset(rows, path, observation_space=info.observation_space, action_space=info.action_space)
    return path


def module_checkpoint(team_ckpt: Path, module_id: str, path: Path, as_id: str = C.DEFAULT_MODULE_ID) -> Path:
    """A single-module checkpoint (its module named ``as_id``) holding module ``module_id``'s policy weights and
    observation statistics."""
    ckpt = load_checkpoint(team_ckpt)
    prefix = f"rl_modules.{module_id}."
    weights = {f"rl_modules.{as_id}.{k[len(prefix):]}": v for k, v in ckpt.module_state().items()
               if k.startswith(prefix)}
    meta = {k: v for k, v in ckpt.meta.to_json().items() if k not in ("format", "format_version", "files")}
    meta.update(module_ids=[as_id], connector_state=ckpt.module_connector_state(module_id))
    return write_checkpoint(path, {"learners": [{"learner": {"module": weights}}]}, meta)


@pytest.fixture(scope="module")
def team(tmp_path_factory, ray_session):
    """(two-agent dataset, its BC checkpoint of modules a0 and a1, root)."""
    root = tmp_path_factory.mktemp("ope-team")
    data = write_team_dataset(root / "data")
    return data, team_checkpoint(root / "bc", data), root


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main(["ope", *map(str, args)])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out, out.err


def test_each_module_equals_single_agent_ope_of_its_agents_rows(capsys, team, tmp_path):
    data, ckpt, root = team
    code, out, err = _run(capsys, ckpt, "--dataset", data, *FAST, "--out", tmp_path / "team.json")
    assert code == 0, err
    report = json.loads((tmp_path / "team.json").read_text())
    assert report["modules"] == [{"module_id": a, "episodes": EPISODES, "steps": EPISODES * STEPS,
                                  "value_range": [0.0, pytest.approx(100.0)]} for a in AGENTS]
    assert (report["episodes"], report["steps"]) == (2 * EPISODES, 2 * EPISODES * STEPS)
    (result,) = report["results"]
    assert "methods" not in result and [m["module_id"] for m in result["modules"]] == list(AGENTS)
    for entry in result["modules"]:
        agent = entry["module_id"]
        single_data = agent_dataset(data, agent, tmp_path / f"data-{agent}")
        single_ckpt = module_checkpoint(ckpt, agent, tmp_path / f"ckpt-{agent}")
        code, _, err = _run(capsys, single_ckpt, "--dataset", single_data, *FAST, "--out", tmp_path / f"{agent}.json")
        assert code == 0, err
        single = json.loads((tmp_path / f"{agent}.json").read_text())
        assert "modules" not in single and single["episodes"] == EPISODES  # the single-agent report, as before
        assert [r["method"] for r in entry["methods"]] == ["fqe", "is", "wis", "pdis", "dr"]
        assert all(r["estimate"] is not None for r in entry["methods"])
        assert entry["methods"] == single["results"][0]["methods"]  # exactly: estimates, intervals, ESS, flags
    a0, a1 = (entry["methods"] for entry in result["modules"])
    assert a0 != a1  # each module on its own rows


def test_a_module_acting_for_several_agents_counts_each_agents_episode(capsys, team, tmp_path):
    """Every row ``module_id: shared`` (parameter sharing): one module, evaluated on both agents' rows, each agent's
    episode an episode of its own; equal to single-agent OPE of the same episodes under distinct ids."""
    _, team_ckpt, _ = team
    data = write_team_dataset(tmp_path / "data", module_id="shared")
    ckpt = module_checkpoint(team_ckpt, "a0", tmp_path / "shared", as_id="shared")  # a0's policy acts for both
    code, _, err = _run(capsys, ckpt, "--dataset", data, *FAST, "--out", tmp_path / "shared.json")
    assert code == 0, err
    report = json.loads((tmp_path / "shared.json").read_text())
    assert [(m["module_id"], m["episodes"], m["steps"]) for m in report["modules"]] == [
        ("shared", 2 * EPISODES, 2 * EPISODES * STEPS)]
    info = read_info(data)
    rows = [dataclasses.replace(e, id=f"{e.id}-{e.agent_id}", agent_id=None, module_id=None)
            for e in load_episodes(data)]  # ep0-a0 < ep0-a1 < ep1-a0 ...: the order of (episode_id, agent_id)
    write_dataset(rows, tmp_path / "flat", observation_space=info.observation_space, action_space=info.action_space)
    single = module_checkpoint(team_ckpt, "a0", tmp_path / "single")
    code, _, err = _run(capsys, single, "--dataset", tmp_path / "flat", *FAST, "--out", tmp_path / "flat.json")
    assert code == 0, err
    flat = json.loads((tmp_path / "flat.json").read_text())
    assert flat["episodes"] == 2 * EPISODES
    assert report["results"][0]["modules"][0]["methods"] == flat["results"][0]["methods"]


def test_module_id_evaluates_one_module_as_the_full_run_does(capsys, team, tmp_path):
    data, ckpt, _ = team
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--method", "fqe,wis", *FAST, "--module-id", "a1",
                          "--out", tmp_path / "a1.json")
    assert code == 0, err
    report = json.loads((tmp_path / "a1.json").read_text())
    assert [m["module_id"] for m in report["modules"]] == ["a1"]
    (entry,) = report["results"][0]["modules"]
    assert entry["module_id"] == "a1" and [r["method"] for r in entry["methods"]] == ["fqe", "wis"]
    full = ope_checkpoints([ckpt], data, OPEConfig(methods=("fqe", "wis"), fqe=FQEConfig(num_updates=50),
                                                   num_resamples=20))
    assert full["results"][0]["modules"][1] == entry
    lines = out.splitlines()
    assert lines[0] == (f"dataset {data} (episodes per module: a1 {EPISODES}; each module on its own agent's rows, "
                        "the other agents part of the environment; γ = 0.99, 95% bootstrap intervals)")
    assert lines[1].split() == ["checkpoint", "module", "method", "policy", "estimate", "interval", "ESS"]
    assert lines[-1] == f"wrote {tmp_path / 'a1.json'}"
    assert [line.split()[1:3] for line in lines[2:-1] if not line.startswith("  !")] == [["a1", "fqe"], ["a1", "wis"]]
    progress = [line.split(" in ")[0] for line in err.splitlines() if "starting Ray" not in line]
    assert progress == [f"offlinerl ope: checkpoint 1/1 {ckpt}: fqe, wis on modules a1 ...",
                        f"offlinerl ope:   module a1: {EPISODES} episodes ...",
                        "offlinerl ope:   fqe: fitting Q̂ (50 updates) ...", "offlinerl ope:   fqe: fitted",
                        "offlinerl ope:   wis: done", "offlinerl ope: checkpoint 1/1 done"]


def test_refusals_are_one_line(capsys, team, tmp_path):
    data, ckpt, root = team
    code, out, err = _run(capsys, ckpt, "--dataset", data, "--module-id", "a9")
    assert code == 1 and not out and err == f"offlinerl ope: {ckpt} has no module 'a9'; it holds ['a0', 'a1']\n"
    info = read_info(data)
    single = write_untrained_checkpoint(tmp_path / "single", info.observation_space, info.action_space, "bc", True)
    code, out, err = _run(capsys, single, "--dataset", data)
    assert code == 1 and not out and err == (
        f"offlinerl ope: {single}: module 'default_policy' has no rows in {data} (its rows belong to the modules "
        "['a0', 'a1']: module_id, else agent_id)\n")
    a0_only = agent_dataset(data, "a0", tmp_path / "a0-data")
    code, out, err = _run(capsys, ckpt, "--dataset", a0_only)
    assert code == 1 and not out and err == (
        f"offlinerl ope: {ckpt}: module 'a0' has no rows in {a0_only} (its rows belong to the modules "
        "['default_policy']: module_id, else agent_id)\n")
    write_dataset([e for e in load_episodes(data) if e.agent_id == "a0"], tmp_path / "a0-rows",
                  observation_space=info.observation_space, action_space=info.action_space)
    code, out, err = _run(capsys, ckpt, "--dataset", tmp_path / "a0-rows")
    assert code == 1 and not out and err == (
        f"offlinerl ope: {ckpt}: module 'a1' has no rows in {tmp_path / 'a0-rows'} (its rows belong to the modules "
        "['a0']: module_id, else agent_id); evaluate a module that has rows with module_id (--module-id)\n")
    code, _, err = _run(capsys, ckpt, "--dataset", tmp_path / "a0-rows", "--module-id", "a0", *FAST, "--method", "fqe")
    assert code == 0, err


def test_help_names_the_module_option(capsys):
    with pytest.raises(SystemExit):
        main(["ope", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--module-id", "per module", "part of the environment"):
        assert words in text


def test_module_weights_of_the_single_module_copy_are_the_modules_own(team, tmp_path):
    """The equivalence's single-module checkpoint acts as the team checkpoint's module (a check of the helper)."""
    _, ckpt, _ = team
    copy = load_checkpoint(module_checkpoint(ckpt, "a1", tmp_path / "c"))
    team_module = load_checkpoint(ckpt).build_module(inference_only=True)["a1"]
    module = copy.build_module(inference_only=True)[C.DEFAULT_MODULE_ID]
    x = torch.randn(5, 2)
    torch.testing.assert_close(module.forward_inference({C.OBS: x})[C.ACTIONS],
                               team_module.forward_inference({C.OBS: x})[C.ACTIONS], rtol=0, atol=0)
    assert copy.connector_state == load_checkpoint(ckpt).module_connector_state("a1")
