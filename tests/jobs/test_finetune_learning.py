"""Learning: a short offline pretraining on Pendulum, then online fine-tuning with the
shipped job files raises the evaluation return by a wide margin (fixed seeds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlinerl.algorithms.registry import get_algorithm
from offlinerl.jobs.finetune import run_finetune
from offlinerl.jobs.spec import load_finetune_spec
from offlinerl.training.algorithm import Algorithm

REPO = Path(__file__).resolve().parents[2]

#: (algorithm, pretraining updates, hidden width, extra config, required gain in return).
#: CQL scores 4 sampled actions per state instead of 10 to fit the test budget (fine-tuning keeps
#: the checkpoint's config). On the old pendulum-mixed (soft-balance mix), measured on a busy 2-core
#: machine: IQL -1301 -> -710 (55 s), CQL -1141 -> -431 (90-250 s). On the current slow-pumping mix
#: 1000 IQL pretraining updates left -1276 and fine-tuning gained 299 (just short), so IQL pretrains
#: 2000; both cases pass in ~45 s each.
CASES = [("iql", 2000, 128, {}, 300.0), ("cql", 500, 64, {"num_sampled_actions": 4}, 300.0)]


@pytest.mark.slow
@pytest.mark.parametrize("name,pre_updates,hidden,extra,gain", CASES)
def test_online_finetuning_improves_a_short_pretraining(ray_session, tmp_path, name, pre_updates, hidden, extra, gain):
    config = get_algorithm(name).config_cls.from_dict({
        "seed": 0, "updates_per_iteration": pre_updates, "train_batch_size": 256, "normalize_observations": True,
        "model": {"hidden": [hidden, hidden]}, "evaluation": {"episodes": 10, "seed": 10_000, "interval": 0}, **extra,
    })
    algo = Algorithm(name, config, REPO / "datasets" / "pendulum-mixed")
    algo.train()
    offline = algo.evaluate()["eval/return_mean"]
    algo.save_checkpoint(tmp_path / "ckpt")
    algo.stop()

    # Evaluated before and after only, with the checkpoint's 10 episodes, for 8 iterations, and no periodic
    # checkpoints: the test measures the gain, the curve and resume are tested elsewhere (test_online_jobs).
    budget = ["checkpoint_interval=0", "config.evaluation.interval=0", "config.evaluation.episodes=10", "stop.iterations=8"]
    job = load_finetune_spec(REPO / "jobs" / f"pendulum-{name}-finetune.yaml", budget,
                             checkpoint=str(tmp_path / "ckpt"))
    result = run_finetune(job, run_dir=tmp_path / "run", progress=False, log=lambda s: None)

    assert result["checkpoint_eval_return"] == offline
    assert result["initial_eval_return"] == offline  # the hand-over loses nothing
    assert result["final_eval_return"] >= offline + gain, result
