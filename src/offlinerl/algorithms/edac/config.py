"""EDAC configuration (An et al. 2021), defaults as the paper's and CORL's Gym-MuJoCo runs.

SAC's settings (``SACConfig``: Adam 3e-4 for actor, critics and temperature, batch 256, τ = 0.005, γ = 0.99,
automatic temperature with target entropy −|A|, α starting at 1) with ``num_critics`` = 10 members and the
ensemble-diversity weight ``eta`` = 1. The per-dataset values of the published runs (CORL's
``configs/offline/edac``: hopper 50 members; η = 5 on halfcheetah- and walker2d-medium-expert; η = 0.1 on maze2d)
are in the benchmark recipes. Both networks have three hidden layers of 256 there (``model: {hidden: [256, 256,
256]}`` in the recipes; the config's own default is the toolkit's two). ``eta: 0`` is SAC-N (the same paper's
ensemble-only baseline; CORL: 10-500 members).
"""

from __future__ import annotations

from dataclasses import dataclass

from offlinerl.algorithms.sac.config import SACConfig
from offlinerl.config_io import check

__all__ = ["EDACConfig"]


@dataclass(frozen=True, kw_only=True)
class EDACConfig(SACConfig):
    num_critics: int = 10
    """Members of the Q ensemble (at least 2); the TD target and the actor take the member-wise minimum."""
    eta: float = 1.0
    """η: weight of the diversity loss (the members' action gradients' mean pairwise cosine) in the critics' loss;
    0 gives SAC-N."""
    paper_init: bool = True
    """Initialise as the paper's code does: hidden biases 0.1, the policy's output layer U(±1e-3) and the critics'
    U(±3e-3); false: ``nn.Linear``'s."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.num_critics >= 2, "num_critics", f"EDAC needs an ensemble of at least 2, got {self.num_critics!r}")
        check(self.eta >= 0, "eta", f"must be >= 0, got {self.eta!r}")

    def module_config(self) -> dict:
        return {**super().module_config(), "paper_init": self.paper_init}
