"""Validate ``offlinerl ope`` (FQE) against real env returns on a shipped dataset.

Trains BC, IQL and CQL with the Ray-free reference loops of ``examples/`` (the same losses as
the Ray path), writes a checkpoint at several update counts (0 = the untrained module), runs
``ope_checkpoints`` (the library function behind ``offlinerl ope``) on the dataset, and rolls
every checkpoint's deployed policy out in the dataset's env with fixed seeds, summing the
discounted rewards (Σ γ^t r_t, the quantity FQE estimates from the dataset's initial states).
Reports Spearman's rank correlation, absolute errors and the bootstrap intervals.

    PYTHONPATH=. python benchmarks/ope_validation.py --dataset cartpole-mixed
    PYTHONPATH=. python benchmarks/ope_validation.py --dataset pendulum-mixed

``--workdir DIR`` keeps the checkpoints (and reuses those already there), to re-run FQE alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from offlinerl.algorithms.bc import BCConfig, bc_loss
from offlinerl.algorithms.registry import get_algorithm
from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModule
from offlinerl.env.evaluation import run_episodes
from offlinerl.episodes import read_info
from offlinerl.episodes.spaces import space_to_json
from offlinerl.evaluation.ope.fqe import FQEConfig
from offlinerl.evaluation.ope.run import OPEConfig, ope_checkpoints
from offlinerl.training.checkpoint import METADATA_FILE, class_path, write_checkpoint

ROOT = Path(__file__).resolve().parents[1]
GAMMA = 0.99
#: Per dataset: the algorithms' settings (as in its shipped pipelines).
SETTINGS = {
    "cartpole-mixed": {"iql": {"expectile": 0.9, "beta": 10.0}, "cql": {"cql_weight": 1.0}},
    "pendulum-mixed": {"iql": {"expectile": 0.7, "beta": 3.0}, "cql": {"cql_weight": 10.0, "num_sampled_actions": 4}},
}


def spearman(x: list[float], y: list[float]) -> float:
    """Pearson correlation of the ranks (ties get their mean rank)."""
    def ranks(v):
        v = np.asarray(v, dtype=float)
        order = v.argsort()
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in np.unique(v):
            r[v == value] = r[v == value].mean()
        return r
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def _reference(algorithm: str):
    name = f"reference_{'iql' if algorithm == 'bc' else algorithm}"  # BC uses IQL's data loader
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_and_save(dataset: Path, algorithm: str, snapshots: list[int], out: Path, seed: int) -> list[Path]:
    """Checkpoints of one training run after each of ``snapshots`` updates (reused if ``out`` has them all)."""
    paths = [out / f"{algorithm}-{target}" for target in snapshots]
    if all((path / METADATA_FILE).exists() for path in paths):
        return paths
    ref = _reference(algorithm)
    info = read_info(dataset)
    settings = SETTINGS[dataset.name]
    base = {"seed": seed, "train_batch_size": 256, "normalize_observations": True, "model": {"hidden": [128, 128]}}
    if algorithm == "bc":
        cfg = BCConfig.from_dict({**base, "lr": 1e-3})
    elif algorithm == "iql":
        cfg = get_algorithm("iql").config_cls.from_dict({**base, **settings["iql"]})
    else:
        cfg = get_algorithm("cql").config_cls.from_dict({**base, **settings["cql"]})
    spec = get_algorithm(algorithm)
    torch.manual_seed(seed)
    module = spec.module_cls(info.observation_space, info.action_space, cfg.module_config())
    arrays, env_to_module = _reference("iql").load_transitions(dataset, cfg.normalize_observations)
    data = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in arrays.items()}
    if algorithm == "bc":
        opt = torch.optim.Adam(module.policy_parameters(), lr=cfg.lr)

        def step(batch):
            loss = bc_loss(batch, module.forward_train(batch), cfg).losses["actor"]
            opt.zero_grad()
            loss.backward()
            opt.step()
    elif algorithm == "iql":
        optimizers = ref.make_optimizers(module, cfg)
        step = lambda batch: ref.update(module, optimizers, batch, cfg)  # noqa: E731
    else:
        optimizers = ref.make_optimizers(module, cfg)
        counter = iter(range(snapshots[-1]))
        step = lambda batch: ref.update(module, optimizers, batch, cfg, next(counter))  # noqa: E731
    done, n = 0, len(data[C.OBS])
    for target, path in zip(snapshots, paths):
        for _ in range(target - done):
            idx = torch.randint(n, (cfg.train_batch_size,))
            step({k: v[idx] for k, v in data.items()})
        done = target
        multi = MultiRLModule({C.DEFAULT_MODULE_ID: module})
        meta = {"algorithm": algorithm, "config": cfg.to_dict(), "observation_space": space_to_json(info.observation_space),
                "action_space": space_to_json(info.action_space), "module_class": class_path(spec.module_cls),
                "module_ids": [C.DEFAULT_MODULE_ID], "learner_class": class_path(spec.learner_cls),
                "connector_state": env_to_module.get_state(), "iteration": 0, "num_updates": target, "env_id": info.env_id}
        write_checkpoint(path, {"learners": [{"learner": {"module": multi.state_dict()}}]}, meta, overwrite=True)
    return paths


class Discounted(gym.Wrapper):
    """Adds up γ^t r_t of each episode it runs (``done``: the finished episodes' sums, in order)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.done: list[float] = []
        self._sum, self._t = 0.0, 0

    def reset(self, **kwargs):
        self._sum, self._t = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._sum += GAMMA ** self._t * float(reward)
        self._t += 1
        if terminated or truncated:
            self.done.append(self._sum)
        return obs, reward, terminated, truncated, info


def real_discounted_return(path: Path, env_id: str, episodes: int, seed: int) -> tuple[float, float, float]:
    """(mean discounted, its standard error, mean undiscounted) return of the deployed policy over seeded episodes."""
    from offlinerl.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(path)
    module = ckpt.build_module()[C.DEFAULT_MODULE_ID].eval()
    pipe = ckpt.env_to_module()
    envs = [Discounted(gym.make(env_id)) for _ in range(episodes)]
    to_env = module_to_env_pipeline(envs[0].action_space)

    @torch.no_grad()
    def act(obs):
        out = module.forward_inference({C.OBS: torch.as_tensor(pipe({C.OBS: obs})[C.OBS])})
        return to_env({C.ACTIONS: out[C.ACTIONS]})[C.ACTIONS]

    returns, _ = run_episodes(envs, act, [seed + j for j in range(episodes)])
    discounted = [d for env in envs for d in env.done]
    assert len(discounted) == episodes
    return float(np.mean(discounted)), float(np.std(discounted, ddof=1) / np.sqrt(episodes)), float(np.mean(returns))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="cartpole-mixed", choices=sorted(SETTINGS))
    p.add_argument("--out", default=None, help="default: benchmarks/results/ope_validation[_<dataset>].json")
    p.add_argument("--algorithms", default="bc,iql,cql")
    p.add_argument("--snapshots", default="0,10,30,100,300,1000,5000",
                   help="update counts at which each run is checkpointed (early ones give the weak policies)")
    p.add_argument("--fqe-updates", type=int, default=None, help="default: FQEConfig's")
    p.add_argument("--episodes", type=int, default=200,
                   help="env episodes per checkpoint for the real return (its standard error is in the table)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None, help="keep (and reuse) the checkpoints here")
    args = p.parse_args()
    snapshots = [int(s) for s in args.snapshots.split(",")]
    dataset = ROOT / "datasets" / args.dataset
    env_id = read_info(dataset).env_id
    suffix = "" if args.dataset == "cartpole-mixed" else f"_{args.dataset.replace('-', '_')}"
    out_path = Path(args.out or ROOT / "benchmarks" / "results" / f"ope_validation{suffix}.json")
    torch.set_num_threads(1)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        paths = [c for i, algo in enumerate(args.algorithms.split(","))
                 for c in train_and_save(dataset, algo, snapshots, work, args.seed + i)]
        t_train = time.time() - t0
        fqe_cfg = FQEConfig(seed=args.seed)
        if args.fqe_updates is not None:
            fqe_cfg = dataclasses.replace(fqe_cfg, num_updates=args.fqe_updates)
        config = OPEConfig(methods=("fqe",), gamma=GAMMA, fqe=fqe_cfg)
        report = ope_checkpoints(paths, dataset, config)
        t_ope = time.time() - t0 - t_train
        rows = []
        for path, result in zip(paths, report["results"]):
            fqe = result["methods"][0]
            real, real_se, length = real_discounted_return(path, env_id, args.episodes, 10_000)
            rows.append({"checkpoint": path.name, "real_discounted": real, "real_discounted_se": real_se,
                         "real_return": length,
                         "fqe": fqe["estimate"], "ci": [fqe["ci_low"], fqe["ci_high"]],
                         "abs_error": abs(fqe["estimate"] - real)})
    rho = spearman([r["real_discounted"] for r in rows], [r["fqe"] for r in rows])
    covered = sum(r["ci"][0] <= r["real_discounted"] <= r["ci"][1] for r in rows)
    out = {"dataset": f"datasets/{args.dataset}", "gamma": GAMMA, "fqe": dataclasses.asdict(fqe_cfg),
           "snapshots": snapshots, "algorithms": args.algorithms.split(","), "eval_episodes": args.episodes, "spearman": rho,
           "mean_abs_error": float(np.mean([r["abs_error"] for r in rows])), "ci_coverage": f"{covered}/{len(rows)}",
           "rows": rows,
           "seconds": {"train": round(t_train, 1), "ope": round(t_ope, 1), "ope_per_checkpoint": round(t_ope / len(rows), 1),
                       "total": round(time.time() - t0, 1)}}
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    print("| checkpoint | real return | real discounted (± s.e.) | FQE | 95% CI | abs error |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['checkpoint']} | {r['real_return']:.1f} | {r['real_discounted']:.1f} ± {r['real_discounted_se']:.1f} | "
              f"{r['fqe']:.1f} | "
              f"[{r['ci'][0]:.1f}, {r['ci'][1]:.1f}] | {r['abs_error']:.1f} |")
    print(f"Spearman {rho:.3f}, mean abs error {out['mean_abs_error']:.1f}, CI coverage {out['ci_coverage']}, "
          f"{out['seconds']}")


if __name__ == "__main__":
    main()
