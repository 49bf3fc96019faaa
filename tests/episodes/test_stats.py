"""``offlinerl inspect`` numbers on a small crafted dataset equal hand-computed values."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.cli import main
from offlinerl.episodes import SingleAgentEpisode, write_dataset
from offlinerl.episodes.stats import dataset_stats

OBS = gym.spaces.Box(-200.0, 200.0, (2,), np.float32)
ACT = gym.spaces.Discrete(3, start=1)


@pytest.fixture
def crafted(tmp_path):
    """A: T=3, rewards 1,2,3, terminated; B: T=5 (three chunks at max 2 steps/row), rewards 0.5, truncated;
    C: T=1, reward -1, neither flag."""
    a = SingleAgentEpisode("A", obs=np.array([[t, 10 * t] for t in range(4)], np.float32),
                           actions=np.array([1, 2, 3]), rewards=[1, 2, 3], terminated=True)
    b = SingleAgentEpisode("B", obs=np.array([[100, -t] for t in range(6)], np.float32),
                           actions=np.ones(5, np.int64), rewards=[0.5] * 5, truncated=True)
    c = SingleAgentEpisode("C", obs=np.array([[7, 7], [8, 8]], np.float32), actions=np.array([3]), rewards=[-1])
    write_dataset([a, b, c], tmp_path / "ds", observation_space=OBS, action_space=ACT, env_id="Crafted-v0",
                  max_steps_per_row=2, rows_per_file=2)
    return tmp_path / "ds"


def test_inspect_numbers_equal_hand_computed(crafted, ray_session):
    s = dataset_stats(crafted)
    assert (s["episodes"], s["rows"], s["steps"]) == (3, 6, 9)  # A: 2 rows, B: 3 rows, C: 1 row
    assert (s["terminated"], s["truncated"], s["neither"]) == (1, 1, 1)
    # returns 6, 2.5, -1
    assert s["returns"] == pytest.approx({
        "min": -1.0, "mean": 2.5, "std": math.sqrt(24.5 / 3),
        "p5": -0.65, "p25": 0.75, "p50": 2.5, "p75": 4.25, "p95": 5.65, "max": 6.0,
    })
    # lengths 3, 5, 1
    assert s["lengths"] == pytest.approx({
        "min": 1, "mean": 3, "std": math.sqrt(8 / 3), "p5": 1.2, "p25": 2, "p50": 3, "p75": 4, "p95": 4.8, "max": 5,
    })
    (act,) = s["actions"]
    assert act["histogram"] == {"1": 6, "2": 1, "3": 2} and act["count"] == 9
    # obs[:T] of each episode: A (0,0) (1,10) (2,20); B (100, 0..-4); C (7,7)
    (obs,) = s["observations"]
    assert obs["count"] == 9 and obs["shape"] == [2]
    assert obs["mean"] == pytest.approx([510 / 9, 3.0])
    assert obs["min"] == [0.0, -4.0] and obs["max"] == [100.0, 20.0]
    dim0 = np.array([0, 1, 2, 100, 100, 100, 100, 100, 7], dtype=np.float64)
    assert obs["std"] == pytest.approx([dim0.std(), math.sqrt(498 / 9)])
    assert sum(s["return_histogram"]["counts"]) == 3 and sum(s["length_histogram"]["counts"]) == 3


def test_inspect_per_leaf_stats_for_dict_obs_and_box_actions(tmp_path, ray_session):
    obs_space = gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (2, 2), np.uint8),
                                 "mode": gym.spaces.Tuple((gym.spaces.Discrete(2),))})
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    rng = np.random.default_rng(0)
    eps = []
    for i in range(4):
        t = 3 + i
        eps.append(SingleAgentEpisode(
            f"e{i}", obs={"img": rng.integers(0, 256, (t + 1, 2, 2)).astype(np.uint8),
                          "mode": (rng.integers(0, 2, t + 1),)},
            actions=rng.uniform(-1, 1, (t, 2)).astype(np.float32), rewards=np.ones(t)))
    write_dataset(eps, tmp_path / "ds", observation_space=obs_space, action_space=act_space, rows_per_file=3)
    s = dataset_stats(tmp_path / "ds")
    img = np.concatenate([e.obs["img"][:-1] for e in eps]).reshape(-1, 4).astype(np.float64)
    mode = np.concatenate([e.obs["mode"][0][:-1] for e in eps])
    acts = np.concatenate([e.actions for e in eps]).astype(np.float64)
    leaves = {leaf["leaf"]: leaf for leaf in s["observations"]}
    assert set(leaves) == {"img", "mode.0"}
    assert leaves["img"]["shape"] == [2, 2]
    assert leaves["img"]["mean"] == pytest.approx(img.mean(0)) and leaves["img"]["std"] == pytest.approx(img.std(0))
    assert leaves["img"]["min"] == img.min(0).tolist() and leaves["img"]["max"] == img.max(0).tolist()
    assert leaves["mode.0"]["histogram"] == {str(v): int((mode == v).sum()) for v in np.unique(mode)}
    (act,) = s["actions"]
    assert act["mean"] == pytest.approx(acts.mean(0)) and act["std"] == pytest.approx(acts.std(0))
    assert act["min"] == pytest.approx(acts.min(0)) and act["max"] == pytest.approx(acts.max(0))


def test_inspect_cli_text_json_and_plot(crafted, tmp_path, ray_session, capsys):
    assert main(["inspect", str(crafted)]) == 0
    out = capsys.readouterr().out
    assert "episodes 3 (rows 6), steps 9; terminated 1, truncated 1, neither 1" in out
    assert "returns  mean 2.5" in out and "1: 6 (66.7%)" in out

    png = tmp_path / "plots" / "hist.png"
    assert main(["inspect", str(crafted), "--json", "--plot", str(png)]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 3
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    jpg = tmp_path / "plots" / "hist.jpg"
    assert main(["inspect", str(crafted), "--plot", str(jpg)]) == 0
    assert jpg.read_bytes()[:3] == b"\xff\xd8\xff"  # a JPEG, not PNG bytes under a .jpg name
    capsys.readouterr()
    assert main(["inspect", str(crafted), "--plot", str(tmp_path / "hist.gif")]) == 2
    assert capsys.readouterr().err == (f"offlinerl inspect: --plot {tmp_path / 'hist.gif'}: cannot write a .gif "
                                       "image; name a .png, .jpg, .jpeg, .svg, .pdf file\n")
    assert not (tmp_path / "hist.gif").exists()
    # a place inside the dataset is refused before it is read: no summary printed first
    assert main(["inspect", str(crafted), "--plot", str(crafted / "p.png")]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.startswith(f"offlinerl inspect: --plot ") and not (crafted / "p.png").exists()
    assert main(["inspect", str(crafted), "--max-dims", "-1"]) == 2
    assert capsys.readouterr().err == "offlinerl inspect: --max-dims must be >= 0, got -1\n"


def test_inspect_unreadable(tmp_path, ray_session, capsys):
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    assert "not a dataset directory" in capsys.readouterr().err
