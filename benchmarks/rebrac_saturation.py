"""Does ReBRAC's actor run to the action bounds in its first updates? A probe per (β1, seed), in seconds.

    PYTHONPATH=. python benchmarks/rebrac_saturation.py benchmarks/runs/locomotion-data/halfcheetah-medium-small \\
        --beta1 0.001,0.01,0.05,0.1 --beta2 0.01 --seeds 0,1,2 --updates 500 --out results/x.json

Runs the Ray-free reference loop (``examples/reference_rebrac.py``: the library's losses, module and connectors)
for ``--updates`` updates on raw observations, as the recipes do, and reports for each setting the share of the
actor's action components within 1% of a bound on 2,048 fixed states of the dataset (``ops.at_bounds``, the
``rebrac/actor_at_bounds`` metric), their mean |pre-tanh| output, and the data's own share. A share near 1 with
|pre-tanh| in the tens is an actor that will not come back (docs/training.md, "An actor at the action bounds").

**A suite's recipes** (``--suite``): for each dataset of a benchmark suite, its ReBRAC recipe exactly as
``offlinerl benchmark`` loads it (the family's file and the dataset's published β1 / β2), probed for
``PROBE_TRANSITIONS`` sampled transitions (500 updates at batch 1024, 2,000 at 256) on seeds 0-2; where any seed's
actor is saturated by the jobs' own test (``offlinerl.jobs.guards.saturated_actor``: ≥ 50% at the bounds and ≥ 40
points above the data), the next β1 of ``LADDER`` above it is probed, and so on, to the first β1 that no seed
saturates. No evaluation return is looked at. An early saturation is not always a lasting one (benchmarks/README.md,
"Every suite dataset's ReBRAC recipe, probed": walker2d's actors come back, halfcheetah-medium's and
PointMaze-Large's did not), so the recipes keep the published values and this says where to look first.

    PYTHONPATH=. python benchmarks/rebrac_saturation.py --suite locomotion --data-dir benchmarks/runs/locomotion-data \\
        --datasets halfcheetah-medium,hopper-medium --out benchmarks/results/rebrac_probe_locomotion.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from examples.reference_rebrac import make_optimizers, update
from offlinerl import ops
from offlinerl.algorithms.rebrac import ReBRACConfig, ReBRACRLModule
from offlinerl.core import columns as C
from offlinerl.data import transitions
from offlinerl.episodes import read_info
from offlinerl.jobs.guards import saturated_actor

#: β1 values a suite's probe walks up, from the recipe's own: half-decades around CORL's per-dataset values (0.001-0.1).
LADDER = (0.0005, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
#: Transitions each probe samples: 500 updates at batch 1024 (the locomotion recipe), 2,000 at 256 (maze2d).
PROBE_TRANSITIONS = 512_000


@dataclass(frozen=True)
class ProbeData:
    """A dataset's transitions (raw observations), 2,048 fixed states to measure the actor on, and the data's own
    share of action components within 1% of a bound."""

    path: str
    info: object
    data: dict[str, torch.Tensor]
    states: torch.Tensor
    data_at_bounds: float


def load(path: str | Path) -> ProbeData:
    info = read_info(path)
    arrays, _ = transitions.load_transitions(path, False, ReBRACConfig())
    data = {k: torch.as_tensor(v.copy()) for k, v in arrays.items()}  # writable: torch warns on read-only arrays
    states = data[C.OBS][torch.randint(len(data[C.OBS]), (2048,), generator=torch.Generator().manual_seed(12345))]
    low, high = torch.as_tensor(info.action_space.low), torch.as_tensor(info.action_space.high)
    share = ops.at_bounds(data[C.ACTIONS], (high + low) / 2, (high - low) / 2).item()
    return ProbeData(str(path), info, data, states, share)


def probe(pd: ProbeData, cfg: ReBRACConfig, updates: int) -> dict:
    """Train ``updates`` updates from ``cfg.seed`` and measure the actor on ``pd.states``."""
    torch.manual_seed(cfg.seed)
    module = ReBRACRLModule(pd.info.observation_space, pd.info.action_space, cfg.module_config())
    optimizers = make_optimizers(module, cfg)
    generator = torch.Generator().manual_seed(cfg.seed)
    n = len(pd.data[C.OBS])
    for i in range(updates):
        idx = torch.randint(n, (cfg.train_batch_size,))
        update(module, optimizers, {k: v[idx] for k, v in pd.data.items()}, cfg, i, generator=generator)
    with torch.no_grad():
        pre = module.pi_head(module.pi_encoder(pd.states))
        actions = module.actions(pd.states)
    at_bounds = round(ops.at_bounds(actions, module.action_center, module.action_scale).item(), 4)
    return {"actor_at_bounds": at_bounds, "mean_abs_pre_tanh": round(pre.abs().mean().item(), 3),
            "saturated": saturated_actor({"rebrac/actor_at_bounds": at_bounds,
                                          "rebrac/data_at_bounds": pd.data_at_bounds}) is not None}


def probe_seeds(pd: ProbeData, cfg: ReBRACConfig, beta1: float, seeds: list[int], updates: int) -> list[dict]:
    rows = []
    for seed in seeds:
        started = time.perf_counter()
        row = {"beta1": beta1, "seed": seed, **probe(pd, cfg.replace(seed=seed, actor_bc_coef=beta1), updates)}
        rows.append(row)
        print(f"  β1 {beta1:<6} seed {seed}: actor at bounds {row['actor_at_bounds']:.1%}, mean |pre-tanh| "
              f"{row['mean_abs_pre_tanh']:.2f}{', saturated' if row['saturated'] else ''} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return rows


def recipe_config(suite: str, name: str, data_dir: Path) -> tuple[Path, ReBRACConfig]:
    """The dataset's path (generated if missing, as ``offlinerl benchmark`` does) and its ReBRAC recipe's config
    with the dataset's own settings."""
    from offlinerl.benchmark.suites import get_suite
    from offlinerl.jobs.spec import load_job_spec

    d = get_suite(suite).dataset(name)
    path = d.materialize(data_dir, "small")
    _, cfg = load_job_spec(d.recipe("rebrac"), [f"dataset={path}", *d.recipe_overrides.get("rebrac", ())])
    return path, cfg


def first_unsaturated(pd: ProbeData, cfg: ReBRACConfig, seeds: list[int]) -> tuple[float | None, list[dict]]:
    """Walk ``LADDER`` up from ``cfg.actor_bc_coef``: the first β1 no seed saturates at, and every probe's row."""
    if cfg.normalize_observations:
        raise SystemExit("the probe trains on raw observations; this recipe normalises them")
    updates = max(1, PROBE_TRANSITIONS // cfg.train_batch_size)
    rows: list[dict] = []
    for beta1 in [cfg.actor_bc_coef, *(b for b in LADDER if b > cfg.actor_bc_coef)]:
        found = probe_seeds(pd, cfg, beta1, seeds, updates)
        rows += found
        if not any(r["saturated"] for r in found):
            return beta1, rows
    return None, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", nargs="?", help="a dataset directory (not with --suite)")
    parser.add_argument("--suite", help="probe this suite's ReBRAC recipes instead, dataset by dataset")
    parser.add_argument("--datasets", help="with --suite: names, comma-separated (default: every one)")
    parser.add_argument("--data-dir", type=Path, default=Path("benchmarks/runs/data"),
                        help="with --suite: where the suite's small datasets are (made there if missing)")
    parser.add_argument("--beta1", default="0.001,0.01,0.05,0.1", help="actor BC coefficients, comma-separated")
    parser.add_argument("--beta2", type=float, default=0.01, help="critic BC coefficient")
    parser.add_argument("--lr", type=float, default=1e-3, help="actor and critic learning rate")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.suite:
        from offlinerl.benchmark.suites import get_suite

        names = args.datasets.split(",") if args.datasets else [d.name for d in get_suite(args.suite).datasets]
        report = {"suite": args.suite, "ladder": list(LADDER), "probe_transitions": PROBE_TRANSITIONS,
                  "seeds": seeds, "datasets": {}}
        for name in names:
            path, cfg = recipe_config(args.suite, name, args.data_dir)
            pd = load(path)
            print(f"{name}: recipe β1 {cfg.actor_bc_coef}, β2 {cfg.critic_bc_coef}, batch {cfg.train_batch_size}, "
                  f"lr {cfg.actor_lr}; {pd.data_at_bounds:.1%} of the data's action components at a bound")
            started = time.perf_counter()
            pick, rows = first_unsaturated(pd, cfg, seeds)
            print(f"{name}: β1 {pick}" + ("" if pick == cfg.actor_bc_coef else f" (recipe's {cfg.actor_bc_coef} "
                  "saturates)"), flush=True)
            report["datasets"][name] = {"path": str(path), "recipe_beta1": cfg.actor_bc_coef,
                                        "beta2": cfg.critic_bc_coef, "batch": cfg.train_batch_size,
                                        "lr": cfg.actor_lr, "data_at_bounds": round(pd.data_at_bounds, 4),
                                        "pick": pick, "seconds": round(time.perf_counter() - started), "rows": rows}
            if args.out:
                args.out.write_text(json.dumps(report, indent=2) + "\n")
        return
    if not args.dataset:
        parser.error("give a dataset directory or --suite")
    pd = load(args.dataset)
    base = ReBRACConfig(normalize_observations=False, critic_bc_coef=args.beta2, actor_lr=args.lr,
                        critic_lr=args.lr, train_batch_size=args.batch)
    print(f"{args.dataset}: {len(pd.data[C.OBS]):,} transitions, {pd.data_at_bounds:.1%} of the data's action "
          f"components within 1% of a bound; {args.updates} updates per probe")
    rows = [row for beta1 in (float(b) for b in args.beta1.split(","))
            for row in probe_seeds(pd, base, beta1, seeds, args.updates)]
    if args.out:
        args.out.write_text(json.dumps({"dataset": str(args.dataset), "beta2": args.beta2, "lr": args.lr,
                                        "batch": args.batch, "updates": args.updates,
                                        "data_at_bounds": pd.data_at_bounds, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
