"""Tiny modules with fixed weights, simple enough that every loss is computable by hand.

They implement the method contract that the CQL and IQL losses document (the real modules
build the same methods from MLP networks).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class TinyContinuous(nn.Module):
    """obs and actions are 1-d. Q_e(s, a) = c_e·s + d_e·a; V(s) = v·s; target Q̄_e(s, a) = c̄_e·s + d̄_e·a.

    Policy: sampled actions are tanh(p·s) (deterministic, every sample alike) with log π = p·s;
    log π(a|s) of a given action = −(a − p·s)².
    """

    def __init__(self, c=(1.0, 2.0), d=(0.0, 0.0), target_c=(1.5, 0.5), target_d=(0.0, 0.0), v=2.0, p=0.5,
                 log_alpha=0.0, log_cql_alpha=0.0):
        super().__init__()
        self.c = nn.Parameter(torch.tensor(c))
        self.d = nn.Parameter(torch.tensor(d))
        self.target_c = nn.Parameter(torch.tensor(target_c), requires_grad=False)
        self.target_d = nn.Parameter(torch.tensor(target_d), requires_grad=False)
        self.v = nn.Parameter(torch.tensor(v))
        self.p = nn.Parameter(torch.tensor(p))
        self.log_alpha = nn.Parameter(torch.tensor(float(log_alpha)))
        self.log_cql_alpha = nn.Parameter(torch.tensor(float(log_cql_alpha)))
        self.register_buffer("action_low", torch.tensor([-1.0]))
        self.register_buffer("action_high", torch.tensor([1.0]))

    @staticmethod
    def _q(c, d, obs, actions):
        # obs [...,B,1], actions [...,B,1] -> [E,...,B]
        shape = (-1,) + (1,) * (obs.dim() - 1)
        return c.view(shape) * obs[..., 0] + d.view(shape) * actions[..., 0]

    def q_values(self, obs, actions):
        return self._q(self.c, self.d, obs, actions)

    def target_q_values(self, obs, actions):
        return self._q(self.target_c, self.target_d, obs, actions)

    def values(self, obs):
        return self.v * obs[:, 0]

    def sample_actions(self, obs, n):
        mean = self.p * obs[:, 0]  # [B]
        return torch.tanh(mean).expand(n, -1).unsqueeze(-1), mean.expand(n, -1)

    def action_log_prob(self, obs, actions):
        return -(actions[:, 0] - self.p * obs[:, 0]).square()


class TinyDiscrete(nn.Module):
    """obs is 1-d; Q_e(s, ·) = s·W_e with W [E, A]; target likewise; V(s) = v·s; π = softmax(s·L)."""

    def __init__(self, w, target_w, v=1.0, logits=(0.0, 0.0)):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w))
        self.target_w = nn.Parameter(torch.tensor(target_w), requires_grad=False)
        self.v = nn.Parameter(torch.tensor(v))
        self.logits = nn.Parameter(torch.tensor(logits))

    def all_q_values(self, obs):
        return obs[:, 0].view(1, -1, 1) * self.w.unsqueeze(1)  # [E,B,A]

    def target_all_q_values(self, obs):
        return obs[:, 0].view(1, -1, 1) * self.target_w.unsqueeze(1)

    def _gather(self, q, actions):
        return q.gather(-1, actions.long().view(1, -1, 1).expand(q.shape[0], -1, 1)).squeeze(-1)

    def q_values(self, obs, actions):
        return self._gather(self.all_q_values(obs), actions)

    def target_q_values(self, obs, actions):
        return self._gather(self.target_all_q_values(obs), actions)

    def values(self, obs):
        return self.v * obs[:, 0]

    def action_log_prob(self, obs, actions):
        logp = torch.log_softmax(obs[:, :1] * self.logits, dim=-1)
        return logp.gather(-1, actions.long().view(-1, 1)).squeeze(-1)


LN2 = math.log(2.0)
