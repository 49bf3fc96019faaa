"""Sanity check that a reference dataset is learnable and leaves room for offline RL.

    PYTHONPATH=. python datasets/check_learnability.py cartpole-mixed [--updates 5000] [--seeds 0 1 2]

A deliberately small, self-contained PyTorch loop (not the offlinerl training
stack): behaviour cloning of the whole mix, BC of the best level alone,
MARWIL (advantage-weighted BC with Monte-Carlo returns, β = 1) and IQL, each
evaluated with its deterministic policy in the real env. The numbers are
normalised with the dataset card, printed, and appended to runs/learnability.jsonl.
They say what the data allows, not what offlinerl's algorithms reach.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent
for _path in (HERE.parent / "src", HERE.parent):  # the checkout's package (src/ layout) and datasets/
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from offlinerl.episodes import load_episodes, read_info  # noqa: E402
from offlinerl.scoring import load_card, normalized_score  # noqa: E402

GAMMA = 0.99


def mlp(n_in: int, n_out: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_out))


def transitions(path: Path) -> dict[str, np.ndarray]:
    """Flat arrays: obs, actions, rewards, next_obs, done (terminated), returns-to-go, level."""
    cols: dict[str, list] = {k: [] for k in ("obs", "act", "rew", "next_obs", "done", "rtg", "level")}
    for ep in load_episodes(path):
        t = len(ep)
        rtg = np.zeros(t, dtype=np.float64)
        acc = 0.0
        for i in range(t - 1, -1, -1):
            acc = float(ep.rewards[i]) + GAMMA * acc
            rtg[i] = acc
        done = np.zeros(t, dtype=np.float32)
        done[-1] = float(ep.terminated)
        for k, v in (("obs", ep.obs[:-1]), ("next_obs", ep.obs[1:]), ("act", ep.actions), ("rew", ep.rewards),
                     ("done", done), ("rtg", rtg), ("level", ep.extras["behavior_level"])):
            cols[k].append(np.asarray(v))
    return {k: np.concatenate(v) for k, v in cols.items()}


class Agent:
    """Observation normalisation + a policy network; deterministic acting."""

    def __init__(self, obs_mean, obs_std, action_space, hidden):
        self.mean, self.std = torch.as_tensor(obs_mean), torch.as_tensor(obs_std)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        n_obs = len(obs_mean)
        if self.discrete:
            self.pi = mlp(n_obs, int(action_space.n), hidden)
        else:
            self.low = torch.as_tensor(action_space.low, dtype=torch.float32)
            self.high = torch.as_tensor(action_space.high, dtype=torch.float32)
            self.pi = mlp(n_obs, action_space.shape[0], hidden)

    def norm(self, obs):
        return (obs - self.mean) / self.std

    def policy_loss(self, obs, act, weights):
        out = self.pi(self.norm(obs))
        if self.discrete:
            per = F.cross_entropy(out, act, reduction="none")
        else:
            pred = self.low + (torch.tanh(out) + 1) * 0.5 * (self.high - self.low)
            per = ((pred - act) ** 2).sum(-1)
        return (weights * per).mean()

    @torch.no_grad()
    def act(self, obs):
        out = self.pi(self.norm(torch.as_tensor(np.asarray(obs, dtype=np.float32))[None]))[0]
        if self.discrete:
            return int(out.argmax())
        return (self.low + (torch.tanh(out) + 1) * 0.5 * (self.high - self.low)).numpy()


def evaluate(agent: Agent, env_id: str, episodes: int, seed: int) -> float:
    env = gym.make(env_id)
    total = 0.0
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        done = False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs))
            total += float(r)
            done = term or trunc
    return total / episodes


def train(method: str, data: dict, info, updates: int, hidden: int, seed: int, best_level: int,
          return_range: float) -> Agent:
    """``method``: bc | bc-best | marwil[:β] | iql[:β]."""
    method, _, beta_text = method.partition(":")
    beta = float(beta_text) if beta_text else (1.0 if method == "marwil" else 3.0)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(data["obs"], dtype=torch.float32)
    nxt = torch.as_tensor(data["next_obs"], dtype=torch.float32)
    discrete = isinstance(info.action_space, gym.spaces.Discrete)
    act = torch.as_tensor(data["act"], dtype=torch.long if discrete else torch.float32)
    mean, std = obs.mean(0), obs.std(0) + 1e-3
    agent = Agent(mean, std, info.action_space, hidden)
    idx_pool = np.flatnonzero(data["level"] == best_level) if method == "bc-best" else np.arange(len(obs))
    opt = torch.optim.Adam(agent.pi.parameters(), lr=3e-4)
    n_obs = obs.shape[1]
    ret_scale = float(np.abs(data["rtg"]).max())
    rtg = torch.as_tensor(data["rtg"] / ret_scale, dtype=torch.float32)
    # IQL's reward scaling for D4RL locomotion: 1000 / (max episode return − min episode return)
    rew = torch.as_tensor(data["rew"], dtype=torch.float32) * (1000.0 / (return_range or 1.0))
    done = torch.as_tensor(data["done"], dtype=torch.float32)
    if method == "marwil":
        value = mlp(n_obs, 1, hidden)
        v_opt = torch.optim.Adam(value.parameters(), lr=3e-4)
        sq_norm = None
    if method == "iql":
        n_q_in = n_obs if discrete else n_obs + act.shape[1]
        n_q_out = int(info.action_space.n) if discrete else 1
        q1, q2, v = mlp(n_q_in, n_q_out, hidden), mlp(n_q_in, n_q_out, hidden), mlp(n_obs, 1, hidden)
        q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
        q_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-4)
        v_opt = torch.optim.Adam(v.parameters(), lr=3e-4)

        def qvals(net, o, a):
            if discrete:
                return net(o).gather(1, a[:, None])[:, 0]
            return net(torch.cat([o, a], -1))[:, 0]
    for _ in range(updates):
        b = torch.as_tensor(rng.choice(idx_pool, 256))
        o, a = agent.norm(obs[b]), act[b]
        weights = torch.ones(len(b))
        if method == "marwil":
            vpred = value(o)[:, 0]
            adv = rtg[b] - vpred
            v_opt.zero_grad()
            (adv**2).mean().backward()
            v_opt.step()
            adv = adv.detach()
            sq = (adv**2).mean()
            sq_norm = sq if sq_norm is None else sq_norm + 1e-2 * (sq - sq_norm)
            weights = torch.exp(beta * adv / (sq_norm.sqrt() + 1e-8)).clamp(max=20.0)
        if method == "iql":
            with torch.no_grad():
                q_t = torch.minimum(qvals(q1_t, o, a), qvals(q2_t, o, a))
                target = rew[b] + GAMMA * (1 - done[b]) * v(agent.norm(nxt[b]))[:, 0]
            diff = q_t - v(o)[:, 0]
            v_loss = (torch.where(diff > 0, 0.7, 0.3) * diff**2).mean()
            v_opt.zero_grad()
            v_loss.backward()
            v_opt.step()
            q_loss = F.mse_loss(qvals(q1, o, a), target) + F.mse_loss(qvals(q2, o, a), target)
            q_opt.zero_grad()
            q_loss.backward()
            q_opt.step()
            with torch.no_grad():
                for net, tgt in ((q1, q1_t), (q2, q2_t)):
                    for p, pt in zip(net.parameters(), tgt.parameters()):
                        pt.mul_(0.995).add_(0.005 * p)
                weights = torch.exp(beta * (q_t - v(o)[:, 0])).clamp(max=100.0)
        loss = agent.policy_loss(obs[b], a, weights)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return agent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a dataset under datasets/, or a dataset directory")
    parser.add_argument("--methods", nargs="+", default=["bc", "bc-best", "marwil", "iql"])
    parser.add_argument("--updates", type=int, default=5000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=str(HERE.parent / "runs" / "learnability.jsonl"),
                        help="JSON lines are appended here (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = Path(args.name) if Path(args.name).is_dir() else HERE / args.name
    info, card = read_info(path), load_card(path)
    data = transitions(path)
    best_level = card["levels"][card["best_level"]]["index"]
    rows = []
    for method in args.methods:
        scores, returns = [], []
        start = time.time()
        for seed in args.seeds:
            agent = train(method, data, info, args.updates, args.hidden, seed, best_level,
                          card["return_max"] - card["return_min"])
            ret = evaluate(agent, info.env_id, args.eval_episodes, 5_000_000 + 1000 * seed)
            returns.append(ret)
            scores.append(normalized_score(ret, card["random_return"], card["best_return"]))
        row = {"dataset": args.name, "method": method, "updates": args.updates, "hidden": args.hidden,
               "seeds": args.seeds, "return_mean": float(np.mean(returns)), "score_mean": float(np.mean(scores)),
               "score_std": float(np.std(scores)), "seconds": round(time.time() - start, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
