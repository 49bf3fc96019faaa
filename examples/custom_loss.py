"""A custom loss with the stock module: "filtered BC" on the stock ``DefaultRLModule``.

Filtered BC imitates only the transitions whose return-to-go is in the top
``quantile`` of the batch (a cheap alternative to advantage weighting). It needs
a config field (``quantile``), a learner connector (``ComputeReturnsToGo``) and a
loss function; the optimizer setup and update step are the stock ``BCLearner``'s.

    python examples/custom_loss.py --updates 1000
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from offlinerl.algorithms.bc import BCConfig, BCLearner
from offlinerl.algorithms.registry import register_algorithm
from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.loss import LossOut
from offlinerl.training.algorithm import Algorithm

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, kw_only=True)
class FilteredBCConfig(BCConfig):
    quantile: float = 0.5
    """Imitate transitions whose return-to-go is at or above this quantile of the batch."""

    def learner_connectors(self, observation_space, action_space):
        from offlinerl.connectors import AddTransitions, ComputeReturnsToGo

        return [AddTransitions(), ComputeReturnsToGo(self.gamma)]


def filtered_bc_loss(batch, fwd_out, config) -> LossOut:
    """``L = -E[1(R >= q_quantile(R)) log pi(a|s)] / P(R >= q)``."""
    rtg = batch[C.RETURNS_TO_GO]
    keep = (rtg >= torch.quantile(rtg, config.quantile)).float()  # [B]
    logp = fwd_out[C.ACTION_DIST].log_prob(batch[C.ACTIONS])  # [B]
    loss = -(keep * logp).sum() / keep.sum().clamp(min=1.0)
    return LossOut(losses={"actor": loss}, metrics={"filtered_bc/kept": keep.mean()})


class FilteredBCLearner(BCLearner):
    def compute_loss_for_module(self, module_id, module, batch, fwd_out):
        return filtered_bc_loss(batch, fwd_out, self.config)


register_algorithm("filtered_bc", FilteredBCConfig, FilteredBCLearner, DefaultRLModule)


def main(updates: int = 1000, dataset: str | Path = REPO / "datasets" / "cartpole-mixed", episodes: int = 10) -> dict:
    config = FilteredBCConfig.from_dict({
        "quantile": 0.5,
        "updates_per_iteration": min(updates, 500),
        "model": {"hidden": [64, 64]},
        "evaluation": {"episodes": episodes, "interval": 0},
    })
    algo = Algorithm("filtered_bc", config, dataset)
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
    print(f"filtered BC: {int(r['learner/updates'])} updates, kept {r['filtered_bc/kept']:.2f} of each batch, "
          f"eval return {r['eval/return_mean']:.1f} ± {r['eval/return_std']:.1f}")
