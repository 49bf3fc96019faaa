"""The locomotion family: hopper, halfcheetah, walker2d (gymnasium MuJoCo v5) at the D4RL levels, made with our SAC.

Recipe (D4RL, Fu et al. 2020, section 5 "Gym-MuJoCo"; we train the agent on our own online stack):

- **the agent**: SAC from scratch (``offlinerl.algorithms.sac``, an online job from scratch, docs/online.md):
  ``warmup_steps`` uniformly random steps, then ``iterations`` x (``env_steps_per_iteration`` sampled steps +
  ``updates_per_iteration`` updates), checkpoints and a 10-episode evaluation (``forward_inference``, reset seeds
  10000...) every ``checkpoint_interval`` iterations (:data:`AGENT_BUDGETS`; D4RL trained 1M steps, we cannot here);
- **expert** = the final checkpoint; **medium** = the checkpoint whose evaluation is closest to 1/3 of the
  expert's, counted from the random policy's return (a normalised score of 33.3; D4RL: "about 1/3 the
  performance of the expert");
- ``medium``: ``steps`` env steps of the medium policy acting with **sampled** actions (``forward_exploration``,
  as D4RL's datasets), 4 envs side by side, reset seeds derived from ``seed``; episodes running at the end are
  truncated;
- ``medium-replay``: the agent's own experience up to the medium checkpoint: its random warm-up steps and every
  online episode (chunk) sampled by the weights of the iterations before it (D4RL: "all samples in the replay
  buffer observed during training until the policy reaches the medium level"); ``steps`` is not used;
- ``medium-expert``: the ``medium`` steps followed by as many steps of the expert policy (sampled, seed + 1);
- **references** (the normalised score's anchors): ``random`` = a uniformly random policy's mean return and
  ``expert`` = the expert policy's mean evaluation return, both over 10 episodes reset with seeds 10000...

The medium and expert actors of the shipped agents are in ``policies/`` (``<env>-<level>.pt``, tensors only,
loaded with ``weights_only=True``; ``agents.json`` says how they were trained and what they scored), so
``medium`` and ``medium-expert`` regenerate in seconds to minutes; ``medium-replay`` needs the agent's run again
(``agents.json``: ``train_s``). With ``agent="tiny"`` (CI) a tiny SAC is trained first, in seconds, and every
level comes from it. Episode ids are renumbered (``<level>-<k>``): the same policy, ``steps`` and ``seed`` write
the same parquet bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from offlinerl.core import metrics as M
from offlinerl.episodes import SingleAgentEpisode, atomic_directory, load_episodes, write_dataset

__all__ = ["TASKS", "LEVELS", "AGENT_BUDGETS", "POLICIES", "RECIPE_VERSION", "LocomotionTask", "AgentBudget",
           "train_agent", "select_levels", "export_policies", "load_agent", "generate_locomotion",
           "measure_random_return", "parse_name"]

#: Bumped whenever the recipe changes what is generated.
RECIPE_VERSION = 1
#: The shipped medium / expert actors and ``agents.json``.
POLICIES = Path(__file__).resolve().parent / "policies"
LEVELS = ("medium", "medium-replay", "medium-expert")
EVAL_SEED, EVAL_EPISODES = 10_000, 10


@dataclass(frozen=True, kw_only=True)
class LocomotionTask:
    name: str
    """Short name (``hopper``): datasets are ``<name>-<level>``."""
    env_id: str
    """Gymnasium id (MuJoCo v5)."""
    published_prefix: str
    """D4RL's name for it (``hopper``: ``hopper-medium-v2``)."""
    shipped_iterations: int
    """The shipped agent's iterations (what it was trained for: ``--train`` repeats exactly that)."""
    shipped_updates_per_iteration: int | None = None
    """The shipped agent's updates per iteration where it is not the budget's (None: the budget's)."""

    def budget(self, name: str) -> "AgentBudget":
        """The agent budget ``name`` for this env (``shipped``: with this env's own iterations and updates)."""
        budget = AGENT_BUDGETS[name]
        if name == "shipped":
            budget = replace(budget, iterations=self.shipped_iterations, wall_time_s=None,
                             updates_per_iteration=self.shipped_updates_per_iteration or budget.updates_per_iteration)
        return budget


# The shipped agents were trained with a cap of 80 iterations or 900 s of training: hopper and walker2d met the
# time cap (24 and 23 iterations) while the shared machine was loaded; halfcheetah, trained again later with
# half the updates per env step (one per step had left it below its own 5k-step checkpoint after 15k steps:
# -115 vs -42), met the iteration cap. The iterations here are what each reached, so --train repeats it.
TASKS: dict[str, LocomotionTask] = {t.name: t for t in (
    LocomotionTask(name="hopper", env_id="Hopper-v5", published_prefix="hopper", shipped_iterations=24),
    LocomotionTask(name="halfcheetah", env_id="HalfCheetah-v5", published_prefix="halfcheetah",
                   shipped_iterations=80, shipped_updates_per_iteration=500),
    LocomotionTask(name="walker2d", env_id="Walker2d-v5", published_prefix="walker2d", shipped_iterations=23),
)}


@dataclass(frozen=True, kw_only=True)
class AgentBudget:
    """How the SAC agent of a family is trained (recorded in ``agents.json`` and every card)."""

    warmup_steps: int
    """Uniformly random steps before the first update."""
    iterations: int
    """Online iterations (each: env steps, then updates)."""
    env_steps_per_iteration: int
    """Env steps sampled (``forward_exploration``) before each iteration's updates."""
    updates_per_iteration: int
    """Gradient updates per iteration (per env step: this / ``env_steps_per_iteration``)."""
    hidden: tuple[int, ...]
    """Widths of the actor's and the twin critics' hidden layers."""
    checkpoint_interval: int
    """Iterations between checkpoints and evaluations: the candidates for ``medium``."""
    eval_episodes: int = EVAL_EPISODES
    """Episodes per evaluation (reset seeds 10000...)."""
    wall_time_s: float | None = None
    """Also stop after this much training time (None: only ``iterations``)."""

    def spec(self, task: LocomotionTask, output: Path, seed: int) -> Any:
        """The online job from scratch that trains the agent (a ``FinetuneSpec``)."""
        from offlinerl.jobs.spec import FinetuneSpec, StopConfig
        from offlinerl.training.online_config import OnlineConfig

        config = {"seed": seed, "updates_per_iteration": self.updates_per_iteration,
                  "model": {"hidden": list(self.hidden)},
                  "evaluation": {"episodes": self.eval_episodes, "interval": self.checkpoint_interval,
                                 "seed": EVAL_SEED}}
        online = OnlineConfig(env=task.env_id, env_steps_per_iteration=self.env_steps_per_iteration,
                              mixing="proportional", replay_capacity=1_000_000)
        return FinetuneSpec(algorithm="sac", warmup_steps=self.warmup_steps, config=config, online=online,
                            stop=StopConfig(iterations=self.iterations, wall_time_s=self.wall_time_s),
                            checkpoint_interval=self.checkpoint_interval, output=str(output.parent),
                            name=f"{task.name}-sac")


AGENT_BUDGETS: dict[str, AgentBudget] = {
    # CI: seconds; the levels exist but mean little.
    "tiny": AgentBudget(warmup_steps=200, iterations=2, env_steps_per_iteration=200, updates_per_iteration=20,
                        hidden=(32, 32), checkpoint_interval=1, eval_episodes=2),
    # The shipped agents (policies/): 11-17 minutes each on a shared 2-core machine (agents.json has the times);
    # each env sets its own iterations (LocomotionTask.budget).
    "shipped": AgentBudget(warmup_steps=5_000, iterations=80, env_steps_per_iteration=1_000,
                           updates_per_iteration=1_000, hidden=(128, 128), checkpoint_interval=5),
}


def parse_name(name: str) -> tuple[LocomotionTask, str]:
    """``hopper-medium-replay`` -> (the hopper task, ``medium-replay``)."""
    env, _, level = name.partition("-")
    if env not in TASKS or level not in LEVELS:
        raise KeyError(f"unknown locomotion dataset {name!r} (envs: {', '.join(TASKS)}; levels: {', '.join(LEVELS)})")
    return TASKS[env], level


# -- the agent --------------------------------------------------------------------------------------------
def train_agent(task: LocomotionTask, run_dir: Path, budget: AgentBudget, *, seed: int = 0,
                log: Callable[[str], None] = print, progress: bool = False) -> dict[str, Any]:
    """Train the SAC agent of ``task`` into ``run_dir`` (an online job from scratch); returns its result.json."""
    from offlinerl.jobs.finetune import run_finetune

    return run_finetune(budget.spec(task, Path(run_dir), seed), run_dir=run_dir, progress=progress, log=log)


def select_levels(run_dir: Path, random: float = 0.0) -> dict[str, dict[str, Any]]:
    """``{"medium": ..., "expert": ...}`` of a finished agent run: each ``{checkpoint, iteration, env_steps,
    eval_return}``. Expert = the final checkpoint; medium = the periodic checkpoint whose evaluation return is
    closest to 1/3 of the expert's, measured from ``random`` (the random policy's return: a normalised score of
    33.3; it matters where random returns are far from 0, halfcheetah's −280)."""
    from offlinerl.training.checkpoint_meta import CheckpointMeta

    run_dir = Path(run_dir)
    levels: list[dict[str, Any]] = []
    for path in sorted((run_dir / "checkpoints").iterdir()):
        if not (path / "algorithm.json").is_file():
            continue
        meta = CheckpointMeta.read(path)
        ret = meta.last_eval.get(M.EVAL_RETURN_MEAN)
        if ret is not None:
            levels.append({"checkpoint": str(path), "iteration": meta.iteration, "env_steps": meta.env_steps,
                           "eval_return": float(ret), "eval_return_std": float(meta.last_eval.get(M.EVAL_RETURN_STD, 0)),
                           "final": path.name == "final"})
    final = [lv for lv in levels if lv["final"]]
    if not final:
        raise ValueError(f"{run_dir}: no final checkpoint with an evaluation (the agent's run did not finish)")
    expert = final[0]
    candidates = [lv for lv in levels if not lv["final"] and lv["iteration"] < expert["iteration"]] or [expert]
    target = random + (expert["eval_return"] - random) / 3
    medium = min(candidates, key=lambda lv: (abs(lv["eval_return"] - target), lv["iteration"]))
    return {"medium": medium, "expert": expert}


def _actor_state(checkpoint: str) -> dict[str, torch.Tensor]:
    from offlinerl.training.checkpoint import load_checkpoint

    state = load_checkpoint(checkpoint).build_module(inference_only=True).state_dict()
    return _single(state)


def _single(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The one module's weights (a MultiRLModule state's ``rl_modules.<id>.`` prefix dropped)."""
    prefix = "rl_modules.default_policy."
    return {k[len(prefix):] if k.startswith(prefix) else k: v.detach().clone() for k, v in state.items()}


def export_policies(task: LocomotionTask, run_dir: Path, budget: AgentBudget, dest: Path = POLICIES, *,
                    budget_name: str = "shipped", train_s: float | None = None) -> dict[str, Any]:
    """Write the medium and expert actors of a finished run to ``dest/<env>-<level>.pt`` and their record (levels,
    budget, references) into ``dest/agents.json``; returns the record."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    random = measure_random_return(task)
    levels = select_levels(run_dir, random[0])
    for level, info in levels.items():
        tmp = dest / f".{task.name}-{level}.pt.tmp"
        torch.save(_actor_state(info["checkpoint"]), tmp)
        tmp.replace(dest / f"{task.name}-{level}.pt")
    record = {"env_id": task.env_id, "budget": budget_name, "agent": asdict(budget), "train_s": train_s,
              "recipe_version": RECIPE_VERSION,
              **{level: {k: v for k, v in info.items() if k not in ("checkpoint", "final")}
                 for level, info in levels.items()},
              "references": {"random": random[0], "random_std": random[1], "expert": levels["expert"]["eval_return"],
                             "expert_std": levels["expert"]["eval_return_std"], "episodes": EVAL_EPISODES,
                             "seed": EVAL_SEED}}
    path = dest / "agents.json"
    data = json.loads(path.read_text()) if path.is_file() else {
        "note": "the SAC agents behind the locomotion family (benchmarks/suite/make_locomotion.py --train)"}
    data.setdefault("agents", {})[task.name] = record
    tmp = dest / ".agents.json.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return record


def load_agent(task: LocomotionTask, source: Path = POLICIES) -> tuple[dict[str, Any], dict[str, dict[str, torch.Tensor]]]:
    """The agent record of ``task`` and its medium / expert actor weights (tensors only, ``weights_only=True``)."""
    path = Path(source) / "agents.json"
    try:
        record = json.loads(path.read_text())["agents"][task.name]
    except (OSError, ValueError, KeyError):
        raise FileNotFoundError(f"{path}: no agent for {task.name} (train one: benchmarks/suite/make_locomotion.py "
                                f"--train {task.name})") from None
    weights = {level: _single(torch.load(Path(source) / f"{task.name}-{level}.pt", weights_only=True,
                                         map_location="cpu"))
               for level in ("medium", "expert")}
    return record, weights


def _make_env(task: LocomotionTask) -> Any:
    from offlinerl.trusted import make_env

    return make_env(task.env_id, {}, explicit=True)


def measure_random_return(task: LocomotionTask, *, episodes: int = EVAL_EPISODES, seed: int = EVAL_SEED
                          ) -> tuple[float, float]:
    """Mean and std of a uniformly random policy's return (episode ``e`` reset with ``seed + e``)."""
    env = _make_env(task)
    env.action_space.seed(seed)
    returns = []
    for e in range(episodes):
        env.reset(seed=seed + e)
        total, end = 0.0, False
        while not end:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total, end = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


# -- the datasets -----------------------------------------------------------------------------------------
def _renumber(episodes: list[SingleAgentEpisode], prefix: str, keep_extras: tuple[str, ...] = ()
              ) -> list[SingleAgentEpisode]:
    """Episode ids ``<prefix>-<k>`` in order of first appearance (the runners' ids are random), chunks of one
    episode kept together under one id; only ``keep_extras`` columns stay."""
    ids: dict[str, str] = {}
    out = []
    for e in episodes:
        new = ids.setdefault(e.id, f"{prefix}-{len(ids):06d}")
        out.append(replace(e, id=new, extras={k: v for k, v in e.extras.items() if k in keep_extras}))
    return out


def _policy_steps(task: LocomotionTask, weights: dict[str, torch.Tensor], hidden: tuple[int, ...], steps: int,
                  seed: int) -> list[SingleAgentEpisode]:
    """``steps`` env steps (and the running episodes' ends, truncated) of the SAC actor ``weights``, sampled."""
    from offlinerl.algorithms.sac import SACRLModule
    from offlinerl.connectors import env_to_module_pipeline, module_to_env_pipeline
    from offlinerl.core.rl_module import RLModuleSpec
    from offlinerl.env import EnvRunnerConfig, EnvRunnerGroup
    from offlinerl.env.module_policy import ModulePolicyFactory, PipelineConnectors
    from offlinerl.training.recording import close_episodes

    env = _make_env(task)
    spec = RLModuleSpec(SACRLModule, env.observation_space, env.action_space, {"hidden": list(hidden)})
    connectors = PipelineConnectors(env_to_module_pipeline(env.observation_space, False, None),
                                    module_to_env_pipeline(env.action_space))
    env.close()
    group = EnvRunnerGroup(EnvRunnerConfig(env=task.env_id, num_envs=4, seed=seed, explore=True),
                           ModulePolicyFactory(spec, weights), connectors, num_env_runners=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a [4, obs] forward per step: more threads only wait on each other (6x slower on 2)
    try:
        return close_episodes(group.sample(num_timesteps=steps, episode_seed=seed))
    finally:
        torch.set_num_threads(threads)
        group.stop()


def _replay(run_dir: Path, medium_iteration: int) -> list[SingleAgentEpisode]:
    """The agent's warm-up steps and its online chunks sampled before the medium checkpoint (weights_seq_no <
    its iteration), episodes cut there stored as truncated."""
    from offlinerl.training.recording import close_episodes

    warmup = load_episodes(Path(run_dir) / "warmup")
    online = [e for e in load_episodes(Path(run_dir) / "online-episodes")
              if int(np.max(e.extras["weights_seq_no"])) < medium_iteration]
    return _renumber(warmup, "warmup") + _renumber(close_episodes(online), "online")


def _agent_run(agents: Path, task: LocomotionTask, budget_name: str, log: Callable[[str], None] | None) -> Path:
    """The agent's run directory under ``agents``: trained now if it is not there (tiny: seconds; shipped: see
    ``agents.json``'s ``train_s``)."""
    run = Path(agents) / f"{task.name}-{budget_name}"
    if not (run / "result.json").is_file():
        if run.exists():
            raise FileExistsError(f"{run}: an unfinished agent run; remove it to train the agent again")
        if log is not None:
            log(f"training the {budget_name} SAC agent of {task.name} into {run}")
        train_agent(task, run, task.budget(budget_name), log=log or (lambda m: None))
    return run


def generate_locomotion(name: str, out: Path, *, steps: int, seed: int = 0, agent: str = "shipped",
                        agents: Path | None = None, overwrite: bool = False,
                        log: Callable[[str], None] | None = None) -> Path:
    """Write the locomotion dataset ``name`` (``<env>-<level>``) into ``out``, atomically: the episode dataset,
    ``card.json``, ``README.md`` and ``SHA256SUMS``. ``steps``: env steps per policy level (``medium-replay``:
    unused). ``agent``: ``shipped`` (the actors in ``policies/``; ``medium-replay`` needs the agent's run in
    ``agents``, trained there if missing) or ``tiny`` (a tiny SAC trained in ``agents`` first). ``agents``
    defaults to ``out``'s parent ``/_agents``."""
    from offlinerl.benchmark.cards import write_checksums

    task, level = parse_name(name)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if agent not in AGENT_BUDGETS:
        raise ValueError(f"agent must be one of {', '.join(AGENT_BUDGETS)}, got {agent!r}")
    out = Path(out)
    agents = Path(agents) if agents is not None else out.parent / "_agents"
    run = None
    if agent == "shipped":
        record, weights = load_agent(task)
    else:
        run = _agent_run(agents, task, agent, log)
        if not (run / "policies" / f"{task.name}-expert.pt").is_file():
            export_policies(task, run, task.budget(agent), run / "policies", budget_name=agent)
        record, weights = load_agent(task, run / "policies")
    hidden = tuple(record["agent"]["hidden"])
    started = time.perf_counter()
    if level == "medium-replay":
        run = run or _agent_run(agents, task, agent, log)
        medium = select_levels(run, record["references"]["random"])["medium"]  # that run's own medium point
        record = {**record, "medium": {k: v for k, v in medium.items() if k not in ("checkpoint", "final")}}
        episodes = _replay(run, medium["iteration"])
    else:
        episodes = _renumber(_policy_steps(task, weights["medium"], hidden, steps, seed), "medium",
                             ("action_logp", "action_dist_inputs"))
        if level == "medium-expert":
            episodes += _renumber(_policy_steps(task, weights["expert"], hidden, steps, seed + 1), "expert",
                                  ("action_logp", "action_dist_inputs"))
    from offlinerl.env.collect import env_spec_json

    env = _make_env(task)
    provenance = {"collector": "offlinerl.benchmark.locomotion", "recipe_version": RECIPE_VERSION, "dataset": name,
                  "agent": agent, "steps": steps, "seed": seed, "published_name": f"{task.published_prefix}-{level}-v2"}
    with atomic_directory(out, overwrite=overwrite, kind="dataset") as tmp:
        info = write_dataset(episodes, tmp / "data", observation_space=env.observation_space,
                             action_space=env.action_space, env_id=task.env_id, env_spec=env_spec_json(task.env_id),
                             provenance=provenance)
        env.close()
        for f in (tmp / "data").iterdir():
            f.rename(tmp / f.name)
        (tmp / "data").rmdir()
        card = make_card(task, level, info, record, steps=steps, seed=seed, agent=agent, dataset_dir=tmp)
        (tmp / "card.json").write_text(json.dumps(card, indent=2, allow_nan=False) + "\n")
        (tmp / "README.md").write_text(render_readme(card))
        write_checksums(tmp)
    if log is not None:
        log(f"{name}: {info.num_steps:,} steps, {info.num_episodes:,} episodes in "
            f"{time.perf_counter() - started:.0f} s -> {out}")
    return out


def make_card(task: LocomotionTask, level: str, info: Any, record: dict[str, Any], *, steps: int, seed: int,
              agent: str, dataset_dir: Path) -> dict[str, Any]:
    """The machine-readable card of a locomotion dataset."""
    from offlinerl.benchmark.cards import data_digest
    from offlinerl.episodes.software import made_with

    refs = record["references"]
    returns = _returns(dataset_dir)
    return {
        "name": f"{task.name}-{level}", "env_id": task.env_id, "level": level,
        "published_name": f"{task.published_prefix}-{level}-v2",
        "num_episodes": info.num_episodes, "num_steps": info.num_steps, "steps_per_policy": steps, "seed": seed,
        "recipe_version": RECIPE_VERSION, "agent_budget": agent, "agent": record["agent"],
        "agent_train_s": record.get("train_s"),
        "medium_policy": record["medium"], "expert_policy": record["expert"],
        "episode_return_mean": returns[0], "episode_return_max": returns[1],
        "reference_returns": refs, "random_return": refs["random"], "best_return": refs["expert"],
        "data_sha256": data_digest(dataset_dir), "made_with": made_with(),
    }


def _returns(directory: Path) -> tuple[float, float]:
    """Mean and max return of the dataset's rows (chunks of one episode summed)."""
    totals: dict[str, float] = {}
    for e in load_episodes(directory):
        totals[e.id] = totals.get(e.id, 0.0) + float(np.sum(e.rewards))
    values = np.asarray(list(totals.values()))
    return float(values.mean()), float(values.max())


def render_readme(card: dict[str, Any]) -> str:
    """``README.md`` of a locomotion dataset."""
    from offlinerl.episodes.software import made_with_text

    a, med, exp, refs = card["agent"], card["medium_policy"], card["expert_policy"], card["reference_returns"]
    total = a["warmup_steps"] + exp["env_steps"]
    what = {
        "medium": f"{card['steps_per_policy']:,} env steps of the medium policy, actions sampled from it",
        "medium-replay": f"the agent's own experience up to the medium checkpoint: its {a['warmup_steps']:,} random "
                         f"warm-up steps and every online step sampled in iterations 1-{med['iteration']}",
        "medium-expert": f"{card['steps_per_policy']:,} env steps of the medium policy, then as many of the expert "
                         "policy (seed + 1), actions sampled",
    }[card["level"]]
    train = f"{card['agent_train_s']:.0f} s" if card.get("agent_train_s") else "see agents.json"
    stop = f", stopped after {a['wall_time_s']:.0f} s of training at the latest" if a.get("wall_time_s") else ""
    return f"""# {card['name']}

{card['env_id']} (gymnasium MuJoCo) at the D4RL `{card['level']}` level, mirroring `{card['published_name']}`;
`offlinerl.benchmark.locomotion.generate_locomotion("{card['name']}", OUT, steps={card['steps_per_policy']}, seed={card['seed']})`
(recipe version {card['recipe_version']}, agent `{card['agent_budget']}`) writes exactly these parquet files
(`data_sha256` in `card.json`) with {made_with_text(card.get('made_with'))} (`made_with`): MuJoCo 4 simulates
otherwise than 3, so other versions, or another CPU, may write other data.

- **Agent**: SAC trained online from scratch here (`offlinerl.algorithms.sac`): {a['warmup_steps']:,} random steps,
  then up to {a['iterations']} iterations of {a['env_steps_per_iteration']:,} env steps + {a['updates_per_iteration']:,} updates
  (hidden {list(a["hidden"])}{stop}); {total:,} env steps in all
  ({train}). D4RL's agents trained 1M steps: ours are weaker experts.
- **Levels**: expert = the final checkpoint (iteration {exp['iteration']}, evaluation return {exp['eval_return']:.1f});
  medium = the checkpoint whose evaluation is closest to 1/3 of that, counted from the random return (iteration {med['iteration']},
  {med['env_steps']:,} online env steps, return {med['eval_return']:.1f}).
- **Data**: {what}. {card['num_episodes']:,} rows, {card['num_steps']:,} steps; mean episode return
  {card['episode_return_mean']:.1f}, best {card['episode_return_max']:.1f}.
- **Reference returns** ({refs['episodes']} episodes, reset seeds {refs['seed']}…): uniformly random actions
  {refs['random']:.2f} ± {refs['random_std']:.2f} (= 0), the expert policy {refs['expert']:.2f} ± {refs['expert_std']:.2f} (= 100).
- **Regenerating**: `medium` and `medium-expert` from the shipped actors (`src/offlinerl/benchmark/policies/`) in
  seconds to minutes; `medium-replay` needs the agent trained again ({train}).

Files: `dataset.json` + `part-*.parquet` (the episode dataset), `card.json`, this README, `SHA256SUMS`.
"""
