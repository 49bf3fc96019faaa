"""datasets/build.py: deterministic builds, exact replays, honest end flags, cards that match the data."""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

from offlinerl.episodes import load_episodes, parquet_files, read_info
from offlinerl.scoring import normalized_score
from tests.conftest import DATASETS

NAMES = ("cartpole-mixed", "pendulum-mixed", "double-pendulum-mixed")
TINY = 0.02  # episodes scale of the test builds: 1-3 episodes per level
ANCHOR_EPISODES = 2
# Normalised per-episode mean return of each shipped mix (default 30-60). cartpole-mixed and
# double-pendulum-mixed are mostly short failing episodes (drift or run-away into the track's end),
# so their per-episode means are low.
MEAN_NORMALIZED_BOUNDS = {"cartpole-mixed": (10.0, 30.0), "double-pendulum-mixed": (5.0, 25.0)}


def _load_build_module():
    spec = importlib.util.spec_from_file_location("offlinerl_datasets_build", DATASETS / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build = _load_build_module()
from dataset_cards import evaluate as evaluate_policy  # noqa: E402  (importable once build.py is loaded)


@pytest.fixture(scope="module")
def tiny_builds(tmp_path_factory):
    """Every recipe built twice at a tiny scale, into two different directories."""
    roots = [tmp_path_factory.mktemp("build-a"), tmp_path_factory.mktemp("build-b")]
    for root in roots:
        for name in NAMES:
            build.build(name, root, episodes_scale=TINY, anchor_episodes=ANCHOR_EPISODES, progress=False)
    return roots


def _replay(env_id: str, episode, reset_seed: int) -> None:
    """Step a fresh env with the recorded actions: every obs, reward and end flag must match exactly."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=reset_seed)
    np.testing.assert_array_equal(np.asarray(obs, dtype=np.float32), episode.obs[0], err_msg=f"{episode.id} obs[0]")
    for t in range(len(episode)):
        action = episode.actions[t]
        obs, reward, terminated, truncated, _ = env.step(int(action) if np.ndim(action) == 0 else action)
        np.testing.assert_array_equal(np.asarray(obs, dtype=np.float32), episode.obs[t + 1],
                                      err_msg=f"{episode.id} obs[{t + 1}]")
        assert np.float32(reward) == episode.rewards[t], f"{episode.id} reward[{t}]"
        last = t == len(episode) - 1
        if not last:
            assert not (terminated or truncated), f"{episode.id}: the env ended at t={t}, the data goes on"
    assert terminated == episode.terminated, episode.id
    assert (truncated and not terminated) == episode.truncated, episode.id
    env.close()


def _reset_seed(recipe, episode_id: str) -> int:
    level_name, k = episode_id.rsplit("-", 1)
    index = [lv.name for lv in recipe.levels].index(level_name)
    seed, _ = build.level_seeds(recipe, index, int(k))
    return seed


@pytest.mark.parametrize("name", NAMES)
def test_tiny_build_is_deterministic(tiny_builds, name):
    a, b = (root / name for root in tiny_builds)
    files_a, files_b = parquet_files(a), parquet_files(b)
    assert [f.name for f in files_a] == [f.name for f in files_b] == ["part-00000.parquet"]
    for fa, fb in zip(files_a, files_b):
        assert pq.read_table(fa).equals(pq.read_table(fb))
    assert json.loads((a / "card.json").read_text()) == json.loads((b / "card.json").read_text())
    info_a, info_b = (json.loads((d / "dataset.json").read_text()) for d in (a, b))
    for info in (info_a, info_b):  # timestamps aside (the dataset's and its lineage entries'), the same
        info.pop("created_at")
        for entry in info["lineage"]:
            entry.pop("created_at")
    assert info_a == info_b and info_a["fingerprint"]
    assert (a / "README.md").read_text() == (b / "README.md").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_tiny_build_replays_exactly(tiny_builds, name):
    """No autoreset step is recorded and end flags are the env's: replaying the actions reproduces everything."""
    recipe = build.RECIPES[name]
    episodes = load_episodes(tiny_builds[0] / name)
    assert {int(ep.extras["behavior_level"][0]) for ep in episodes} == set(range(len(recipe.levels)))
    for ep in episodes:
        _replay(recipe.env_id, ep, _reset_seed(recipe, ep.id))


@pytest.mark.parametrize("name", NAMES)
def test_tiny_build_card_matches_data(tiny_builds, name):
    _assert_card_matches_data(tiny_builds[0] / name)


def _assert_card_matches_data(path):
    card = json.loads((path / "card.json").read_text())
    info = read_info(path)
    episodes = load_episodes(path)
    returns = np.array([ep.episode_return for ep in episodes])
    assert card["env_id"] == info.env_id
    assert card["num_episodes"] == len(episodes) == info.num_episodes
    assert card["num_steps"] == sum(len(ep) for ep in episodes) == info.num_steps
    assert card["return_mean"] == pytest.approx(returns.mean(), rel=1e-12)
    assert card["return_min"] == returns.min()
    assert card["return_max"] == returns.max()
    names = [lv["name"] for lv in info.provenance["levels"]]
    assert list(card["levels"]) == names
    for index, level in enumerate(names):
        eps = [ep for ep in episodes if ep.id.startswith(level + "-")]
        assert all(np.all(ep.extras["behavior_level"] == index) for ep in eps)
        stats = card["levels"][level]
        assert stats["episodes"] == len(eps) == info.provenance["levels"][index]["episodes"]
        assert stats["steps"] == sum(len(ep) for ep in eps)
        assert stats["return_mean"] == pytest.approx(np.mean([ep.episode_return for ep in eps]), rel=1e-12)
    for key in ("random_return", "best_return"):
        assert math.isfinite(card[key])
    assert card["best_level"] in names


def test_epsilon_greedy_logp_is_exact(tiny_builds):
    recipe = build.RECIPES["cartpole-mixed"]
    env = gym.make(recipe.env_id)
    for ep in load_episodes(tiny_builds[0] / "cartpole-mixed"):
        policy = recipe.levels[int(ep.extras["behavior_level"][0])].make_policy(env)  # fresh: Latched keeps state
        for t in range(len(ep)):
            if hasattr(policy, "epsilon"):
                greedy = policy.mean_action(ep.obs[t])
                p = policy.epsilon / 2 + (1 - policy.epsilon) * (int(ep.actions[t]) == greedy)
            else:
                p = 0.5
            assert ep.extras["action_logp"][t] == np.float32(math.log(p))


def test_gaussian_logp_is_density_before_clipping(tiny_builds):
    """Recompute each step's noise from the recorded seed stream: logp is the Gaussian density of μ + σε."""
    recipe = build.RECIPES["pendulum-mixed"]
    env = gym.make(recipe.env_id)
    for ep in load_episodes(tiny_builds[0] / "pendulum-mixed"):
        index = int(ep.extras["behavior_level"][0])
        policy = recipe.levels[index].make_policy(env)
        if not hasattr(policy, "sigma"):
            continue
        _, rng = build.level_seeds(recipe, index, int(ep.id.rsplit("-", 1)[1]))
        for t in range(len(ep)):
            noise = rng.standard_normal(1)
            expected = -0.5 * noise[0] ** 2 - math.log(policy.sigma) - 0.5 * math.log(2 * math.pi)
            assert ep.extras["action_logp"][t] == np.float32(expected)
            raw = policy.controller(ep.obs[t])[0] + policy.sigma * noise[0]
            assert ep.actions[t, 0] == np.float32(np.clip(raw, -2.0, 2.0))


def test_cli_refuses_to_overwrite_and_writes_only_dataset_files(tmp_path, capsys):
    args = ["--only", "cartpole-mixed", "--out", str(tmp_path), "--episodes-scale", "0.01", "--anchor-episodes", "1"]
    assert build.main(args) == 0
    target = tmp_path / "cartpole-mixed"
    before = (target / "part-00000.parquet").read_bytes()
    assert build.main(args) == 1
    assert "already exists" in capsys.readouterr().err
    assert (target / "part-00000.parquet").read_bytes() == before
    assert sorted(p.name for p in target.iterdir()) == ["README.md", "card.json", "dataset.json", "part-00000.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cartpole-mixed"]  # no temporary directory left
    assert build.main(args + ["--overwrite"]) == 0


# ------------------------------------------------------------- shipped datasets


@pytest.mark.parametrize("name", NAMES)
def test_shipped_dataset_card_matches_data(name):
    path = DATASETS / name
    _assert_card_matches_data(path)
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size < 10 * 2**20, f"{name} is {size / 2**20:.1f} MiB"


@pytest.mark.parametrize("name", NAMES)
def test_shipped_dataset_replays_first_episode_of_each_level(name):
    recipe = build.RECIPES[name]
    episodes = {ep.id: ep for ep in load_episodes(DATASETS / name)}
    for level in recipe.levels:
        _replay(recipe.env_id, episodes[f"{level.name}-00000"], _reset_seed(recipe, f"{level.name}-00000"))


@pytest.mark.parametrize("name", NAMES)
def test_shipped_dataset_leaves_room_for_offline_rl(name):
    """Most steps from weaker levels, the best level present, the mean well below it (D4RL-style mix)."""
    card = json.loads((DATASETS / name / "card.json").read_text())
    best = card["levels"][card["best_level"]]
    assert best["steps"] < card["num_steps"] / 2
    assert best["return_mean_normalized"] > 95.0
    low, high = MEAN_NORMALIZED_BOUNDS.get(name, (30.0, 60.0))
    assert low <= card["return_mean_normalized"] <= high


def test_cartpole_mixed_drifts_with_a_small_recovery():
    """cartpole-mixed: a few expert episodes, a drifting majority, and a small level that recovers.

    In drifted states (|x| > 0.3, moving outward) the data that keeps drifting must outnumber the
    recovery several times (so imitation drifts off), while recovery episodes survive to the time limit.
    """
    path = DATASETS / "cartpole-mixed"
    card = json.loads((path / "card.json").read_text())
    levels, steps = card["levels"], card["num_steps"]
    assert 0.05 <= levels["expert"]["steps"] / steps <= 0.15
    assert levels["recovering"]["steps"] / steps <= 0.15
    assert (levels["medium"]["steps"] + levels["poor"]["steps"]) / steps >= 0.6
    assert levels["recovering"]["return_mean_normalized"] > 95.0
    assert levels["medium"]["return_mean_normalized"] < 30.0
    names = [lv["name"] for lv in read_info(path).provenance["levels"]]
    drifted = dict.fromkeys(names, 0)
    for ep in load_episodes(path):
        obs = ep.obs[:-1]
        outward = (np.abs(obs[:, 0]) > 0.3) & (obs[:, 0] * obs[:, 1] > 0)
        drifted[names[int(ep.extras["behavior_level"][0])]] += int(outward.sum())
    assert drifted["medium"] + drifted["poor"] >= 5 * drifted["recovering"] > 0, drifted


def test_shipped_double_pendulum_mistake_is_punished_within_tens_of_steps():
    """The design of double-pendulum-mixed: the medium majority's runaway ends within tens of steps of
    leaving the centre; the recovering minority leaves the same way, is stopped beyond the limit and
    survives; the expert is a small share; weaker levels hold most of the steps."""
    card = json.loads((DATASETS / "double-pendulum-mixed" / "card.json").read_text())
    levels = card["levels"]
    assert 0.05 <= levels["expert"]["steps"] / card["num_steps"] <= 0.15
    weaker = sum(levels[name]["steps"] for name in ("medium", "poor", "random"))
    assert weaker > card["num_steps"] / 2
    assert levels["recovering"]["steps"] < weaker
    after_limit = {"medium": [], "recovering": []}
    for ep in load_episodes(DATASETS / "double-pendulum-mixed"):
        level = ep.id.rsplit("-", 1)[0]
        if level not in after_limit:
            continue
        beyond = np.flatnonzero(np.abs(ep.obs[:, 0]) > build.DP_LIMIT)
        assert beyond.size, f"{ep.id} never leaves |x| <= {build.DP_LIMIT}"
        after_limit[level].append(len(ep) - beyond[0])
        assert ep.terminated == (level == "medium"), ep.id
    assert max(after_limit["medium"]) <= 100  # the runaway ends within tens of steps
    assert np.median(after_limit["medium"]) <= 50
    assert min(after_limit["recovering"]) >= 500  # stopped beyond the limit and held to the time limit
    assert build.DP_EPISODES["recovering"] < build.DP_EPISODES["medium"] / 10


def _steps_to_upright(env, policy, limit: int) -> int:
    """Steps the noise-free policy needs to bring the pendulum from hanging at rest to cos θ > 0.95."""
    env.reset(seed=0)
    env.unwrapped.state = np.array([np.pi, 0.0])
    obs = np.array([-1.0, 0.0, 0.0], dtype=np.float32)
    for t in range(limit):
        obs, *_ = env.step(policy.mean_action(obs))
        if obs[0] > 0.95:
            return t + 1
    return limit


def test_pendulum_mixed_majority_swings_up_slowly():
    """pendulum-mixed: most steps come from levels that pump too weakly to swing up from hanging within an
    episode; their noise-free controllers are clearly worse than the expert's (BC is evaluated noise-free)."""
    card = json.loads((DATASETS / "pendulum-mixed" / "card.json").read_text())
    share = {name: lv["steps"] / card["num_steps"] for name, lv in card["levels"].items()}
    assert 0.05 <= share["expert"] <= 0.15
    assert share["medium"] + share["poor"] >= 0.7
    recipe = build.RECIPES["pendulum-mixed"]
    env = gym.make(recipe.env_id)
    policies = {lv.name: lv.make_policy(env) for lv in recipe.levels}
    assert _steps_to_upright(env, policies["expert"], 200) <= 80
    for name in ("medium", "poor"):
        assert _steps_to_upright(env, policies[name], 200) == 200, name
        first_seed = int(card["anchor_reset_seeds"].split("..")[0])
        returns = evaluate_policy(env, lambda obs, rng, p=policies[name]: p.mean_action(obs), 10, first_seed)
        score = normalized_score(float(np.mean(returns)), card["random_return"], card["best_return"])
        assert score < 75.0, (name, score)
    env.close()
