import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.rl_module import MultiRLModule, MultiRLModuleSpec, RLModuleSpec

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3), BOX])
def test_three_forwards(space):
    torch.manual_seed(0)
    m = DefaultRLModule(OBS, space, {"hidden": [16], "value_head": True})
    batch = {C.OBS: torch.randn(4, 3)}
    inf = m.forward_inference(batch)
    exp = m.forward_exploration(batch)
    train = m.forward_train(batch)
    assert inf[C.ACTIONS].shape[0] == 4 and exp[C.ACTION_LOGP].shape == (4,)
    assert train[C.VALUES].shape == (4,)
    # the inference action is the mode of the train distribution
    torch.testing.assert_close(inf[C.ACTIONS], train[C.ACTION_DIST].mode())
    if isinstance(space, gym.spaces.Box):
        a = exp[C.ACTIONS]
        assert (a >= torch.tensor(space.low)).all() and (a <= torch.tensor(space.high)).all()


def test_inference_only_builds_no_value_head_and_loads_full_state():
    full = DefaultRLModule(OBS, gym.spaces.Discrete(2), {"hidden": [8], "value_head": True})
    small = DefaultRLModule(OBS, gym.spaces.Discrete(2), {"hidden": [8], "value_head": True}, inference_only=True)
    assert not hasattr(small, "vf_head")
    assert len(small.state_dict()) < len(full.state_dict())
    small.load_state_dict(full.state_dict())
    x = {C.OBS: torch.randn(5, 3)}
    torch.testing.assert_close(small.forward_inference(x)[C.ACTIONS], full.forward_inference(x)[C.ACTIONS])
    with pytest.raises(RuntimeError):
        small.load_state_dict({})  # its own keys are still required


def test_multi_rl_module_and_specs():
    spec = MultiRLModuleSpec({"a": RLModuleSpec(DefaultRLModule, OBS, gym.spaces.Discrete(2), {"hidden": [4]}),
                              "b": RLModuleSpec(DefaultRLModule, OBS, BOX, {"hidden": [4]})},
                             agent_to_module={"agent_0": "a", "agent_1": "b"})
    multi = spec.build()
    assert isinstance(multi, MultiRLModule) and multi.keys() == ["a", "b"]
    assert multi.module_for_agent("agent_1") == "b"
    out = multi.forward_inference({"a": {C.OBS: torch.zeros(2, 3)}, "b": {C.OBS: torch.zeros(2, 3)}})
    assert out["b"][C.ACTIONS].shape == (2, 2)
    with pytest.raises(KeyError, match="no module 'c'"):
        multi["c"]


def test_cnn_encoder_is_picked_for_images():
    img = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
    m = DefaultRLModule(img, gym.spaces.Discrete(4), {"hidden": [8], "cnn_out": 16})
    out = m.forward_inference({C.OBS: torch.zeros(2, 16 * 16 * 3)})
    assert out[C.ACTIONS].shape == (2,)


def test_unbounded_box_actions_are_refused():
    with pytest.raises(TypeError, match="finite bounds"):
        DefaultRLModule(OBS, gym.spaces.Box(-np.inf, np.inf, (2,)), {})
