"""Model selection without an env: score a job's checkpoints by OPE on its held-out episodes.

A job whose config sets ``evaluation.ope`` (and ``data.holdout``) runs :func:`select_checkpoint` after its
training loop, so training is never slowed: every kept periodic checkpoint and ``final`` (one per update
count) is scored with ``ope_checkpoints`` on the episodes ``data.holdout`` kept out of training, and the
best estimate wins. Env returns, when the job evaluated in an env at a checkpoint's iteration, are copied
from ``metrics.jsonl`` beside the estimates; no extra env episodes are run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import ConfigError
from offlinerl.core import metrics as M
from offlinerl.jobs.run_dir import list_checkpoints

__all__ = ["check_selection", "select_checkpoint", "format_selection"]

_IS_FAMILY = ("is", "wis", "pdis", "dr")


def check_selection(config: AlgorithmConfig, checkpoint_interval: int, dataset: str | Path) -> None:
    """``ConfigError`` (one line) if ``evaluation.ope`` is set but the job cannot select: no periodic
    checkpoints, or an IS-family estimator on a dataset without ``action_logp``."""
    method = config.evaluation.ope
    if method is None:
        return
    if checkpoint_interval < 1:
        raise ConfigError("evaluation.ope: selection scores the periodic checkpoints; set checkpoint_interval "
                          "(e.g. checkpoint_interval: 5) so the job writes some")
    from offlinerl.episodes import read_info

    try:
        info = read_info(dataset)
    except (OSError, ValueError):
        return  # the missing or broken dataset is reported where it is read
    if info.module_ids is not None and len(info.module_ids) > 1:
        raise ConfigError(f"evaluation.ope: {dataset} trains {len(info.module_ids)} modules; selection scores one "
                          "policy per checkpoint (run offlinerl ope per module instead, docs/ope.md)")
    if method in _IS_FAMILY:
        if "action_logp" not in info.extra_columns:
            raise ConfigError(f"evaluation.ope: {method} needs the dataset's action_logp (behaviour log-probs), which "
                              f"{dataset} does not record; use fqe")


def select_checkpoint(run: Path, dataset: str | Path, config: AlgorithmConfig,
                      history: Sequence[Mapping[str, Any]]) -> dict:
    """Score the checkpoints of ``run`` by ``config.evaluation.ope`` on the held-out episodes; the ``selection``
    entry of ``result.json``."""
    from offlinerl.evaluation.ope.fqe import FQEConfig
    from offlinerl.evaluation.ope.run import OPEConfig, ope_checkpoints

    ev = config.evaluation
    by_updates: dict[int, tuple[int, Path]] = {}
    for updates, iteration, path in list_checkpoints(run):
        by_updates[updates] = (iteration, path)  # final replaces a periodic checkpoint of the same updates
    ckpts = sorted(by_updates.items())
    ope = OPEConfig(methods=(ev.ope,), gamma=min(config.gamma, 0.999),
                    fqe=FQEConfig(num_updates=ev.ope_updates, seed=config.seed), seed=config.seed)
    report = ope_checkpoints([p for _, (_, p) in ckpts], dataset, ope, validate=False, holdout=config.data.holdout)
    env_returns = {int(h[M.ITERATION]): h[M.EVAL_RETURN_MEAN] for h in history
                   if M.ITERATION in h and h.get(M.EVAL_RETURN_MEAN) is not None}
    rows = []
    for (updates, (iteration, path)), result in zip(ckpts, report["results"]):
        (est,) = result["methods"]
        rows.append({"path": str(path), "iteration": iteration, "updates": updates, "estimate": est["estimate"],
                     "ci_low": est["ci_low"], "ci_high": est["ci_high"], "env_return": env_returns.get(iteration),
                     **({"skipped": est["skipped"]} if est.get("skipped") else {})})
    scored = [r for r in rows if r["estimate"] is not None]
    best = max(scored, key=lambda r: r["estimate"]) if scored else None
    return {"method": ev.ope, "gamma": ope.gamma, "holdout_episodes": report["episodes"],
            "holdout_fraction": config.data.holdout.fraction, "checkpoints": rows,
            "selected": best["path"] if best else None, "selected_estimate": best["estimate"] if best else None}


def format_selection(selection: Mapping[str, Any], log: Callable[[str], None] = print) -> None:
    """The short table printed at the end of a selecting job."""
    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.2f}"

    log(f"model selection by {selection['method']} on {selection['holdout_episodes']} held-out episodes "
        f"(discounted return, γ = {selection['gamma']}; env return: the job's own evaluation, undiscounted)")
    log(f"  {'checkpoint':<14} {'updates':>8} {'estimate':>10} {'interval':>20} {'env return':>11}")
    for r in selection["checkpoints"]:
        mark = "*" if r["path"] == selection["selected"] else " "
        interval = f"[{num(r['ci_low'])}, {num(r['ci_high'])}]"
        log(f"{mark} {Path(r['path']).name:<14} {r['updates']:>8} {num(r['estimate']):>10} {interval:>20} "
            f"{num(r['env_return']):>11}" + (f"  skipped: {r['skipped']}" if r.get("skipped") else ""))
    log(f"selected: {selection['selected']}" if selection["selected"] else "selected: none (no checkpoint could be scored)")
