"""``learning_curve.png`` (``offlinerl.jobs.plots``): each loss on its own axes (log when positive), a labelled
evaluation band, the card's random/best lines; the readable summary ``finetune`` ends with, like ``train``'s."""

from __future__ import annotations

from offlinerl.cli.summary import finetune_summary
from offlinerl.jobs.plots import plot_learning_curve, reference_lines
from tests.conftest import DATASETS

HISTORY = [
    {"learner/updates": 500.0, "losses/actor": 0.9, "losses/critic": 120.0},
    {"learner/updates": 1000.0, "losses/actor": 0.5, "losses/critic": -3.0, "eval/return_mean": 150.0,
     "eval/return_std": 20.0, "eval/episodes": 10.0},
    {"learner/updates": 1500.0, "losses/actor": 0.4, "losses/critic": 2.0, "eval/return_mean": 180.0,
     "eval/return_std": 10.0, "eval/episodes": 10.0},
]


def test_learning_curve_panels_legend_and_reference_lines(tmp_path):
    refs = reference_lines(DATASETS / "cartpole-mixed")
    assert set(refs) == {"random", "best"} and refs["best"] == 500.0
    drawn = plot_learning_curve(HISTORY, tmp_path / "curve.png", "iql on cartpole-mixed", references=refs)
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawn["panels"] == ["evaluation return", "actor", "critic"]
    assert drawn["log"] == ["actor"]  # the critic loss went negative: linear
    assert drawn["legend"] == ["evaluation return (mean)", "± std over 10 episodes",
                               "best (dataset card): 500", f"random (dataset card): {refs['random']:g}"]
    assert reference_lines(tmp_path) == {} and reference_lines(None) == {}


def test_finetune_ends_with_a_readable_summary():
    result = {"algorithm": "iql", "from_checkpoint": "runs/a/checkpoints/final", "env": "Pendulum-v1",
              "iterations": 4, "updates": 400, "env_steps": 800, "train_time_s": 12.34, "initial_eval_return": -900.0,
              "checkpoint_eval_return": -900.0, "final_eval_return": -300.25, "final_eval_return_std": 40.0,
              "best_eval_return": -250.0, "env_runner_restarts": 0, "online_episodes": "runs/f/online-episodes",
              "run_dir": "runs/f", "checkpoint": "runs/f/checkpoints/final", "ray_nodes": {}}
    assert finetune_summary(result).splitlines() == [
        "iql fine-tuned online in Pendulum-v1 from runs/a/checkpoints/final: 4 iterations, 400 updates, 800 env "
        "steps in 12.3 s",
        "evaluation return: before -900.0 (the checkpoint's own: -900.0), final -300.2 ± 40.0, best -250.0",
        "online episodes: runs/f/online-episodes",
        "run directory: runs/f  (checkpoint: runs/f/checkpoints/final)",
    ]
    # A job that evaluates with other settings than the checkpoint's also says its own first evaluation.
    assert finetune_summary({**result, "first_eval_return": -870.5}).splitlines()[1] == (
        "evaluation return: before -900.0 (the checkpoint's own: -900.0), -870.5 with this job's evaluation "
        "settings, final -300.2 ± 40.0, best -250.0")
