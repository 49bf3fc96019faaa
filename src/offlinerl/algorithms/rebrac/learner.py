"""``ReBRACLearner``: TD3+BC's update schedule with ReBRAC's losses.

"critic" every update; "actor" and the Polyak targets every policy_freq-th (``TD3BCLearner``: the
optimizers, the schedule and the target syncs). Both losses are computed before any weight moves, as
for TD3+BC; the paper's code steps the actor against the critic just updated, one Adam step later.
"""

from __future__ import annotations

from offlinerl.algorithms.rebrac.losses import actor_loss, critic_loss
from offlinerl.algorithms.td3bc.learner import TD3BCLearner

__all__ = ["ReBRACLearner"]


class ReBRACLearner(TD3BCLearner):
    critic_loss_fn = staticmethod(critic_loss)
    actor_loss_fn = staticmethod(actor_loss)
