"""ReBRAC learns on the shipped Pendulum dataset, ahead of TD3+BC at the same small budget.

The loop is the Ray-free reference script (examples/reference_rebrac.py), which
tests/algorithms/test_rebrac_training.py shows to compute the same transitions, losses and updates
as the Ray path; it skips Ray's start-up so the test stays well under a minute on 2 busy cores.
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from offlinerl.algorithms.rebrac import ReBRACRLModule
from offlinerl.core import columns as C
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes import read_info
from offlinerl.jobs.spec import load_job_spec
from offlinerl.scoring import score_for_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rebrac_learns_pendulum_ahead_of_td3bc_at_4000_updates():
    # jobs/pendulum-rebrac.yaml's settings (128 x 128, batch 256, β1 0.01, β2 0.1, the paper's initialisation),
    # 4,000 of its 6,000 updates: 97.6 / 91.6 / 98.8 normalised on seeds 0 / 1 / 2 (10 episodes; 99.0 / 99.0 /
    # 89.2 with nn.Linear's initialisation). TD3+BC at its job file's
    # settings (same network and batch, α 10) and budget: 38.2 / 39.5 / 49.1; its full 10,000 reach ~96.
    spec = importlib.util.spec_from_file_location("reference_rebrac", ROOT / "examples" / "reference_rebrac.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    job, cfg = load_job_spec(ROOT / "jobs" / "pendulum-rebrac.yaml")
    path = ROOT / job.dataset
    info = read_info(path)
    torch.manual_seed(cfg.seed)
    arrays, env_to_module = ref.load_transitions(str(path), cfg.normalize_observations)
    data = {k: torch.as_tensor(v) for k, v in arrays.items()}
    module = ReBRACRLModule(info.observation_space, info.action_space, cfg.module_config())
    optimizers = ref.make_optimizers(module, cfg)
    n = len(data[C.OBS])
    for step in range(4000):
        idx = torch.randint(n, (cfg.train_batch_size,))
        ref.update(module, optimizers, {k: v[idx] for k, v in data.items()}, cfg, step)
    result = evaluate_module(module, info.env_id, env_to_module, episodes=10, seed=cfg.evaluation.seed)
    assert score_for_dataset(result["eval/return_mean"], path) > 70  # TD3+BC: 38-49 here
