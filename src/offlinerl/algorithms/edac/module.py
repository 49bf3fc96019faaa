"""``EDACRLModule``: SAC's module (tanh-Gaussian policy, Q ensemble as one ``EnsembleMLP``, Polyak targets,
``log_alpha``) with the paper's initialisation and the members' action gradients for the diversity loss."""

from __future__ import annotations

import torch
from torch import Tensor

from offlinerl.algorithms.rebrac.module import ACTOR_OUT_BOUND, CRITIC_OUT_BOUND, HIDDEN_BIAS, init_like_paper
from offlinerl.algorithms.sac.module import SACRLModule
from offlinerl.core.networks import EnsembleMLP

__all__ = ["EDACRLModule", "init_ensemble_like_paper"]


@torch.no_grad()
def init_ensemble_like_paper(net: EnsembleMLP, out_bound: float) -> None:
    """``init_like_paper`` for every member of ``net``: hidden biases ``HIDDEN_BIAS``, the output layer's weights
    and bias U(±out_bound); hidden weights kept."""
    for bias in list(net.biases)[:-1]:
        bias.fill_(HIDDEN_BIAS)
    net.weights[-1].uniform_(-out_bound, out_bound)
    net.biases[-1].uniform_(-out_bound, out_bound)


class EDACRLModule(SACRLModule):
    def setup(self) -> None:
        super().setup()
        if self.model_config.get("paper_init", True):
            init_like_paper(self.pi_encoder, self.pi_head, ACTOR_OUT_BOUND)
            if not self.inference_only:
                init_ensemble_like_paper(self.q, CRITIC_OUT_BOUND)
                self.target_q.load_state_dict(self.q.state_dict())

    def q_and_action_gradients(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """``Q_e(s, a)`` [E,B] and each member's ``∇_a Q_e(s, a)`` [E,B,A] at obs [B,O], actions [B,A]; the
        gradients keep their graph (create_graph), so a loss on them trains the critics."""
        e = self.q.num_members
        a = actions.detach().unsqueeze(0).expand(e, -1, -1).clone().requires_grad_(True)  # one copy per member
        q = self.q(torch.cat([obs.unsqueeze(0).expand(e, -1, -1), a], dim=-1)).squeeze(-1)  # [E,B]
        (grads,) = torch.autograd.grad(q.sum(), a, create_graph=True)
        return q, grads
