"""The locomotion family: a tiny SAC agent trained on our online stack, the three D4RL levels made from it
(what each holds, step for step), seeded generation, cards and checksums, the shipped actors, and the suite
run at tiny size on the recorded task."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from offlinerl.benchmark import locomotion as L
from offlinerl.benchmark.cards import verify_checksums
from offlinerl.benchmark.suites import get_suite, published_scores
from offlinerl.cli import main
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.software import made_with
from offlinerl.episodes.validate import validate_dataset

HOPPER = L.TASKS["hopper"]
STEPS = 300


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, ray_session):
    """hopper's three levels from one tiny agent (trained once, in ``root/_agents``), and medium again."""
    root = tmp_path_factory.mktemp("loco")
    out = {level: L.generate_locomotion(f"hopper-{level}", root / f"hopper-{level}-tiny", steps=STEPS, agent="tiny")
           for level in L.LEVELS}
    out["again"] = L.generate_locomotion("hopper-medium", root / "again", steps=STEPS, agent="tiny")
    return root, out


def _steps(path):
    return sum(len(e) for e in load_episodes(path))


def test_the_levels_hold_what_the_recipe_says(tiny):
    root, out = tiny
    run = root / "_agents" / "hopper-tiny"
    random = json.loads((run / "policies" / "agents.json").read_text())["agents"]["hopper"]["references"]["random"]
    levels = L.select_levels(run, random)
    # expert = the final checkpoint; medium = the periodic one closest to 1/3 of its evaluation, from random
    assert levels["expert"]["iteration"] == L.AGENT_BUDGETS["tiny"].iterations
    candidates = [json.loads((p / "algorithm.json").read_text()) for p in (run / "checkpoints").iterdir()
                  if p.name != "final"]
    target = random + (levels["expert"]["eval_return"] - random) / 3
    best = min(candidates, key=lambda m: abs(m["last_eval"]["eval/return_mean"] - target))
    assert levels["medium"]["iteration"] == best["iteration"]
    for level, path in out.items():
        assert validate_dataset(path).ok, level
        assert verify_checksums(path) == []
        assert read_info(path).env_id == "Hopper-v5"
    # medium: at least STEPS steps of the medium policy, sampled (log-probs recorded), episodes ended
    medium = load_episodes(out["medium"])
    assert STEPS <= sum(len(e) for e in medium) < STEPS + 4 * 1000 and all(e.terminated or e.truncated for e in medium)
    assert all("action_logp" in e.extras for e in medium)
    # medium-expert: exactly the medium steps, then the expert's
    both = load_episodes(out["medium-expert"])
    assert [e.id for e in both[:len(medium)]] == [e.id for e in medium]
    for a, b in zip(both, medium):
        np.testing.assert_array_equal(a.actions, b.actions)
    assert {e.id.split("-")[0] for e in both[len(medium):]} == {"expert"}
    # medium-replay: the random warm-up and the online steps sampled up to the medium checkpoint
    budget = L.AGENT_BUDGETS["tiny"]
    replay = load_episodes(out["medium-replay"])
    assert sum(len(e) for e in replay if e.id.startswith("warmup")) == budget.warmup_steps
    assert sum(len(e) for e in replay if e.id.startswith("online")) == \
        levels["medium"]["iteration"] * budget.env_steps_per_iteration
    last = {}
    for e in replay:
        last[e.id] = e
    assert all(e.terminated or e.truncated for e in last.values())  # every episode ends (cut ones truncated)


def test_generation_is_seeded_and_the_card_holds_the_anchors(tiny):
    root, out = tiny
    a, b = (json.loads((out[k] / "card.json").read_text()) for k in ("medium", "again"))
    assert a["data_sha256"] == b["data_sha256"]
    record = json.loads((root / "_agents" / "hopper-tiny" / "policies" / "agents.json").read_text())["agents"]["hopper"]
    assert (a["random_return"], a["best_return"]) == (record["references"]["random"], record["expert"]["eval_return"])
    random, _ = L.measure_random_return(HOPPER)
    assert a["random_return"] == pytest.approx(random)
    assert a["published_name"] == "hopper-medium-v2" and "1/3" in (out["medium"] / "README.md").read_text()
    # what the bytes depend on is recorded: the same digest needs the same simulator, torch and CPU
    assert a["made_with"] == made_with() and a["made_with"]["packages"]["mujoco"].startswith("3.")
    assert f"MuJoCo {a['made_with']['packages']['mujoco']}" in (out["medium"] / "README.md").read_text()


def test_the_shipped_actors_load_as_tensors_and_act():
    if not (L.POLICIES / "agents.json").is_file():
        pytest.skip("no shipped agents in this checkout")
    from offlinerl.algorithms.sac import SACRLModule
    from offlinerl.core.rl_module import RLModuleSpec

    env = L._make_env(HOPPER)
    for name, task in L.TASKS.items():
        record, weights = L.load_agent(task)
        assert record["expert"]["eval_return"] > record["medium"]["eval_return"] > record["references"]["random"]
        e = L._make_env(task)
        spec = RLModuleSpec(SACRLModule, e.observation_space, e.action_space, {"hidden": record["agent"]["hidden"]})
        module = spec.build(inference_only=True)
        module.load_state_dict(weights["expert"])  # actor keys only: strict loading into the inference-only module
        obs = torch.zeros((1, e.observation_space.shape[0]))
        assert module.forward_inference({"obs": obs})["actions"].shape == (1, e.action_space.shape[0])
    env.close()


def test_the_suite_lists_nine_datasets_with_published_numbers():
    suite = get_suite("locomotion")
    assert len(suite.datasets) == 9 and suite.algorithms == ("bc", "td3bc", "cql", "iql", "rebrac")
    for d in suite.datasets:
        assert published_scores(d.published_name).keys() == {"bc", "td3bc", "cql", "iql", "rebrac", "edac"}
        for algorithm in (*suite.algorithms, "edac"):
            assert d.recipe(algorithm).name == f"locomotion-{algorithm}.yaml"
    assert published_scores("hopper-medium-replay-v2")["rebrac"] == 94.98
    assert published_scores("walker2d-medium-v2")["edac"] == 93.36
    # ReBRAC's BC coefficients are tuned per D4RL dataset in the paper's configs: each dataset gets its own
    own = {d.name: d.recipe_overrides for d in suite.datasets}
    assert own["hopper-medium-replay"] == {"rebrac": ("config.actor_bc_coef=0.05", "config.critic_bc_coef=0.5"),
                                           "edac": ("config.num_critics=50",)}
    # EDAC's: hopper's 50 critics, eta 5 on two medium-expert sets, the recipe's 10 critics and eta 1 elsewhere
    assert own["walker2d-medium-expert"]["edac"] == ("config.eta=5.0",) and own["walker2d-medium"]["edac"] == ()
    assert own["halfcheetah-medium"]["rebrac"] == ("config.actor_bc_coef=0.001", "config.critic_bc_coef=0.01")
    assert len({v["rebrac"] for v in own.values()}) == 8  # 9 datasets, 8 distinct pairs


def test_the_locomotion_suite_runs_at_tiny_size(tiny, tmp_path, capsys):
    root, _ = tiny  # its tiny agent is reused from root/_agents
    out = tmp_path / "bench"
    code = main(["benchmark", "locomotion", "--datasets", "hopper-medium", "--size", "tiny", "--algorithms", "bc,rebrac",
                 "--seeds", "0", "--updates", "20", "--eval-episodes", "1", "--data-dir", str(root), "-o", str(out),
                 "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| hopper-medium |" in captured.out and "[53.5]" in captured.out  # CORL's hopper-medium BC: 53.51
    cell = json.loads((out / "scores.json").read_text())["cells"]["hopper-medium/bc"]
    assert len(cell["runs"]) == 1 and cell["anchors"][1] > cell["anchors"][0]
    trial = next((out / "sweeps" / "hopper-medium-rebrac" / "trials").glob("*/config.yaml"))
    config = yaml.safe_load(trial.read_text())["config"]
    assert (config["actor_bc_coef"], config["critic_bc_coef"]) == (0.01, 0.01)
