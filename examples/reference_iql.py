"""IQL in one page, without Ray: the library's loss, module and connectors in a plain loop.

    PYTHONPATH=. python examples/reference_iql.py datasets/pendulum-mixed --updates 5000

Read it top to bottom: load every transition with the same connectors the Ray pipeline
uses, then repeat {draw a batch, compute the three IQL losses, step each optimizer on the
gradient of its own loss, Polyak-average the target critics}. ``tests/examples`` checks
that this loop and the Ray path (Algorithm + LearnerGroup) compute identical losses.
"""

from __future__ import annotations

import argparse

import torch

from offlinerl.algorithms.iql import IQLConfig, IQLRLModule, iql_loss
from offlinerl.core import columns as C
from offlinerl.data.transitions import load_transitions
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes import read_info


def make_optimizers(module: IQLRLModule, cfg: IQLConfig) -> dict[str, torch.optim.Optimizer]:
    # fused: the Adam kernel offlinerl's learners step with (``core.learner.fast_step``), so the two agree bit for bit
    return {"actor": torch.optim.Adam(module.policy_parameters(), lr=cfg.actor_lr, fused=True),
            "critic": torch.optim.Adam(module.critic_parameters(), lr=cfg.critic_lr, fused=True),
            "value": torch.optim.Adam(module.value_parameters(), lr=cfg.value_lr, fused=True)}


def update(module: IQLRLModule, optimizers: dict[str, torch.optim.Optimizer], batch: dict[str, torch.Tensor],
           cfg: IQLConfig) -> dict[str, torch.Tensor]:
    out = iql_loss(batch, module, cfg)
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
    args = parser.parse_args()

    cfg = IQLConfig(seed=args.seed, normalize_observations=True)
    torch.manual_seed(cfg.seed)
    info = read_info(args.dataset)
    arrays, env_to_module = load_transitions(args.dataset, cfg.normalize_observations)
    data = {k: torch.as_tensor(v) for k, v in arrays.items()}
    module = IQLRLModule(info.observation_space, info.action_space, cfg.module_config())
    optimizers = make_optimizers(module, cfg)
    n = len(data[C.OBS])
    for step in range(1, args.updates + 1):
        idx = torch.randint(n, (cfg.train_batch_size,))
        metrics = update(module, optimizers, {k: v[idx] for k, v in data.items()}, cfg)
        if step % 1000 == 0:
            print(step, {k: round(float(v), 3) for k, v in metrics.items()})
    result = evaluate_module(module, info.env_id, env_to_module, episodes=args.eval_episodes, seed=cfg.evaluation.seed)
    print(f"return {result['eval/return_mean']:.1f} ± {result['eval/return_std']:.1f}")


if __name__ == "__main__":
    main()
