"""Gradient updates/s of CQL, IQL, TD3+BC and ReBRAC (Box actions, batch 256, 256x256 MLPs; ReBRAC 3 x 256 with
LayerNorm critics) through our Learner (in-memory source, in-process) against a minimal pure-PyTorch loop with the
same networks, batch, sampled actions and optimisers on in-memory tensors (the practical limit).

    PYTHONPATH=. python benchmarks/throughput_offpolicy.py --updates 30 --out benchmarks/throughput_offpolicy.json
    PYTHONPATH=. python benchmarks/throughput_offpolicy.py --algorithms td3bc,rebrac --repeats 3 --out ...
    PYTHONPATH=. python benchmarks/throughput_offpolicy.py --algorithms rebrac --batch 1024 --flops --out ...
    PYTHONPATH=. python benchmarks/throughput_offpolicy.py --algorithms cql,rebrac --bf16 --out ...

``--flops`` also counts the floating-point operations of one update of ours (``torch.utils.flop_counter``, averaged
over two updates: a delayed actor steps every second one) and times this machine's matmul at the update's own
shapes (``[batch, 256] @ [256, 256]``), so a rate can be read as a share of what the cores can do. ``--bf16`` also
times ours with ``config.precision: bf16`` (hidden layers in bfloat16 under autocast; the reference loop stays float32).

The reference loops are written here from the papers, independently of offlinerl's losses:
two separate critic MLPs (no ensemble batching), one backward over the summed losses with
manual zeroing, as in common single-file implementations.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from offlinerl.algorithms.cql import CQLConfig, CQLLearner, CQLRLModule
from offlinerl.algorithms.iql import IQLConfig, IQLLearner, IQLRLModule
from offlinerl.algorithms.rebrac import ReBRACConfig, ReBRACLearner, ReBRACRLModule
from offlinerl.algorithms.td3bc import TD3BCConfig, TD3BCLearner, TD3BCRLModule
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.data.sources import InMemorySource

OBS_DIM, ACT_DIM, BATCH, HIDDEN, N_ACTIONS = 17, 6, 256, 256, 10
NEXT_ACTION_COLUMNS = ("next_actions", "has_next_actions")
OBS = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)


def _arrays(n=100_000, seed=0):
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, OBS_DIM)).astype(np.float32), "next_obs": rng.normal(size=(n, OBS_DIM)).astype(np.float32),
            "actions": rng.uniform(-1, 1, size=(n, ACT_DIM)).astype(np.float32), "rewards": rng.normal(size=n).astype(np.float32),
            "terminateds": np.zeros(n, np.float32), "next_actions": rng.uniform(-1, 1, size=(n, ACT_DIM)).astype(np.float32),
            "has_next_actions": np.ones(n, np.float32)}


def adam(params, lr):
    """Adam with the fused kernel, the step offlinerl's learners take (``Learner``'s ``fast_step``): the reference
    loops compare the rest of the update, not two Adam implementations (the default per-tensor CPU step costs
    ~0.2 ms more per update on two 256x256 MLPs)."""
    return torch.optim.Adam(params, lr, fused=True)


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, o))


class Actor(nn.Module):
    def __init__(self, obs_dim=OBS_DIM, act_dim=ACT_DIM):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)

    def forward(self, obs, n=None):
        mean, log_std = self.net(obs).chunk(2, -1)
        std = log_std.clamp(-5, 2).exp()
        if n is not None:
            mean, std = mean.expand(n, *mean.shape), std.expand(n, *std.shape)
        u = mean + std * torch.randn_like(mean)
        logp = (-0.5 * ((u - mean) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), logp

    def log_prob(self, obs, a):
        mean, log_std = self.net(obs).chunk(2, -1)
        std = log_std.clamp(-5, 2).exp()
        u = torch.atanh(a.clamp(-1 + 1e-6, 1 - 1e-6))
        logp = (-0.5 * ((u - mean) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        return logp - (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)


def q(net, s, a):
    return net(torch.cat([s, a], -1)).squeeze(-1)


def sample(data, batch=BATCH):
    """A minibatch (s, a, r, s', terminated) of ``batch`` uniformly drawn transitions."""
    idx = torch.randint(len(data["obs"]), (batch,))
    return (data[k][idx] for k in ("obs", "actions", "rewards", "next_obs", "terminateds"))


@torch.no_grad()
def polyak(pairs, tau=0.005):
    for target, online in pairs:
        for pt, po in zip(target.parameters(), online.parameters()):
            pt.lerp_(po, tau)


def cql_step(data, low=-1.0, high=1.0, batch=BATCH):
    """One pure-PyTorch CQL-SAC update per call, on in-memory tensors (actions in the box [low, high])."""
    obs_dim, act_dim = data["obs"].shape[1], data["actions"].shape[1]
    actor, q1, q2 = Actor(obs_dim, act_dim), mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    t1, t2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    t1.load_state_dict(q1.state_dict()), t2.load_state_dict(q2.state_dict())
    log_alpha = torch.zeros((), requires_grad=True)
    opt_a, opt_q = adam(actor.parameters(), 1e-4), adam([*q1.parameters(), *q2.parameters()], 3e-4)
    opt_t = adam([log_alpha], 1e-4)
    log_box = act_dim * math.log(high - low)

    def step():
        s, a, r, s2, d = sample(data, batch)
        a_new, logp = actor(s)
        alpha = log_alpha.exp()
        loss_t = -(log_alpha * (logp.detach() - act_dim)).mean()
        loss_a = (alpha.detach() * logp - torch.min(q(q1, s, a_new), q(q2, s, a_new))).mean()
        with torch.no_grad():
            a2, _ = actor(s2)
            y = r + 0.99 * (1 - d) * torch.min(q(t1, s2, a2), q(t2, s2, a2))
            a_pi, lp_pi = actor(s, N_ACTIONS)
            a_pn, lp_pn = actor(s2, N_ACTIONS)
        a_rand = low + (high - low) * torch.rand(N_ACTIONS, batch, act_dim)
        s_rep = s.expand(N_ACTIONS, *s.shape)
        loss_q = 0
        for net in (q1, q2):
            cat = torch.cat([q(net, s_rep, a_rand) + log_box, q(net, s_rep, a_pi) - lp_pi, q(net, s_rep, a_pn) - lp_pn])
            qd = q(net, s, a)
            loss_q = loss_q + ((qd - y) ** 2).mean() + 5.0 * (torch.logsumexp(cat, 0) - qd).mean()
        for opt in (opt_a, opt_q, opt_t):
            opt.zero_grad()
        (loss_a + loss_t).backward(inputs=[*actor.parameters(), log_alpha])
        loss_q.backward(inputs=[*q1.parameters(), *q2.parameters()])
        for opt in (opt_a, opt_q, opt_t):
            opt.step()
        polyak(((t1, q1), (t2, q2)))

    return step


def _iql_update(batch, q_sa, log_pi, v, opts, pairs):
    """The IQL update both action kinds share: ``q_sa(net, s, a)`` -> [B], ``log_pi(s, a)`` -> [B];
    ``pairs``: (target, online) twin critics."""
    s, a, r, s2, d = batch
    (t1, q1), (t2, q2) = pairs
    with torch.no_grad():
        tq = torch.min(q_sa(t1, s, a), q_sa(t2, s, a))
        y = r + 0.99 * (1 - d) * v(s2).squeeze(-1)
    vs = v(s).squeeze(-1)
    diff = tq - vs
    loss_v = (torch.where(diff < 0, 0.3, 0.7) * diff ** 2).mean()
    loss_q = ((q_sa(q1, s, a) - y) ** 2).mean() + ((q_sa(q2, s, a) - y) ** 2).mean()
    w = torch.exp(3.0 * diff.detach()).clamp(max=100.0)
    loss_a = -(w * log_pi(s, a)).mean()
    for opt in opts:
        opt.zero_grad()
    (loss_v + loss_q + loss_a).backward()
    for opt in opts:
        opt.step()
    polyak(pairs)


def iql_step(data, low=-1.0, high=1.0, batch=BATCH):
    """One pure-PyTorch IQL update per call, on in-memory tensors (bounds unused: AWR scores data actions)."""
    obs_dim, act_dim = data["obs"].shape[1], data["actions"].shape[1]
    actor, q1, q2, v = Actor(obs_dim, act_dim), mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1), mlp(obs_dim, 1)
    t1, t2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    opts = [adam(p, 3e-4) for p in (actor.parameters(), [*q1.parameters(), *q2.parameters()], v.parameters())]
    return lambda: _iql_update(sample(data, batch), q, actor.log_prob, v, opts, ((t1, q1), (t2, q2)))


def cql_discrete_step(data, num_actions, batch=BATCH):
    """One pure-PyTorch discrete CQL update (double DQN on twin Q networks + the conservative gap)."""
    obs_dim = data["obs"].shape[1]
    q1, q2, t1, t2 = (mlp(obs_dim, num_actions) for _ in range(4))
    t1.load_state_dict(q1.state_dict()), t2.load_state_dict(q2.state_dict())
    opt = adam([*q1.parameters(), *q2.parameters()], 3e-4)

    def step():
        s, a, r, s2, d = sample(data, batch)
        a = a.long()
        with torch.no_grad():
            best = torch.min(q1(s2), q2(s2)).argmax(-1, keepdim=True)
            y = r + 0.99 * (1 - d) * torch.min(t1(s2).gather(-1, best), t2(s2).gather(-1, best)).squeeze(-1)
        loss = 0
        for net in (q1, q2):
            qs = net(s)
            qd = qs.gather(-1, a.unsqueeze(-1)).squeeze(-1)
            loss = loss + ((qd - y) ** 2).mean() + 5.0 * (torch.logsumexp(qs, -1) - qd).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        polyak(((t1, q1), (t2, q2)))

    return step


def iql_discrete_step(data, num_actions, batch=BATCH):
    """One pure-PyTorch discrete IQL update (twin Q over actions, V, a categorical AWR actor)."""
    obs_dim = data["obs"].shape[1]
    actor, q1, q2, t1, t2 = (mlp(obs_dim, num_actions) for _ in range(5))
    v = mlp(obs_dim, 1)
    opts = [adam(p, 3e-4) for p in (actor.parameters(), [*q1.parameters(), *q2.parameters()], v.parameters())]

    def pick(values, a):
        return values.gather(-1, a.long().unsqueeze(-1)).squeeze(-1)

    return lambda: _iql_update(sample(data, batch), lambda net, s, a: pick(net(s), a),
                               lambda s, a: pick(torch.log_softmax(actor(s), -1), a), v, opts, ((t1, q1), (t2, q2)))


def _stack(i, o, layers, layer_norm=False):
    """``layers`` hidden Linear-ReLU(-LayerNorm) layers of HIDDEN units, then a Linear to ``o``."""
    mods, d = [], i
    for _ in range(layers):
        mods += [nn.Linear(d, HIDDEN), nn.ReLU()] + ([nn.LayerNorm(HIDDEN)] if layer_norm else [])
        d = HIDDEN
    return nn.Sequential(*mods, nn.Linear(d, o))


def td3bc_step(data, low=-1.0, high=1.0, batch=BATCH, *, rebrac=False):
    """One pure-PyTorch TD3+BC update per call (Fujimoto & Gu 2021: critics every update; the actor,
    -α·Q/mean|Q| + MSE to the data's action, and the Polyak targets every 2nd); ``rebrac``: ReBRAC's
    (Tarasov et al. 2023: 3 hidden layers, LayerNorm critics, β1·Σ(π(s)−a)² − Q/mean|Q| for the actor,
    β2·Σ(a′−a′_data)² off the TD target). Actions in [−1, 1]; the bounds are unused."""
    obs_dim, act_dim = data["obs"].shape[1], data["actions"].shape[1]
    layers = 3 if rebrac else 2
    actor = _stack(obs_dim, act_dim, layers)
    q1, q2 = (_stack(obs_dim + act_dim, 1, layers, layer_norm=rebrac) for _ in range(2))
    ta, t1, t2 = (copy.deepcopy(net).requires_grad_(False) for net in (actor, q1, q2))
    opt_a, opt_q = adam(actor.parameters(), 3e-4), adam([*q1.parameters(), *q2.parameters()], 3e-4)
    n, count = len(data["obs"]), [0]

    def step():
        idx = torch.randint(n, (batch,))
        s, a, r, s2, d = (data[k][idx] for k in ("obs", "actions", "rewards", "next_obs", "terminateds"))
        with torch.no_grad():
            a2 = (torch.tanh(ta(s2)) + (0.2 * torch.randn_like(a)).clamp(-0.5, 0.5)).clamp(-1.0, 1.0)
            target = torch.min(q(t1, s2, a2), q(t2, s2, a2))
            if rebrac:
                target = target - 0.01 * (a2 - data["next_actions"][idx]).square().sum(-1) * data["has_next_actions"][idx]
            y = r + 0.99 * (1 - d) * target
        loss_q = ((q(q1, s, a) - y) ** 2).mean() + ((q(q2, s, a) - y) ** 2).mean()
        opt_q.zero_grad()
        loss_q.backward()
        opt_q.step()
        count[0] += 1
        if count[0] % 2:
            return
        pi = torch.tanh(actor(s))
        if rebrac:
            q_pi = torch.min(q(q1, s, pi), q(q2, s, pi))
            loss_a = (0.01 * (pi - a).square().sum(-1) - q_pi / q_pi.abs().mean().detach()).mean()
        else:
            q_pi = q(q1, s, pi)
            loss_a = -2.5 / q_pi.abs().mean().detach() * q_pi.mean() + ((pi - a) ** 2).mean()
        opt_a.zero_grad()
        loss_a.backward(inputs=list(actor.parameters()))
        opt_a.step()
        polyak(((ta, actor), (t1, q1), (t2, q2)))

    return step


REFERENCE_STEPS = {"cql": cql_step, "iql": iql_step, "td3bc": td3bc_step,
                   "rebrac": lambda data, low=-1.0, high=1.0, batch=BATCH: td3bc_step(data, low, high, batch, rebrac=True)}
DISCRETE_REFERENCE_STEPS = {"cql": cql_discrete_step, "iql": iql_discrete_step}


def _sync():
    if torch.cuda.is_available() and torch.get_default_device().type == "cuda":
        torch.cuda.synchronize()


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # main() may switch to process CPU time (steadier on a shared machine)


def _learner(name, arrays, device="cpu", batch=BATCH, precision="fp32"):
    cfg_cls, learner_cls, module_cls = {"cql": (CQLConfig, CQLLearner, CQLRLModule), "iql": (IQLConfig, IQLLearner, IQLRLModule),
                                        "td3bc": (TD3BCConfig, TD3BCLearner, TD3BCRLModule),
                                        "rebrac": (ReBRACConfig, ReBRACLearner, ReBRACRLModule)}[name]
    hidden = [HIDDEN] * (3 if name == "rebrac" else 2)  # ReBRAC's 3 x 256 (LayerNorm critics: its default)
    cfg = cfg_cls.from_dict({"train_batch_size": batch, "model": {"hidden": hidden}, "precision": precision})
    spec = MultiRLModuleSpec.single(RLModuleSpec(module_cls, OBS, ACT, cfg.module_config()))
    learner = learner_cls(config=cfg, module_spec=spec, device=torch.device(device)).build()
    source = InMemorySource(arrays, batch, 0, torch.device(device))
    learner.run_updates(source, 3)  # warm-up
    return learner, source


def ours(name, arrays, updates, device="cpu", batch=BATCH, precision="fp32"):
    learner, source = _learner(name, arrays, device, batch, precision)
    _sync()
    t0 = clock()
    learner.run_updates(source, updates)
    _sync()
    return updates / (clock() - t0)


def flops_per_update(name, arrays, batch=BATCH) -> float:
    """Floating-point operations of one update of ours (forwards, backwards, optimizer), over two updates."""
    from torch.utils.flop_counter import FlopCounterMode

    learner, source = _learner(name, arrays, batch=batch)
    with FlopCounterMode(display=False) as counter:
        learner.run_updates(source, 2)
    return counter.get_total_flops() / 2


def matmul_gflops(rows: int, width: int = HIDDEN, seconds: float = 2.0) -> float:
    """This machine's rate (GFLOP/s) of ``[rows, width] @ [width, width]``, the bulk of an update's work."""
    a, w = torch.randn(rows, width), torch.randn(width, width)
    out = torch.empty(rows, width)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, w, out=out)
        n += 1
    return 2 * rows * width * width * n / (time.perf_counter() - t0) / 1e9


def _time(step, updates):
    for _ in range(3):
        step()
    _sync()
    t0 = clock()
    for _ in range(updates):
        step()
    _sync()
    return updates / (clock() - t0)


def main() -> None:
    global clock
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2, help="alternate ours/reference this many times; best of each")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: this process's CPU time (steadier when neighbours load the machine; "
                        "CPU only, both loops run in this process)")
    parser.add_argument("--algorithms", default="cql,iql", help=f"of {','.join(REFERENCE_STEPS)}")
    parser.add_argument("--out", default="benchmarks/throughput_offpolicy.json")
    parser.add_argument("--device", default="cpu", help="cpu or cuda: where data, networks and updates live")
    parser.add_argument("--batch", type=int, default=BATCH, help="minibatch size (ReBRAC's recipes use 1024)")
    parser.add_argument("--bf16", action="store_true",
                        help="also time ours with config.precision=bf16 (interleaved with the rest; the loop stays float32)")
    parser.add_argument("--flops", action="store_true",
                        help="also count each update's FLOPs and time this machine's matmul at the same shapes (CPU)")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)
    torch.set_default_device(args.device)  # the reference loops build their networks and samples there
    all_arrays = _arrays()
    data = {k: torch.as_tensor(v, device=args.device) for k, v in all_arrays.items()}
    results = {}
    for name in args.algorithms.split(","):
        make_step = REFERENCE_STEPS[name]
        n = args.updates * {"iql": 4, "td3bc": 4, "rebrac": 2}.get(name, 1)
        columns = NEXT_ACTION_COLUMNS if name == "rebrac" else ()  # the data's next actions: ReBRAC's only
        arrays = {k: v for k, v in all_arrays.items() if k not in NEXT_ACTION_COLUMNS or k in columns}
        o = r = h = 0.0
        for _ in range(args.repeats):  # alternate, so both see the same (shared) machine
            o = max(o, ours(name, arrays, n, args.device, args.batch))
            r = max(r, _time(make_step(data, batch=args.batch), n))
            if args.bf16:
                h = max(h, ours(name, arrays, n, args.device, args.batch, precision="bf16"))
        results[name] = {"ours_in_memory_updates_per_s": round(o, 2), "pure_pytorch_updates_per_s": round(r, 2),
                         "ratio": round(o / r, 3), "updates_timed": n}
        if args.bf16:
            results[name].update({"ours_bf16_updates_per_s": round(h, 2), "bf16_over_fp32": round(h / o, 3)})
        if args.flops:
            flops, peak = flops_per_update(name, arrays, args.batch), matmul_gflops(args.batch)
            results[name].update({"gflop_per_update": round(flops / 1e9, 3), "matmul_gflops": round(peak, 1),
                                  "ours_gflops": round(flops * o / 1e9, 1),
                                  "share_of_matmul_rate": round(flops * o / 1e9 / peak, 3)})
        print(name, results[name], flush=True)
    meta = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu", "batch": args.batch, "hidden": [HIDDEN, HIDDEN], "obs_dim": OBS_DIM, "act_dim": ACT_DIM, "cql_sampled_actions": N_ACTIONS,
            "threads": args.threads, "clock": args.clock, "torch": torch.__version__, "load_average": list(__import__("os").getloadavg())}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
