"""Does ReBRAC's actor run to the action bounds in its first updates? A probe per (β1, seed), in seconds.

    PYTHONPATH=. python benchmarks/rebrac_saturation.py benchmarks/runs/locomotion-data/halfcheetah-medium-small \\
        --beta1 0.001,0.01,0.05,0.1 --beta2 0.01 --seeds 0,1,2 --updates 500 --out results/x.json

Runs the Ray-free reference loop (``examples/reference_rebrac.py``: the library's losses, module and connectors)
for ``--updates`` updates on raw observations, as the recipes do, and reports for each setting the share of the
actor's action components within 1% of a bound on 2,048 fixed states of the dataset (``ops.at_bounds``, the
``rebrac/actor_at_bounds`` metric), their mean |pre-tanh| output, and the data's own share. A share near 1 with
|pre-tanh| in the tens is an actor that will not come back (docs/training.md, "An actor at the action bounds").
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from examples.reference_rebrac import make_optimizers, update
from offlinerl import ops
from offlinerl.algorithms.rebrac import ReBRACConfig, ReBRACRLModule
from offlinerl.core import columns as C
from offlinerl.data import transitions
from offlinerl.episodes import read_info


def probe(data: dict[str, torch.Tensor], info, cfg: ReBRACConfig, updates: int, states: torch.Tensor) -> dict:
    """Train ``updates`` updates from ``cfg.seed`` and measure the actor on ``states``."""
    torch.manual_seed(cfg.seed)
    module = ReBRACRLModule(info.observation_space, info.action_space, cfg.module_config())
    optimizers = make_optimizers(module, cfg)
    generator = torch.Generator().manual_seed(cfg.seed)
    n = len(data[C.OBS])
    for i in range(updates):
        idx = torch.randint(n, (cfg.train_batch_size,))
        update(module, optimizers, {k: v[idx] for k, v in data.items()}, cfg, i, generator=generator)
    with torch.no_grad():
        pre = module.pi_head(module.pi_encoder(states))
        actions = module.actions(states)
    return {"actor_at_bounds": round(ops.at_bounds(actions, module.action_center, module.action_scale).item(), 4),
            "mean_abs_pre_tanh": round(pre.abs().mean().item(), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
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
    info = read_info(args.dataset)
    arrays, _ = transitions.load_transitions(args.dataset, False, ReBRACConfig())
    data = {k: torch.as_tensor(v.copy()) for k, v in arrays.items()}  # writable: torch warns on read-only arrays
    states = data[C.OBS][torch.randint(len(data[C.OBS]), (2048,), generator=torch.Generator().manual_seed(12345))]
    base = ReBRACConfig(normalize_observations=False, critic_bc_coef=args.beta2, actor_lr=args.lr,
                        critic_lr=args.lr, train_batch_size=args.batch)
    low, high = torch.as_tensor(info.action_space.low), torch.as_tensor(info.action_space.high)
    data_share = ops.at_bounds(data[C.ACTIONS], (high + low) / 2, (high - low) / 2).item()
    rows = []
    print(f"{args.dataset}: {len(data[C.OBS]):,} transitions, {data_share:.1%} of the data's action components "
          f"within 1% of a bound; {args.updates} updates per probe")
    for beta1 in (float(b) for b in args.beta1.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            started = time.perf_counter()
            row = {"beta1": beta1, "seed": seed,
                   **probe(data, info, base.replace(seed=seed, actor_bc_coef=beta1), args.updates, states)}
            rows.append(row)
            print(f"  β1 {beta1:<6} seed {seed}: actor at bounds {row['actor_at_bounds']:.1%}, mean |pre-tanh| "
                  f"{row['mean_abs_pre_tanh']:.2f} ({time.perf_counter() - started:.0f} s)", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"dataset": str(args.dataset), "beta2": args.beta2, "lr": args.lr,
                                        "batch": args.batch, "updates": args.updates, "data_at_bounds": data_share,
                                        "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
