"""CQL and IQL on the real Learner / LearnerGroup / Algorithm: modules, Polyak targets,
gradient isolation, in-process and 2-learner DDP training, all four variants."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.cql import CQLConfig, CQLLearner, CQLRLModule
from offlinerl.algorithms.iql import IQLConfig, IQLLearner, IQLRLModule
from offlinerl.core import columns as C
from offlinerl.core.learner_group import LearnerGroup
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.training.algorithm import Algorithm
from tests.datagen import make_dataset

BOX_OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
BOX_ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
DISCRETE_ACT = gym.spaces.Discrete(3)
VARIANTS = [("cql", "box"), ("cql", "discrete"), ("iql", "box"), ("iql", "discrete")]
CLASSES = {"cql": (CQLConfig, CQLLearner, CQLRLModule), "iql": (IQLConfig, IQLLearner, IQLRLModule)}


def _batch(kind, n=64, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "box":
        actions = rng.uniform(BOX_ACT.low, BOX_ACT.high, size=(n, 2)).astype(np.float32)
    else:
        actions = rng.integers(0, 3, size=n)
    return {C.OBS: rng.normal(size=(n, 3)).astype(np.float32), C.NEXT_OBS: rng.normal(size=(n, 3)).astype(np.float32),
            C.ACTIONS: actions, C.REWARDS: rng.normal(size=n).astype(np.float32),
            C.TERMINATEDS: (rng.random(n) < 0.1).astype(np.float32), C.TRUNCATEDS: np.zeros(n, np.float32)}


def _setup(algo, kind, **kw):
    cfg_cls, learner_cls, module_cls = CLASSES[algo]
    cfg = cfg_cls.from_dict({"model": {"hidden": [16, 16]}, "num_cpus_per_learner": 0.5, "seed": 3, **kw})
    act = BOX_ACT if kind == "box" else DISCRETE_ACT
    spec = MultiRLModuleSpec.single(RLModuleSpec(module_cls, BOX_OBS, act, cfg.module_config()))
    return cfg, learner_cls, spec


@pytest.mark.parametrize("algo,kind", VARIANTS)
def test_inference_only_module_builds_only_what_acting_needs(algo, kind):
    cfg, _, spec = _setup(algo, kind)
    full, lean = spec.build(inference_only=False), spec.build(inference_only=True)
    acts_on_q = algo == "cql" and kind == "discrete"
    names = {n.split(".")[0] for n in lean["default_policy"].state_dict()}
    assert names == ({"q"} if acts_on_q else {"pi_encoder", "pi_head"})
    full_names = {n.split(".")[0] for n in full["default_policy"].state_dict()}
    assert {"q", "target_q"} <= full_names and ("v" in full_names) == (algo == "iql")
    assert ("log_alpha" in full_names) == (algo == "cql" and kind == "box")
    lean.load_state_dict(full.state_dict())
    obs = torch.randn(5, 3)
    a_full = full["default_policy"].forward_inference({C.OBS: obs})[C.ACTIONS]
    a_lean = lean["default_policy"].forward_inference({C.OBS: obs})[C.ACTIONS]
    assert torch.equal(a_full, a_lean)
    if kind == "box":
        assert (a_lean >= torch.tensor(BOX_ACT.low)).all() and (a_lean <= torch.tensor(BOX_ACT.high)).all()
    explore = lean["default_policy"].forward_exploration({C.OBS: obs})
    assert explore[C.ACTION_LOGP].shape == (5,)


@pytest.mark.parametrize("algo,kind", VARIANTS)
def test_one_update_steps_each_optimizer_on_its_own_loss_and_polyak_follows(algo, kind):
    """The Learner's update equals: per loss term, an Adam step on the gradient of that term
    alone (computed before any step), then target <- (1 - tau) target + tau online."""
    cfg, learner_cls, spec = _setup(algo, kind, tau=0.1)
    learner = learner_cls(config=cfg, module_spec=spec).build()
    module = learner.module["default_policy"]
    twin = copy.deepcopy(module)
    opts = {name: copy.deepcopy(opt) for (_, name), opt in learner._optimizers.items()}
    groups = {name: params for (_, name), params in learner._params.items()}
    by_id = dict(zip((id(p) for p in module.parameters()), twin.parameters()))
    for name, opt in opts.items():  # re-point the copied optimizers at the twin's parameters
        opt.param_groups[0]["params"] = [by_id[id(p)] for p in groups[name]]
    batch = {k: torch.as_tensor(v) for k, v in _batch(kind).items()}

    rng = torch.get_rng_state()
    learner.update(batch)
    torch.set_rng_state(rng)
    out = learner.compute_loss_for_module("default_policy", twin, batch, {})
    grads = {n: torch.autograd.grad(out.losses[n], opts[n].param_groups[0]["params"], retain_graph=True, allow_unused=True)
             for n in out.losses}
    if "actor" in out.losses and algo == "cql":  # the actor loss does reach the critic: isolation matters here
        g = torch.autograd.grad(out.losses["actor"], list(twin.critic_parameters()), retain_graph=True)
        assert any(float(x.abs().sum()) > 0 for x in g)
    target_before = [p.clone() for p in twin.target_q.parameters()]
    for n, gs in grads.items():
        for p, g in zip(opts[n].param_groups[0]["params"], gs):
            p.grad = torch.zeros_like(p) if g is None else g
        opts[n].step()
    twin.sync_target_networks(0.1)
    for t0, t, q in zip(target_before, twin.target_q.parameters(), twin.q.parameters()):
        torch.testing.assert_close(t.detach(), 0.9 * t0 + 0.1 * q.detach())
    for (k, a), b in zip(module.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=k)
    assert all(not p.requires_grad for p in module.target_q.parameters())


@pytest.mark.parametrize("algo,kind", VARIANTS)
def test_two_ddp_learners_stay_identical(ray_session, algo, kind):
    extra = {"lagrangian": True} if (algo, kind) == ("cql", "box") else {}
    cfg, learner_cls, spec = _setup(algo, kind, grad_clip=10.0, **extra)
    single = LearnerGroup(cfg.replace(num_learners=0), learner_cls, spec)
    group = LearnerGroup(cfg.replace(num_learners=2), learner_cls, spec)
    try:
        for i in range(3):
            batch = _batch(kind, seed=i)
            m1 = single.update_from_batch(batch)
            m2 = group.update_from_batch(batch)
        w_a, w_b = group.get_all_weights()
        for k in w_a:
            assert torch.equal(w_a[k], w_b[k]), k  # replicas identical, bit for bit
        assert np.isfinite(m2["losses/critic"])
        if algo == "iql" or kind == "discrete":  # no sampling in the loss: 2 half batches == 1 full batch
            w_single = single.get_weights()
            for k in w_a:
                torch.testing.assert_close(w_a[k], w_single[k], rtol=1e-4, atol=1e-5)
            assert abs(m1["losses/critic"] - m2["losses/critic"]) < 1e-4 * max(1.0, abs(m1["losses/critic"]))
    finally:
        group.shutdown()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    return {"box": make_dataset(root / "pendulum", env_id="Pendulum-v1", episodes=4, max_steps=40),
            "discrete": make_dataset(root / "cartpole", episodes=4)}


@pytest.mark.parametrize("algo,kind", VARIANTS)
def test_algorithm_trains_and_evaluates(ray_session, datasets, algo, kind):
    cfg = CLASSES[algo][0].from_dict({"updates_per_iteration": 10, "train_batch_size": 32, "model": {"hidden": [16, 16]},
                                      "normalize_observations": True, "evaluation": {"episodes": 1, "interval": 2}})
    algorithm = Algorithm(algo, cfg, datasets[kind])
    try:
        algorithm.train()
        m = algorithm.train()
        assert m["learner/updates"] == 20 and "eval/return_mean" in m
        expected = {"critic"} | ({"actor"} if (algo, kind) != ("cql", "discrete") else set())
        expected |= {"value"} if algo == "iql" else ({"alpha"} if kind == "box" else set())
        assert {k.split("/")[1] for k in m if k.startswith("losses/")} == expected
        assert all(np.isfinite(m[f"losses/{k}"]) for k in expected)
    finally:
        algorithm.stop()
