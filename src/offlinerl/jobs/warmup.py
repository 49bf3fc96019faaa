"""An online job from scratch: no checkpoint, no dataset (``FinetuneSpec.algorithm`` set, ``checkpoint`` unset).

    online.env --uniformly random actions, warmup_steps steps--> RUN/warmup   (an episode dataset, validated)
        -> Algorithm(spec.algorithm, a new module, dataset=RUN/warmup, online=spec.online)
        -> the fine-tuning job loop, unchanged (offlinerl.jobs.finetune.run_finetune)

The warm-up steps are the job's offline data: with ``online.mixing: proportional`` (the default from scratch)
every batch draws from them and from the replay in proportion to their sizes, i.e. uniformly over every step
seen, as SAC's single buffer (up to ``online.replay_capacity`` online steps). Evaluation runs in the env the
warm-up recorded (its env spec, kwargs included), so ``--resume``, ``offlinerl evaluate`` and the benchmark read
the task from the run's own files.
"""

from __future__ import annotations

from pathlib import Path

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.config_io import from_dict
from offlinerl.env import EnvRunnerConfig, EnvRunnerGroup
from offlinerl.env.collect import env_spec_json
from offlinerl.env.env_runner import random_policy_factory
from offlinerl.episodes.io import write_dataset
from offlinerl.jobs.spec import FinetuneSpec
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.recording import close_episodes

__all__ = ["WARMUP", "write_warmup", "start_from_scratch"]

#: The warm-up dataset's directory inside the run directory.
WARMUP = "warmup"


def write_warmup(env: str, env_kwargs: dict, steps: int, seed: int, path: str | Path) -> None:
    """``steps`` uniformly random steps in ``env`` (episodes running at the end stored as truncated) as a new
    episode dataset at ``path``, seeded by ``seed``: same seed, same steps."""
    group = EnvRunnerGroup(EnvRunnerConfig(env=env, env_kwargs=dict(env_kwargs), seed=seed),
                           random_policy_factory(seed), num_env_runners=0)
    try:
        chunks = close_episodes(group.sample(num_timesteps=steps, episode_seed=seed))
        write_dataset(chunks, path, observation_space=group.observation_space, action_space=group.action_space,
                      env_id=env, env_spec=env_spec_json(env, env_kwargs),
                      provenance={"collector": "offlinerl finetune (warm-up from scratch)", "policy": "random",
                                  "seed": seed, "steps": steps, "env_kwargs": dict(env_kwargs)})
    finally:
        group.stop()


def start_from_scratch(spec: FinetuneSpec, warmup: str | Path) -> Algorithm:
    """Write the warm-up steps to ``warmup``, then a new ``spec.algorithm`` Algorithm on them, online."""
    algorithm = get_algorithm(spec.algorithm)
    config = from_dict(algorithm.config_cls, spec.config, "config")
    write_warmup(spec.online.env, spec.online.env_kwargs, spec.warmup_steps, config.seed, warmup)
    return Algorithm(spec.algorithm, config, warmup, validate_data=True, online=spec.online)
