"""TD3+BC through the real Algorithm / LearnerGroup / CLI on small datasets: training, evaluation,
exact resume across the delayed-update cycle, the Ray-free reference loop, discrete data refused."""

import copy
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from offlinerl.algorithms.td3bc import TD3BCConfig
from offlinerl.cli import main
from offlinerl.config_io import ConfigError
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    return {"box": make_dataset(root / "pendulum", env_id="Pendulum-v1", episodes=4, max_steps=40),
            "discrete": make_dataset(root / "cartpole", episodes=2)}


def _cfg(**kw):
    return TD3BCConfig.from_dict({"updates_per_iteration": 5, "train_batch_size": 32, "model": {"hidden": [16, 16]},
                                  "normalize_observations": True, "evaluation": {"episodes": 1, "interval": 2}, **kw})


def test_trains_evaluates_and_resumes_exactly_mid_cycle(ray_session, datasets, tmp_path):
    # 5 updates per iteration, actor every 2nd: the checkpoint falls between an update and its actor step
    a = Algorithm("td3bc", _cfg(), datasets["box"])
    try:
        a.train()
        a.save_checkpoint(tmp_path / "ckpt")
        m = a.train()
        assert m["learner/updates"] == 10 and "eval/return_mean" in m
        assert {k for k in m if k.startswith("losses/")} == {"losses/actor", "losses/critic"}
        assert all(np.isfinite(m[k]) for k in ("losses/actor", "losses/critic", "td3bc/lambda", "td3bc/bc_mse"))
        a.train()
        b = Algorithm.from_checkpoint(tmp_path / "ckpt")
        try:
            assert b.num_updates == 5 and b.learner_group.local_learner.timestep == 5
            b.train()
            b.train()
            wa, wb = a.learner_group.get_weights(), b.learner_group.get_weights()
            assert wa.keys() == wb.keys()
            for k in wa:
                assert torch.equal(wa[k], wb[k]), k  # bitwise, targets included
        finally:
            b.stop()
    finally:
        a.stop()


def test_reference_script_matches_the_ray_path(ray_session, datasets):
    spec = importlib.util.spec_from_file_location("reference_td3bc", EXAMPLES / "reference_td3bc.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    cfg = _cfg(updates_per_iteration=1, evaluation={"episodes": 1, "interval": 0})
    algorithm = Algorithm("td3bc", cfg, datasets["box"])
    try:
        arrays = algorithm.offline_data.load_arrays()
        ref_arrays, _ = ref.load_transitions(str(datasets["box"]), normalize=True)
        for k in arrays:
            np.testing.assert_array_equal(arrays[k], ref_arrays[k], err_msg=k)
        learner = algorithm.learner_group.local_learner
        module = copy.deepcopy(learner.module["default_policy"])
        optimizers = ref.make_optimizers(module, cfg)
        noise = torch.Generator().manual_seed(cfg.seed)  # the learner's generator: seeded with the job's seed
        for step in range(2):  # step 0: critic only; step 1: critic, actor, targets
            batch = {k: torch.as_tensor(v[32 * step:32 * (step + 1)]) for k, v in arrays.items()}
            ray_metrics = learner.update(batch)
            ref_metrics = ref.update(module, optimizers, batch, cfg, step, generator=noise)
            for name in ref_metrics:
                if name in ("critic", "actor"):
                    assert ray_metrics[f"losses/{name}"].item() == ref_metrics[name].item(), (step, name)
        ray_state = learner.module["default_policy"].state_dict()
        for k, v in module.state_dict().items():
            assert torch.equal(ray_state[k], v), k
    finally:
        algorithm.stop()


def test_discrete_actions_are_refused_before_any_setup(ray_session, datasets):
    with pytest.raises(ConfigError, match="continuous actions.*Discrete"):
        Algorithm("td3bc", _cfg(), datasets["discrete"])


def test_cli_train_tiny_budget_and_discrete_refusal(ray_session, datasets, tmp_path, capsys):
    def job(name, dataset):
        spec = {"algorithm": "td3bc", "dataset": str(dataset), "stop": {"updates": 12}, "output": str(tmp_path / "runs"),
                "config": {"updates_per_iteration": 6, "train_batch_size": 16, "normalize_observations": True,
                           "model": {"hidden": [16]}, "evaluation": {"episodes": 1, "interval": 1}}}
        (tmp_path / name).write_text(yaml.safe_dump(spec))
        return str(tmp_path / name)

    assert main(["train", job("ok.yaml", datasets["box"]), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["algorithm"] == "td3bc" and result["updates"] == 12 and result["final_eval_return"] is not None
    capsys.readouterr()
    assert main(["evaluate", result["checkpoint"], "--json", "--episodes", "1"]) == 0
    ev = json.loads(capsys.readouterr().out)  # same weights, preprocessing and seed as the job's final evaluation
    assert ev["eval/return_mean"] == pytest.approx(result["final_eval_return"], rel=1e-9)
    assert main(["train", job("bad.yaml", datasets["discrete"]), "--output", str(tmp_path / "bad"), "--no-progress"]) == 1
    assert "TD3+BC needs continuous actions" in capsys.readouterr().err


@pytest.mark.parametrize("dataset", ["pendulum", "double-pendulum"])
def test_shipped_job_files_load_with_their_config(dataset):
    from offlinerl.jobs.spec import load_job_spec

    job, config = load_job_spec(EXAMPLES.parent / "jobs" / f"{dataset}-td3bc.yaml")
    assert job.algorithm == "td3bc" and isinstance(config, TD3BCConfig)
    assert (EXAMPLES.parent / job.dataset / "card.json").is_file()  # scored against the card's anchors
    assert job.stop.updates and config.normalize_observations
