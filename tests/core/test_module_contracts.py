"""Learners check the module capabilities their losses call once, when they build, and name what is missing."""

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.core.default_module import DefaultRLModule
from torch import nn

from offlinerl.core.rl_module import ActorCriticAPI, MultiRLModuleSpec, RLModuleSpec, StateValueAPI, require_api

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
BOX = gym.spaces.Box(-2, 2, (1,), np.float32)


def _learner(name, module_cls, action_space=BOX):
    spec = get_algorithm(name)
    config = spec.config_cls.from_dict({"model": {"hidden": [8]}})
    module_spec = MultiRLModuleSpec.single(RLModuleSpec(module_cls, OBS, action_space, config.module_config()))
    return spec.learner_cls(config=config, module_spec=module_spec)


@pytest.mark.parametrize("name", ["cql", "iql"])
def test_a_module_without_critics_fails_at_build_naming_the_members(name):
    with pytest.raises(TypeError, match=r"ActorCriticAPI; DefaultRLModule lacks .*q_values.*target_q_values"):
        _learner(name, DefaultRLModule).build()


def test_the_stock_modules_declare_what_their_losses_call():
    for name in ("cql", "iql"):
        module = _learner(name, get_algorithm(name).module_cls).build().module["default_policy"]
        assert isinstance(module, ActorCriticAPI) and isinstance(module, StateValueAPI)


def test_require_api_names_every_missing_member():
    class HalfValue(nn.Module):
        def values(self, obs):
            return obs.sum(-1)

    with pytest.raises(TypeError, match="IQL needs a module implementing StateValueAPI; HalfValue lacks value_parameters"):
        require_api(HalfValue(), StateValueAPI, "IQL")


def test_cql_needs_its_temperatures():
    class NoTemperatures(get_algorithm("iql").module_cls):
        """Actor-critic without CQL's log_alpha / log_cql_alpha."""

    with pytest.raises(TypeError, match="lacks log_alpha, log_cql_alpha"):
        _learner("cql", NoTemperatures).build()
