"""A custom RLModule trained with the stock BC learner.

``ResidualPolicy`` is a policy with LayerNorm residual blocks. It implements the
three forwards and ``action_dist`` comes from the ``RLModule`` base, so the
stock ``BCLearner`` (and evaluation, checkpoints, the CLI's ``evaluate``) work
with it unchanged. Run:

    python examples/custom_module.py --updates 1000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

from offlinerl.algorithms.bc import BCConfig
from offlinerl.core import columns as C
from offlinerl.core.flatten import flat_dim
from offlinerl.core.rl_module import RLModule, action_dist_inputs_dim
from offlinerl.training.algorithm import Algorithm

REPO = Path(__file__).resolve().parents[1]


class ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class ResidualPolicy(RLModule):
    """Policy only: ``model_config["width"]`` and ``model_config["blocks"]`` set its size."""

    def setup(self) -> None:
        width = int(self.model_config.get("width", 64))
        self.trunk = nn.Sequential(nn.Linear(flat_dim(self.observation_space), width),
                                   *[ResidualBlock(width) for _ in range(int(self.model_config.get("blocks", 2)))],
                                   nn.ReLU())
        self.head = nn.Linear(width, action_dist_inputs_dim(self.action_space))

    def forward_train(self, batch):
        inputs = self.head(self.trunk(batch[C.OBS]))
        return {C.ACTION_DIST_INPUTS: inputs, C.ACTION_DIST: self.action_dist(inputs)}

    def forward_inference(self, batch):
        inputs = self.head(self.trunk(batch[C.OBS]))
        return {C.ACTIONS: self.action_dist(inputs).mode(), C.ACTION_DIST_INPUTS: inputs}

    def forward_exploration(self, batch):
        inputs = self.head(self.trunk(batch[C.OBS]))
        dist = self.action_dist(inputs)
        actions = dist.sample()
        return {C.ACTIONS: actions, C.ACTION_LOGP: dist.log_prob(actions), C.ACTION_DIST_INPUTS: inputs}


def main(updates: int = 1000, dataset: str | Path = REPO / "datasets" / "cartpole-mixed", episodes: int = 10) -> dict:
    config = BCConfig.from_dict({
        "updates_per_iteration": min(updates, 500),
        "model": {"extra": {"width": 64, "blocks": 2}},
        "evaluation": {"episodes": episodes, "interval": 0},
    })
    algo = Algorithm("bc", config, dataset, module_class=ResidualPolicy)
    while algo.num_updates < updates:
        metrics = algo.train()
    result = {**metrics, **algo.evaluate()}
    algo.stop()
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--dataset", default=str(REPO / "datasets" / "cartpole-mixed"))
    args = parser.parse_args()
    r = main(args.updates, args.dataset)
    print(f"ResidualPolicy + BC: {int(r['learner/updates'])} updates, loss {r['losses/actor']:.3f}, "
          f"eval return {r['eval/return_mean']:.1f} ± {r['eval/return_std']:.1f}")
