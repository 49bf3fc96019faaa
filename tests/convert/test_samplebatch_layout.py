"""Choosing spaces and extra-column specs from per-episode descriptions (no Ray)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from offlinerl.convert.samplebatch.layout import ColumnStats, conforms, describe, extra_spec, infer_space, out_of_bounds


def stats_of(*values) -> ColumnStats:
    st = ColumnStats()
    for v in values:
        st.add(describe(v))
    return st


def test_integer_actions_infer_discrete_with_n_from_the_max():
    space = infer_space(stats_of(np.array([0, 2]), np.array([1, 4])), "actions")
    assert isinstance(space, gym.spaces.Discrete) and space.n == 5
    md = infer_space(stats_of(np.array([[0, 3], [1, 0]])), "actions")
    assert isinstance(md, gym.spaces.MultiDiscrete) and md.nvec.tolist() == [2, 4]
    image = infer_space(stats_of(np.zeros((2, 3, 3), np.uint8)), "observations")
    assert isinstance(image, gym.spaces.Box) and image.dtype == np.uint8 and image.high.max() == 255


def test_json_doubles_that_are_float32_are_stored_as_float32():
    exact = np.float32([[0.1, 0.2]]).astype(np.float64)
    space = infer_space(stats_of(exact, np.float32([[1.5, np.nan]])), "observations")
    assert space.dtype == np.float32 and space.shape == (2,) and np.isinf(space.low).all()
    assert infer_space(stats_of(np.array([[0.1, 0.2]])), "observations").dtype == np.float64


def test_conformance_and_bounds():
    box = gym.spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)
    assert conforms(describe(np.zeros((3, 1))), box) is None
    assert "shape" in conforms(describe(np.zeros((3, 2))), box)
    assert "outside" in conforms(describe(np.array([0, 3])), gym.spaces.Discrete(3))
    assert conforms(describe([{"a": 1}]), box) == "values are not a numeric array"
    assert out_of_bounds(describe(np.array([[0.5], [2.5]])), box)
    assert not out_of_bounds(describe(np.array([[0.5], [np.nan]])), box)


def test_extra_columns_fall_back_to_json_when_not_uniform():
    assert extra_spec(stats_of(np.zeros((2, 3), np.float32)), 1) == {"dtype": "float32", "shape": [3]}
    assert extra_spec(stats_of(np.zeros((2, 3)), np.zeros((2, 4))), 2)["dtype"] == "json"
    assert extra_spec(stats_of(np.zeros(2)), 2)["dtype"] == "json"  # missing from one episode
    assert extra_spec(stats_of(np.array([True, False])), 1) == {"dtype": "bool", "shape": []}
