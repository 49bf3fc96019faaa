"""Action distributions: ``Categorical`` for Discrete actions and ``TanhGaussian``
for Box actions (a Gaussian squashed by tanh and scaled to the action bounds).

Both are built from a flat ``dist_inputs`` tensor (what a policy head outputs)
so the inputs can be stored in data (``action_dist_inputs``) and rebuilt later.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["Distribution", "Categorical", "TanhGaussian", "LOG_STD_MIN", "LOG_STD_MAX"]

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0
_LOG2 = math.log(2.0)


class Distribution:
    """The few methods losses and runners use."""

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        raise NotImplementedError

    def rsample_and_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError

    def mode(self) -> torch.Tensor:
        raise NotImplementedError


class Categorical(Distribution):
    """Categorical over ``n`` actions from logits ``[B, n]``."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits
        self.log_probs = F.log_softmax(logits, dim=-1)  # [B, n]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.multinomial(self.log_probs.exp(), 1, generator=generator).squeeze(-1)  # [B]

    def rsample_and_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise TypeError("a Categorical has no reparameterised sample; use probs() and sum over actions")

    def probs(self) -> torch.Tensor:
        return self.log_probs.exp()

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # [B]

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def mode(self) -> torch.Tensor:
        return self.logits.argmax(-1)


class TanhGaussian(Distribution):
    """``a = center + scale * tanh(u)``, ``u ~ N(mean, exp(log_std))`` with ``dist_inputs = [mean, log_std]``.

    Log-density in env units (change of variables):
    ``log p(a) = log N(u) - sum log(scale * (1 - tanh(u)^2))``, computed stably as
    ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``.
    ``log_prob`` of given actions clamps them to ``(1 - eps)`` of the half-range first, so
    data actions recorded exactly at a bound (clipped torques) stay finite and do not
    dominate a likelihood loss.
    """

    def __init__(self, dist_inputs: torch.Tensor, low: torch.Tensor, high: torch.Tensor, eps: float = 1e-3,
                 center: torch.Tensor | None = None, scale: torch.Tensor | None = None,
                 log_scale: torch.Tensor | None = None) -> None:
        mean, log_std = dist_inputs.chunk(2, dim=-1)
        self.mean = mean  # [B, A]
        self.log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)  # [B, A]
        self.std = self.log_std.exp()
        # center/scale/log_scale may be passed precomputed (the module keeps them as buffers)
        self.center = (high + low) / 2.0 if center is None else center  # [A]
        self.scale = (high - low) / 2.0 if scale is None else scale  # [A]
        self.log_scale = torch.log(self.scale) if log_scale is None else log_scale  # [A]
        self.eps = eps

    def _squash(self, u: torch.Tensor) -> torch.Tensor:
        return self.center + self.scale * torch.tanh(u)

    def _log_prob_u(self, u: torch.Tensor) -> torch.Tensor:
        normal = -0.5 * ((u - self.mean) / self.std).pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)
        log_det = 2.0 * (_LOG2 - u - F.softplus(-2.0 * u)) + self.log_scale
        return (normal - log_det).sum(-1)  # [B]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        with torch.no_grad():
            noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device, dtype=self.mean.dtype)
            return self._squash(self.mean + self.std * noise)

    def rsample_and_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        u = self.mean + self.std * torch.randn_like(self.mean)
        return self._squash(u), self._log_prob_u(u)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        y = ((actions - self.center) / self.scale).clamp(-1.0 + self.eps, 1.0 - self.eps)
        return self._log_prob_u(torch.atanh(y))

    def entropy(self) -> torch.Tensor:
        """Entropy of the Gaussian before squashing (the squashed one has no closed form)."""
        return (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    def mode(self) -> torch.Tensor:
        return self._squash(self.mean)
