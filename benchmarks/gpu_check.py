"""GPU check of the learner hot loop (Ray-free): the in-memory source and the learner on one
CUDA device, compared with the pure-PyTorch loop on the same device, and a proof that an
update makes no host<->device synchronisation (``torch.cuda.set_sync_debug_mode("error")``).
BC and MARWIL against ``throughput.pure_loop``, CQL and IQL against ``throughput_offpolicy``'s
reference updates (all written independently of offlinerl's losses), at each ``--batches`` size.

``--seeds N`` (issue 28): vectorised seeds on the device instead: for each of ``--algorithms`` (bc, iql, td3bc), one
single-seed learner's updates/s against a ``SeedStack`` of N replicas' seed-updates/s (N x its updates/s), batch
256 each, 256x256 MLPs, and (``parity``) a replica's weights and losses against a single learner's after 10 updates
on the same batches.

    PYTHONPATH=. python benchmarks/gpu_check.py --out benchmarks/results/gpu_check.json
    PYTHONPATH=. python benchmarks/gpu_check.py --seeds 8 --algorithms bc,iql,td3bc --out benchmarks/results/gpu_seeds.json
    PYTHONPATH=. python benchmarks/gpu_check.py --device cpu --updates 20 --size 10000   # a smoke run without a GPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import offpolicy_loop, pure_loop  # noqa: E402

from offlinerl.algorithms.registry import get_algorithm  # noqa: E402
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec  # noqa: E402
from offlinerl.data.sources import InMemorySource  # noqa: E402

OBS_DIM, ACT_DIM = 17, 6


def _data(name: str, size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    data = {"obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32),
            "actions": rng.uniform(-1, 1, size=(size, ACT_DIM)).astype(np.float32)}
    if name == "marwil":
        data["returns_to_go"] = rng.normal(size=size).astype(np.float32)
    if name in ("cql", "iql", "td3bc"):
        data.update(next_obs=rng.normal(size=(size, OBS_DIM)).astype(np.float32),
                    rewards=rng.normal(size=size).astype(np.float32), terminateds=np.zeros(size, np.float32))
    return data


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def check(name: str, batch: int, data: dict[str, np.ndarray], updates: int, dev: torch.device) -> dict:
    """Learner vs pure loop at one batch size; on CUDA, also five updates under sync-debug "error"."""
    obs_space, act_space = gym.spaces.Box(-1, 1, (OBS_DIM,), np.float32), gym.spaces.Box(-1, 1, (ACT_DIM,), np.float32)
    spec_ = get_algorithm(name)
    cfg = spec_.config_cls.from_dict({"train_batch_size": batch, "num_gpus_per_learner": int(dev.type == "cuda"),
                                      "grad_clip": 1.0, "model": {"hidden": [256, 256]}})
    spec = MultiRLModuleSpec.single(RLModuleSpec(spec_.module_cls, obs_space, act_space, cfg.module_config()))
    learner = spec_.learner_cls(config=cfg, module_spec=spec, device=dev).build()
    src = InMemorySource(data, batch, 0, dev)
    learner.run_updates(src, 50)
    _sync(dev)
    if dev.type == "cuda":
        torch.cuda.set_sync_debug_mode("error")
        for _ in range(5):
            learner.update(src.next_batch())  # raises if anything synchronises with the host
        torch.cuda.set_sync_debug_mode("default")
    _sync(dev)
    t = time.perf_counter()
    metrics = learner.run_updates(src, updates)
    _sync(dev)
    lib = updates / (time.perf_counter() - t)
    tensors = {k: torch.as_tensor(v, device=dev) for k, v in data.items()}
    low, high = torch.as_tensor(act_space.low), torch.as_tensor(act_space.high)
    if name in ("bc", "marwil"):
        pure = pure_loop(tensors, name, low, high, [256, 256], batch, 1e-3, device=dev)
    else:  # the reference updates build their networks and draw their samples on the default device
        torch.set_default_device(dev)
        try:
            pure = offpolicy_loop(tensors, name, low, high, batch)
        finally:
            torch.set_default_device("cpu")
    with torch.device(dev):
        pure(50)
        _sync(dev)
        t = time.perf_counter()
        pure(updates)
        _sync(dev)
    ref = updates / (time.perf_counter() - t)
    learner.set_state(learner.get_state())  # the state round trip works on the device
    return {"learner_updates_per_s": lib, "pure_updates_per_s": ref, "ratio": lib / ref,
            "no_sync_per_update": dev.type == "cuda", "final_actor_loss": metrics["losses/actor"]}


def _learner(name: str, seed: int, batch: int, dev: torch.device, hidden: int = 256):
    obs_space, act_space = gym.spaces.Box(-1, 1, (OBS_DIM,), np.float32), gym.spaces.Box(-1, 1, (ACT_DIM,), np.float32)
    spec_ = get_algorithm(name)
    cfg = spec_.config_cls.from_dict({"seed": seed, "train_batch_size": batch, "grad_clip": 1.0,
                                      "model": {"hidden": [hidden, hidden]}})
    spec = MultiRLModuleSpec.single(RLModuleSpec(spec_.module_cls, obs_space, act_space, cfg.module_config()))
    return spec_.learner_cls(config=cfg, module_spec=spec, device=dev).build()


def check_seeds(name: str, seeds: int, data: dict[str, np.ndarray], updates: int, dev: torch.device,
                batch: int = 256) -> dict:
    """One learner against ``seeds`` stacked replicas (``SeedStack``) on ``dev``: seed-updates/s, and replica 0's
    weights against a single learner given the same batches (parity on the device)."""
    from offlinerl.core.seed_stack import SeedStack

    single = _learner(name, 100, batch, dev)
    src = InMemorySource(data, batch, 100, dev)
    stack = SeedStack([_learner(name, s, batch, dev) for s in range(seeds)])
    sources = [InMemorySource(data, batch, s, dev) for s in range(seeds)]
    single.run_updates(src, 50)
    stack.run_updates(sources, 50)
    _sync(dev)
    no_sync = None
    if dev.type == "cuda":  # a stacked update makes no host<->device synchronisation either
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                stack.update([s.next_batch() for s in sources])
            no_sync = True
        except RuntimeError as exc:
            no_sync = str(exc).splitlines()[0]
        finally:
            torch.cuda.set_sync_debug_mode("default")
        stack.sync_replicas()
    t = time.perf_counter()
    single.run_updates(src, updates)
    _sync(dev)
    one = updates / (time.perf_counter() - t)
    t = time.perf_counter()
    stack.run_updates(sources, updates)
    _sync(dev)
    stacked = seeds * updates / (time.perf_counter() - t)
    return {"single_updates_per_s": one, "stacked_seed_updates_per_s": stacked, "ratio": stacked / one,
            "no_sync_per_stacked_update": no_sync, **parity(name, data, dev, batch)}


def parity(name: str, data: dict[str, np.ndarray], dev: torch.device, batch: int = 256, updates: int = 10) -> dict:
    """Replica 1 of a 2-seed stack against a single learner of its seed after ``updates`` updates on the same
    batches: the largest weight and loss differences (float rounding: batched and single matmuls sum in another
    order, and over hundreds of updates such differences grow as in any two runs of a chaotic optimisation)."""
    from offlinerl.core.seed_stack import SeedStack

    stack = SeedStack([_learner(name, s, batch, dev) for s in (0, 1)])
    stacked = stack.run_updates([InMemorySource(data, batch, s, dev) for s in (0, 1)], updates)[1]
    single = _learner(name, 1, batch, dev)
    alone = single.run_updates(InMemorySource(data, batch, 1, dev), updates)
    mine, theirs = stack.replicas[1].get_module_state(), single.get_module_state()
    losses = [k for k in alone if k.startswith("losses/")]
    return {f"parity_{updates}_updates_max_abs_weight_diff": max(float((mine[k] - v).abs().max())
                                                                  for k, v in theirs.items()),
            f"parity_{updates}_updates_max_rel_loss_diff": max(abs(stacked[k] - alone[k]) / max(abs(alone[k]), 1e-8)
                                                                for k in losses)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--algorithms", default="bc,marwil,cql,iql")
    parser.add_argument("--batches", default="256,4096")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, default=0, help="N > 0: vectorised seeds (check_seeds) instead")
    parser.add_argument("--out", default="gpu_check.json")
    args = parser.parse_args()
    dev = torch.device(args.device)
    out = {"device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "transitions": args.size, "updates": args.updates, "results": {}}
    if args.seeds:
        out["seeds"] = args.seeds
        for name in args.algorithms.split(","):
            out["results"][f"{name}/seeds{args.seeds}"] = check_seeds(name, args.seeds, _data(name, args.size),
                                                                      args.updates, dev)
            print(name, json.dumps(out["results"][f"{name}/seeds{args.seeds}"]), flush=True)
            Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        return
    for name in args.algorithms.split(","):
        data = _data(name, args.size)
        for batch in (int(b) for b in args.batches.split(",")):
            key = f"{name}/batch{batch}"
            out["results"][key] = check(name, batch, data, args.updates, dev)
            print(key, json.dumps(out["results"][key]), flush=True)
            Path(args.out).write_text(json.dumps(out, indent=2) + "\n")  # after each: a timeout keeps what ran


if __name__ == "__main__":
    main()
