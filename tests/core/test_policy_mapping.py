"""``policy_mapping`` (the agent -> module mapping of a multi-agent job) as pure functions: the rule, its checks in
the config, its order through the config's JSON (what checkpoints store), and the env check's use of it."""

from __future__ import annotations

import json
import pickle

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.algorithms.bc import BCConfig
from offlinerl.config_io import ConfigError
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.policy_mapping import (AgentToModule, UnmappedAgentError, map_agent, mapped_module_id,
                                           policy_mapping_problem)
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.env.env_check import unmapped_agents

PATTERNS = {"adversary_*": "adversary", "agent_*": "good"}


def test_a_module_id_maps_every_agent_and_patterns_map_by_the_first_match():
    assert [map_agent("shared", a) for a in ("agent_0", "adversary_3", "x")] == ["shared"] * 3
    assert [map_agent(PATTERNS, a) for a in ("adversary_0", "agent_1", "agent_12")] == ["adversary", "good", "good"]
    ordered = {"agent_0": "lead", "agent_?": "team", "*": "rest"}
    assert [map_agent(ordered, a) for a in ("agent_0", "agent_1", "agent_10", "Agent_1")] == ["lead", "team", "rest", "rest"]
    with pytest.raises(UnmappedAgentError, match=r"the agent 'leader' matches none of the patterns "
                                                 r"\['adversary_\*', 'agent_\*'\]") as exc:
        map_agent(PATTERNS, "leader")
    assert isinstance(exc.value, ConfigError) and isinstance(exc.value, ValueError)


def test_the_mapping_applies_to_the_agent_id_else_the_module_id_and_overrides_the_module_id():
    assert mapped_module_id(None, "policy_1", "agent_0") == "policy_1"  # no mapping: today's rule
    assert mapped_module_id(None, None, "agent_0") == "agent_0"
    assert mapped_module_id(None, None, None) == "default_policy"
    assert mapped_module_id(PATTERNS, "policy_1", "agent_0") == "good"  # the row's module_id is not used
    assert mapped_module_id({"policy_*": "p", "*": "q"}, "policy_1", None) == "p"  # no agent_id: its module_id
    assert mapped_module_id({"default_*": "d"}, None, None) == "d"
    with pytest.raises(UnmappedAgentError, match="rows without an agent_id count as that agent"):
        mapped_module_id(PATTERNS, None, None)


def test_agent_to_module_is_a_picklable_callable_in_the_patterns_order():
    fn = AgentToModule.of({"agent_0": "lead", "*": "rest"})
    assert fn.mapping == (("agent_0", "lead"), ("*", "rest"))
    again = pickle.loads(pickle.dumps(fn))
    assert again == fn and [again("agent_0"), again("agent_1"), again(None)] == ["lead", "rest", "rest"]
    assert AgentToModule.of("shared")("agent_7") == "shared"
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    spec = MultiRLModuleSpec({m: RLModuleSpec(DefaultRLModule, space, gym.spaces.Discrete(2), {"hidden": [4]})
                              for m in ("lead", "rest")}, fn)
    module = pickle.loads(pickle.dumps(spec)).build()
    assert [module.module_for_agent(a) for a in ("agent_0", "agent_2")] == ["lead", "rest"]


def test_the_config_checks_the_mapping_and_keeps_its_order_through_json():
    assert BCConfig().policy_mapping is None and BCConfig().agent_to_module is None
    assert policy_mapping_problem("shared") is None and policy_mapping_problem(PATTERNS) is None
    for bad, message in [("", "a module id must be a non-empty string, got ''"),
                         ("a.b", "a module id cannot contain '.', got 'a.b'"),
                         ({}, "a module id or a non-empty mapping {pattern: module id}, got {}"),
                         ({"a*": ""}, "'a\\*': a module id must be a non-empty string, got ''"),
                         ({"a*": "x.y"}, "'a\\*': a module id cannot contain '.'"),
                         ({"": "a"}, "a pattern must be a non-empty string, got ''")]:
        with pytest.raises(ConfigError, match=f"^policy_mapping: {message}"):
            BCConfig.from_dict({"policy_mapping": bad})
    with pytest.raises(ConfigError, match="policy_mapping: \\['a'\\] matches none of"):
        BCConfig.from_dict({"policy_mapping": ["a"]})
    with pytest.raises(ConfigError, match="policy_mapping: a pattern must be a non-empty string, got 3"):
        BCConfig.from_dict({"policy_mapping": {3: "a"}})
    # the order of the patterns decides; a checkpoint stores the config as JSON and loads it with from_dict
    config = BCConfig.from_dict({"policy_mapping": {"b0": "solo", "*": "rest"}})
    loaded = BCConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert list(loaded.policy_mapping) == ["b0", "*"] and loaded == config
    assert [loaded.agent_to_module(a) for a in ("b0", "a1")] == ["solo", "rest"]
    assert BCConfig.from_dict({"policy_mapping": "shared"}).agent_to_module("anyone") == "shared"


def test_the_env_check_finds_agents_without_a_module_through_the_mapping():
    agents = ["agent_0", "agent_1", "adversary_0"]
    assert unmapped_agents(agents, ["shared"], "shared") == []
    assert unmapped_agents(agents, ["adversary", "good"], PATTERNS) == []
    assert unmapped_agents(agents, ["good"], {"agent_*": "good"}) == [
        "the agents ['adversary_0'] match no pattern of policy_mapping ['agent_*']"]
    assert unmapped_agents(agents, ["good"], PATTERNS) == [
        "policy_mapping maps the agent adversary_0 to the module 'adversary', which is not trained (the modules are "
        "['good'])"]
    assert unmapped_agents(agents, ["other"], "shared") == [
        f"policy_mapping maps the agent {a} to the module 'shared', which is not trained (the modules are ['other'])"
        for a in agents]
    # without a mapping: one module acts for every agent, several each for the agent of its id
    assert unmapped_agents(agents, ["anything"]) == []
    assert unmapped_agents(agents, ["agent_0", "agent_1"]) == [
        "the agents ['adversary_0'] have no module (the modules are ['agent_0', 'agent_1'])"]
