"""ReBRAC through the real Algorithm / LearnerGroup on a small dataset: the Ray-free reference loop and
the Ray path compute the same transitions (next actions included), losses and weights; both data modes
hand the learner the next-action columns; the shipped job file loads. (Training, checkpoints, exact
resume and streaming for every algorithm: test_contract.py.)"""

import copy
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from offlinerl.algorithms.rebrac import ReBRACConfig
from offlinerl.config_io import ConfigError
from offlinerl.core import columns as C
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    return {"box": make_dataset(root / "pendulum", env_id="Pendulum-v1", episodes=4, max_steps=40),
            "discrete": make_dataset(root / "cartpole", episodes=2)}


def _cfg(**kw):
    return ReBRACConfig.from_dict({"updates_per_iteration": 1, "train_batch_size": 32, "model": {"hidden": [16, 16]},
                                   "normalize_observations": True, "evaluation": {"episodes": 1, "interval": 0}, **kw})


def test_reference_script_matches_the_ray_path(ray_session, datasets):
    spec = importlib.util.spec_from_file_location("reference_rebrac", ROOT / "examples" / "reference_rebrac.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    cfg = _cfg(critic_bc_coef=0.5)
    algorithm = Algorithm("rebrac", cfg, datasets["box"])
    try:
        arrays = algorithm.offline_data.load_arrays()
        ref_arrays, _ = ref.load_transitions(str(datasets["box"]), normalize=True)
        assert arrays.keys() == ref_arrays.keys() and {C.NEXT_ACTIONS, C.HAS_NEXT_ACTIONS} <= arrays.keys()
        for k in arrays:
            np.testing.assert_array_equal(arrays[k], ref_arrays[k], err_msg=k)
        assert arrays[C.HAS_NEXT_ACTIONS].sum() == len(arrays[C.OBS]) - 4  # 4 truncated episodes of 40 steps
        learner = algorithm.learner_group.local_learner
        module = copy.deepcopy(learner.module["default_policy"])
        optimizers = ref.make_optimizers(module, cfg)
        noise = torch.Generator().manual_seed(cfg.seed)  # the learner's generator: seeded with the job's seed
        for step in range(2):  # step 0: critic only; step 1: critic, actor, targets
            batch = {k: torch.as_tensor(v[32 * step:32 * (step + 1)]) for k, v in arrays.items()}
            ray_metrics = learner.update(batch)
            ref_metrics = ref.update(module, optimizers, batch, cfg, step, generator=noise)
            for name in ("critic", "actor"):
                if name in ref_metrics:
                    assert ray_metrics[f"losses/{name}"].item() == ref_metrics[name].item(), (step, name)
            assert ray_metrics["rebrac/critic_penalty"].item() == ref_metrics["rebrac/critic_penalty"].item()
        ray_state = learner.module["default_policy"].state_dict()
        for k, v in module.state_dict().items():
            assert torch.equal(ray_state[k], v), k
    finally:
        algorithm.stop()


def test_streaming_batches_carry_the_next_actions(ray_session, datasets):
    algorithm = Algorithm("rebrac", _cfg(data={"mode": "streaming", "shuffle_buffer_size": 64}), datasets["box"])
    try:
        assert algorithm.offline_data.mode == "streaming"
        m = algorithm.train()
        assert m["learner/updates"] == 1 and np.isfinite(m["rebrac/critic_penalty"]) and m["rebrac/critic_penalty"] > 0
    finally:
        algorithm.stop()


def test_discrete_actions_are_refused_before_any_setup(ray_session, datasets):
    with pytest.raises(ConfigError, match="ReBRAC needs continuous actions.*Discrete"):
        Algorithm("rebrac", _cfg(), datasets["discrete"])


def test_shipped_job_file_loads_with_its_config():
    from offlinerl.jobs.spec import load_job_spec

    job, config = load_job_spec(ROOT / "jobs" / "pendulum-rebrac.yaml")
    assert job.algorithm == "rebrac" and isinstance(config, ReBRACConfig)
    assert (ROOT / job.dataset / "card.json").is_file()  # scored against the card's anchors
    assert job.stop.updates and config.normalize_observations


@pytest.mark.parametrize("actor_lr,bc,saturates", [(1e-2, 0.0, True), (1e-3, 0.1, False)])
def test_a_job_says_once_when_its_actor_runs_to_the_action_bounds(ray_session, tmp_path, capsys, actor_lr, bc,
                                                                  saturates):
    """With no BC weight and a large actor step the actor reaches tanh's flat ends within a few dozen updates on the
    shipped Pendulum set (4% of its actions within 1% of a bound); the job says so once, naming the setting to change."""
    import yaml

    from offlinerl.cli import main

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "rebrac", "dataset": str(ROOT / "datasets" / "pendulum-mixed"),
        "config": {"updates_per_iteration": 40, "train_batch_size": 256, "model": {"hidden": [64, 64]},
                   "actor_lr": actor_lr, "actor_bc_coef": bc, "normalize_observations": False, "evaluation": {"episodes": 1, "interval": 0}},
        "stop": {"iterations": 3}}))
    assert main(["train", str(job), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.count("the actor is at the action bounds") == (1 if saturates else 0)
    if saturates:
        assert "raise config.actor_bc_coef" in out and "against 4% of the data's (rebrac/actor_at_bounds)" in out
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(0.03 < x["rebrac/data_at_bounds"] < 0.05 for x in lines if "rebrac/data_at_bounds" in x)
