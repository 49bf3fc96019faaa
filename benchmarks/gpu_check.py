"""GPU check of the learner hot loop (Ray-free): the in-memory source and the learner on one
CUDA device, compared with the pure-PyTorch loop on the same device, and a proof that an
update makes no host<->device synchronisation (``torch.cuda.set_sync_debug_mode("error")``).

    PYTHONPATH=. python benchmarks/gpu_check.py --out benchmarks/results/gpu_check.json
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
from throughput import pure_loop  # noqa: E402

from offlinerl.algorithms.bc import BCConfig, BCLearner  # noqa: E402
from offlinerl.algorithms.marwil import MARWILConfig, MARWILLearner  # noqa: E402
from offlinerl.core.default_module import DefaultRLModule  # noqa: E402
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec  # noqa: E402
from offlinerl.data.sources import InMemorySource  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--out", default="gpu_check.json")
    args = parser.parse_args()
    dev = torch.device("cuda")
    obs_space, act_space = gym.spaces.Box(-1, 1, (17,), np.float32), gym.spaces.Box(-1, 1, (6,), np.float32)
    rng = np.random.default_rng(0)
    data = {"obs": rng.normal(size=(args.size, 17)).astype(np.float32),
            "actions": rng.uniform(-1, 1, size=(args.size, 6)).astype(np.float32),
            "returns_to_go": rng.normal(size=args.size).astype(np.float32)}
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "transitions": args.size, "results": {}}
    for name, cfg_cls, learner_cls in (("bc", BCConfig, BCLearner), ("marwil", MARWILConfig, MARWILLearner)):
        for batch in (256, 4096):
            cfg = cfg_cls(train_batch_size=batch, num_gpus_per_learner=1, grad_clip=1.0)
            spec = MultiRLModuleSpec.single(RLModuleSpec(DefaultRLModule, obs_space, act_space, cfg.module_config()))
            learner = learner_cls(config=cfg, module_spec=spec, device=dev).build()
            src = InMemorySource(data, batch, 0, dev)
            learner.run_updates(src, 50)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            for _ in range(5):
                learner.update(src.next_batch())  # raises if anything synchronises with the host
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
            t = time.perf_counter()
            metrics = learner.run_updates(src, args.updates)
            torch.cuda.synchronize()
            lib = args.updates / (time.perf_counter() - t)
            tensors = {k: torch.as_tensor(v, device=dev) for k, v in data.items()}
            pure = pure_loop(tensors, name, torch.as_tensor(act_space.low), torch.as_tensor(act_space.high), [256, 256],
                             batch, 1e-3, device=dev)
            pure(50)
            torch.cuda.synchronize()
            t = time.perf_counter()
            pure(args.updates)
            torch.cuda.synchronize()
            ref = args.updates / (time.perf_counter() - t)
            state = learner.get_state()
            learner.set_state(state)
            key = f"{name}/batch{batch}"
            out["results"][key] = {"learner_updates_per_s": lib, "pure_updates_per_s": ref, "ratio": lib / ref,
                                   "no_sync_per_update": True, "final_actor_loss": metrics["losses/actor"]}
            print(key, json.dumps(out["results"][key]), flush=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
