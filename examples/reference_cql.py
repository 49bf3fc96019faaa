"""CQL in one page, without Ray: the library's loss, module and connectors in a plain loop.

    PYTHONPATH=. python examples/reference_cql.py datasets/pendulum-mixed --updates 5000
    PYTHONPATH=. python examples/reference_cql.py datasets/cartpole-mixed --updates 5000 --cql-weight 1

Read it top to bottom: load every transition with the same connectors the Ray pipeline
uses, then repeat {draw a batch, compute the CQL losses (actor, critic, temperature; only
the critic for discrete actions), step each optimizer on the gradient of its own loss,
Polyak-average the target critics}. ``tests/examples`` checks
that this loop and the Ray path (Algorithm + LearnerGroup) compute identical losses.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from offlinerl.algorithms.cql import CQLConfig, CQLRLModule, cql_continuous_loss, cql_discrete_loss
from offlinerl.core import columns as C
from offlinerl.data.transitions import load_transitions
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes import read_info


def make_optimizers(module: CQLRLModule, cfg: CQLConfig) -> dict[str, torch.optim.Optimizer]:
    optimizers = {"critic": torch.optim.Adam(module.critic_parameters(), lr=cfg.critic_lr, fused=True)}  # as the learners
    if module.discrete:
        return optimizers
    with torch.no_grad():
        module.log_alpha.fill_(float(np.log(cfg.initial_alpha)))
        module.log_cql_alpha.fill_(float(np.log(cfg.initial_cql_alpha)))
    optimizers["actor"] = torch.optim.Adam(module.policy_parameters(), lr=cfg.actor_lr, fused=True)
    optimizers["alpha"] = torch.optim.Adam([module.log_alpha], lr=cfg.alpha_lr, fused=True)
    if cfg.lagrangian:
        optimizers["cql_alpha"] = torch.optim.Adam([module.log_cql_alpha], lr=cfg.cql_alpha_lr, fused=True)
    return optimizers


def update(module: CQLRLModule, optimizers: dict[str, torch.optim.Optimizer], batch: dict[str, torch.Tensor],
           cfg: CQLConfig, step: int) -> dict[str, torch.Tensor]:
    if module.discrete:
        out = cql_discrete_loss(batch, module, cfg)
    else:
        out = cql_continuous_loss(batch, module, cfg, update_index=step)
    params = {name: [p for g in opt.param_groups for p in g["params"]] for name, opt in optimizers.items()}
    grads = {name: torch.autograd.grad(out.losses[name], params[name], retain_graph=True) for name in optimizers}
    for name, opt in optimizers.items():  # every gradient is taken before any weight moves
        for p, g in zip(params[name], grads[name]):
            p.grad = g
        opt.step()
    module.sync_target_networks(cfg.tau)
    return {k: v.detach() for k, v in {**out.losses, **out.metrics}.items()}  # tensors: no sync per step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--updates", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--cql-weight", type=float, default=5.0)
    args = parser.parse_args()

    cfg = CQLConfig(seed=args.seed, normalize_observations=True, cql_weight=args.cql_weight)
    torch.manual_seed(cfg.seed)
    info = read_info(args.dataset)
    arrays, env_to_module = load_transitions(args.dataset, cfg.normalize_observations)
    data = {k: torch.as_tensor(v) for k, v in arrays.items()}
    module = CQLRLModule(info.observation_space, info.action_space, cfg.module_config())
    optimizers = make_optimizers(module, cfg)
    n = len(data[C.OBS])
    for step in range(args.updates):
        idx = torch.randint(n, (cfg.train_batch_size,))
        metrics = update(module, optimizers, {k: v[idx] for k, v in data.items()}, cfg, step)
        if (step + 1) % 1000 == 0:
            print(step + 1, {k: round(float(v), 3) for k, v in metrics.items()})
    result = evaluate_module(module, info.env_id, env_to_module, episodes=args.eval_episodes, seed=cfg.evaluation.seed)
    print(f"return {result['eval/return_mean']:.1f} ± {result['eval/return_std']:.1f}")


if __name__ == "__main__":
    main()
