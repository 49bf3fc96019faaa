"""Metric names: every number a job reports (``metrics.jsonl``, TensorBoard, the progress bar, ``result.json``'s
sources), one constant per name, namespaced by what produces it.

- ``losses/<optimizer>`` and ``learner/...``: the learners (``core/learner.py``); a multi-module learner prefixes
  each with ``<module_id>/``. An algorithm's own loss metrics (``LossOut.metrics``, e.g. ``actor/logp_mean``)
  are named in its ``losses.py`` and reported as they are.
- ``perf/...``, ``online/...``: the Algorithm's iteration (``training/algorithm.py``).
- ``eval/...``: an evaluation (:func:`episode_metrics` with prefix :data:`EVAL`); ``env_runners/...``: the
  sampling runners.
- ``iteration`` and ``time/total_s``: the job loop (``jobs/loop.py``).

Names are stable: runs, sweeps and benchmarks read them back from ``metrics.jsonl``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = [
    "ITERATION", "UPDATES", "FIRST_UPDATE_AT", "LOSSES", "loss", "grad_norm", "is_loss", "loss_term",
    "UPDATES_PER_S", "SAMPLES_PER_S", "ITERATION_S", "UPDATE_S", "SAMPLE_S", "REPLAY_ADD_S", "TOTAL_S",
    "EVAL", "EVAL_RETURN_MEAN", "EVAL_RETURN_STD", "EVAL_LENGTH_MEAN", "EVAL_EPISODES", "MAX_EVAL_EPISODES",
    "episode_metrics",
    "ENV_STEPS", "REPLAY_SIZE", "WEIGHTS_SEQ_NO", "POLICY_HELD", "GATE_ENV_STEPS", "CANDIDATE_RETURN",
    "DEPLOYED_RETURN", "GATE_DIFF", "GATE_DIFF_SE", "PROMOTED", "PROMOTIONS",
    "RUNNER_EPISODE", "RUNNER_ENV_STEPS", "RUNNER_RESTARTS",
]

# -- the job loop --------------------------------------------------------------------------------------
ITERATION = "iteration"
"""Iterations run so far (every ``metrics.jsonl`` record has it)."""
TOTAL_S = "time/total_s"
"""Seconds from the job's start to the end of the iteration (a resumed job adds its earlier runs' last value, so
the series only grows)."""

# -- the learners -------------------------------------------------------------------------------------
UPDATES = "learner/updates"
"""Gradient updates so far (the x axis of every curve)."""
FIRST_UPDATE_AT = "perf/first_update_at"
"""Wall-clock time of a learner's first update in its process (once; the job loop turns it into ``first_update_s``)."""
LOSSES = "losses/"
"""Prefix of the loss terms: ``losses/<optimizer name>``."""


def loss(name: str, module_id: str | None = None) -> str:
    """``losses/<name>``, or ``<module_id>/losses/<name>`` for one module of a multi-module learner."""
    return f"{module_id}/{LOSSES}{name}" if module_id else f"{LOSSES}{name}"


def grad_norm(name: str, module_id: str | None = None) -> str:
    """The clipped gradient norm of optimizer ``name``: ``learner/grad_norm/<name>`` (``<module_id>/`` first)."""
    return f"{module_id}/learner/grad_norm/{name}" if module_id else f"learner/grad_norm/{name}"


def is_loss(key: str) -> bool:
    """Whether ``key`` names a loss term (``[<module_id>/]losses/<name>``)."""
    return LOSSES in key


def loss_term(key: str) -> tuple[str, str]:
    """``(module_id or "", name)`` of a loss term's key: ``agent_0/losses/critic`` -> ``("agent_0", "critic")``."""
    module, _, name = key.rpartition(LOSSES)
    return module.rstrip("/"), name


# -- the Algorithm's iteration ------------------------------------------------------------------------
UPDATES_PER_S = "perf/updates_per_s"
SAMPLES_PER_S = "perf/samples_per_s"
"""Transitions per second over all learners."""
ITERATION_S = "perf/iteration_s"
"""Seconds of the iteration's ``training_step`` (evaluation excluded): what ``stop.wall_time_s`` sums."""
UPDATE_S = "perf/update_s"
SAMPLE_S = "perf/sample_s"
REPLAY_ADD_S = "perf/replay_add_s"

# -- evaluation ---------------------------------------------------------------------------------------
EVAL = "eval"
"""Prefix of an evaluation's :func:`episode_metrics`."""
EVAL_RETURN_MEAN = f"{EVAL}/return_mean"
EVAL_RETURN_STD = f"{EVAL}/return_std"
EVAL_LENGTH_MEAN = f"{EVAL}/length_mean"
EVAL_EPISODES = f"{EVAL}/episodes"
MAX_EVAL_EPISODES = 1_000_000
"""Most episodes one evaluation plays (``evaluation.episodes``, ``--episodes``): far more than any estimate needs,
and a typo (a few extra zeros) is refused instead of filling memory with per-episode seeds and results."""


def episode_metrics(returns: Sequence[float], lengths: Sequence[int], prefix: str) -> dict[str, float]:
    """``{prefix}/return_mean``, ``return_std``, ``return_min``, ``return_max``, ``length_mean``, ``episodes``."""
    if not len(returns):
        return {f"{prefix}/episodes": 0}
    r = np.asarray(returns, dtype=np.float64)
    return {
        f"{prefix}/return_mean": float(r.mean()),
        f"{prefix}/return_std": float(r.std()),
        f"{prefix}/return_min": float(r.min()),
        f"{prefix}/return_max": float(r.max()),
        f"{prefix}/length_mean": float(np.mean(lengths)),
        f"{prefix}/episodes": len(returns),
    }


# -- online jobs --------------------------------------------------------------------------------------
ENV_STEPS = "online/env_steps"
"""Env steps the job sampled (gate episodes included)."""
REPLAY_SIZE = "online/replay_size"
WEIGHTS_SEQ_NO = "online/weights_seq_no"
POLICY_HELD = "online/policy_held"
"""1 while the critics warm up (``online.critic_warmup_iterations``), else 0."""
GATE_ENV_STEPS = "online/gate_env_steps"
CANDIDATE_RETURN = "online/candidate_return"
DEPLOYED_RETURN = "online/deployed_return"
GATE_DIFF = "online/gate_diff"
GATE_DIFF_SE = "online/gate_diff_se"
PROMOTED = "online/promoted"
PROMOTIONS = "online/promotions"
RUNNER_EPISODE = "env_runners/episode"
"""Prefix of the sampling runners' :func:`episode_metrics`."""
RUNNER_ENV_STEPS = "env_runners/num_env_steps"
RUNNER_RESTARTS = "env_runners/num_restarts"
