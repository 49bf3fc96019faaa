"""Vectorised seeds (``offlinerl.core.seed_stack``): N replicas updated as one stacked learner equal N single-seed
learners, update for update: losses, weights, optimizer moments and random draws (no Ray)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.core.seed_stack import Lockstep, SeedStack, per_seed_clip

BOX_OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
BOX_ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
DISCRETE = gym.spaces.Discrete(3)
SEEDS = (3, 5, 11)


class Batches:
    """A BatchSource of random transitions from its own numpy generator (what a seed's sampler would draw)."""

    def __init__(self, seed, act_space, size=16):
        self.rng, self.act_space, self.size = np.random.default_rng(seed), act_space, size

    def next_batch(self):
        r, n = self.rng, self.size
        if isinstance(self.act_space, gym.spaces.Discrete):
            actions = torch.as_tensor(r.integers(0, self.act_space.n, n))
        else:
            lo, hi = self.act_space.low, self.act_space.high
            actions = torch.as_tensor(r.uniform(lo, hi, (n, lo.size)).astype(np.float32))
        batch = {C.OBS: torch.as_tensor(r.uniform(-1, 1, (n, 3)).astype(np.float32)),
                 C.NEXT_OBS: torch.as_tensor(r.uniform(-1, 1, (n, 3)).astype(np.float32)),
                 C.ACTIONS: actions,
                 C.REWARDS: torch.as_tensor(r.normal(size=n).astype(np.float32)),
                 C.TERMINATEDS: torch.as_tensor((r.random(n) < 0.1).astype(np.float32)),
                 C.TRUNCATEDS: torch.zeros(n)}
        return {C.DEFAULT_MODULE_ID: batch}

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


def _learner(algorithm, seed, act_space, **overrides):
    spec = get_algorithm(algorithm)
    cfg = spec.config_cls.from_dict({"model": {"hidden": [16, 16]}, "seed": seed, "grad_clip": 0.5, **overrides})
    mspec = MultiRLModuleSpec.single(RLModuleSpec(spec.module_cls, BOX_OBS, act_space, cfg.module_config()))
    return spec.learner_cls(config=cfg, module_spec=mspec).build()


CASES = [("bc", BOX_ACT, {}), ("bc", DISCRETE, {}), ("iql", BOX_ACT, {}), ("iql", DISCRETE, {}),
         ("td3bc", BOX_ACT, {"policy_freq": 2}), ("marwil", DISCRETE, {})]


@pytest.mark.parametrize("algorithm,act_space,overrides", CASES,
                         ids=[f"{a}-{type(s).__name__}" for a, s, _ in CASES])
def test_each_replica_equals_a_single_seed_run(algorithm, act_space, overrides):
    if algorithm == "marwil":
        pytest.skip("MARWIL keeps a running advantage norm outside its module: refused, see the next test")
    singles = [_learner(algorithm, s, act_space, **overrides) for s in SEEDS]
    replicas = [_learner(algorithm, s, act_space, **overrides) for s in SEEDS]
    stack = SeedStack(replicas)
    single_metrics = [lr.run_updates(Batches(s, act_space), 6) for lr, s in zip(singles, SEEDS)]
    stacked_metrics = stack.run_updates([Batches(s, act_space) for s in SEEDS], 6)
    for single, replica, sm, vm in zip(singles, replicas, single_metrics, stacked_metrics):
        assert replica.timestep == single.timestep == 6
        a, b = single.get_state(), replica.get_state()
        for name, value in a["module"].items():
            torch.testing.assert_close(b["module"][name], value, rtol=1e-5, atol=1e-6, msg=name)
        for key, opt_state in a["optimizers"].items():
            for idx, moments in opt_state["state"].items():
                for k, v in moments.items():
                    torch.testing.assert_close(b["optimizers"][key]["state"][idx][k], v, rtol=1e-5, atol=1e-7)
        assert set(vm) == set(sm)
        for k in sm:
            if k != "perf/first_update_at":
                assert vm[k] == pytest.approx(sm[k], rel=1e-4, abs=1e-6), k
        assert torch.equal(single.generator.get_state(), replica.generator.get_state())
    # the replicas' seeds differ: their weights do too
    first = next(iter(replicas[0].get_module_state()))
    assert not torch.equal(replicas[0].get_module_state()[first], replicas[1].get_module_state()[first])


@pytest.mark.parametrize("algorithm", ["td3bc", "rebrac"])
def test_bf16_replicas_run_their_matmuls_in_bfloat16_and_track_their_single_seed_runs(algorithm):
    """config.precision: bf16 with vectorised seeds: the stacked forwards run under autocast (their losses are not
    the float32 stack's) and each replica's first update's losses are its single bf16 learner's to bfloat16's
    rounding (the batched and the single matmuls round differently)."""
    class WithNextActions(Batches):  # ReBRAC's critic penalty reads the dataset's next actions
        def next_batch(self):
            out = super().next_batch()
            b = out[C.DEFAULT_MODULE_ID]
            b["next_actions"], b["has_next_actions"] = b[C.ACTIONS].flip(0), torch.ones(self.size)
            return out

    def stacked(precision):
        return SeedStack([_learner(algorithm, s, BOX_ACT, precision=precision) for s in SEEDS[:2]])

    def sources():
        return [WithNextActions(s, BOX_ACT, size=64) for s in SEEDS[:2]]

    singles = [_learner(algorithm, s, BOX_ACT, precision="bf16") for s in SEEDS[:2]]
    single_metrics = [lr.run_updates(src, 1) for lr, src in zip(singles, sources())]
    bf16 = stacked("bf16").run_updates(sources(), 1)
    fp32 = stacked("fp32").run_updates(sources(), 1)
    losses = [k for k in single_metrics[0] if k.startswith("losses/")]
    assert losses
    for sm, bm, fm in zip(single_metrics, bf16, fp32):
        for k in losses:
            assert bm[k] == pytest.approx(sm[k], rel=0.05, abs=0.02), k
            assert fm[k] == pytest.approx(sm[k], rel=0.05, abs=0.02), k
    assert any(bm[k] != fm[k] for bm, fm in zip(bf16, fp32) for k in losses)  # autocast reached the stacked forwards


def test_learners_with_running_statistics_outside_the_module_are_refused():
    with pytest.raises(ValueError, match="running statistics"):
        SeedStack([_learner("marwil", s, DISCRETE) for s in SEEDS[:2]])


def test_per_seed_clip_equals_clip_grad_norm_of_each_slice():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.zeros(3, 4, 2)), torch.nn.Parameter(torch.zeros(3, 5))]
    for p, scale in zip(params, (1.0, 0.1)):
        p.grad = torch.randn_like(p) * scale
    slices = [[torch.nn.Parameter(p[i].detach().clone()) for p in params] for i in range(3)]
    for i, ps in enumerate(slices):
        for p, big in zip(ps, params):
            p.grad = big.grad[i].clone()
    norms = per_seed_clip(params, 0.7)
    for i, ps in enumerate(slices):
        expected = torch.nn.utils.clip_grad_norm_(ps, 0.7)
        assert norms[i].item() == pytest.approx(expected.item(), rel=1e-6)
        for p, big in zip(ps, params):
            torch.testing.assert_close(big.grad[i], p.grad)


def test_lockstep_runs_each_iteration_once_for_every_thread_and_lets_a_finished_one_leave():
    import threading

    replicas = [_learner("bc", s, BOX_ACT) for s in SEEDS]
    singles = [_learner("bc", s, BOX_ACT) for s in SEEDS]
    sources = [Batches(s, BOX_ACT) for s in SEEDS]
    lock = Lockstep(len(SEEDS))
    iterations = {0: 3, 1: 1, 2: 3}  # replica 1 stops after one iteration: the others must not wait for it
    out: dict[int, list] = {i: [] for i in iterations}

    def job(i):
        try:
            for _ in range(iterations[i]):
                out[i].append(lock.run_updates(i, replicas[i], sources[i], 4))
        finally:
            lock.leave(i)

    threads = [threading.Thread(target=job, args=(i,)) for i in iterations]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [len(out[i]) for i in iterations] == [3, 1, 3]
    assert lock.stack.stacked.timestep == 12
    for i in (0, 2):  # the replicas that ran to the end equal single-seed learners given the same 12 updates
        expected = singles[i].run_updates(Batches(SEEDS[i], BOX_ACT), 12)
        assert replicas[i].timestep == 12
        for name, value in singles[i].get_module_state().items():
            torch.testing.assert_close(replicas[i].get_module_state()[name], value, rtol=1e-5, atol=1e-6)
        key = "losses/actor"
        assert out[i][-1][key] != expected[key]  # the last 4 updates' mean, not all 12


def test_lockstep_runs_work_it_is_handed_on_its_one_worker_thread():
    """The joint updates and (``jobs.vectorized``) the replicas' evaluations share one thread: one OpenMP pool."""
    import threading

    lock = Lockstep(2)
    names = {lock.call(lambda: threading.current_thread().name) for _ in range(3)}
    assert len(names) == 1 and next(iter(names)).startswith("offlinerl-seedstack")
    lock.leave(0)
    lock.leave(1)
