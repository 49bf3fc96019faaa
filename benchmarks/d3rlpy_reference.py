"""Same-budget d3rlpy reference runs of our CQL / IQL pipelines (issue 5), run by hand.

Reads one of our pipeline files (``jobs/*-cql.yaml`` / ``*-iql.yaml``: ``algorithm``,
``dataset``, ``config``, ``stop.updates``, read as ``benchmarks/quality.py`` reads them),
trains d3rlpy's matching algorithm on the same episodes for the same number of updates
with the closest settings d3rlpy offers, evaluates its deterministic policy in the real
gymnasium env on the same evaluation seeds and number of episodes, normalises the return
with the dataset's ``card.json`` anchors, and appends one JSON line per run:

    /work/d3rlpy-venv/bin/python benchmarks/d3rlpy_reference.py run jobs/pendulum-iql.yaml --seed 0 --out d3rlpy.jsonl
    /work/d3rlpy-venv/bin/python benchmarks/d3rlpy_reference.py run jobs/cartpole-cql.yaml --updates 300 --out /tmp/smoke.jsonl
    python benchmarks/d3rlpy_reference.py table d3rlpy.jsonl     # markdown, mean ± std over seeds (no d3rlpy needed)

(run from the repository root; the script puts the root on ``sys.path`` itself.)

d3rlpy is NOT a dependency of offlinerl. It lives in its own venv that reuses the main
venv's packages (torch 2.13 CPU, gymnasium 1.4, numpy 2.4, ...) through a ``.pth`` file
(``--system-site-packages`` would expose the interpreter's site-packages, not the main
venv's, because ``/work/main/.venv`` is itself a venv). Installed with (d3rlpy 2.8.1):

    /work/main/.venv/bin/python -m venv /work/d3rlpy-venv
    echo /work/main/.venv/lib/python3.11/site-packages \\
        > /work/d3rlpy-venv/lib/python3.11/site-packages/offlinerl-main-venv.pth
    /work/d3rlpy-venv/bin/pip install --no-deps d3rlpy==2.8.1
    /work/d3rlpy-venv/bin/pip install gym==0.26.2 structlog colorama dataclasses-json scikit-learn

``--no-deps`` because d3rlpy 2.8.1 pins ``gymnasium==1.0.0`` (we keep 1.4; d3rlpy only needs
its spaces, and evaluation here uses gymnasium directly); its other requirements are
installed by hand above (the legacy ``gym`` 0.26 is imported for ``gym.spaces`` and prints
an unmaintained/NumPy-2 warning on import, harmless here; scikit-learn is imported by its
PRDC algorithm at package import). pip then installs no torch: torch 2.13 CPU comes from
the main venv through the ``.pth`` file.

Data (``offlinerl.episodes.load_episodes``): an ``MDPDataset`` with ``terminals`` =
terminated and ``timeouts`` = truncated. d3rlpy stores T observations per episode and
drops the last transition of a non-terminated episode (it has no next observation), so a
truncated (or unfinished) episode gets its final observation appended as one extra row
(action = the last action, reward 0) that carries the timeout: every one of our
transitions (s, a, r, s', terminated) is then a d3rlpy transition, and the run checks
that the count equals ``offlinerl.data.transitions.load_transitions``'. The extra row's
action and reward are never used as a transition (d3rlpy samples uniformly over
transitions, as our loop does). A terminated episode's last transition gets d3rlpy's
terminal flag (no bootstrap), as ours. Checked once by hand on pendulum-, cartpole- and
double-pendulum-mixed: every d3rlpy transition (obs, action, reward, terminal, next obs)
equals ours, in the same order. Box observations only (flattened).

Settings mapping (ours -> d3rlpy 2.8.1):

- all: ``train_batch_size`` -> ``batch_size``; ``gamma`` -> ``gamma``; ``seed`` ->
  ``d3rlpy.seed`` (also seeds minibatch sampling); ``model.hidden`` -> the actor's
  ``VectorEncoderFactory(hidden_units)``; ``model.extra.critic_hidden`` (else ``hidden``) ->
  the critic / value encoders; ``model.activation`` -> ``activation`` (silu -> swish; elu
  is refused: d3rlpy has none); ``grad_clip`` -> ``AdamFactory(clip_grad_norm)`` of every
  optimizer; ``normalize_observations`` -> ``StandardObservationScaler`` with OUR fitted
  mean and ``sqrt(var + 1e-8)`` as std and ``eps=0`` (identical statistics); ``reward_scale``
  -> ``MultiplyRewardScaler``; Box actions -> ``MinMaxActionScaler`` over the action box
  (d3rlpy's policies act in [-1, 1]; ours squash to the box directly); ``stop.updates`` ->
  ``fit(n_steps)``; ``evaluation.episodes`` / ``seed`` / ``interval`` -> the same evaluation
  episodes, env seeds and evaluation points (``fit`` epochs end where ours evaluate).
- CQL, Box actions -> ``CQLConfig``: ``actor_lr``/``critic_lr``/``alpha_lr`` ->
  ``actor_/critic_/temp_learning_rate``; ``initial_alpha`` -> ``initial_temperature``;
  ``tau``; ``num_critics`` -> ``n_critics``; ``num_sampled_actions`` -> ``n_action_samples``;
  ``cql_weight`` -> ``conservative_weight``; fixed weight (ours by default) ->
  ``alpha_learning_rate=0`` and ``initial_alpha=1`` (d3rlpy's ``alpha`` is the Lagrange
  multiplier; its ``alpha_threshold`` then only shifts the loss by a constant);
  ``lagrangian`` -> ``alpha_learning_rate=cql_alpha_lr``, ``initial_alpha=initial_cql_alpha``,
  ``alpha_threshold=target_action_gap``; ``backup_entropy`` -> ``soft_q_backup``.
- CQL, Discrete actions -> ``DiscreteCQLConfig``: ``critic_lr`` -> ``learning_rate``;
  ``num_critics`` -> ``n_critics``; ``cql_weight · num_critics`` -> ``alpha`` (d3rlpy puts the
  penalty on the ensemble-MEAN Q, so each member gets 1/E of the gradient; ours penalises
  every member, so the factor E restores the per-member strength); Polyak ``tau`` -> hard
  target copy every ``round(1 / tau)`` updates (``target_update_interval``; same time constant).
- IQL, Box actions -> ``IQLConfig``: ``actor_lr`` -> ``actor_learning_rate``; ``critic_lr``
  -> ``critic_learning_rate`` (one Adam over Q and V in d3rlpy; Adam is per-parameter, so
  this equals ours when ``value_lr == critic_lr``, else a difference is recorded); ``tau``;
  ``num_critics``; ``expectile``; ``beta`` -> ``weight_temp``; ``max_weight``.
- IQL, Discrete actions: d3rlpy has no discrete IQL; the run records ``"n/a"``.

Differences that remain (d3rlpy's design, not settings):

- CQL (Box): the TD target uses the deterministic action tanh(μ(s')) of the policy
  (``soft_q_backup=False``); ours samples a' ~ π(·|s'). Log-std clamp [-20, 2] (ours [-5, 2]).
  The temperature loss is −α·(log π − |A|) (ours −log α·(log π − |A|): same fixed point,
  gradient scaled by α). The Lagrangian α' loss carries the factor ``cql_weight``.
  d3rlpy steps the critic first and computes the actor loss with the updated critic; ours
  takes every gradient before any weight moves. ``cql_temperature`` ≠ 1,
  ``bc_warmup_updates`` > 0 and a custom ``target_entropy`` have no d3rlpy counterpart and
  are refused.
- CQL (Discrete): Huber TD loss (ours squared error); the double-DQN argmax is over the
  ensemble-mean online Q (ours the member-wise minimum); hard target copies (above).
- IQL (Box): d3rlpy's IQL policy is a plain Gaussian (mean tanh-squashed, a state-
  independent log-std parameter, clamp [-5, 2]) and AWR maximises its log-density of the
  scaled data action; ours is a tanh-squashed Gaussian with a state-dependent log-std and
  evaluates log π of the data action (clamped 1e-3 inside the bounds). Critic (Q and V) is
  stepped before the actor, as above.
- Observation clipping: ours clips normalised observations to ±10; d3rlpy does not clip.
- No Ray, no DDP: d3rlpy's single-process ``fit`` (Python per-sample minibatch assembly).

The networks are built before the training clock starts, so ``fit`` logs one expected
warning, "Skip building models since they're already built"; d3rlpy's per-epoch INFO logs
are filtered out.

Each JSON line: pipeline, algorithm, d3rlpy class, seed, d3rlpy and torch versions, dataset,
updates, ``train_s`` (training only, evaluation excluded, as quality.py), ``seconds`` (whole
run including data loading and evaluation), ``updates_per_s``, evaluation curve, final
return and score, best score, and ``settings`` (the d3rlpy config values used) plus
``differences`` (the notes above that apply).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "src", ROOT):  # the checkout's package (src/ layout) and its helpers
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import numpy as np  # noqa: E402

from offlinerl.algorithms.registry import get_algorithm  # noqa: E402
from offlinerl.trusted import load_config_file  # noqa: E402
from offlinerl.scoring import score_for_dataset  # noqa: E402

DIFFERENCES = {
    "all": [
        "normalised observations are not clipped to ±10 (ours clip)",
        "single-process d3rlpy fit with Python per-sample minibatch assembly",
    ],
    "cql_box": [
        "TD target uses tanh(mu(s')) (ours: a' ~ pi(.|s'))",
        "policy log-std clamp [-20, 2] (ours [-5, 2])",
        "temperature loss -alpha*(logp - |A|) (ours -log_alpha*(logp - |A|))",
        "critic stepped before the actor loss is computed (ours: all gradients first)",
    ],
    "cql_discrete": [
        "Huber TD loss (ours squared error)",
        "double-DQN argmax over the ensemble-mean Q (ours the member-wise min)",
        "penalty on the ensemble-mean Q: alpha = cql_weight * num_critics",
        "hard target copy every round(1/tau) updates (ours Polyak tau every update)",
    ],
    "iql_box": [
        "Gaussian policy with tanh(mean), state-independent log-std (ours tanh-squashed Gaussian, state-dependent log-std)",
        "critic and value stepped before the actor loss is computed (ours: all gradients first)",
    ],
}


# -- pipeline -> our config -------------------------------------------------------------------

def load_pipeline(pipeline_path: str, overrides: list[str]) -> tuple[dict, Any, str, int]:
    """(spec, our frozen config, absolute dataset path, updates) exactly as quality.py reads them."""
    spec = load_config_file(pipeline_path, [f"config.{o}" for o in overrides])
    name = spec["algorithm"]
    if name not in ("cql", "iql"):
        raise SystemExit(f"{pipeline_path}: algorithm {name!r} has no d3rlpy reference here (cql or iql)")
    dataset = spec["dataset"] if Path(spec["dataset"]).is_absolute() else str(ROOT / spec["dataset"])
    return spec, get_algorithm(name).config_cls.from_dict(spec.get("config", {})), dataset, int(spec["stop"]["updates"])


def _refuse(pipeline: str, problems: list[str]) -> None:
    if problems:
        raise SystemExit(f"{pipeline}: no d3rlpy counterpart for: " + "; ".join(problems))


def d3rlpy_settings(name: str, cfg: Any, discrete: bool, pipeline: str) -> dict[str, Any]:
    """The d3rlpy config values (plain JSON) that mirror our config; see the module docstring."""
    model = cfg.model
    activation = {"relu": "relu", "tanh": "tanh", "gelu": "gelu", "silu": "swish"}.get(model.activation)
    problems = []
    if activation is None:
        problems.append(f"model.activation={model.activation}")
    if model.encoder == "cnn":
        problems.append("model.encoder=cnn")
    hidden = list(model.hidden)
    critic_hidden = list(model.extra.get("critic_hidden") or hidden)
    common = {"batch_size": cfg.train_batch_size, "gamma": cfg.gamma}
    if name == "cql":
        if cfg.cql_temperature != 1.0:
            problems.append(f"cql_temperature={cfg.cql_temperature}")
        if cfg.bc_warmup_updates:
            problems.append(f"bc_warmup_updates={cfg.bc_warmup_updates}")
        if cfg.target_entropy is not None:
            problems.append(f"target_entropy={cfg.target_entropy}")
        _refuse(pipeline, problems)
        if discrete:
            return {"class": "DiscreteCQL", **common, "learning_rate": cfg.critic_lr, "n_critics": cfg.num_critics,
                    "alpha": cfg.cql_weight * cfg.num_critics, "target_update_interval": max(1, round(1 / cfg.tau)),
                    "encoder": {"hidden_units": critic_hidden, "activation": activation}}
        return {"class": "CQL", **common, "actor_learning_rate": cfg.actor_lr, "critic_learning_rate": cfg.critic_lr,
                "temp_learning_rate": cfg.alpha_lr, "initial_temperature": cfg.initial_alpha, "tau": cfg.tau,
                "n_critics": cfg.num_critics, "conservative_weight": cfg.cql_weight,
                "n_action_samples": cfg.num_sampled_actions,
                "alpha_learning_rate": cfg.cql_alpha_lr if cfg.lagrangian else 0.0,
                "initial_alpha": cfg.initial_cql_alpha if cfg.lagrangian else 1.0,
                "alpha_threshold": cfg.target_action_gap, "soft_q_backup": cfg.backup_entropy,
                "actor_encoder": {"hidden_units": hidden, "activation": activation},
                "critic_encoder": {"hidden_units": critic_hidden, "activation": activation}}
    _refuse(pipeline, problems)
    if discrete:
        return {"class": None}  # d3rlpy has no discrete IQL
    return {"class": "IQL", **common, "actor_learning_rate": cfg.actor_lr, "critic_learning_rate": cfg.critic_lr,
            "tau": cfg.tau, "n_critics": cfg.num_critics, "expectile": cfg.expectile, "weight_temp": cfg.beta,
            "max_weight": cfg.max_weight,
            "actor_encoder": {"hidden_units": hidden, "activation": activation},
            "critic_encoder": {"hidden_units": critic_hidden, "activation": activation},
            "value_encoder": {"hidden_units": critic_hidden, "activation": activation}}


# -- data ---------------------------------------------------------------------------------------

def build_arrays(dataset: str) -> dict[str, np.ndarray]:
    """MDPDataset columns; a non-terminated episode gets its final observation as an extra timeout row."""
    from offlinerl.episodes import load_episodes

    obs, act, rew, term, tout = [], [], [], [], []
    for ep in load_episodes(dataset):
        t = len(ep.actions)
        if t == 0:
            continue
        o = np.asarray(ep.obs, dtype=np.float32).reshape(t + 1, -1)
        a, r = np.asarray(ep.actions), np.asarray(ep.rewards, dtype=np.float32)
        if not ep.terminated:  # the final observation becomes an extra row carrying the timeout
            a, r = np.concatenate([a, a[-1:]]), np.concatenate([r, np.zeros(1, np.float32)])
        else:
            o = o[:t]
        done = np.zeros(len(o), dtype=np.float32)
        done[-1] = 1.0
        obs.append(o)
        act.append(a)
        rew.append(r)
        term.append(done if ep.terminated else np.zeros_like(done))
        tout.append(np.zeros_like(done) if ep.terminated else done)
    return {"observations": np.concatenate(obs), "actions": np.concatenate(act), "rewards": np.concatenate(rew),
            "terminals": np.concatenate(term), "timeouts": np.concatenate(tout)}


def observation_stats(dataset: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Our NormalizeObservations statistics (mean, sqrt(var + eps)) and our transition count."""
    from offlinerl.connectors import NormalizeObservations
    from offlinerl.core import columns as C
    from offlinerl.data.transitions import load_transitions

    arrays, _ = load_transitions(dataset, normalize=False)
    norm = NormalizeObservations()
    norm.fit(arrays[C.OBS])
    std = np.sqrt(norm.stats.var + norm.eps)
    return norm.stats.mean.astype(np.float32), std.astype(np.float32), len(arrays[C.OBS])


# -- d3rlpy -----------------------------------------------------------------------------------

def make_algo(settings: dict[str, Any], cfg: Any, info: Any, mean: np.ndarray, std: np.ndarray, device: str):
    import d3rlpy
    from d3rlpy.models.encoders import VectorEncoderFactory
    from d3rlpy.optimizers import AdamFactory
    from d3rlpy.preprocessing import MinMaxActionScaler, MultiplyRewardScaler, StandardObservationScaler

    kw = {k: v for k, v in settings.items() if k != "class" and not k.endswith("encoder")}
    for key in ("encoder", "actor_encoder", "critic_encoder", "value_encoder"):
        if key in settings:
            kw[f"{key}_factory"] = VectorEncoderFactory(**settings[key])
    optimizers = {"DiscreteCQL": ("optim",), "CQL": ("actor_optim", "critic_optim", "temp_optim", "alpha_optim"),
                  "IQL": ("actor_optim", "critic_optim")}[settings["class"]]
    for key in optimizers:  # Adam with torch's defaults, as ours; grad_clip per optimizer, as ours
        kw[f"{key}_factory"] = AdamFactory(clip_grad_norm=cfg.grad_clip)
    if cfg.normalize_observations:
        kw["observation_scaler"] = StandardObservationScaler(mean=mean, std=std, eps=0.0)
    if cfg.reward_scale != 1.0:
        kw["reward_scaler"] = MultiplyRewardScaler(multiplier=cfg.reward_scale)
    if settings["class"] != "DiscreteCQL":
        kw["action_scaler"] = MinMaxActionScaler(minimum=info.action_space.low.astype(np.float32),
                                                 maximum=info.action_space.high.astype(np.float32))
    config_cls = getattr(d3rlpy.algos, settings["class"] + "Config")
    return config_cls(**kw).create(device=device if device != "cpu" else False)


def evaluate(algo, env_id: str, episodes: int, seed: int, env_kwargs: dict) -> tuple[float, float]:
    """Mean/std return of deterministic episodes on env seeds seed, seed+1, ... (all stepped side by side)."""
    import gymnasium as gym

    envs = [gym.make(env_id, **env_kwargs) for _ in range(episodes)]
    box = isinstance(envs[0].action_space, gym.spaces.Box)
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    ret, active = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        x = np.stack([np.asarray(obs[i], dtype=np.float32).reshape(-1) for i in idx])
        actions = algo.predict(x)
        if box:
            actions = np.clip(actions, envs[0].action_space.low, envs[0].action_space.high)
        for j, i in enumerate(idx):
            obs[i], r, term, trunc, _ = envs[i].step(actions[j] if box else int(actions[j]))
            ret[i] += r
            active[i] = not (term or trunc)
    for env in envs:
        env.close()
    return float(ret.mean()), float(ret.std())


def run(pipeline_path: str, seed: int, overrides: list[str], device: str, updates: int | None, out: str,
        progress: bool) -> dict:
    import gymnasium as gym

    from offlinerl.episodes import read_info

    started = time.perf_counter()
    spec, cfg, dataset, total = load_pipeline(pipeline_path, overrides)
    total = updates or total
    name = spec["algorithm"]
    info = read_info(dataset)
    discrete = isinstance(info.action_space, gym.spaces.Discrete)
    settings = d3rlpy_settings(name, cfg, discrete, pipeline_path)
    base = {"pipeline": Path(pipeline_path).stem, "algorithm": name, "seed": seed, "overrides": overrides,
            "dataset": spec["dataset"], "updates": total}
    if settings["class"] is None:
        result = {**base, "d3rlpy_class": None, "final_return": None, "final_score": None,
                  "note": "n/a: d3rlpy has no discrete IQL"}
        with open(out, "a") as f:
            f.write(json.dumps(result) + "\n")
        return result
    if not isinstance(info.observation_space, gym.spaces.Box):
        raise SystemExit(f"{dataset}: only Box observation spaces are mapped to d3rlpy, got {info.observation_space}")

    import d3rlpy
    import torch
    from d3rlpy.constants import ActionSpace
    from d3rlpy.dataset import MDPDataset
    from d3rlpy.logging import NoopAdapterFactory

    mean, std, our_transitions = observation_stats(dataset)
    arrays = build_arrays(dataset)
    if discrete:
        arrays["actions"] = arrays["actions"].astype(np.int64)
        space, size = ActionSpace.DISCRETE, int(info.action_space.n)
    else:
        arrays["actions"] = arrays["actions"].astype(np.float32).reshape(len(arrays["actions"]), -1)
        space, size = ActionSpace.CONTINUOUS, int(info.action_space.shape[0])
    mdp = MDPDataset(**arrays, action_space=space, action_size=size)
    if mdp.transition_count != our_transitions:
        raise SystemExit(f"{dataset}: d3rlpy dataset has {mdp.transition_count} transitions, ours {our_transitions}")

    d3rlpy.seed(seed)
    algo = make_algo(settings, cfg, info, mean, std, device)
    ev = cfg.evaluation
    eval_every = cfg.updates_per_iteration * max(1, ev.interval)
    eval_points = {s for s in range(eval_every, total + 1, eval_every)} | {total}
    per_epoch = math.gcd(total, eval_every)  # fit epochs end at every evaluation point
    env_id = ev.env or info.env_id
    curve, eval_s = [], 0.0

    def on_epoch(algo_, epoch: int, step: int) -> None:
        nonlocal eval_s
        if step not in eval_points:
            return
        t = time.perf_counter()
        mean_ret, std_ret = evaluate(algo_, env_id, ev.episodes, ev.seed, dict(ev.env_kwargs))
        eval_s += time.perf_counter() - t
        curve.append([step, mean_ret, std_ret])

    algo.build_with_dataset(mdp)  # networks built before the clock starts (fit then skips building)
    t0 = time.perf_counter()
    algo.fit(mdp, n_steps=total, n_steps_per_epoch=per_epoch, logger_adapter=NoopAdapterFactory(),
             show_progress=progress, save_interval=total + 1, epoch_callback=on_epoch)
    train_s = time.perf_counter() - t0 - eval_s
    final = curve[-1][1]
    result = {
        **base, "d3rlpy_class": settings["class"], "d3rlpy_version": d3rlpy.__version__,
        "torch_version": torch.__version__, "torch_threads": torch.get_num_threads(), "device": device,
        "transitions": our_transitions, "train_s": round(train_s, 1), "seconds": round(time.perf_counter() - started, 1),
        "updates_per_s": round(total / train_s, 1), "eval_episodes": ev.episodes, "curve": curve,
        "final_return": final, "final_score": score_for_dataset(final, dataset),
        "best_score": max(score_for_dataset(c[1], dataset) for c in curve),
        "settings": {**settings, "observation_scaler": "standard (ours)" if cfg.normalize_observations else None,
                     "reward_scale": cfg.reward_scale, "grad_clip": cfg.grad_clip},
        "differences": DIFFERENCES["all"] + DIFFERENCES[f"{name}_{'discrete' if discrete else 'box'}"]
        + ([] if name != "iql" or cfg.value_lr == cfg.critic_lr else [f"value lr {cfg.value_lr} -> {cfg.critic_lr}"]),
    }
    with open(out, "a") as f:  # one line per run
        f.write(json.dumps(result) + "\n")
    return result


def table(paths: list[str]) -> str:
    rows: dict[tuple, list[dict]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows.setdefault((r["dataset"], r["pipeline"], r["algorithm"], " ".join(r["overrides"]), r["updates"]), []).append(r)

    def ms(values):
        values = [v for v in values if v is not None]
        if not values:
            return "n/a"
        if len(values) == 1:
            return f"{values[0]:.1f}"
        return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"

    lines = ["| dataset | pipeline | d3rlpy algorithm | overrides | seeds | updates | final score | final return | "
             "best score (any eval) | updates/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (ds, pipe, _, ov, updates), rs in sorted(rows.items()):
        rs.sort(key=lambda r: r["seed"])
        cls = rs[0].get("d3rlpy_class") or "n/a (no discrete IQL)"
        lines.append(f"| {Path(ds).name} | {pipe} | {cls} | {ov or '-'} | {len(rs)} | {updates} | "
                     f"{ms([r['final_score'] for r in rs])} | {ms([r['final_return'] for r in rs])} | "
                     f"{ms([r.get('best_score') for r in rs])} | {ms([r.get('updates_per_s') for r in rs])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog="Run `run` with the d3rlpy venv's python (see the module docstring).")
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train d3rlpy's counterpart of one pipeline for one seed, evaluate, append a line")
    r.add_argument("pipeline", help="jobs/<dataset>-cql.yaml or -iql.yaml")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="our config override before mapping, e.g. --set cql_weight=1.0")
    r.add_argument("--device", default="cpu", help="cpu or cuda:N")
    r.add_argument("--updates", type=int, help="default: the pipeline's stop.updates")
    r.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    r.add_argument("--no-progress", action="store_true", help="no tqdm bar per fit epoch")
    r.add_argument("--out", required=True, help="JSON-lines file to append the result to")
    t = sub.add_parser("table", help="markdown table (mean ± std over seeds) of result files")
    t.add_argument("results", nargs="+")
    args = parser.parse_args()
    if args.cmd == "table":
        print(table(args.results))
        return
    import logging

    import structlog
    import torch

    torch.set_num_threads(args.threads)
    # d3rlpy logs every epoch's metrics at INFO through structlog; keep its warnings only
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    res = run(args.pipeline, args.seed, args.overrides, args.device, args.updates, args.out, not args.no_progress)
    print(json.dumps({k: v for k, v in res.items() if k not in ("curve", "settings", "differences")}))


if __name__ == "__main__":
    main()
