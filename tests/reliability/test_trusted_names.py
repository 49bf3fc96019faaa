"""Names read from files never import anything, and no settings text gives a traceback.

Each hostile file names a real module written here, whose top-level code would create a marker file and
register an env: the module must stay unimported unless the user allows its package (``--env-package`` /
``OFFLINERL_ENV_PACKAGES``). Deeply nested, huge-integer and YAML-1.1-number texts in job files, specs,
``--set``, ``dataset.json`` and ``sweep.json`` are one message and an exit code.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from offlinerl.cli import main
from offlinerl.trusted import ENV_PACKAGES_VAR, SETTINGS_VAR, UntrustedNameError, allow_env_packages, check_env_id, env_id_problem
from tests.datagen import make_dataset

SPEC = {"episode_id": "episode", "step": "t", "observation": ["x0", "x1", "x2", "x3"], "action": "a",
        "reward": "r", "terminated": {"column": "done"}, "truncated": {"rule": "none"}}
DEEP = "[" * 20000


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """A module that, once imported, creates ``marker`` and registers ``EvilCartPole-v0``."""
    name = f"evil_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "imported"
    code = f"""
import pathlib
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv
pathlib.Path({str(marker)!r}).touch()
gym.register("{name}/EvilCartPole-v0", entry_point=CartPoleEnv, max_episode_steps=500)
"""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"{name}.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setenv(ENV_PACKAGES_VAR, "")  # restored (removed) after the test
    yield name, marker
    sys.modules.pop(name, None)


def _not_imported(evil) -> bool:
    name, marker = evil
    return not marker.exists() and name not in sys.modules


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=4)


def _run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.out + captured.err


def _steps(path: Path) -> Path:
    rows = ["episode,t,x0,x1,x2,x3,a,r,done"]
    rows += [f"e1,{t},0.01,0.02,0.03,0.04,{t % 2},1.0,{str(t == 2).lower()}" for t in range(3)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _job(tmp_path: Path, dataset: Path, **config) -> Path:
    spec = {"algorithm": "bc", "dataset": str(dataset),
            "config": {"updates_per_iteration": 2, "train_batch_size": 8, "model": {"hidden": [8]},
                       "evaluation": {"episodes": 1, "interval": 1}, **config},
            "stop": {"iterations": 1}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# ---------------------------------------------------------------- the one rule


def test_the_rule_allows_registry_ids_allow_listed_packages_and_explicit_ids(monkeypatch):
    monkeypatch.setenv(ENV_PACKAGES_VAR, "")  # restored (removed) after the test
    assert env_id_problem("CartPole-v1") is None and env_id_problem("ns/Name-v0") is None
    assert "would import the module 'this'" in env_id_problem("this:Foo-v0", "spec x: env")
    assert "--env-package this" in env_id_problem("this:Foo-v0")
    assert env_id_problem("this:Foo-v0", explicit=True) is None
    for bad in ("", None, 3, "x" * 300, "Cart\nPole-v1"):
        assert env_id_problem(bad, explicit=True) is not None
    allow_env_packages(["pkg"])
    assert env_id_problem("pkg:Foo-v0") is None and env_id_problem("pkg.sub:Foo-v0") is None
    assert env_id_problem("pkgother:Foo-v0") is not None
    with pytest.raises(UntrustedNameError, match="not a module name"):
        allow_env_packages(["os; rm -rf /"])
    with pytest.raises(UntrustedNameError):
        check_env_id("pkgother:Foo-v0")


def test_the_users_own_settings_file_allows_packages(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_PACKAGES_VAR, "")
    settings = tmp_path / "settings.yaml"
    monkeypatch.setenv(SETTINGS_VAR, str(settings))
    assert env_id_problem("mine:Foo-v0") is not None
    settings.write_text("env_packages: [mine, other.sub]\n")
    assert env_id_problem("mine:Foo-v0") is None and env_id_problem("other.sub:Foo-v0") is None
    settings.write_text("env_packages: mine\n")
    with pytest.raises(UntrustedNameError, match="env_packages must be a list"):
        env_id_problem("mine:Foo-v0")


# ---------------------------------------------------------------- env ids in files


@pytest.mark.usefixtures("ray_session")
def test_a_spec_env_never_imports_a_module_unless_its_package_is_allowed(tmp_path, evil, capsys):
    name, marker = evil
    steps = _steps(tmp_path / "steps.csv")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "env": f"{name}:{name}/EvilCartPole-v0"}))
    code, out = _run(capsys, "convert", "table", steps, "--spec", spec, "-o", tmp_path / "out")
    assert code == 2 and f"would import the module {name!r}" in out and f"--env-package {name}" in out
    assert _not_imported(evil) and not (tmp_path / "out").exists()
    # the user allows the package: it is imported, its env registered and made
    code, out = _run(capsys, "convert", "table", steps, "--spec", spec, "-o", tmp_path / "out",
                     "--env-package", name)
    assert code == 0, out
    assert marker.exists()
    assert json.loads((tmp_path / "out" / "dataset.json").read_text())["env_id"] == f"{name}:{name}/EvilCartPole-v0"


def test_a_job_file_env_never_imports_a_module(tmp_path, dataset, evil, capsys):
    name, _ = evil
    job = _job(tmp_path, dataset, evaluation={"env": f"{name}:Evil-v0", "episodes": 1, "interval": 1})
    code, out = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 2 and f"{job}: config.evaluation.env names the env" in out and "would import" in out
    assert _not_imported(evil) and not (tmp_path / "run").exists()


def test_a_set_override_env_never_imports_a_module(tmp_path, dataset, evil, capsys):
    name, _ = evil
    code, out = _run(capsys, "train", _job(tmp_path, dataset), "--no-progress", "-o", tmp_path / "run",
                     "--set", f"config.evaluation.env={name}:Evil-v0")
    assert code == 2 and "--set: config.evaluation.env" in out and "would import" in out
    assert _not_imported(evil)


@pytest.mark.usefixtures("ray_session")
def test_a_dataset_env_id_never_imports_a_module(tmp_path, dataset, evil, capsys):
    name, _ = evil
    import shutil

    data = Path(shutil.copytree(dataset, tmp_path / "data"))
    info = json.loads((data / "dataset.json").read_text())
    (data / "dataset.json").write_text(json.dumps({**info, "env_id": f"{name}:Evil-v0"}))
    code, out = _run(capsys, "train", _job(tmp_path, data), "--no-progress", "-o", tmp_path / "run")
    assert code == 1 and f"names the env '{name}:Evil-v0', which would import the module" in out
    assert _not_imported(evil)


# ---------------------------------------------------------------- parsing without tracebacks


@pytest.mark.parametrize("case, text, expected", [
    ("deep YAML", "algorithm: bc\nconfig:\n  lr: " + DEEP + "\n", "nested more than 64 levels deep"),
    ("deep flow mapping", "algorithm: bc\nconfig: " + "{a: " * 5000 + "\n", "nested more than 64 levels deep"),
    ("5000-digit integer", "algorithm: bc\nstop:\n  updates: " + "9" * 5000 + "\n", "more than 40 digits"),
    ("beyond int64", "algorithm: bc\nstop:\n  updates: 99999999999999999999\n", "does not fit in 64 bits"),
    ("underscore number", "algorithm: bc\nstop:\n  updates: 1_000\n", "expected an integer, got '1_000'"),
])
def test_hostile_job_file_texts_are_one_message(tmp_path, dataset, capsys, case, text, expected):
    job = tmp_path / "job.yaml"
    job.write_text(f"dataset: {dataset}\n" + text)
    code, out = _run(capsys, "train", job, "--no-progress", "-o", tmp_path / "run")
    assert code == 2 and expected in out, (case, out)


@pytest.mark.parametrize("value, expected", [
    (DEEP, "nested more than 64 levels deep"), ("9" * 5000, "more than 40 digits"), ("1_000", "got '1_000'"),
])
def test_hostile_set_values_are_one_message(tmp_path, dataset, capsys, value, expected):
    code, out = _run(capsys, "train", _job(tmp_path, dataset), "--no-progress", "--set", f"stop.updates={value}")
    assert code == 2 and expected in out


def test_a_deep_json_spec_is_one_message(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text('{"episode_id": ' + "[" * 20000 + "]" * 20000 + "}")
    code, out = _run(capsys, "convert", "table", _steps(tmp_path / "s.csv"), "--spec", spec, "-o", tmp_path / "o")
    assert code == 2 and "nested more than 64 levels deep" in out and str(spec) in out


@pytest.mark.parametrize("text, expected", [
    ('{"a": ' + "[" * 20000 + "]" * 20000 + "}", "nested more than 64 levels deep"),
    ('{"num_steps": ' + "9" * 5000 + "}", "more than 40 digits"),
])
def test_a_hostile_dataset_json_is_one_message(tmp_path, dataset, capsys, text, expected):
    import shutil

    data = Path(shutil.copytree(dataset, tmp_path / "data"))
    (data / "dataset.json").write_text(text)
    code, out = _run(capsys, "validate", data)
    assert code != 0 and expected in out and "dataset.json" in out
    code, out = _run(capsys, "train", _job(tmp_path, data), "--no-progress", "-o", tmp_path / "run")
    assert code in (1, 2) and expected in out


def test_a_deep_sweep_json_is_one_message(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text('{"grid": ' + "[" * 20000 + "]" * 20000 + "}")
    code, out = _run(capsys, "sweep", "--resume", sweep)
    assert code == 2 and "nested more than 64 levels deep" in out
