"""Algorithm end to end on small real datasets: training, evaluation, exact resume."""

import numpy as np
import pytest
import torch

from offlinerl.algorithms.bc import BCConfig
from offlinerl.algorithms.marwil import MARWILConfig
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "pendulum", env_id="Pendulum-v1", episodes=6, max_steps=60)


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=6)


def _cfg(cls, **kw):
    return cls.from_dict({"updates_per_iteration": 20, "train_batch_size": 32, "model": {"hidden": [32, 32]},
                          "normalize_observations": True, "evaluation": {"episodes": 2, "interval": 2}, **kw})


@pytest.mark.parametrize("name,cls,data", [("bc", BCConfig, "cartpole"), ("marwil", MARWILConfig, "pendulum")])
def test_train_and_evaluate(ray_session, request, name, cls, data):
    algo = Algorithm(name, _cfg(cls), request.getfixturevalue(data))
    m1 = algo.train()
    m2 = algo.train()
    assert m1["learner/updates"] == 20 and m2["learner/updates"] == 40
    assert "eval/return_mean" not in m1 and "eval/return_mean" in m2
    assert np.isfinite(m2["losses/actor"])
    if name == "marwil":
        assert "losses/value" in m2 and "marwil/weights_mean" in m2


def test_restore_continues_exactly(ray_session, pendulum, tmp_path):
    cfg = _cfg(MARWILConfig, grad_clip=1.0)
    a = Algorithm("marwil", cfg, pendulum)
    for _ in range(2):
        a.train()
    a.save_checkpoint(tmp_path / "ckpt")
    for _ in range(2):
        a.train()
    b = Algorithm.from_checkpoint(tmp_path / "ckpt")
    assert b.iteration == 2 and b.num_updates == 40
    for _ in range(2):
        b.train()
    wa, wb = a.learner_group.get_weights(), b.learner_group.get_weights()
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k  # bitwise: zero tolerance
    sa = a.learner_group.local_learner.get_extra_state()["sq_adv_norm"]
    sb = b.learner_group.local_learner.get_extra_state()["sq_adv_norm"]
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_checkpoint_refuses_overwrite(ray_session, cartpole, tmp_path):
    from offlinerl.episodes import OutputExistsError

    algo = Algorithm("bc", _cfg(BCConfig), cartpole)
    algo.save_checkpoint(tmp_path / "c")
    with pytest.raises(OutputExistsError):
        algo.save_checkpoint(tmp_path / "c")


def test_streaming_mode_with_two_ddp_learners(ray_session, cartpole):
    """Each learner reads its own streaming_split shard; weights stay identical across learners."""
    cfg = _cfg(BCConfig, num_learners=2, num_cpus_per_learner=0.5,
               data={"mode": "streaming", "shuffle_buffer_size": 128}, evaluation={"episodes": 1, "interval": 0})
    algo = Algorithm("bc", cfg, cartpole)
    try:
        assert algo.offline_data.mode == "streaming"
        m = algo.train()
        m = algo.train()
        assert m["learner/updates"] == 40
        w0, w1 = algo.learner_group.get_all_weights()
        assert all(torch.equal(w0[k], w1[k]) for k in w0)
    finally:
        algo.stop()


def test_in_memory_shards_with_two_ddp_learners_and_auto_mode(ray_session, pendulum):
    from offlinerl.data import OfflineData

    assert OfflineData(pendulum, _cfg(BCConfig, data={"in_memory_max_bytes": 1})).mode == "streaming"
    algo = Algorithm("marwil", _cfg(MARWILConfig, num_learners=2, num_cpus_per_learner=0.5,
                                    evaluation={"episodes": 1, "interval": 0}), pendulum)
    try:
        assert algo.offline_data.mode == "in_memory"
        m = algo.train()
        assert m["learner/updates"] == 20 and "losses/value" in m
        w0, w1 = algo.learner_group.get_all_weights()
        assert all(torch.equal(w0[k], w1[k]) for k in w0)
    finally:
        algo.stop()


def test_learners_that_cannot_all_start_are_refused_not_waited_for(ray_session, cartpole):
    """In memory, 4 learners x 1 CPU on the session's 2-CPU Ray waited forever; now one error before any actor."""
    from offlinerl.config_io import ConfigError

    cfg = _cfg(BCConfig, num_learners=4, num_cpus_per_learner=1, data={"mode": "in_memory"})
    with pytest.raises(ConfigError, match=r"^num_cpus_per_learner: 4 learners x 1 CPUs need 4 CPUs, the Ray cluster "
                                          r"has 2 \(the learners would wait forever\)"):
        Algorithm("bc", cfg, cartpole)
