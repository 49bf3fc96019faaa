"""``offlinerl collect``: record a new episode dataset by acting in a gymnasium env."""

from __future__ import annotations

import argparse
import sys

from offlinerl.cli.common import add_env_kwargs_option, overwrite_help
from offlinerl.trusted import is_pettingzoo

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "collect",
        help="record an episode dataset by acting in a gymnasium env",
        description="Run a policy (uniformly random, or a training checkpoint's) in a gymnasium env with "
        "EnvRunners and write the episodes as a new episode parquet dataset, atomically; the dataset is "
        "validated once written. action_logp / action_dist_inputs are stored when the policy provides them.",
    )
    parser.add_argument("--env", required=True, help="gymnasium env id, e.g. CartPole-v1, or a PettingZoo parallel "
                        "env pettingzoo:MODULE (every agent's episode is recorded; docs/multi-agent.md)")
    add_env_kwargs_option(parser)
    parser.add_argument("--policy", default="random", help="'random' or the path of a training checkpoint")
    parser.add_argument("--episodes", type=int, required=True, help="number of complete episodes to record")
    parser.add_argument("-o", "--output", required=True, help="dataset directory to create")
    parser.add_argument("--num-env-runners", type=int, default=0, help="EnvRunner Ray actors (0: in-process)")
    parser.add_argument("--num-envs", type=int, default=1, help="vector-env width per runner")
    parser.add_argument("--epsilon", type=float, default=0.0, help="probability of a uniformly random action")
    parser.add_argument("--greedy", action="store_true",
                        help="act with the policy's deterministic forward_inference (default: sample)")
    parser.add_argument("--max-episode-steps", type=int, default=None, help="override the env's time limit")
    parser.add_argument("--seed", type=int, default=None, help="seed of envs and random actions")
    parser.add_argument("--overwrite", action="store_true", help=overwrite_help())
    parser.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or local)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from offlinerl.env.collect import CollectConfig, collect
    from offlinerl.episodes.atomic import OutputExistsError, OutputWriteError, check_output

    try:
        config = CollectConfig(
            env=args.env, output=args.output, num_episodes=args.episodes, policy=args.policy,
            max_episode_steps=args.max_episode_steps, num_env_runners=args.num_env_runners,
            num_envs=args.num_envs, explore=not args.greedy, epsilon=args.epsilon, seed=args.seed,
            overwrite=args.overwrite, env_kwargs=_env_kwargs(args),
        )
        check_output(config.output, config.overwrite, kind="dataset", inputs=config.inputs)  # before any work
    except (ValueError, OutputExistsError) as exc:
        print(f"offlinerl collect: {exc}", file=sys.stderr)
        return 2
    if config.policy == "random" and not is_pettingzoo(config.env):  # a checkpoint's policy checks its env itself
        from offlinerl.env.env_check import EnvMismatchError, check_env_makes

        try:  # an unknown id or a keyword the env does not take: one line now, not a traceback from a runner
            check_env_makes(config.env, config.env_kwargs)
        except EnvMismatchError as exc:
            print(f"offlinerl collect: {exc}", file=sys.stderr)
            return 2
    if config.num_env_runners > 0 or args.address:
        from offlinerl.ray_utils import init_ray

        init_ray(args.address)
    factories: dict = {}
    if is_pettingzoo(config.env):
        from offlinerl.env.collect import collect_team
        from offlinerl.env.env_check import EnvMismatchError
        from offlinerl.training.checkpoint import CheckpointError

        try:  # the checkpoint is checked against the env first; its modules are rebuilt wherever episodes run
            team: dict = {}
            if config.policy != "random":
                from offlinerl.evaluation.acting import checkpoint_team_policy

                factory, provenance = checkpoint_team_policy(config.policy, env=config.env,
                                                             env_kwargs=config.env_kwargs, explore=config.explore)
                team = {"policy_factory": factory, "policy_info": provenance}
            info = collect_team(config, progress=not args.no_progress, **team)
        except (CheckpointError, EnvMismatchError, OutputWriteError, RuntimeError) as exc:  # e.g. a runner died twice
            print(f"offlinerl collect: {exc}", file=sys.stderr)
            return 1
        except (OutputExistsError, FileNotFoundError, ValueError) as exc:
            print(f"offlinerl collect: {exc}", file=sys.stderr)
            return 2
        return _summary(args, config, info)
    if config.policy != "random":
        from offlinerl.training.checkpoint import CheckpointError
        from offlinerl.evaluation.acting import checkpoint_policy
        from offlinerl.env.env_check import EnvMismatchError

        try:
            policy, connectors, info = checkpoint_policy(config.policy, env=config.env, env_kwargs=config.env_kwargs)
        except (CheckpointError, EnvMismatchError) as exc:  # a bad --policy: exit 1, as evaluate and finetune
            print(f"offlinerl collect: {exc}", file=sys.stderr)
            return 1
        factories = {"policy_factory": policy, "connectors_factory": connectors, "policy_info": info}
    try:
        info = collect(config, progress=not args.no_progress, **factories)
    except OutputWriteError as exc:  # a read-only or full disk: one line, nothing half-written left
        print(f"offlinerl collect: {exc}", file=sys.stderr)
        return 1
    except (OutputExistsError, FileNotFoundError, ValueError, gym.error.Error) as exc:
        print(f"offlinerl collect: {exc}", file=sys.stderr)
        return 2
    return _summary(args, config, info)


def _env_kwargs(args: argparse.Namespace) -> dict:
    """``--env-kwargs``; without it, a checkpoint policy's recorded task when ``--env`` is the checkpoint's own env
    (as ``evaluate``), else none. A checkpoint that cannot be read is reported where its policy is loaded."""
    if args.env_kwargs is not None or args.policy == "random":
        return dict(args.env_kwargs or {})
    from offlinerl.evaluation.evaluate import task_kwargs
    from offlinerl.training.checkpoint import CheckpointError, load_checkpoint

    try:
        return task_kwargs(load_checkpoint(args.policy), args.env)
    except (CheckpointError, OSError, ValueError):
        return {}


def _summary(args: argparse.Namespace, config, info) -> int:
    p = info.provenance
    agents = p.get("agents")
    counts = (f"{config.num_episodes} episodes x {len(agents)} agents ({', '.join(agents)}), {info.num_steps} agent "
              f"steps" if agents else f"{info.num_episodes} episodes, {info.num_steps} steps")
    print(
        f"wrote {args.output}: {counts} in {p['seconds']} s; {'team ' if agents else ''}"
        f"return {p['return_mean']:.2f} ± {p['return_std']:.2f} (min {p['return_min']:.2f}, max {p['return_max']:.2f}); "
        f"extra columns: {', '.join(sorted(info.extra_columns)) or 'none'}"
        + (f"; env-runner restarts: {p['env_runner_restarts']}" if not agents or config.num_env_runners else "")
    )
    return 0
