"""A job's connector state with several modules: ``{module_id: state}``, and back to each module's."""

import pytest

from offlinerl.connectors import ConnectorStateError, join_module_states, split_module_states

A0 = {"NormalizeObservations": {"count": 2, "mean": [0.5], "var": [0.25]}}
A1 = {"NormalizeObservations": {"count": 3, "mean": [50.0], "var": [2500.0]}}


def test_one_module_keeps_the_single_agent_format():
    assert join_module_states({"default_policy": A0}) == A0
    assert split_module_states(A0, ["default_policy"]) == {"default_policy": A0}
    assert split_module_states({}, ["walker"]) == {"walker": {}}


def test_several_modules_are_keyed_by_module_id_and_split_back():
    joined = join_module_states({"a0": A0, "a1": A1})
    assert joined == {"a0": A0, "a1": A1}
    assert split_module_states(joined, ["a0", "a1"]) == {"a0": A0, "a1": A1}
    assert split_module_states({"a1": A1}, ["a0", "a1"]) == {"a0": {}, "a1": A1}  # a0 not fitted yet
    assert split_module_states({}, ["a0", "a1"]) == {"a0": {}, "a1": {}}


def test_a_state_keyed_by_connector_names_is_every_modules():
    """Multi-module checkpoints written before statistics were per module hold one state for all modules."""
    assert split_module_states(A0, ["a0", "a1"]) == {"a0": A0, "a1": A0}


def test_a_module_the_job_does_not_train_is_refused():
    with pytest.raises(ConnectorStateError, match=r"^a2: no module of that name \(the job trains \['a0', 'a1'\]\)"):
        split_module_states({"a0": A0, "a2": A1}, ["a0", "a1"])
    with pytest.raises(ConnectorStateError, match="^a1 must be an object"):
        split_module_states({"a0": A0, "a1": [1, 2]}, ["a0", "a1"])
