"""``offlinerl evaluate CHECKPOINT``: run a trained policy in its environment."""

from __future__ import annotations

import argparse
import json
import sys

from offlinerl.cli.common import add_device_option, add_env_kwargs_option, device_problem


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="evaluate a checkpoint's policy in a gymnasium environment",
        description="Run the deterministic policy (forward_inference) of CHECKPOINT in a gymnasium environment, "
        "with the checkpoint's observation preprocessing, and print the mean return.",
    )
    p.add_argument("checkpoint", help="checkpoint directory (e.g. runs/<run>/checkpoints/final)")
    p.add_argument("--env", help="gymnasium env id, or pettingzoo:MODULE for a multi-agent checkpoint (default: the one the checkpoint was evaluated in)")
    add_env_kwargs_option(p)
    p.add_argument("--episodes", type=int, help="number of episodes (default: the config's evaluation.episodes)")
    p.add_argument("--seed", type=int, help="seed of the first episode")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_device_option(p, "the policy network runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.core import metrics as M
    from offlinerl.evaluation.evaluate import evaluate_checkpoint

    from offlinerl.env.evaluation import MAX_EVAL_EPISODES

    if args.episodes is not None and not 1 <= args.episodes <= MAX_EVAL_EPISODES:
        print(f"offlinerl evaluate: --episodes must be between 1 and {MAX_EVAL_EPISODES:,}, got {args.episodes:,}",
              file=sys.stderr)
        return 2
    if args.seed is not None and args.seed < 0:
        print(f"offlinerl evaluate: --seed must be >= 0 (episode j is reset with seed + j), got {args.seed}",
              file=sys.stderr)
        return 2
    if (problem := device_problem(args.device)) is not None:
        print(f"offlinerl evaluate: {problem}", file=sys.stderr)
        return 2
    try:
        r = evaluate_checkpoint(args.checkpoint, env=args.env, episodes=args.episodes, seed=args.seed,
                                env_kwargs=args.env_kwargs, device=args.device)
    except (FileNotFoundError, ValueError) as exc:
        print(f"offlinerl evaluate: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        task = f" ({', '.join(f'{k}=...' if isinstance(v, (list, dict)) else f'{k}={v}' for k, v in sorted(r['env_kwargs'].items()))})" \
            if r["env_kwargs"] else ""
        agents = {k.split("/")[1]: v for k, v in r.items() if k.startswith(f"{M.EVAL}/") and k.count("/") == 2}
        per_agent = f"; per agent: {', '.join(f'{a} {v:.1f}' for a, v in agents.items())}" if agents else ""
        print(f"{r['algorithm']} policy in {r['env']}{task}: {'team ' if agents else ''}return "
              f"{r[M.EVAL_RETURN_MEAN]:.1f} ± {r[M.EVAL_RETURN_STD]:.1f} over {int(r[M.EVAL_EPISODES])} episodes "
              f"(mean length {r[M.EVAL_LENGTH_MEAN]:.1f}){per_agent}")
    return 0
