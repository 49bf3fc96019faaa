"""ReBRAC in one page, without Ray: the library's losses, module and connectors in a plain loop.

    PYTHONPATH=. python examples/reference_rebrac.py datasets/pendulum-mixed --updates 3000

Read it top to bottom: load every transition, with the data's next action, through the same
connectors the Ray pipeline uses; then repeat {draw a batch, step the critics on the TD loss whose
target subtracts the critic's BC penalty at s'; every policy_freq-th update also step the actor on
β1·BC − λ·Q and Polyak-average both targets}. ``tests/algorithms/test_rebrac_training.py`` checks
that this loop and the Ray path (Algorithm + LearnerGroup) compute identical losses and weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from examples import reference_td3bc
from examples.reference_td3bc import make_optimizers
from offlinerl.algorithms.rebrac import ReBRACConfig, ReBRACRLModule, actor_loss, critic_loss
from offlinerl.connectors import ConnectorPipeline
from offlinerl.data import transitions

__all__ = ["load_transitions", "make_optimizers", "update", "main"]


def load_transitions(path: str | Path, normalize: bool) -> tuple[dict[str, np.ndarray], ConnectorPipeline]:
    """Every transition with ReBRAC's columns (next actions and their mask) and the env-side pipeline."""
    return transitions.load_transitions(path, normalize, ReBRACConfig())


def update(module: ReBRACRLModule, optimizers: dict[str, torch.optim.Optimizer], batch: dict[str, torch.Tensor],
           cfg: ReBRACConfig, update_index: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """TD3+BC's update (critics every step, the actor and targets every ``policy_freq``-th) with ReBRAC's losses."""
    return reference_td3bc.update(module, optimizers, batch, cfg, update_index, losses=(critic_loss, actor_loss),
                                  generator=generator)


def main() -> None:
    reference_td3bc.main(ReBRACConfig, ReBRACRLModule, (critic_loss, actor_loss), default_updates=3000,
                         description=__doc__)


if __name__ == "__main__":
    main()
