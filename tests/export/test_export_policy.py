"""An exported policy acts exactly as the Python inference path (``evaluate_module``: env-to-module
connectors -> ``forward_inference`` -> module-to-env) on 1,000 observations of every kind of space:
the ONNX file in onnxruntime, the TorchScript file in a process that never imports offlinerl.
Box actions within 1e-5, discrete actions identical, dtypes and shapes as the env expects."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.connectors import module_to_env_pipeline, observation_connectors
from offlinerl.core import columns as C
from offlinerl.core.flatten import flatten_batch
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.episodes import write_dataset
from offlinerl.episodes.spaces import space_to_json
from offlinerl.export import METADATA_KEY, export_policy, policy_inputs
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import class_path, load_checkpoint, write_checkpoint
from tests.episodes.builders import make_episode, sample_batch

N_OBS = 1000
ATOL = 1e-5
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(np.array([-2.0, -1.0], np.float32), np.array([2.0, 0.5], np.float32))
#: name -> (observation space, action space, algorithm, normalise observations). Box + CQL is trained by a
#: real ``Algorithm`` (a few updates); the others are written from freshly initialised modules with statistics
#: fitted on sampled observations, which exercises the same checkpoint reader in a fraction of the time.
CASES = {
    "box-cql": (gym.spaces.Box(-5.0, 5.0, (3,), np.float32), BOX, "cql", True),
    "box-td3bc": (gym.spaces.Box(-5.0, 5.0, (3,), np.float32), BOX, "td3bc", True),
    "box-rebrac": (gym.spaces.Box(-5.0, 5.0, (3,), np.float32), BOX, "rebrac", True),
    "discrete-bc": (gym.spaces.Discrete(5, start=-2), DISCRETE, "bc", True),
    "dict-cql": (gym.spaces.Dict({
        "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "mode": gym.spaces.Discrete(3),
        "flags": gym.spaces.MultiBinary(2),
    }), DISCRETE, "cql", True),
    "image-bc": (gym.spaces.Box(0, 255, (8, 8, 3), np.uint8), DISCRETE, "bc", False),
}
TRAINED = "box-cql"
CONFIG = {"updates_per_iteration": 3, "train_batch_size": 16, "model": {"hidden": [16], "cnn_channels": [4],
                                                                         "cnn_out": 16}, "evaluation": {"interval": 0}}


def train_checkpoint(path: Path, obs_space, act_space, algorithm: str, normalize: bool, ray_session) -> Path:
    """A handful of real updates on random episodes."""
    episodes = [make_episode(i, obs_space, act_space, steps=20) for i in range(3)]
    write_dataset(episodes, path.parent / "data", observation_space=obs_space, action_space=act_space)
    config = get_algorithm(algorithm).config_cls.from_dict({**CONFIG, "normalize_observations": normalize})
    algo = Algorithm(algorithm, config, path.parent / "data")
    algo.train()
    algo.save_checkpoint(path)
    algo.stop()
    return path


def write_untrained_checkpoint(path: Path, obs_space, act_space, algorithm: str, normalize: bool) -> Path:
    """What ``Algorithm.save_checkpoint`` writes, for a seeded fresh module and statistics of sampled observations."""
    spec = get_algorithm(algorithm)
    config = spec.config_cls.from_dict({**CONFIG, "normalize_observations": normalize})
    torch.manual_seed(0)
    module = MultiRLModuleSpec({C.DEFAULT_MODULE_ID: RLModuleSpec(spec.module_cls, obs_space, act_space,
                                                                  config.module_config())}).build()
    observations = observation_connectors(obs_space, normalize)
    if normalize:
        observations.normalize.fit(flatten_batch(sample_batch(obs_space, 50, seed=1), obs_space) * 0.5 + 0.1)
    meta = {"algorithm": algorithm, "config": config.to_dict(), "observation_space": space_to_json(obs_space),
            "action_space": space_to_json(act_space), "module_class": class_path(spec.module_cls),
            "module_ids": [C.DEFAULT_MODULE_ID], "learner_class": class_path(spec.learner_cls),
            "connector_state": observations.get_state(), "iteration": 0, "num_updates": 0}
    return write_checkpoint(path, {"learners": [{"learner": {"module": module.state_dict()}}]}, meta)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(checkpoint, 1,000 seeded observations of its space)."""
    obs_space, act_space, algorithm, normalize = CASES[request.param]
    path = tmp_path_factory.mktemp(request.param) / "ckpt"
    if request.param == TRAINED:
        train_checkpoint(path, obs_space, act_space, algorithm, normalize, request.getfixturevalue("ray_session"))
    else:
        write_untrained_checkpoint(path, obs_space, act_space, algorithm, normalize)
    return load_checkpoint(path), sample_batch(obs_space, N_OBS, seed=7)


def python_actions(ckpt, obs) -> np.ndarray:
    """The Python inference path, as ``evaluate_module`` acts."""
    module = ckpt.build_module(inference_only=True)[C.DEFAULT_MODULE_ID].eval()
    batch = ckpt.env_to_module()({C.OBS: obs})
    with torch.no_grad():
        out = module.forward_inference({C.OBS: torch.as_tensor(batch[C.OBS])})
    return module_to_env_pipeline(ckpt.action_space)({C.ACTIONS: out[C.ACTIONS]})[C.ACTIONS]


def input_arrays(space: gym.Space, obs) -> dict[str, np.ndarray]:
    """The exported file's inputs: each leaf of the observation batch under its input name."""
    out = {}
    for spec in policy_inputs(space):
        value = obs
        for key in filter(None, spec.path.split(".")):
            value = value[int(key)] if isinstance(value, tuple) else value[key]
        out[spec.name] = np.ascontiguousarray(value, dtype=spec.dtype)
    return out


def assert_same_actions(got: np.ndarray, expected: np.ndarray, space: gym.Space, label: str) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    if isinstance(space, gym.spaces.Discrete):
        np.testing.assert_array_equal(got, expected)
        print(f"{label}: {len(got)} discrete actions identical")
    else:
        diff = float(np.max(np.abs(got.astype(np.float64) - expected)))
        print(f"{label}: max abs diff {diff:.3g}")
        assert diff <= ATOL
        assert np.all(got >= space.low) and np.all(got <= space.high)


def test_onnx_in_onnxruntime_matches_the_python_path(case, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'offlinerl[export]')")
    pytest.importorskip("onnx", reason="onnx is not installed (pip install 'offlinerl[export]')")
    ckpt, obs = case
    file = export_policy(ckpt, tmp_path / "policy.onnx", "onnx")
    session = ort.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    meta = json.loads(session.get_modelmeta().custom_metadata_map[METADATA_KEY])
    assert [i.name for i in session.get_inputs()] == [i["name"] for i in meta["inputs"]]
    assert meta == json.loads(Path(f"{file}.json").read_text())
    (got,) = session.run(["actions"], input_arrays(ckpt.observation_space, obs))
    assert_same_actions(got, python_actions(ckpt, obs), ckpt.action_space, f"onnx {ckpt.algorithm}")


RUN_TORCHSCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np, torch
    folder = Path(sys.argv[1])
    extra = {"%s.json": ""}
    policy = torch.jit.load(str(folder / "policy.pt"), _extra_files=extra)
    meta = json.loads(extra["%s.json"])
    inputs = [torch.from_numpy(np.load(folder / (spec["name"] + ".npy"))) for spec in meta["inputs"]]
    np.save(folder / "actions.npy", policy(*inputs).numpy())  # no torch.no_grad() needed
    assert not any(m == "offlinerl" or m.startswith("offlinerl.") for m in sys.modules), "offlinerl was imported"
""" % (METADATA_KEY, METADATA_KEY))


def test_torchscript_without_offlinerl_matches_the_python_path(case, tmp_path):
    ckpt, obs = case
    export_policy(ckpt, tmp_path / "policy.pt", "torchscript")
    for name, array in input_arrays(ckpt.observation_space, obs).items():
        np.save(tmp_path / f"{name}.npy", array)
    subprocess.run([sys.executable, "-c", RUN_TORCHSCRIPT, str(tmp_path)], check=True, cwd=tmp_path,
                   env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}, timeout=120)
    got = np.load(tmp_path / "actions.npy")
    assert_same_actions(got, python_actions(ckpt, obs), ckpt.action_space, f"torchscript {ckpt.algorithm}")
