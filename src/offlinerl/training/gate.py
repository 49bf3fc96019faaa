"""The deployed policy of a gated fine-tune (``online.promotion: gated``).

Fine-tuning can unlearn before it improves: the policy follows critics that have
just met its own experience, and a user who stops early (or whose budget is
smaller) would deploy a policy worse than the one they started from. With a
gate, the learners train as always and the runners explore with the learners'
latest policy (the *candidate*), but the policy that is evaluated, checkpointed
as the job's policy (``offlinerl evaluate``/``export``/``ope``/``collect --policy`` read it) and
handed on by ``finetune --from`` is the *deployed* one. It starts as the policy
the job starts from. Every ``gate_interval`` iterations both policies play the
same ``gate_episodes`` fresh starts (``forward_inference``; gate ``g`` resets
episode ``j`` with ``gate_seed + g * gate_episodes + j``), and the candidate is
deployed if the mean of the paired return differences, less ``gate_confidence``
standard errors of that mean, reaches ``gate_margin`` (``paired_gate``).
Fresh starts at every gate keep the comparison from fitting one small set of
starts; the same starts for both keep it paired; the standard errors keep a
candidate that was only lucky on a few starts out (returns with heavy tails,
such as Pendulum's, where one start that spins costs ~800). Gate episodes are
env steps like any other: they count in ``online/env_steps`` (and are not
learned from).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

__all__ = ["PolicyGate", "paired_gate"]


def paired_gate(candidate: Sequence[float], deployed: Sequence[float], margin: float = 0.0,
                confidence: float = 1.0) -> tuple[bool, float, float]:
    """``(deploy, mean difference, its standard error)`` for returns of the same starts, in the same order:
    deploy when ``mean(candidate - deployed) - confidence * se >= margin`` (se = 0 for one episode)."""
    diff = np.asarray(candidate, dtype=np.float64) - np.asarray(deployed, dtype=np.float64)
    if diff.ndim != 1 or not len(diff):
        raise ValueError(f"paired_gate needs returns of the same starts, got {len(candidate)} and {len(deployed)}")
    mean = float(diff.mean())
    se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else 0.0
    return mean - confidence * se >= margin, mean, se


@dataclass
class PolicyGate:
    """The deployed policy's inference-only weights, its newest gate score, and the gates so far."""

    margin: float = 0.0
    confidence: float = 1.0
    weights: dict[str, torch.Tensor] | None = None
    """Inference-only MultiRLModule state (None until the job's first iteration deploys its starting policy)."""
    score: float | None = None
    """The deployed policy's mean return at the newest gate (None before the first)."""
    gates: int = 0
    promotions: int = 0

    def deploy(self, weights: Mapping[str, torch.Tensor]) -> None:
        self.weights = {k: v.detach().clone() for k, v in weights.items()}

    def seed(self, gate_seed: int, episodes: int) -> int:
        """The first reset seed of the next gate's episodes (fresh starts every gate)."""
        return gate_seed + self.gates * episodes

    def consider(self, weights: Mapping[str, torch.Tensor], candidate: Sequence[float],
                 deployed: Sequence[float]) -> tuple[bool, float, float]:
        """One gate on the two policies' returns of the same starts: deploy the candidate (``weights``) if
        ``paired_gate`` says so; ``(deployed?, mean difference, its standard error)``."""
        self.gates += 1
        promoted, diff, se = paired_gate(candidate, deployed, self.margin, self.confidence)
        if promoted:
            self.deploy(weights)
            self.promotions += 1
        self.score = float(np.mean(candidate if promoted else deployed))
        return promoted, diff, se

    def metadata(self) -> dict[str, Any]:
        return {"score": self.score, "gates": self.gates, "promotions": self.promotions}

    def restore(self, weights: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> None:
        self.deploy(weights)
        self.score = None if meta.get("score") is None else float(meta["score"])
        self.gates, self.promotions = int(meta["gates"]), int(meta["promotions"])
