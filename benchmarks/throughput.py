"""Gradient updates/s of BC, MARWIL, CQL and IQL in offlinerl (in-memory and streaming data) against
a minimal pure-PyTorch loop with the same networks, batch and optimizers on in-memory tensors.

    PYTHONPATH=. python benchmarks/throughput.py --out benchmarks/results/throughput.json
    PYTHONPATH=. python benchmarks/throughput.py --algorithms cql,iql --updates 100 --out benchmarks/results/throughput_cql_iql.json

BC and MARWIL's pure loops are below; CQL and IQL's are ``throughput_offpolicy.py``'s
(written from the papers, two separate critic MLPs, one backward per optimizer group).

Each configuration runs in alternating rounds (pure loop, in-memory, streaming, ...)
and reports the median round, so background load on a shared machine affects all
three alike. Start-up = Ray start + data pipeline + learner build + first update.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
OFF_POLICY = ("cql", "iql")


# -- the pure-PyTorch reference: same shapes, same maths, no framework ----------------------------------------
def _mlp(i, o, hidden):
    layers, d = [], i
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, o))


def pure_loop(data: dict[str, torch.Tensor], algo: str, low, high, hidden, batch_size: int, lr: float, device="cpu",
              num_actions: int | None = None):
    """Returns a function running n updates. Data: obs [N, D], actions [N, A] (or [N] integers with
    ``num_actions``: a categorical policy over that many actions), MARWIL: returns_to_go [N] (on ``device``)."""
    obs, act = data["obs"], data["actions"]
    rtg = data["returns_to_go"] if algo == "marwil" else None  # BC's loss needs no returns
    n, d = len(obs), obs.shape[1]
    discrete = num_actions is not None
    a = num_actions if discrete else act.shape[1]
    torch.manual_seed(0)
    pi = _mlp(d, a if discrete else 2 * a, hidden).to(device)
    vf = _mlp(d, 1, hidden).to(device) if algo == "marwil" else None
    params = list(pi.parameters()) + (list(vf.parameters()) if vf else [])
    opt = torch.optim.Adam(params, lr=lr, fused=True)  # the fused step, as offlinerl's learners take
    if not discrete:
        low, high = low.to(device), high.to(device)
        center, scale = (high + low) / 2, (high - low) / 2
    gen = torch.Generator(device=device).manual_seed(0)
    c2 = torch.tensor(100.0, device=device)

    def logp(inputs, actions):
        if discrete:
            return torch.log_softmax(inputs, -1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        mean, log_std = inputs.chunk(2, -1)
        log_std = log_std.clamp(-5, 2)
        y = ((actions - center) / scale).clamp(-1 + 1e-3, 1 - 1e-3)
        u = torch.atanh(y)
        normal = -0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
        log_det = 2 * (math.log(2) - u - nn.functional.softplus(-2 * u)) + torch.log(scale)
        return (normal - log_det).sum(-1)

    def run(updates: int) -> None:
        nonlocal c2
        for _ in range(updates):
            idx = torch.randint(n, (batch_size,), generator=gen, device=device)
            o, ac = obs[idx], act[idx]
            lp = logp(pi(o), ac)
            if vf is None:
                loss = -lp.mean()
            else:
                adv = rtg[idx] - vf(o).squeeze(-1)
                c2 = c2 + 1e-3 * (adv.detach().pow(2).mean() - c2)
                w = torch.exp(torch.clamp(adv.detach() / (c2.sqrt() + 1e-8), max=math.log(20.0)))
                loss = -(w * lp).mean() + 0.5 * adv.pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    return run


def offpolicy_loop(data: dict[str, torch.Tensor], algo: str, low, high, batch_size: int = 256,
                   num_actions: int | None = None):
    """CQL / IQL: ``throughput_offpolicy``'s reference update as a function running n updates (``num_actions``:
    the discrete versions, over that many actions)."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from throughput_offpolicy import DISCRETE_REFERENCE_STEPS, REFERENCE_STEPS

    torch.manual_seed(0)
    if num_actions is not None:
        step = DISCRETE_REFERENCE_STEPS[algo](data, num_actions, batch_size)
    else:
        step = REFERENCE_STEPS[algo](data, float(low.min()), float(high.max()), batch_size)

    def run(updates: int) -> None:
        for _ in range(updates):
            step()

    return run


def _repeated(dataset: str, times: int) -> str:
    """A temporary copy of ``dataset`` with every episode repeated ``times`` times."""
    import dataclasses
    import tempfile

    from offlinerl.episodes import load_episodes, read_info, write_dataset

    if times <= 1:
        return dataset
    info = read_info(dataset)
    episodes = load_episodes(dataset)
    out = Path(tempfile.mkdtemp(prefix="offlinerl-bench-")) / "repeated"
    copies = (dataclasses.replace(e, id=f"{e.id}-r{k}") for k in range(times) for e in episodes)
    write_dataset(copies, out, observation_space=info.observation_space, action_space=info.action_space,
                  env_id=info.env_id, extra_columns=info.extra_columns, rows_per_file=200)
    return str(out)


def _rounds(fns: dict[str, callable], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(fn())
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(REPO / "datasets" / "pendulum-mixed"))
    parser.add_argument("--updates", type=int, default=500, help="updates per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (= num_cpus_per_learner)")
    parser.add_argument("--algorithms", default="bc,marwil")
    parser.add_argument("--streaming-repeat", type=int, default=20,
                        help="streaming mode reads a copy of the dataset with its episodes repeated this many times, "
                        "so the per-epoch pipeline start-up is amortised as on a real larger-than-memory dataset")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "throughput.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    t_start = time.perf_counter()
    from offlinerl.ray_utils import init_ray

    init_ray()
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ray_s = time.perf_counter() - t_start
    from offlinerl.training.algorithm import Algorithm
    from offlinerl.algorithms.registry import get_algorithm

    hidden = [256, 256]
    stream_dataset = _repeated(args.dataset, args.streaming_repeat)
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                           "load_avg_1m": os.getloadavg()[0], "threads": args.threads},
               "batch_size": 256, "hidden": hidden, "dataset": args.dataset, "ray_init_s": ray_s,
               "streaming_dataset_repeat": args.streaming_repeat, "algorithms": {}}
    for name in args.algorithms.split(","):
        base = {"train_batch_size": 256, "updates_per_iteration": args.updates,
                "num_cpus_per_learner": args.threads, "model": {"hidden": hidden}, "evaluation": {"interval": 0}}
        if name not in OFF_POLICY:
            base["lr"] = 1e-3
        cfg_cls = get_algorithm(name).config_cls
        def timed(fn):
            def run():
                t = time.perf_counter()
                fn()
                return args.updates / (time.perf_counter() - t)
            return run

        rates, startup, pure = {}, {}, None
        for mode in ("in_memory", "streaming"):  # one job at a time: a live stream prefetches in the background
            t0 = time.perf_counter()
            dataset = args.dataset if mode == "in_memory" else stream_dataset
            algo = Algorithm(name, cfg_cls.from_dict({**base, "data": {"mode": mode}}), dataset)
            algo.learner_group.update(1)
            startup[mode] = time.perf_counter() - t0 + (ray_s if mode == "in_memory" else 0.0)
            if pure is None:
                data = {k: torch.as_tensor(v) for k, v in algo.offline_data.load_arrays().items()}
                space = algo.offline_data.action_space
                k = int(space.n) if hasattr(space, "n") else None  # Discrete: a categorical policy / Q over k
                low, high = (None, None) if k else (torch.as_tensor(space.low), torch.as_tensor(space.high))
                if name in OFF_POLICY:
                    pure = offpolicy_loop(data, name, low, high, num_actions=k)
                else:
                    pure = pure_loop(data, name, low, high, hidden, 256, 1e-3, num_actions=k)
                pure(20)
            algo.training_step()  # warm-up round
            r = _rounds({"pure_pytorch": timed(lambda: pure(args.updates)), mode: timed(algo.training_step)}, args.rounds)
            rates[mode] = r[mode]
            rates[f"pure_pytorch_vs_{mode}"] = r["pure_pytorch"]
            algo.stop()
        rates["pure_pytorch"] = max(rates["pure_pytorch_vs_in_memory"], rates["pure_pytorch_vs_streaming"])
        results["algorithms"][name] = {
            "updates_per_s": rates,
            "samples_per_s": {k: v * 256 for k, v in rates.items()},
            "ratio_in_memory": rates["in_memory"] / rates["pure_pytorch_vs_in_memory"],
            "ratio_streaming": rates["streaming"] / rates["pure_pytorch_vs_streaming"],
            "startup_first_update_s": startup,
        }
        res = results["algorithms"][name]
        print(f"{name}: pure {rates['pure_pytorch']:.0f} upd/s | in-memory {rates['in_memory']:.0f} "
              f"({res['ratio_in_memory']:.2f}x) | streaming {rates['streaming']:.0f} ({res['ratio_streaming']:.2f}x) | "
              f"start-up {startup['in_memory']:.1f} s", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
