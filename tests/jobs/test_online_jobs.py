"""Online jobs on every scale axis and across a kill: 2 remote learners x 2 env runners on streaming offline
data behave like one in-process learner; a fine-tune killed with SIGKILL resumes from its newest checkpoint
(replay included) and ends exactly where the uninterrupted job ends; checkpoints keep the replay as a valid
episode dataset; the recording validates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from offlinerl.algorithms.iql import IQLConfig
from offlinerl.cli import main
from offlinerl.config_io import from_dict
from offlinerl.episodes import load_episodes
from offlinerl.episodes.validate import validate_dataset
from offlinerl.evaluation.acting import checkpoint_policy
from offlinerl.jobs.finetune import run_finetune
from offlinerl.jobs.spec import FinetuneSpec
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import load_checkpoint
from offlinerl.training.online_config import OnlineConfig
from tests.datagen import make_dataset
from tests.processes import kill_once_written



@pytest.fixture(scope="module")
def pendulum_iql(ray_session, tmp_path_factory):
    """A short IQL pretraining on 20 scripted Pendulum episodes (4000 steps), evaluated and saved."""
    root = tmp_path_factory.mktemp("online")
    data = make_dataset(root / "pendulum", env_id="Pendulum-v1", episodes=20, eps=0.3)
    config = IQLConfig.from_dict({"seed": 0, "updates_per_iteration": 50, "train_batch_size": 64,
                                  "model": {"hidden": [32, 32]}, "normalize_observations": True,
                                  "evaluation": {"episodes": 2, "seed": 100}})
    algo = Algorithm("iql", config, data)
    algo.train()
    algo.save_checkpoint(root / "ckpt")
    algo.stop()
    return root / "ckpt"


def _finetune_spec(checkpoint: Path, config: dict | None = None, online: dict | None = None, **extra) -> FinetuneSpec:
    return from_dict(FinetuneSpec, {
        "checkpoint": str(checkpoint),
        "config": {"updates_per_iteration": 10, "evaluation": {"episodes": 4, "seed": 100}, **(config or {})},
        "online": {"env_steps_per_iteration": 400, "num_envs": 2, "online_fraction": 0.5, **(online or {})},
        "stop": {"iterations": 2}, **extra,
    })


def test_two_remote_learners_two_runners_and_streaming_data_behave_like_one_learner(pendulum_iql, tmp_path):
    """The same fine-tune with one in-process learner (in-memory data, in-process runner), and with 2 DDP
    learners (each its own streaming shard and its own replay) fed by 2 EnvRunner actors."""
    quiet = lambda s: None  # noqa: E731
    one = run_finetune(_finetune_spec(pendulum_iql), run_dir=tmp_path / "one", progress=False, log=quiet)
    scaled = _finetune_spec(
        pendulum_iql,
        config={"num_learners": 2, "num_cpus_per_learner": 0.25, "data": {"mode": "streaming", "shuffle_buffer_size": 1000}},
        online={"num_env_runners": 2, "num_cpus_per_env_runner": 0.25},
        record=str(tmp_path / "recorded"),
    )
    two = run_finetune(scaled, run_dir=tmp_path / "two", progress=False, log=quiet)

    assert (two["iterations"], two["updates"], two["env_steps"]) == (one["iterations"], one["updates"], one["env_steps"])
    assert two["initial_eval_return"] == one["initial_eval_return"]  # the same checkpoint, the same evaluation
    state = torch.load(Path(two["checkpoint"]) / "learner_group.pt", weights_only=True)
    first, second = (s["learner"]["module"] for s in state["learners"])
    for key in first:
        assert torch.equal(first[key], second[key]), key  # DDP replicas identical, bit for bit
    sizes = [s["source"]["online"]["size"] for s in state["learners"]]
    assert sizes == [two["env_steps"] // 2] * 2  # each learner's replay holds its half of the online steps
    episodes = load_episodes(two["online_episodes"])
    assert {("-w1-" in e.id, "-w2-" in e.id) for e in episodes} == {(True, False), (False, True)}  # both runners
    assert validate_dataset(two["online_episodes"]).ok
    # Within noise of the one-learner run: 20 updates barely move either policy from where both started.
    scale = abs(one["initial_eval_return"])
    assert abs(two["final_eval_return"] - one["final_eval_return"]) < 0.05 * scale, (one["curve"], two["curve"])
    lines = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["online/replay_size"] == two["env_steps"] and lines[-1]["online/weights_seq_no"] == 2
    # result.json says where it ran: every learner and runner actor on a node of the cluster.
    nodes = two["ray_nodes"]
    assert (len(nodes["learners"]), len(nodes["env_runners"])) == (2, 2)
    assert set(nodes["learners"] + nodes["env_runners"] + [nodes["driver"]]) <= set(nodes["cluster"])
    assert one["ray_nodes"]["env_runners"] == [one["ray_nodes"]["driver"]]  # in-process runner


def _finetune_file(tmp_path: Path, checkpoint: Path, **online) -> Path:
    """Pendulum-v1: 200-step episodes, 200 env steps per iteration, one env: iterations end on episode
    boundaries. A replay of 300 transitions wraps, so its ring position must come back too."""
    spec = {"checkpoint": str(checkpoint),
            "config": {"updates_per_iteration": 10, "evaluation": {"episodes": 2, "seed": 100, "interval": 2}},
            "online": {"env_steps_per_iteration": 200, "num_envs": 1, "online_fraction": 0.5, "replay_capacity": 300,
                       **online},
            "stop": {"iterations": 6}, "checkpoint_interval": 1}
    path = tmp_path / "finetune.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _comparable(run: Path) -> list[dict]:
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(("perf/", "time/"))} for r in lines]


@pytest.mark.parametrize("gate", [{}, {"promotion": "gated", "gate_episodes": 1}], ids=["always", "gated"])
def test_kill_9_then_finetune_resume_equals_the_uninterrupted_job(pendulum_iql, tmp_path, capsys, gate):
    """Gated, the deployed policy, its score and the gate count come back too (what later gates compare)."""
    job = _finetune_file(tmp_path, pendulum_iql, **gate)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["finetune", str(job), "-o", str(whole), "--record", str(tmp_path / "whole-episodes"),
                 "--no-progress"]) == 0

    kill_once_written(["finetune", str(job), "-o", str(killed), "--record", str(tmp_path / "killed-episodes")],
                      killed / "checkpoints" / "iter-000003")
    assert not (tmp_path / "killed-episodes").exists()
    capsys.readouterr()

    assert main(["finetune", "--resume", str(killed), "--no-progress"]) == 0
    assert "resuming" in capsys.readouterr().out
    assert _comparable(killed) == _comparable(whole)
    a = json.loads((whole / "result.json").read_text())
    b = json.loads((killed / "result.json").read_text())
    for key in ("initial_eval_return", "final_eval_return", "updates", "env_steps", "curve", "gate"):
        assert a[key] == b[key], key
    sa, sb = (torch.load(r / "checkpoints" / "final" / "learner_group.pt", weights_only=True) for r in (whole, killed))
    wa, wb = sa["learners"][0], sb["learners"][0]
    for key, value in wa["learner"]["module"].items():
        assert torch.equal(value, wb["learner"]["module"][key]), key
    assert ("deployed" in sa) == ("deployed" in sb) == bool(gate)
    if gate:
        assert a["gate"]["gates"] == 6
        assert all(torch.equal(v, sb["deployed"][k]) for k, v in sa["deployed"].items())
    assert wa["source"]["online"] == wb["source"]["online"] == {"capacity": 300, "next": 0, "size": 300,
                                                                 "num_added": 1200}
    # The recording holds every step once, the resumed part included: the same steps as the whole job's.
    ea, eb = load_episodes(a["online_episodes"]), load_episodes(b["online_episodes"])
    assert validate_dataset(b["online_episodes"]).ok
    for column in ("obs", "actions", "rewards"):
        np.testing.assert_array_equal(np.concatenate([getattr(e, column) for e in ea]),
                                      np.concatenate([getattr(e, column) for e in eb]))


def test_a_checkpoint_keeps_the_replay_as_a_valid_dataset_and_restores_it_mid_episode(pendulum_iql, tmp_path):
    """150 env steps per iteration: checkpoints fall inside episodes. The replay's episodes still form a valid
    dataset (chunk indices renumbered), and a restored job writes the same replay and learner state again."""
    online = OnlineConfig(env_steps_per_iteration=150, num_envs=1, replay_capacity=250)
    algo = Algorithm.from_checkpoint(pendulum_iql, online=online, resume=False,
                                     overrides={"updates_per_iteration": 5, "evaluation": {"interval": 0}})
    for _ in range(3):
        algo.train()
    first = algo.save_checkpoint(tmp_path / "a")
    algo.stop()
    assert validate_dataset(first / "replay").ok
    ckpt = load_checkpoint(first)
    assert (ckpt.meta.env_steps, ckpt.meta.weights_seq_no, ckpt.meta.iteration) == (450, 3, 3)
    replay = ckpt.replay_episodes()
    assert replay.iterations == [2, 3]  # the oldest add left the 250-transition replay entirely
    again = Algorithm.from_checkpoint(first, online=online)
    assert (again.env_steps, again.weights_seq_no, again.iteration) == (450, 3, 3)
    second = again.save_checkpoint(tmp_path / "b")
    again.stop()
    sa, sb = (torch.load(p / "learner_group.pt", weights_only=True) for p in (first, second))
    assert sa["learners"][0]["source"]["online"] == sb["learners"][0]["source"]["online"]
    assert torch.equal(sa["learners"][0]["source"]["generator"], sb["learners"][0]["source"]["generator"])
    ra, rb = replay, load_checkpoint(second).replay_episodes()
    assert [len(g) for g in ra.groups] == [len(g) for g in rb.groups]
    for x, y in zip([e for g in ra.groups for e in g], [e for g in rb.groups for e in g]):
        assert (x.id, x.chunk_index, x.t_start) == (y.id, y.chunk_index, y.t_start)
        np.testing.assert_array_equal(x.obs, y.obs)
    # The replay is checked like the tensors file: a modified part is refused, never used.
    from offlinerl.training.checkpoint import CheckpointError

    part = next((second / "replay").glob("*.parquet"))
    part.write_bytes(part.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(CheckpointError, match="sha256"):
        load_checkpoint(second).replay_episodes()


def test_resuming_an_offline_checkpoint_as_an_online_job_is_refused(pendulum_iql):
    from offlinerl.training.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match="holds no online replay"):
        Algorithm.from_checkpoint(pendulum_iql, online=OnlineConfig(env_steps_per_iteration=10))


def test_config_overrides_of_a_checkpoint_merge_into_its_nested_settings(pendulum_iql):
    algo = Algorithm.from_checkpoint(pendulum_iql, resume=False, overrides={"evaluation": {"episodes": 3}})
    try:
        assert (algo.config.evaluation.episodes, algo.config.evaluation.seed) == (3, 100)  # the seed is kept
    finally:
        algo.stop()


def test_critic_warmup_holds_the_policy_while_the_critics_learn_then_releases_it(pendulum_iql):
    online = OnlineConfig(env_steps_per_iteration=100, num_envs=1, critic_warmup_iterations=2)
    algo = Algorithm.from_checkpoint(pendulum_iql, online=online, resume=False,
                                     overrides={"updates_per_iteration": 5, "evaluation": {"interval": 0}})
    try:
        def split(w):
            return ({k: v.clone() for k, v in w.items() if ".pi_" in f".{k}"},
                    {k: v.clone() for k, v in w.items() if ".q." in f".{k}" or ".v." in f".{k}"})

        pi0, critics0 = split(algo.learner_group.get_weights())
        assert pi0 and critics0
        held = [algo.train()["online/policy_held"] for _ in range(2)]
        pi2, critics2 = split(algo.learner_group.get_weights())
        assert held == [1.0, 1.0]
        assert all(torch.equal(pi0[k], pi2[k]) for k in pi0)  # the policy did not move ...
        assert any(not torch.equal(critics0[k], critics2[k]) for k in critics0)  # ... while the critics learned
        assert algo.train()["online/policy_held"] == 0.0
        pi3, _ = split(algo.learner_group.get_weights())
        assert any(not torch.equal(pi2[k], pi3[k]) for k in pi2)
    finally:
        algo.stop()


def _policy(weights: dict) -> dict:
    return {k: v.clone() for k, v in weights.items() if ".pi_" in f".{k}"}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_gate_that_is_never_passed_keeps_the_starting_policy_wherever_the_policy_is_read(pendulum_iql, tmp_path):
    """gate_margin 1e9: no candidate is ever deployed. The learners train on, but evaluation, the checkpoint's
    policy (evaluate/export read it), a new job from it and a resumed job all have the starting policy; gate
    episodes (both policies, fresh starts every gate) count as env steps."""
    online = OnlineConfig(env_steps_per_iteration=100, num_envs=1, promotion="gated", gate_episodes=2,
                          gate_margin=1e9)
    algo = Algorithm.from_checkpoint(pendulum_iql, online=online, resume=False,
                                     overrides={"updates_per_iteration": 5, "evaluation": {"interval": 0}})
    try:
        start = _policy(algo.eval_module.state_dict())
        metrics = [algo.train() for _ in range(2)]
        assert [m["online/promoted"] for m in metrics] == [0.0, 0.0]
        assert metrics[-1]["online/promotions"] == 0.0
        assert metrics[-1]["online/candidate_return"] != metrics[-1]["online/deployed_return"]
        assert algo.env_steps == 2 * 100 + 2 * 2 * 2 * 200  # sampling + 2 gates x 2 policies x 2 episodes
        assert metrics[-1]["online/env_steps"] == algo.env_steps
        learner = _policy(algo.learner_group.get_weights())
        assert not _same(learner, {k: v for k, v in start.items()})  # the learners moved on ...
        assert _same(_policy(algo.eval_module.state_dict()), start)  # ... the evaluated policy did not
        ckpt_path = algo.save_checkpoint(tmp_path / "gated")
    finally:
        algo.stop()
    ckpt = load_checkpoint(ckpt_path)
    assert _same(_policy(ckpt.build_module(inference_only=True).state_dict()), start)  # evaluate, export, ope
    factory, _, _ = checkpoint_policy(ckpt_path)  # collect --policy
    assert _same(_policy(factory.weights), {k.split("default_policy.", 1)[1]: v for k, v in start.items()})
    assert _same(_policy(ckpt.trained_module.state_dict()), learner)
    assert ckpt.meta.gate == {"score": metrics[-1]["online/deployed_return"], "gates": 2, "promotions": 0}
    fresh = Algorithm.from_checkpoint(ckpt_path, online=OnlineConfig(env_steps_per_iteration=100), resume=False)
    try:
        assert _same(_policy(fresh.learner_group.get_weights()), start)  # a new job starts from the deployed policy
    finally:
        fresh.stop()
    resumed = Algorithm.from_checkpoint(ckpt_path, online=online)
    try:
        assert (resumed.gate.score, resumed.gate.gates) == (metrics[-1]["online/deployed_return"], 2)
        assert _same(_policy(resumed.eval_module.state_dict()), start)
        assert _same(_policy(resumed.learner_group.get_weights()), learner)
    finally:
        resumed.stop()


def test_a_gate_with_nothing_to_beat_deploys_every_candidate_every_gate_interval(pendulum_iql):
    online = OnlineConfig(env_steps_per_iteration=100, num_envs=1, promotion="gated", gate_episodes=1,
                          gate_margin=-1e9, gate_interval=2)
    algo = Algorithm.from_checkpoint(pendulum_iql, online=online, resume=False,
                                     overrides={"updates_per_iteration": 5, "evaluation": {"interval": 0}})
    try:
        start = _policy(algo.eval_module.state_dict())
        first = algo.train()
        assert "online/promoted" not in first and algo.env_steps == 100  # no gate in iteration 1
        assert _same(_policy(algo.eval_module.state_dict()), start)
        second = algo.train()
        assert (second["online/promoted"], second["online/promotions"]) == (1.0, 1.0)
        assert algo.gate.score == second["online/candidate_return"]
        assert algo.env_steps == 200 + 2 * 200
        assert _same(_policy(algo.eval_module.state_dict()), _policy(algo.learner_group.get_weights()))
    finally:
        algo.stop()
