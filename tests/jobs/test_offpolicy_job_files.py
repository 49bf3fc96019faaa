"""The shipped CQL/IQL job files (offline and fine-tune) load and validate (their results: benchmarks/README.md)."""

from pathlib import Path

import pytest

from offlinerl.algorithms.cql import CQLConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.jobs.spec import load_job_spec

JOB_FILES = Path(__file__).resolve().parents[2] / "jobs"
NAMES = [f"{ds}-{algo}" for ds in ("pendulum", "cartpole", "double-pendulum") for algo in ("cql", "iql")]


@pytest.mark.parametrize("name", NAMES)
def test_pipeline_loads_with_its_algorithm_config(name):
    job, config = load_job_spec(JOB_FILES / f"{name}.yaml")
    assert job.algorithm == name.rsplit("-", 1)[1]
    assert isinstance(config, CQLConfig if job.algorithm == "cql" else IQLConfig)
    assert (JOB_FILES.parent / job.dataset / "card.json").is_file()  # scored against the card's anchors
    assert job.stop.updates and config.normalize_observations


def test_progress_bar_shows_the_loss_terms_each_algorithm_has():
    from offlinerl.jobs.loop import _postfix

    discrete_cql = {"losses/critic": 1.25, "cql/gap": 0.3, "perf/updates_per_s": 400.0}
    assert _postfix(discrete_cql, {}) == {"critic": "1.25", "upd/s": "400"}  # there is no actor loss to show
    iql = {"losses/actor": -0.4123, "losses/critic": 2.0, "losses/value": 0.01}
    assert _postfix(iql, {}) == {"actor": "-0.412", "critic": "2", "value": "0.01"}
    assert _postfix({"main/losses/actor": 0.5}, {}) == {"actor": "0.5"}  # multi-module prefix
    assert _postfix({"losses/actor": 0.5}, {"eval/return_mean": -201.25}) == {"actor": "0.5", "eval": "-201.2"}


#: Env steps a fine-tune may spend: issue 12 asks for <= 50,000 on Pendulum and CartPole; the same is stated for
#: InvertedDoublePendulum (benchmarks/README.md).
FINETUNE_BUDGET = 50_000


@pytest.mark.parametrize("name", NAMES)
def test_finetune_pipeline_overrides_its_offline_config_within_the_budget(name):
    """``<name>-finetune.yaml`` applies onto the offline job's config (a typo'd key or a bad value fails here,
    not minutes into a job), and its worst case (every sampled step + every gate episode at the env's step limit)
    stays within the budget the benchmark reports."""
    import gymnasium as gym

    from offlinerl.config_io import merge, to_dict
    from offlinerl.jobs.spec import load_finetune_spec
    from offlinerl.episodes.info import read_info

    offline, config = load_job_spec(JOB_FILES / f"{name}.yaml")
    ft = load_finetune_spec(JOB_FILES / f"{name}-finetune.yaml", checkpoint="unused")
    tuned = type(config).from_dict(merge(to_dict(config), ft.config))
    assert {k: getattr(tuned, k) for k in ft.config if k != "evaluation"} == \
        {k: v for k, v in ft.config.items() if k != "evaluation"}
    env_id = read_info(JOB_FILES.parent / offline.dataset).env_id
    online, iterations = ft.online, ft.stop.iterations
    gates = iterations // online.gate_interval if online.promotion == "gated" else 0
    worst = iterations * online.env_steps_per_iteration + gates * 2 * online.gate_episodes * gym.spec(env_id).max_episode_steps
    assert worst <= FINETUNE_BUDGET


def test_the_multi_agent_finetune_job_applies_onto_spread_iql():
    """``spread-iql-finetune.yaml`` merges onto ``spread-iql.yaml``'s config and names nothing a team fine-tune
    refuses (vector envs, remote evaluation runners)."""
    from offlinerl.config_io import merge, to_dict
    from offlinerl.jobs.spec import load_finetune_spec

    offline, config = load_job_spec(JOB_FILES / "spread-iql.yaml")
    ft = load_finetune_spec(JOB_FILES / "spread-iql-finetune.yaml", checkpoint="unused")
    tuned = type(config).from_dict(merge(to_dict(config), ft.config))
    assert tuned.updates_per_iteration == 1000 and tuned.expectile == config.expectile
    assert ft.online.num_envs == 1 and ft.online.num_eval_env_runners == 0 and ft.online.promotion == "gated"
