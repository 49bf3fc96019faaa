"""GPU check of the learner hot loop (Ray-free): the in-memory source and the learner on one
CUDA device, compared with the pure-PyTorch loop on the same device, and a proof that an
update makes no host<->device synchronisation (``torch.cuda.set_sync_debug_mode("error")``).
BC and MARWIL against ``throughput.pure_loop``, CQL and IQL against ``throughput_offpolicy``'s
reference updates (all written independently of offlinerl's losses), at each ``--batches`` size.

    PYTHONPATH=. python benchmarks/gpu_check.py --out benchmarks/results/gpu_check.json
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
    if name in ("cql", "iql"):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--algorithms", default="bc,marwil,cql,iql")
    parser.add_argument("--batches", default="256,4096")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default="gpu_check.json")
    args = parser.parse_args()
    dev = torch.device(args.device)
    out = {"device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "transitions": args.size, "updates": args.updates, "results": {}}
    for name in args.algorithms.split(","):
        data = _data(name, args.size)
        for batch in (int(b) for b in args.batches.split(",")):
            key = f"{name}/batch{batch}"
            out["results"][key] = check(name, batch, data, args.updates, dev)
            print(key, json.dumps(out["results"][key]), flush=True)
            Path(args.out).write_text(json.dumps(out, indent=2) + "\n")  # after each: a timeout keeps what ran


if __name__ == "__main__":
    main()
