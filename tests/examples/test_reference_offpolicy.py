"""The Ray-free reference scripts (examples/reference_cql.py, reference_iql.py) and the Ray path
(Algorithm: Ray Data transitions, LearnerGroup, Learner) compute identical data, losses and updates."""

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from offlinerl.algorithms.cql import CQLConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    return {"box": make_dataset(root / "pendulum", env_id="Pendulum-v1", episodes=6, max_steps=30),
            "discrete": make_dataset(root / "cartpole", episodes=6)}


CASES = [("iql", "box", IQLConfig, {}), ("iql", "discrete", IQLConfig, {}),
         ("cql", "box", CQLConfig, {"lagrangian": True, "bc_warmup_updates": 1}), ("cql", "discrete", CQLConfig, {})]


@pytest.mark.parametrize("algo,kind,cfg_cls,extra", CASES)
def test_reference_script_matches_the_ray_path(ray_session, datasets, algo, kind, cfg_cls, extra):
    ref = _load(f"reference_{algo}")
    cfg = cfg_cls.from_dict({"train_batch_size": 32, "model": {"hidden": [16, 16]}, "normalize_observations": True,
                             "updates_per_iteration": 1, "evaluation": {"episodes": 1, "interval": 0}, **extra})
    algorithm = Algorithm(algo, cfg, datasets[kind])
    try:
        ray_arrays = algorithm.offline_data.load_arrays()  # Ray Data: read_parquet -> map_batches -> normalise
        ref_arrays, _ = ref.load_transitions(str(datasets[kind]), normalize=True)
        assert ray_arrays.keys() == ref_arrays.keys()
        for k in ray_arrays:
            np.testing.assert_array_equal(ray_arrays[k], ref_arrays[k], err_msg=k)

        learner = algorithm.learner_group.local_learner
        module = copy.deepcopy(learner.module["default_policy"])  # same initial weights
        optimizers = ref.make_optimizers(module, cfg)
        assert set(optimizers) == {name for _, name in learner._optimizers}
        for step in range(2):  # step 0 runs the CQL BC warm-up, step 1 the SAC actor loss
            batch = {k: torch.as_tensor(v[32 * step:32 * (step + 1)]) for k, v in ray_arrays.items()}
            torch.manual_seed(100 + step)
            ray_metrics = learner.update(batch)
            torch.manual_seed(100 + step)
            ref_metrics = ref.update(module, optimizers, batch, cfg, step) if algo == "cql" else ref.update(module, optimizers, batch, cfg)
            for name in optimizers:
                assert ray_metrics[f"losses/{name}"].item() == ref_metrics[name].item(), name
        ray_state = learner.module["default_policy"].state_dict()
        for k, v in module.state_dict().items():
            assert torch.equal(ray_state[k], v), k
    finally:
        algorithm.stop()
