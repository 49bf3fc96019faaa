"""The shipped CQL/IQL pipeline files load and validate (their learning results: benchmarks/README.md)."""

from pathlib import Path

import pytest

from offlinerl.algorithms.cql import CQLConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.algorithms.pipeline import load_pipeline

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
NAMES = [f"{ds}-{algo}" for ds in ("pendulum", "cartpole", "double-pendulum") for algo in ("cql", "iql")]


@pytest.mark.parametrize("name", NAMES)
def test_pipeline_loads_with_its_algorithm_config(name):
    pipeline, config = load_pipeline(PIPELINES / f"{name}.yaml")
    assert pipeline.algorithm == name.rsplit("-", 1)[1]
    assert isinstance(config, CQLConfig if pipeline.algorithm == "cql" else IQLConfig)
    assert (PIPELINES.parent / pipeline.dataset / "card.json").is_file()  # scored against the card's anchors
    assert pipeline.stop.updates and config.normalize_observations


def test_progress_bar_shows_the_loss_terms_each_algorithm_has():
    from offlinerl.algorithms.job import _postfix

    discrete_cql = {"losses/critic": 1.25, "cql/gap": 0.3, "perf/updates_per_s": 400.0}
    assert _postfix(discrete_cql, {}) == {"critic": "1.25", "upd/s": "400"}  # there is no actor loss to show
    iql = {"losses/actor": -0.4123, "losses/critic": 2.0, "losses/value": 0.01}
    assert _postfix(iql, {}) == {"actor": "-0.412", "critic": "2", "value": "0.01"}
    assert _postfix({"main/losses/actor": 0.5}, {}) == {"actor": "0.5"}  # multi-module prefix
    assert _postfix({"losses/actor": 0.5}, {"eval/return_mean": -201.25}) == {"actor": "0.5", "eval": "-201.2"}
