"""The readable summary ``train`` and ``finetune`` end with (their ``result.json`` holds every number)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["train_summary", "vectorized_summary", "finetune_summary"]


def train_summary(r: Mapping[str, Any]) -> str:
    """The lines ``offlinerl train`` ends with, from its ``result.json``."""
    lines = [f"{r['algorithm']} on {r['dataset']}: {r['updates']} updates in {r['train_time_s']:.1f} s "
             f"({r['updates_per_s']:.0f} updates/s)"]
    if r["final_eval_return"] is None:
        lines.append("no evaluation (a multi-agent dataset, or no env named by the dataset or evaluation.env)")
    else:
        lines.append(f"evaluation in {r['env']} ({r['eval_episodes']} episodes): final return {r['final_eval_return']:.1f} "
                     f"± {r['final_eval_return_std']:.1f}, best {r['best_eval_return']:.1f}")
    if "final_eval_normalized_score" in r:
        lines.append(f"normalised score (0 = random, 100 = best in dataset): final {r['final_eval_normalized_score']:.1f}, "
                     f"best {r['best_eval_normalized_score']:.1f}")
    if r.get("selection"):
        sel = r["selection"]
        lines.append(f"selected by {sel['method']} on {sel['holdout_episodes']} held-out episodes: {sel['selected']} "
                     f"(estimate {sel['selected_estimate']:.2f})" if sel["selected"] else
                     f"selection by {sel['method']}: no checkpoint could be scored")
    lines += _cluster_lines(r)
    lines.append(f"run directory: {r['run_dir']}  (checkpoint: {r['checkpoint']})")
    return "\n".join(lines)


def vectorized_summary(r: Mapping[str, Any]) -> str:
    """The lines ``offlinerl train`` ends with for ``num_seeds > 1``, from the vectorised run's ``result.json``."""
    per = [x for x in r["updates_per_s_per_replica"] if x is not None]
    lines = [f"{r['algorithm']} on {r['dataset']}, {r['num_seeds']} seeds as one vectorised learner: {r['updates']} "
             f"updates in {r['wall_time_s']:.1f} s ({r['updates_per_s']:.0f} updates/s in all"
             + (f", {min(per):.0f}-{max(per):.0f} per seed)" if per else ")")]
    if r["final_eval_return_mean"] is not None:
        lines.append(f"evaluation over seeds: final return {r['final_eval_return_mean']:.1f} ± "
                     f"{r['final_eval_return_std_over_seeds']:.1f}, best {r['best_eval_return_mean']:.1f} ± "
                     f"{r['best_eval_return_std_over_seeds']:.1f}")
    if "final_eval_normalized_score_mean" in r:
        lines.append(f"normalised score over seeds: final {r['final_eval_normalized_score_mean']:.1f} ± "
                     f"{r['final_eval_normalized_score_std_over_seeds']:.1f}")
    for rep in r["replicas"]:
        state = rep.get("error") or f"final return {_num(rep.get('final_eval_return'))}"
        lines.append(f"  seed {rep['seed']}: {state}  ({rep['run_dir']})")
    lines.append(f"run directory: {r['run_dir']}")
    return "\n".join(lines)


def _cluster_lines(r: Mapping[str, Any]) -> list[str]:
    lines = []
    nodes = r.get("ray_nodes") or {}
    if len(nodes.get("cluster") or []) > 1:  # joined a cluster: say where the work ran
        learners = nodes["learners"]
        lines.append(f"Ray cluster of {len(nodes['cluster'])} nodes: {len(learners)} learner(s) on "
                     f"{len(set(learners))} node(s), validation tasks on {len(nodes['validation'])} "
                     "(node ids in result.json: ray_nodes)")
    return lines


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:.1f}"


def finetune_summary(r: Mapping[str, Any]) -> str:
    """The lines ``offlinerl finetune`` ends with, from its ``result.json``: what was trained, how long, the
    evaluations before and after (and the checkpoint's own), where the online episodes and the run went."""
    start = f"from {r['from_checkpoint']}" if r.get("from_checkpoint") else "from scratch"
    iterations = f"{r['iterations']} iteration" + ("" if r["iterations"] == 1 else "s")
    lines = [f"{r['algorithm']} fine-tuned online in {r['env']} {start}: {iterations}, "
             f"{r['updates']} updates, {r['env_steps']} env steps in {r['train_time_s']:.1f} s"]
    if r.get("final_eval_return") is None:
        lines.append("no evaluation")
    else:
        own = f" (the checkpoint's own: {r['checkpoint_eval_return']:.1f})" if r.get("checkpoint_eval_return") \
            is not None else ""
        first = r.get("first_eval_return")
        if first is not None and first != r.get("initial_eval_return"):  # the job evaluates otherwise
            own += f", {first:.1f} with this job's evaluation settings"
        lines.append(f"evaluation return: before {_num(r.get('initial_eval_return'))}{own}, final "
                     f"{r['final_eval_return']:.1f} ± {_num(r.get('final_eval_return_std'))}, best "
                     f"{_num(r.get('best_eval_return'))}")
    if r.get("env_runner_restarts"):
        lines.append(f"env runners restarted {r['env_runner_restarts']} time(s)")
    if r.get("online_episodes"):
        lines.append(f"online episodes: {r['online_episodes']}")
    lines += _cluster_lines(r)
    lines.append(f"run directory: {r['run_dir']}  (checkpoint: {r['checkpoint']})")
    return "\n".join(lines)
