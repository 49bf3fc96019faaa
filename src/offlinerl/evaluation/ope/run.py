"""Off-policy evaluation of checkpoints on a dataset: FQE and the importance-sampling family.

Which policy each method evaluates:

- ``fqe``: the deployed policy, ``forward_inference`` (what ``offlinerl evaluate`` runs).
- ``is``, ``wis``, ``pdis``, ``dr``: the module's stochastic policy, the distribution
  ``forward_exploration`` samples from (π(a|s) must exist); refused with a reason for
  deterministic modules (TD3+BC) and for datasets without ``action_logp``. DR's control
  variate is FQE's Q̂ of the deployed policy with V̂(s) = E_{a~π} Q̂(s, a), which keeps DR
  unbiased for the stochastic policy.

Every estimate is of the discounted return from the dataset's initial states; its
interval is a percentile bootstrap over episodes (for FQE, over the initial states
with Q̂ held fixed, so it ignores FQE's own fitting error).

Multi-agent data is evaluated per module (``ope_checkpoints``): each module on its own
rows (each agent's episode one episode) with its own observation statistics; the other
agents are part of the environment, acting as they did in the data (the independent-
learner view), so an estimate is of that module's agents' return alongside the data's
other agents, not of the team under the joint policy.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModule
from offlinerl.env.env_check import space_mismatch
from offlinerl.env.policies import forward, module_inputs
from offlinerl.evaluation.ope import estimators as E
from offlinerl.episodes.info import read_info
from offlinerl.evaluation.ope.data import OPEEpisodes, is_multi_agent, ope_episodes, read_ope_table, table_module_ids
from offlinerl.evaluation.ope.fqe import FQEConfig, FQEData, fit_fqe
from offlinerl.training.checkpoint import load_checkpoint

__all__ = ["METHODS", "OPEConfig", "evaluate_policy_offline", "ope_checkpoints", "flags", "LOW_ESS_FRACTION",
           "MIN_HORIZON_REACHED"]

log = logging.getLogger(__name__)

LOW_ESS_FRACTION = 0.1
"""An IS-family estimate is flagged when its ESS is under this fraction of the episodes (or under 5)."""
MIN_HORIZON_REACHED = 0.95
"""FQE is flagged as not converged when its backups reached less of the horizon: 1 − γ^K < this (K target copies)."""

METHODS = ("fqe", "is", "wis", "pdis", "dr")
_IS_FAMILY = {"is": E.importance_sampling, "wis": E.weighted_is, "pdis": E.per_decision_is}
_CHUNK = 8192


@dataclass(frozen=True, kw_only=True)
class OPEConfig:
    """What to estimate and how."""

    methods: tuple[str, ...] = METHODS
    """Estimators to run, among ``METHODS``."""
    gamma: float = 0.99
    """Discount of the estimated return."""
    fqe: FQEConfig = field(default_factory=FQEConfig)
    """How FQE fits (also the Q̂ of DR)."""
    num_resamples: int = 1000
    """Bootstrap resamples of the episodes."""
    confidence: float = 0.95
    """Coverage of the percentile interval."""
    action_samples: int = 16
    """Samples of π per state for V̂(s) = E_π Q̂(s, ·) with continuous actions (DR)."""
    seed: int = 0
    """Seed of the bootstrap and of π's samples."""
    device: str = "cpu"
    """Where the policy's forward passes and the FQE fit run (``cpu``, ``cuda``, ``cuda:N``); the episodes, the
    estimators and the bootstrap stay on the CPU."""

    def __post_init__(self) -> None:
        from offlinerl.core.devices import DEVICE_PATTERN

        if DEVICE_PATTERN.fullmatch(self.device) is None:
            raise ValueError(f"OPEConfig.device: 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"OPEConfig.methods: unknown {unknown or 'none given'}; choose among {', '.join(METHODS)}")
        if not 0 <= self.gamma < 1:
            raise ValueError(f"OPEConfig.gamma must be in [0, 1), got {self.gamma}")
        if not 0 < self.confidence < 1 or self.num_resamples < 1 or self.action_samples < 1:
            raise ValueError("OPEConfig: confidence in (0, 1), num_resamples >= 1 and action_samples >= 1 needed")


def _torch_actions(actions: Any, discrete: bool) -> torch.Tensor:
    return torch.as_tensor(np.array(actions, dtype=np.int64 if discrete else np.float32))


@torch.no_grad()
def _chunked(fn: Callable[[slice], torch.Tensor], n: int) -> torch.Tensor:
    return torch.cat([fn(slice(i, i + _CHUNK)) for i in range(0, n, _CHUNK)]) if n else torch.zeros(0)


def _row(method: str, policy: str, estimate: float | None = None, ci: tuple[float, float] | None = None,
         episodes: int = 0, **extra: Any) -> dict[str, Any]:
    def num(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else float(x)

    return {"method": method, "policy": policy, "estimate": num(estimate), "ci_low": num(ci[0]) if ci else None,
            "ci_high": num(ci[1]) if ci else None, "episodes": episodes, **extra}


@torch.no_grad()
def evaluate_policy_offline(module: Any, env_to_module: Any, data: OPEEpisodes,
                            config: OPEConfig = OPEConfig()) -> list[dict[str, Any]]:
    """One row per method: estimate, interval, episodes (and ESS for the IS family), or ``skipped``: why."""
    if isinstance(module, MultiRLModule):
        module = module[module.module_for_agent(None)]
    module.eval().to(config.device)
    space = data.info.action_space
    discrete = hasattr(space, "n")
    obs = module_inputs(env_to_module, data.obs)[C.OBS].float()  # [rows + S, D]: the act step's inputs
    n_obs = len(obs)
    # π(s) of every obs
    def policy(s: slice, explore: bool, key: str) -> torch.Tensor:  # on config.device, the result on the CPU
        return forward(module, {C.OBS: obs[s].to(config.device)}, explore=explore)[key].cpu()

    deployed = _chunked(lambda s: policy(s, False, C.ACTIONS), n_obs)
    s_idx = torch.as_tensor(data.step_obs)
    actions = _torch_actions(data.actions, discrete)
    rewards = torch.as_tensor(np.array(data.rewards, dtype=np.float32))
    gen = torch.Generator().manual_seed(config.seed)
    rows, q = [], None
    if "fqe" in config.methods or "dr" in config.methods:
        fqe_data = FQEData(obs=obs[s_idx], actions=actions, rewards=rewards, next_obs=obs[s_idx + 1],
                           terminateds=torch.as_tensor(data.terminateds, dtype=torch.float32),
                           next_actions=deployed[s_idx + 1].unsqueeze(1), next_weights=torch.ones(len(s_idx), 1))
        t0 = time.perf_counter()
        log.info(f"  fqe: fitting Q̂ ({config.fqe.num_updates} updates) ...")
        q, metrics = fit_fqe(fqe_data, space, config.gamma, config.fqe, device=config.device)
        log.info(f"  fqe: fitted in {time.perf_counter() - t0:.1f} s")
        init = torch.as_tensor(data.initial_obs)
        v0 = q(obs[init], deployed[init]).double().numpy()  # [E] Q̂(s0, π(s0))
        if "fqe" in config.methods:
            ci = E.bootstrap_ci(np.mean, [v0], num_resamples=config.num_resamples, confidence=config.confidence,
                                seed=config.seed)
            rows.append(_row("fqe", "deployed", float(v0.mean()), ci, data.num_episodes, **metrics))
    wanted = [m for m in ("is", "wis", "pdis", "dr") if m in config.methods]
    if not wanted:
        return rows
    reason = None
    if data.action_logp is None:
        reason = "the dataset records no action_logp (behaviour log-probs)"
    else:
        probe = forward(module, {C.OBS: obs[:1].to(config.device)}, explore=True)
        if C.ACTION_DIST_INPUTS not in probe:
            reason = f"{type(module).__name__} acts deterministically: π(a|s) is undefined, IS needs a stochastic policy"
    if reason is not None:
        return rows + [_row(m, "stochastic", skipped=reason) for m in wanted]
    dist_inputs = _chunked(lambda s: policy(s, True, C.ACTION_DIST_INPUTS), n_obs)
    module.cpu()  # the forward passes are done; action_dist's bounds (buffers) go beside its CPU inputs
    logp_pi = module.action_dist(dist_inputs[s_idx]).log_prob(actions).double().numpy()  # [S]
    lengths = data.episode_lengths
    r, mask = E.pad_episodes(data.rewards, lengths)
    logr, _ = E.pad_episodes(logp_pi - data.action_logp, lengths)
    ess = E.effective_sample_size(np.where(mask, logr, 0.0).sum(axis=1))
    boot = dict(num_resamples=config.num_resamples, confidence=config.confidence, seed=config.seed)
    for m in wanted:
        t0 = time.perf_counter()
        if m == "dr":
            dist = module.action_dist(dist_inputs[s_idx])
            if discrete:
                pairs = torch.arange(space.n).expand(len(s_idx), -1), dist.probs().float()
            else:
                samples = torch.stack([dist.sample(gen) for _ in range(config.action_samples)], dim=1)  # [S, K, A]
                pairs = samples, torch.full(samples.shape[:2], 1 / config.action_samples)
            step_obs = obs[s_idx]
            qv = _chunked(lambda s: q(step_obs[s], actions[s]), len(s_idx)).double().numpy()
            vv = _chunked(lambda s: q.q_values(step_obs[s], pairs[0][s], pairs[1][s]), len(s_idx)).double().numpy()
            qt, _ = E.pad_episodes(qv, lengths)
            vt, _ = E.pad_episodes(vv, lengths)
            stat = (lambda a, b, c, d, mk: E.doubly_robust(a, b, c, d, mk, config.gamma))
            arrays = [r, logr, qt, vt, mask]
        else:
            est = _IS_FAMILY[m]
            stat = (lambda a, b, mk, est=est: est(a, b, mk, config.gamma))
            arrays = [r, logr, mask]
        rows.append(_row(m, "stochastic", stat(*arrays), E.bootstrap_ci(stat, arrays, **boot), data.num_episodes,
                         ess=ess))
        log.info(f"  {m}: done in {time.perf_counter() - t0:.1f} s")
    return rows


def flags(row: dict[str, Any], value_range: tuple[float, float], gamma: float) -> list[str]:
    """Why ``row``'s estimate should not be trusted as it stands (empty: no reason found):

    - its estimate lies outside ``value_range``, the discounted returns any policy can reach
      ([min(r, 0), max(r, 0)] / (1 − γ) over the dataset's rewards);
    - IS family: the effective sample size is under ``LOW_ESS_FRACTION`` of the episodes, or under 5;
    - FQE: its backups did not reach the horizon (``fqe/horizon_reached`` < ``MIN_HORIZON_REACHED``).
    """
    out = []
    lo, hi = value_range
    est = row.get("estimate")
    if est is not None and not lo - 1e-6 * max(1.0, abs(lo)) <= est <= hi + 1e-6 * max(1.0, abs(hi)):
        out.append(f"{est:.2f} is outside the feasible range [{lo:.2f}, {hi:.2f}] of discounted returns (the "
                   f"dataset's rewards / (1 − γ)): not a value any policy can have")
    ess, n = row.get("ess"), row.get("episodes") or 0
    if ess is not None and n and ess < max(5.0, LOW_ESS_FRACTION * n):
        out.append(f"low effective sample size: ESS {ess:.2f} of {n} episodes (under {LOW_ESS_FRACTION:.0%} or 5): "
                   "a few episodes' weights decide the estimate and its interval")
    reached = row.get("fqe/horizon_reached")
    if reached is not None and reached < MIN_HORIZON_REACHED:
        iters = row["fqe/iterations"]
        per_iter = max(1, round(row["fqe/updates"] / max(iters, 1)))
        need = math.ceil(math.log(1 - MIN_HORIZON_REACHED) / math.log(gamma)) * per_iter if gamma > 0 else per_iter
        out.append(f"FQE not converged: {iters} backups reach 1 − γ^{iters} = {reached:.2f} of the horizon (criterion: "
                   f">= {MIN_HORIZON_REACHED}); use --fqe-updates {need} or more")
    return out


def _value_range(data: OPEEpisodes, gamma: float) -> tuple[float, float]:
    """[min(r, 0), max(r, 0)] / (1 − γ) over the episodes' rewards: the discounted returns any policy can reach."""
    rewards = np.asarray(data.rewards, dtype=np.float64)
    if not rewards.size:
        return 0.0, 0.0
    return min(float(rewards.min()), 0.0) / (1 - gamma), max(float(rewards.max()), 0.0) / (1 - gamma)


def _evaluate(module: Any, env_to_module: Any, data: OPEEpisodes, config: OPEConfig,
              value_range: tuple[float, float]) -> list[dict[str, Any]]:
    rows = evaluate_policy_offline(module, env_to_module, data, config)
    for row in rows:
        if not row.get("skipped"):
            row["flags"] = flags(row, value_range, config.gamma)
    return rows


def _modules_to_evaluate(ckpts: Sequence[Any], dataset: str | Path, present: list[str],
                         module_id: str | None) -> list[list[str]]:
    """Each checkpoint's modules to evaluate (``module_id``, else all), each checked to have rows in the data."""
    out = []
    for ckpt in ckpts:
        if module_id is not None and module_id not in ckpt.module_ids:
            raise ValueError(f"{ckpt.path} has no module {module_id!r}; it holds {ckpt.module_ids}")
        wanted = [module_id] if module_id is not None else ckpt.module_ids
        missing = [mid for mid in wanted if mid not in present]
        if missing:
            some = len(missing) < len(wanted)
            hint = "; evaluate a module that has rows with module_id (--module-id)" if some else ""
            raise ValueError(f"{ckpt.path}: module {missing[0]!r} has no rows in {dataset} (its rows belong to the "
                             f"modules {present}: module_id, else agent_id){hint}")
        out.append(wanted)
    return out


def ope_checkpoints(checkpoints: Sequence[str | Path], dataset: str | Path, config: OPEConfig = OPEConfig(),
                    validate: bool = True, holdout: Any = None, module_id: str | None = None) -> dict[str, Any]:
    """Estimate every checkpoint's value on ``dataset`` (only its held-out episodes with ``holdout``, a
    ``HoldoutConfig``); a JSON-ready report.

    A multi-agent dataset (rows with ``agent_id``), a checkpoint of several modules or a ``module_id`` make the
    evaluation per module: each module (only ``module_id`` if given) is evaluated on its own rows (``module_id``,
    else ``agent_id``; each agent's episode one episode) with its own observation statistics, the other agents
    being part of the environment as the data recorded them. The report then describes each module's data under
    ``modules`` and each result lists ``modules: [{module_id, methods}]`` instead of ``methods``.

    Raises ``ValueError`` (``CheckpointError``, ``InvalidDatasetError``, a space mismatch, a module without rows)
    before any fitting.
    """
    ckpts = [load_checkpoint(p) for p in checkpoints]
    info = read_info(dataset)  # the spaces are checked before the episodes are read (and Ray started)
    for ckpt in ckpts:
        for what, want, have in (("observation", ckpt.observation_space, info.observation_space),
                                 ("action", ckpt.action_space, info.action_space)):
            if (problem := space_mismatch(want, have, f"{what} space")) is not None:
                raise ValueError(f"{ckpt.path} does not fit {dataset}: {problem.replace('the env has', 'the dataset has')}")
        ckpt.env_to_modules()  # every module's saved statistics, checked before any work
    info, table = read_ope_table(dataset, validate=validate, holdout=holdout)
    per_module = module_id is not None or is_multi_agent(table) or any(len(c.module_ids) > 1 for c in ckpts)
    common = {"dataset": str(dataset), "env_id": info.env_id}
    boot = {"gamma": config.gamma, "confidence": config.confidence, "num_resamples": config.num_resamples}
    if not per_module:
        data = ope_episodes(info, table)
        value_range = _value_range(data, config.gamma)
        results = []
        for i, ckpt in enumerate(ckpts, 1):
            t0 = time.perf_counter()
            log.info(f"checkpoint {i}/{len(ckpts)} {ckpt.path}: {', '.join(config.methods)} on {data.num_episodes} "
                     "episodes ...")
            rows = _evaluate(ckpt.build_module(inference_only=True), ckpt.env_to_module(), data, config, value_range)
            log.info(f"checkpoint {i}/{len(ckpts)} done in {time.perf_counter() - t0:.1f} s")
            results.append({"checkpoint": str(ckpt.path), "algorithm": ckpt.algorithm, "methods": rows})
        return {**common, "episodes": data.num_episodes, "steps": int(data.episode_lengths.sum()),
                "gamma": config.gamma, "value_range": list(value_range), "confidence": config.confidence,
                "num_resamples": config.num_resamples, "results": results}
    mappings = {json.dumps(c.config.policy_mapping) for c in ckpts}
    if len(mappings) > 1:
        raise ValueError("the checkpoints map agents to modules differently (policy_mapping); run ope on each "
                         "mapping's checkpoints separately")
    mapping = ckpts[0].config.policy_mapping
    evaluated = _modules_to_evaluate(ckpts, dataset, table_module_ids(table, mapping), module_id)
    module_ids = list(dict.fromkeys(m for wanted in evaluated for m in wanted))
    data = {mid: ope_episodes(info, table, mid, mapping) for mid in module_ids}
    ranges = {mid: _value_range(d, config.gamma) for mid, d in data.items()}
    results = []
    for i, (ckpt, wanted) in enumerate(zip(ckpts, evaluated), 1):
        t0 = time.perf_counter()
        log.info(f"checkpoint {i}/{len(ckpts)} {ckpt.path}: {', '.join(config.methods)} on modules "
                 f"{', '.join(wanted)} ...")
        modules = ckpt.build_module(inference_only=True)
        entries = []
        for mid in wanted:
            log.info(f"  module {mid}: {data[mid].num_episodes} episodes ...")
            entries.append({"module_id": mid, "methods": _evaluate(modules[mid], ckpt.env_to_module(mid), data[mid],
                                                                    config, ranges[mid])})
        log.info(f"checkpoint {i}/{len(ckpts)} done in {time.perf_counter() - t0:.1f} s")
        results.append({"checkpoint": str(ckpt.path), "algorithm": ckpt.algorithm, "modules": entries})
    described = [{"module_id": mid, "episodes": d.num_episodes, "steps": int(d.episode_lengths.sum()),
                  "value_range": list(ranges[mid])} for mid, d in data.items()]
    return {**common, "episodes": sum(m["episodes"] for m in described), "steps": sum(m["steps"] for m in described),
            **boot, "modules": described, "results": results}
