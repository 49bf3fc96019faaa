"""Learning on the shipped datasets through the real Algorithm (Ray Data, Learner, evaluation).

Short budgets with small networks (each test well under ~90 s on 2 busy cores); the
thresholds are normalised scores (0 = random policy, 100 = best behaviour level of the card)
well above what an untrained policy gets. The full-size results are in benchmarks/README.md.
"""

from pathlib import Path

import pytest

from offlinerl.algorithms.algorithm import Algorithm
from offlinerl.algorithms.cql import CQLConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.scoring import score_for_dataset

DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def _train(name, cfg, dataset, iterations):
    algorithm = Algorithm(name, cfg, DATASETS / dataset)
    try:
        for _ in range(iterations):
            algorithm.train()
        ret = algorithm.evaluate()["eval/return_mean"]
    finally:
        algorithm.stop()
    return score_for_dataset(ret, DATASETS / dataset)


@pytest.mark.slow
def test_discrete_cql_learns_cartpole(ray_session):
    cfg = CQLConfig.from_dict({"seed": 0, "train_batch_size": 128, "updates_per_iteration": 500, "cql_weight": 1.0,
                               "normalize_observations": True, "model": {"hidden": [64, 64]},
                               "evaluation": {"episodes": 5, "interval": 0}})
    assert _train("cql", cfg, "cartpole-mixed", 3) > 60  # dataset mean: 34


@pytest.mark.slow
def test_discrete_iql_learns_cartpole(ray_session):
    cfg = IQLConfig.from_dict({"seed": 0, "train_batch_size": 128, "updates_per_iteration": 500,
                               "normalize_observations": True, "model": {"hidden": [64, 64]},
                               "evaluation": {"episodes": 5, "interval": 0}})
    assert _train("iql", cfg, "cartpole-mixed", 3) > 60  # dataset mean: 34


@pytest.mark.slow
def test_iql_learns_pendulum(ray_session):
    cfg = IQLConfig.from_dict({"seed": 0, "train_batch_size": 256, "updates_per_iteration": 1000,
                               "normalize_observations": True, "model": {"hidden": [64, 64]},
                               "evaluation": {"episodes": 10, "interval": 0}})
    score = _train("iql", cfg, "pendulum-mixed", 3)
    print("pendulum iql score", score)
    assert score > 60  # dataset mean: 44
