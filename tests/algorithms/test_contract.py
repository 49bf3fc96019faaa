"""The contract every registered algorithm meets, for both action kinds it supports.

A new algorithm joins by registering itself: it builds (or refuses an action space it does not
support, at build time, with a message naming it), trains in-memory and streaming, round-trips a
checkpoint, resumes bit-exactly and evaluates through the loaded checkpoint as it did in the job.
"""

from __future__ import annotations

import math

import pytest
import torch

from offlinerl.algorithms.registry import algorithm_names, get_algorithm
from offlinerl.config_io import ConfigError
from offlinerl.evaluation.evaluate import evaluate_checkpoint
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset

KINDS = {"discrete": ("CartPole-v1", None), "continuous": ("Pendulum-v1", 40)}
CASES = [(name, kind) for name in algorithm_names() for kind in KINDS]
UPDATES = 5


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    return {kind: make_dataset(root / kind, env_id=env, episodes=4, max_steps=steps) for kind, (env, steps) in KINDS.items()}


def _config(name: str, **extra):
    return get_algorithm(name).config_cls.from_dict({
        "seed": 3, "updates_per_iteration": UPDATES, "train_batch_size": 16, "model": {"hidden": [8]},
        "normalize_observations": True, "evaluation": {"episodes": 1, "interval": 0}, **extra})


def _build(name: str, dataset, **extra) -> Algorithm:
    try:
        return Algorithm(name, _config(name, **extra), dataset)
    except (ConfigError, TypeError, ValueError) as exc:
        message = str(exc)
        assert any(w in message for w in ("Discrete", "Box", "action")), f"unclear refusal: {message}"
        pytest.skip(f"{name} refuses this action space at build: {message}")


def _losses_finite(metrics: dict) -> bool:
    losses = [v for k, v in metrics.items() if "losses/" in k]
    return bool(losses) and all(math.isfinite(v) for v in losses)


@pytest.mark.parametrize("name,kind", CASES)
def test_trains_checkpoints_resumes_exactly_and_evaluates_from_the_checkpoint(ray_session, datasets, tmp_path, name, kind):
    algo = _build(name, datasets[kind], data={"mode": "in_memory"})
    try:
        for _ in range(2):
            m = algo.train()
        assert m["learner/updates"] == 2 * UPDATES and _losses_finite(m), m
        ckpt = algo.save_checkpoint(tmp_path / "ckpt")
        expected = algo.evaluate()
        algo.train()
        resumed = Algorithm.from_checkpoint(ckpt)
        try:
            assert (resumed.iteration, resumed.num_updates) == (2, 2 * UPDATES)
            resumed.train()
            wa, wb = algo.learner_group.get_weights(), resumed.learner_group.get_weights()
            assert wa.keys() == wb.keys()
            for key in wa:
                assert torch.equal(wa[key], wb[key]), key
        finally:
            resumed.stop()
    finally:
        algo.stop()
    # Last: building a module draws from the process's torch RNG, which the in-process learner samples with.
    assert evaluate_checkpoint(ckpt)["eval/return_mean"] == expected["eval/return_mean"]


@pytest.mark.parametrize("name,kind", CASES)
def test_trains_streaming(ray_session, datasets, name, kind):
    algo = _build(name, datasets[kind], data={"mode": "streaming", "shuffle_buffer_size": 64})
    try:
        assert algo.offline_data.mode == "streaming"
        for _ in range(2):
            m = algo.train()
        assert m["learner/updates"] == 2 * UPDATES and _losses_finite(m), m
    finally:
        algo.stop()
