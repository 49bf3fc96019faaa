"""The gate's decision (``online.promotion: gated``) on hand-computed paired returns."""

import math

import pytest
import torch

from offlinerl.training.gate import PolicyGate, paired_gate
from offlinerl.config_io import ConfigError
from offlinerl.training.online_config import OnlineConfig


def test_paired_gate_subtracts_standard_errors_of_the_mean_difference():
    # differences [1, 3, 5]: mean 3, sample std 2, se 2/sqrt(3)
    deploy, mean, se = paired_gate([1.0, 3.0, 5.0], [0.0, 0.0, 0.0])
    assert (deploy, mean, se) == (True, 3.0, pytest.approx(2 / math.sqrt(3)))
    assert not paired_gate([1.0, 3.0, 5.0], [0.0, 0.0, 0.0], margin=2.0)[0]  # 3 - 1.155 < 2
    assert paired_gate([1.0, 3.0, 5.0], [0.0, 0.0, 0.0], margin=2.0, confidence=0.0)[0]  # means only: 3 >= 2


def test_a_candidate_lucky_on_one_start_is_not_deployed():
    # Pendulum-like: the deployed policy spins on one start (-800), the candidate is 10 worse everywhere else.
    candidate, deployed = [-150.0, -160.0, -160.0, -160.0], [-950.0, -150.0, -150.0, -150.0]
    deploy, mean, se = paired_gate(candidate, deployed)
    assert mean == pytest.approx(192.5) and se == pytest.approx(202.5)  # deviations 607.5, -202.5 x 3
    assert not deploy
    assert paired_gate(candidate, deployed, confidence=0.0)[0]  # comparing means alone would deploy it


def test_ties_deploy_the_candidate_and_one_episode_has_no_standard_error():
    assert paired_gate([500.0] * 5, [500.0] * 5) == (True, 0.0, 0.0)
    assert paired_gate([1.0], [2.0]) == (False, -1.0, 0.0)
    with pytest.raises(ValueError, match="same starts"):
        paired_gate([], [])


def test_policy_gate_keeps_the_deployed_weights_until_a_candidate_clears_it():
    gate = PolicyGate()
    start = {"w": torch.zeros(2)}
    gate.deploy(start)
    start["w"] += 1  # the gate holds its own copy
    assert gate.consider({"w": torch.ones(2)}, [1.0, 1.0], [2.0, 2.0])[0] is False
    assert torch.equal(gate.weights["w"], torch.zeros(2)) and gate.score == 2.0
    assert gate.consider({"w": torch.ones(2)}, [3.0, 4.0], [2.0, 2.0])[0] is True
    assert torch.equal(gate.weights["w"], torch.ones(2))
    assert gate.metadata() == {"score": 3.5, "gates": 2, "promotions": 1}
    seeds = gate.seed(20_000, 10)
    assert seeds == 20_020  # the third gate starts where the second's episodes ended


def test_gate_settings_are_checked():
    for bad in ({"promotion": "best"}, {"gate_episodes": 0}, {"gate_interval": 0}, {"gate_confidence": -1.0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            OnlineConfig(**bad)
