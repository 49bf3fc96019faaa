"""The one job loop (``offlinerl.jobs.loop.run_job``) that train and finetune share: stop conditions,
``metrics.jsonl``, checkpoints, the final evaluation and ``result.json``, over a small real Trainable."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from offlinerl.config_io import ConfigError
from offlinerl.jobs import loop
from offlinerl.jobs.guards import NonFiniteLossError
from offlinerl.jobs.loop import run_job, write_result
from offlinerl.jobs.spec import StopConfig


class Counter:
    """A Trainable whose iterations take ``seconds`` of "training" each and whose returns rise by one."""

    def __init__(self, updates_per_iteration: int = 10, seconds: float = 1.0, eval_every: int = 0,
                 loss_at: dict[int, float] | None = None, extra: dict[int, dict] | None = None) -> None:
        self.iteration, self.num_updates, self.last_eval = 0, 0, {}
        self.upi, self.seconds, self.eval_every, self.loss_at = updates_per_iteration, seconds, eval_every, loss_at or {}
        self.extra = extra or {}  # iteration -> further metrics of that iteration
        self.saved: list[tuple[str, dict]] = []

    @property
    def can_evaluate(self) -> bool:
        return True

    def evaluate(self) -> dict[str, float]:
        self.last_eval = {"eval/return_mean": float(self.iteration), "eval/episodes": 2}
        return self.last_eval

    def train(self) -> dict[str, float]:
        self.iteration += 1
        self.num_updates += self.upi
        m = {"iteration": float(self.iteration), "learner/updates": float(self.num_updates),
             "perf/iteration_s": self.seconds, "losses/total": self.loss_at.get(self.iteration, 1.0),
             "data/ratio": math.inf, **self.extra.get(self.iteration, {})}
        if self.eval_every and self.iteration % self.eval_every == 0:
            m.update(self.evaluate())
        return m

    def save_checkpoint(self, path, overwrite: bool = False) -> Path:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "algorithm.json").write_text(json.dumps({"num_updates": self.num_updates, "last_eval": self.last_eval}))
        self.saved.append((path.name, dict(self.last_eval)))
        return path


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("stop,iterations", [
    ({"iterations": 3}, 3),
    ({"updates": 25}, 3),           # checked after each iteration of 10 updates
    ({"wall_time_s": 4.5}, 5),      # the sum of perf/iteration_s, not the (much shorter) real time
    ({"eval_return": 4.0}, 4),      # evaluated every 2 iterations: 2.0, then 4.0
    ({"iterations": 100, "updates": 20}, 2),  # the first condition met
])
def test_every_stop_condition_ends_the_job(tmp_path, stop, iterations):
    trainable = Counter(eval_every=2)
    out = run_job(trainable, tmp_path, StopConfig(**stop), t_start=0.0)
    assert trainable.iteration == iterations
    assert out.train_s == pytest.approx(iterations * 1.0)
    assert out.checkpoint == tmp_path / "checkpoints" / "final"


def test_metrics_are_strict_json_and_the_final_evaluation_is_recorded_once(tmp_path):
    trainable = Counter()
    out = run_job(trainable, tmp_path, StopConfig(iterations=2), t_start=0.0,
                  first_records=[{"iteration": 0.0, "eval/return_mean": -1.0}])
    text = (tmp_path / "metrics.jsonl").read_text()
    assert "Infinity" not in text and "NaN" not in text
    lines = _lines(tmp_path)
    assert [line["iteration"] for line in lines] == [0, 1, 2, 2]
    assert lines[1]["data/ratio"] is None and lines[1]["time/total_s"] > 0
    assert lines[-1] == {"iteration": 2.0, "learner/updates": 20.0, "eval/return_mean": 2.0, "eval/episodes": 2}
    assert [h["iteration"] for h in out.history] == [line["iteration"] for line in lines]
    # Weights first, then the same checkpoint again with the evaluation in it.
    assert trainable.saved == [("final", {}), ("final", {"eval/return_mean": 2.0, "eval/episodes": 2})]
    assert (tmp_path / "tensorboard").is_dir()


class Stamped(Counter):
    """A Trainable whose learner reports when its first update finished (as ``Learner.run_updates`` does)."""

    def train(self) -> dict[str, float]:
        m = super().train()
        if self.iteration == 1:
            m["perf/first_update_at"] = 1000.25
        return m


def test_first_update_time_counts_from_the_jobs_start_to_the_learners_stamp(tmp_path):
    out = run_job(Stamped(), tmp_path, StopConfig(iterations=2), t_start=1000.0)
    assert out.first_update_s == pytest.approx(0.25)
    assert not any("perf/first_update_at" in line for line in _lines(tmp_path))  # a time stamp is not a metric
    (tmp_path / "plain").mkdir()
    out = run_job(Counter(), tmp_path / "plain", StopConfig(iterations=1), t_start=time.time() - 5.0)
    assert 5.0 <= out.first_update_s < 60.0  # no stamp: the end of the first iteration


def test_no_second_evaluation_when_the_last_iteration_evaluated(tmp_path):
    trainable = Counter(eval_every=1)
    run_job(trainable, tmp_path, StopConfig(iterations=2), t_start=0.0)
    assert [line["iteration"] for line in _lines(tmp_path)] == [1, 2]
    assert [name for name, _ in trainable.saved] == ["final"]


def test_periodic_checkpoints_are_pruned_and_a_resumed_finished_job_runs_nothing(tmp_path):
    run_job(Counter(), tmp_path, StopConfig(iterations=5), t_start=0.0, checkpoint_interval=2, checkpoint_keep=1)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["final", "iter-000004"]
    done = Counter()
    done.iteration, done.num_updates = 5, 50
    out = run_job(done, tmp_path, StopConfig(iterations=5), t_start=0.0, resumed=True)
    assert done.iteration == 5 and out.first_update_s is None
    assert out.train_s == pytest.approx(5.0)  # the kept lines' training time counts


def test_a_non_finite_loss_names_the_last_good_checkpoint_and_keeps_no_state(tmp_path):
    trainable = Counter(loss_at={3: math.nan})
    with pytest.raises(NonFiniteLossError, match="iter-000002"):
        run_job(trainable, tmp_path, StopConfig(iterations=5), t_start=0.0, checkpoint_interval=2,
                resume_command="offlinerl train --resume x", log=lambda s: None)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["iter-000002"]


def test_a_failing_final_evaluation_keeps_the_trained_weights(tmp_path):
    trainable = Counter()
    trainable.evaluate = lambda: 1 / 0
    logged: list[str] = []
    with pytest.raises(ZeroDivisionError):
        run_job(trainable, tmp_path, StopConfig(iterations=1), t_start=0.0, resume_command="resume me",
                log=logged.append)
    assert (tmp_path / "checkpoints" / "final").is_dir() and not logged  # final written: nothing more to save


def test_result_json_is_strict_and_stop_config_is_one_class(tmp_path):
    write_result(tmp_path, {"final_eval_return": math.nan, "updates": 3})
    assert json.loads((tmp_path / "result.json").read_text()) == {"final_eval_return": None, "updates": 3}
    assert loop.StopConfig is StopConfig
    with pytest.raises(ConfigError, match="at least one"):
        StopConfig()


def test_a_plain_progress_line_shows_the_iteration_it_counts(tmp_path, capsys):
    """In a log (stderr not a terminal), each line's metrics are its own iteration's, and 100% is said once."""
    run_job(Counter(eval_every=1), tmp_path, StopConfig(iterations=2), t_start=0.0,
            progress=loop.Progress(desc="job", unit="it", total=2, interval_s=0.0))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("job:")]
    assert [line.split(",")[0] for line in lines] == ["job: 1/2 it (50%)", "job: 2/2 it (100%)"]
    assert lines[0].endswith("eval=1.0") and lines[1].endswith("eval=2.0"), lines


def test_total_time_goes_on_across_a_resume(tmp_path):
    """time/total_s of a resumed job starts from the kept records' last value, not from 0 (curves fold back)."""
    run_job(Counter(), tmp_path, StopConfig(iterations=2), t_start=time.time() - 100.0, checkpoint_interval=1)
    first = _lines(tmp_path)
    again = Counter()
    again.iteration, again.num_updates = 2, 20
    run_job(again, tmp_path, StopConfig(iterations=3), t_start=time.time(), resumed=True)
    totals = [line["time/total_s"] for line in _lines(tmp_path) if "time/total_s" in line]
    assert totals == sorted(totals) and totals[-1] >= max(line.get("time/total_s", 0) for line in first) > 100, totals


def test_an_actor_at_the_action_bounds_is_said_once_with_the_setting_to_change(tmp_path):
    at = {"rebrac/actor_at_bounds": 0.98, "rebrac/data_at_bounds": 0.05}
    said: list[str] = []
    run_job(Counter(extra={1: {"rebrac/actor_at_bounds": 0.3, "rebrac/data_at_bounds": 0.05}, 2: at, 3: at}), tmp_path,
            StopConfig(iterations=3), t_start=0.0, log=said.append)
    notices = [line for line in said if "action bounds" in line]
    assert notices == [notices[0]] and "after 20 updates: 98% of its action components" in notices[0]
    assert "against 5% of the data's (rebrac/actor_at_bounds)" in notices[0] and "raise config.actor_bc_coef" in notices[0]


@pytest.mark.parametrize("metrics,expected", [
    ({"td3bc/actor_at_bounds": 0.6, "td3bc/data_at_bounds": 0.1}, "lower config.alpha"),  # at both thresholds
    ({"agent_0/rebrac/actor_at_bounds": 1.0, "agent_0/rebrac/data_at_bounds": 0.0}, "agent_0/rebrac/actor_at_bounds"),
    ({"rebrac/actor_at_bounds": 1.0, "rebrac/data_at_bounds": 0.7}, None),   # the data sit at the bounds too
    ({"rebrac/actor_at_bounds": 0.45, "rebrac/data_at_bounds": 0.0}, None),  # most actions inside
    ({"rebrac/actor_at_bounds": 1.0}, None),                                  # nothing to compare with
])
def test_which_actors_count_as_saturated(metrics, expected):
    from offlinerl.jobs.guards import saturated_actor

    notice = saturated_actor(metrics)
    assert (notice is None) if expected is None else (expected in notice)
