"""Keys of a train batch (the dict of tensors a Learner updates on) and of module outputs.

Every loss and connector names its columns through these constants; readers map
foreign names onto them at the edge (never inside a loss).

Shapes (B = batch size):

- ``OBS``, ``NEXT_OBS``: ``[B, obs_dim]`` float32, flattened and (if configured) normalised.
- ``ACTIONS``: ``[B]`` int64 for Discrete spaces, ``[B, act_dim]`` float32 for Box, in env units.
- ``NEXT_ACTIONS``: like ``ACTIONS``, the data's action at ``NEXT_OBS`` (the next step of the same row);
  ``HAS_NEXT_ACTIONS`` ``[B]`` float32 is 0.0 where the row ends there (no such action: ``NEXT_ACTIONS``
  repeats ``ACTIONS``), 1.0 elsewhere.
- ``REWARDS``, ``TERMINATEDS``, ``TRUNCATEDS``, ``RETURNS_TO_GO``: ``[B]`` float32.
  ``TERMINATEDS`` = 1.0 means "no bootstrap"; a truncated step still bootstraps from ``NEXT_OBS``.
  ``RETURNS_TO_GO`` is discounted within the episode row, without bootstrapping.
"""

from __future__ import annotations

from offlinerl.episodes import schema as S

__all__ = [
    "OBS",
    "NEXT_OBS",
    "ACTIONS",
    "NEXT_ACTIONS",
    "HAS_NEXT_ACTIONS",
    "REWARDS",
    "TERMINATEDS",
    "TRUNCATEDS",
    "RETURNS_TO_GO",
    "ADVANTAGES",
    "ACTION_LOGP",
    "ACTION_DIST_INPUTS",
    "ACTION_DIST",
    "VALUES",
    "EMBEDDINGS",
    "WEIGHTS_SEQ_NO",
    "DEFAULT_MODULE_ID",
]

OBS = "obs"
NEXT_OBS = "next_obs"
ACTIONS = "actions"
NEXT_ACTIONS = "next_actions"
HAS_NEXT_ACTIONS = "has_next_actions"
REWARDS = "rewards"
TERMINATEDS = "terminateds"
TRUNCATEDS = "truncateds"
RETURNS_TO_GO = "returns_to_go"
ADVANTAGES = "advantages"
#: Log-probability of the taken action under the policy that produced it (optional column).
ACTION_LOGP = "action_logp"
#: Distribution parameters (logits, or mean and log-std concatenated) output by a module.
ACTION_DIST_INPUTS = "action_dist_inputs"
#: A ``Distribution`` object in ``forward_train`` outputs (built from ``ACTION_DIST_INPUTS``).
ACTION_DIST = "action_dist"
VALUES = "values"
EMBEDDINGS = "embeddings"
#: Which weights produced a batch, where an algorithm cares about staleness (optional column).
WEIGHTS_SEQ_NO = "weights_seq_no"

#: Module id of a single-agent policy inside a ``MultiRLModule`` (the episode format's default module).
DEFAULT_MODULE_ID = S.DEFAULT_MODULE_ID
