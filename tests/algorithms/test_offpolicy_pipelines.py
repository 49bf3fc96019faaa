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
