"""BC in one plain PyTorch loop, without Ray: the same connectors, module and loss
function as the library, so it doubles as readable documentation of what a
``bc`` job computes (and a test checks that both compute identical numbers).

    python examples/reference_bc.py --updates 2000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from offlinerl.algorithms.bc import BCConfig, bc_loss
from offlinerl.connectors import EpisodeColumns, env_to_module_pipeline, learner_pipeline, observation_connectors
from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes import load_episodes, read_info

REPO = Path(__file__).resolve().parents[1]


def load_transitions(dataset: str | Path, config: BCConfig) -> dict[str, torch.Tensor]:
    """Episodes -> the BC learner pipeline -> tensors (no observation normalisation here)."""
    info = read_info(dataset)
    episodes = EpisodeColumns.from_episodes(load_episodes(dataset, reassemble=False))
    pipeline = learner_pipeline(observation_connectors(info.observation_space, normalize=False), info.action_space, config)
    return {k: torch.as_tensor(np.ascontiguousarray(v)) for k, v in pipeline({}, episodes).items()}


def train(dataset: str | Path, config: BCConfig, updates: int):
    info = read_info(dataset)
    data = load_transitions(dataset, config)
    n = len(data[C.OBS])
    torch.manual_seed(config.seed)  # the same initial weights as the library's learner
    module = MultiRLModuleSpec.single(RLModuleSpec(DefaultRLModule, info.observation_space, info.action_space,
                                                   config.module_config())).build()[C.DEFAULT_MODULE_ID]
    torch.manual_seed(config.seed + 1000 * 0)  # the library's learner reseeds after building (rank 0)
    optimizer = torch.optim.Adam(module.parameters(), lr=config.lr, fused=True)  # the kernel the learners step with
    generator = torch.Generator().manual_seed(config.seed)  # the in-memory sampler's generator
    losses = []
    for _ in range(updates):
        idx = torch.randint(n, (config.train_batch_size,), generator=generator)
        batch = {k: v[idx] for k, v in data.items()}
        out = bc_loss(batch, module.forward_train(batch), config)
        optimizer.zero_grad()
        out.losses["actor"].backward()
        optimizer.step()
        losses.append(out.losses["actor"].item())
    return module, losses


def main(updates: int = 2000, dataset: str | Path = REPO / "datasets" / "cartpole-mixed", episodes: int = 10) -> dict:
    config = BCConfig()
    module, losses = train(dataset, config, updates)
    env_to_module = env_to_module_pipeline(read_info(dataset).observation_space)
    result = evaluate_module(module, read_info(dataset).env_id, env_to_module, episodes=episodes)
    return {"final_loss": losses[-1], **result}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--dataset", default=str(REPO / "datasets" / "cartpole-mixed"))
    args = parser.parse_args()
    r = main(args.updates, args.dataset)
    print(f"reference BC: final loss {r['final_loss']:.3f}, eval return {r['eval/return_mean']:.1f} ± {r['eval/return_std']:.1f}")
