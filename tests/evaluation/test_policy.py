"""``load_policy(checkpoint).predict(obs)`` (src/offlinerl/evaluation/policy.py): the actions the job's own policy takes
(the act step, with the job's observation statistics), for one observation or a batch, Discrete and Box, with no
dataset and without importing Ray."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.algorithms.algorithm_config import EvaluationConfig
from offlinerl.algorithms.bc import BCConfig
from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.env.policies import act
from offlinerl.evaluation.policy import load_policy
from offlinerl.training.algorithm import Algorithm

DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def _observations(env_id: str, n: int) -> np.ndarray:
    env = gym.make(env_id)
    return np.stack([env.reset(seed=i)[0] for i in range(n)])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, ray_session):
    """A BC checkpoint on CartPole (Discrete actions) and one on Pendulum with normalised observations (Box), each
    trained 20 updates on a copy of the shipped dataset that is deleted once the checkpoint is written."""
    tmp = tmp_path_factory.mktemp("policies")
    out = {}
    for name, env_id, normalize in (("cartpole-mixed", "CartPole-v1", False), ("pendulum-mixed", "Pendulum-v1", True)):
        data = shutil.copytree(DATASETS / name, tmp / f"data-{name}")
        config = BCConfig(updates_per_iteration=20, train_batch_size=64, normalize_observations=normalize,
                          evaluation=EvaluationConfig(interval=0))
        algo = Algorithm("bc", config, data)
        algo.train()
        obs = _observations(env_id, 5)
        expected = act(algo.eval_module[C.DEFAULT_MODULE_ID], algo.env_to_module,
                       module_to_env_pipeline(algo.offline_data.action_space), obs)["actions"]
        path = algo.save_checkpoint(tmp / f"ckpt-{name}")
        algo.stop()
        shutil.rmtree(data)
        out[name] = (path, obs, expected)
    return out


@pytest.mark.parametrize("name,dtype,shape", [("cartpole-mixed", np.int64, (5,)), ("pendulum-mixed", np.float32, (5, 1))])
def test_predict_is_the_job_policy(checkpoints, name, dtype, shape):
    path, obs, expected = checkpoints[name]
    policy = load_policy(path)
    batch = policy.predict(obs)
    assert batch.dtype == dtype and batch.shape == shape
    np.testing.assert_array_equal(batch, expected)
    one = policy.predict(obs[0])
    assert one.shape == shape[1:]
    np.testing.assert_allclose(one, expected[0], rtol=1e-5)  # a batch of 1 rounds like a batch of 5, nearly
    np.testing.assert_array_equal(policy.predict(obs[:1]), policy.predict(obs[0])[None])
    if name == "pendulum-mixed":
        assert np.all(np.abs(batch) <= 2.0)
    empty = policy.predict(obs[:0])  # no observations, no actions (as the ONNX and TorchScript exports answer)
    assert empty.dtype == dtype and empty.shape == (0, *shape[1:])
    broken = obs.astype(np.float64)
    broken[2, 0] = np.nan
    with pytest.raises(ValueError, match="the observation holds NaN"):
        policy.predict(broken)


def test_predict_needs_no_dataset_and_no_ray(checkpoints, tmp_path):
    path, obs, expected = checkpoints["pendulum-mixed"]
    script = (
        "import json, sys\nimport numpy as np\nfrom offlinerl import load_policy\n"
        f"policy = load_policy({str(path)!r})\n"
        f"actions = policy.predict(np.array({obs.tolist()!r}, dtype=np.float32))\n"
        "print(json.dumps({'ray': sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')),"
        " 'actions': actions.tolist()}))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["ray"] == []
    # the same weights and statistics; float rounding may differ with the process's torch thread count
    np.testing.assert_allclose(np.array(got["actions"], dtype=np.float32), expected, rtol=1e-5)


def test_a_wrong_observation_is_one_clear_error(checkpoints):
    policy = load_policy(checkpoints["cartpole-mixed"][0])
    with pytest.raises(ValueError, match=r"^observation of shape \(3,\) for the observation space Box\(.*\): give one "
                                         r"observation of shape \(4,\) or a batch of shape \(B, 4\)$"):
        policy.predict(np.zeros(3))


def test_one_observation_or_a_batch_of_any_space():
    from offlinerl.evaluation.policy import _as_batch, _is_single

    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "door": gym.spaces.Discrete(3)})
    one = {"pos": np.zeros(2, np.float32), "door": 1}
    assert _is_single(space, one) is True
    batch = _as_batch(space, one, True)
    assert batch["pos"].shape == (1, 2) and batch["door"].tolist() == [1]
    assert _is_single(space, {"pos": np.zeros((4, 2)), "door": np.array([0, 1, 2, 0])}) is False
    with pytest.raises(ValueError, match="some parts of the observation are one observation and others a batch"):
        _is_single(space, {"pos": np.zeros((4, 2)), "door": 1})
    with pytest.raises(ValueError, match=r"a Dict observation is a dict with the keys \['door', 'pos'\], got \['pos'\]"):
        _is_single(space, {"pos": np.zeros(2)})
    assert _is_single(gym.spaces.Discrete(2), 1) is True and _is_single(gym.spaces.Discrete(2), [0, 1]) is False
    tup = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (3,))))
    assert _is_single(tup, (1, np.ones(3))) is True
    assert [v.shape for v in _as_batch(tup, (1, np.ones(3)), True)] == [(1,), (1, 3)]
