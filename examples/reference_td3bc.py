"""TD3+BC in one page, without Ray: the library's losses, module and connectors in a plain loop.

    PYTHONPATH=. python examples/reference_td3bc.py datasets/pendulum-mixed --updates 5000

Read it top to bottom: load every transition with the same connectors the Ray pipeline
uses, then repeat {draw a batch, step the critics on the TD loss with a smoothed target
action; every policy_freq-th update also step the actor on −λ·Q + BC and Polyak-average
both targets}. ``tests/algorithms/test_td3bc_training.py`` checks that this loop and the
Ray path (Algorithm + LearnerGroup) compute identical losses and weights.
"""

from __future__ import annotations

import argparse

import torch

from offlinerl.algorithms.td3bc import TD3BCConfig, TD3BCRLModule, actor_loss, critic_loss
from offlinerl.core import columns as C
from offlinerl.data.transitions import load_transitions
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes import read_info


def make_optimizers(module: TD3BCRLModule, cfg: TD3BCConfig) -> dict[str, torch.optim.Optimizer]:
    # fused: the Adam kernel offlinerl's learners step with (``core.learner.fast_step``), so the two agree bit for bit
    return {"actor": torch.optim.Adam(module.policy_parameters(), lr=cfg.actor_lr, fused=True),
            "critic": torch.optim.Adam(module.critic_parameters(), lr=cfg.critic_lr, fused=True)}


def _step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, retain: bool) -> None:
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for p, g in zip(params, torch.autograd.grad(loss, params, retain_graph=retain)):
        p.grad = g
    optimizer.step()


def update(module: TD3BCRLModule, optimizers: dict[str, torch.optim.Optimizer], batch: dict[str, torch.Tensor],
           cfg: TD3BCConfig, update_index: int, *, losses: tuple = (critic_loss, actor_loss),
           generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """One update; ``losses`` = (critic loss, actor loss) of the TD3 family (ReBRAC passes its own). The target
    policy smoothing noise comes from ``generator`` (the learner's: ``torch.Generator().manual_seed(seed)``)."""
    critic_fn, actor_fn = losses
    noise = torch.randn(batch[C.ACTIONS].shape, generator=generator)  # target policy smoothing
    critic = critic_fn(batch, module, cfg, noise)
    if (update_index + 1) % cfg.policy_freq:  # critic-only update: the actor's optimizer does not step
        _step(optimizers["critic"], critic.losses["critic"], retain=False)
        return {**critic.losses, **critic.metrics}
    actor = actor_fn(batch, module, cfg)
    actor_grads = torch.autograd.grad(actor.losses["actor"], list(module.policy_parameters()), retain_graph=True)
    _step(optimizers["critic"], critic.losses["critic"], retain=False)  # both gradients before any weight moves
    for p, g in zip(module.policy_parameters(), actor_grads):
        p.grad = g
    optimizers["actor"].step()
    module.sync_target_networks(cfg.tau)
    return {k: v.detach() for k, v in {**critic.losses, **actor.losses, **critic.metrics, **actor.metrics}.items()}


def main(config_cls: type = TD3BCConfig, module_cls: type = TD3BCRLModule, losses: tuple = (critic_loss, actor_loss),
         default_updates: int = 5000, description: str = __doc__) -> None:
    """The command line: train on a dataset, then evaluate (the TD3 family's loop; ReBRAC's script reuses it)."""
    parser = argparse.ArgumentParser(description=description.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--updates", type=int, default=default_updates)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    args = parser.parse_args()

    cfg = config_cls(seed=args.seed, normalize_observations=True)
    torch.manual_seed(cfg.seed)
    info = read_info(args.dataset)
    arrays, env_to_module = load_transitions(args.dataset, cfg.normalize_observations, cfg)
    data = {k: torch.as_tensor(v) for k, v in arrays.items()}
    module = module_cls(info.observation_space, info.action_space, cfg.module_config())
    optimizers = make_optimizers(module, cfg)
    n = len(data[C.OBS])
    generator = torch.Generator().manual_seed(cfg.seed)
    for i in range(args.updates):
        idx = torch.randint(n, (cfg.train_batch_size,))
        metrics = update(module, optimizers, {k: v[idx] for k, v in data.items()}, cfg, i, losses=losses,
                         generator=generator)
        if (i + 1) % 1000 == 0:
            print(i + 1, {k: round(float(v), 3) for k, v in metrics.items()})
    result = evaluate_module(module, info.env_id, env_to_module, episodes=args.eval_episodes, seed=cfg.evaluation.seed)
    print(f"return {result['eval/return_mean']:.1f} ± {result['eval/return_std']:.1f}")


if __name__ == "__main__":
    main()
