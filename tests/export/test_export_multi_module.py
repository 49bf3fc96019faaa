"""``offlinerl export policy`` of a checkpoint of several modules (issue 25): ``--module-id`` one module,
``--all-modules`` a file per module, ``--joint`` one file for every module. Every file acts exactly as the
checkpoint's inference-only module with that module's own observation statistics (agent a1 observes
``100 x + 50`` where a0 observes ``x``, so a swapped normalisation would change the actions), in onnxruntime and
in TorchScript; a multi-module checkpoint without a choice, and refused outputs, are one line, no traceback.

``team_checkpoint`` (also used by the per-module OPE tests) trains BC through the CLI on a two-agent dataset.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from offlinerl.cli import main
from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.episodes import SingleAgentEpisode, write_dataset
from offlinerl.export import METADATA_KEY, export_joint_policy, export_module_policies
from offlinerl.training.checkpoint import load_checkpoint

PROG = "offlinerl export policy"
AGENTS = {"a0": (1.0, 0.0), "a1": (100.0, 50.0)}  # obs = scale * x + offset
OBS = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT = gym.spaces.Discrete(3)
EPISODES, STEPS = 8, 12
N_OBS = {"a0": 1000, "a1": 700}  # each module's batch is its own


def _label(agent: str, x: np.ndarray) -> np.ndarray:
    """The agent's best action from the unscaled observation: 0, 1 or 2 by its own feature's sign and size."""
    feature = x[:, 0 if agent == "a0" else 1]
    return np.digitize(feature, [-0.5, 0.5]).astype(np.int64)


def write_team_dataset(path: Path, seed: int = 0, module_id: str | None = None) -> Path:
    """Two agents per env episode (rows ``agent_id`` a0/a1, and ``module_id`` if given); the behaviour takes the
    best action with probability 0.6, each other one with 0.2 (``action_logp`` exact); reward 1 for the best
    action."""
    rng = np.random.default_rng(seed)
    episodes = []
    for i in range(EPISODES):
        for agent, (scale, offset) in AGENTS.items():
            x = rng.normal(size=(STEPS + 1, 2)).astype(np.float32)
            best = _label(agent, x[:-1])
            explore = rng.random(STEPS) < 0.4
            actions = np.where(explore, (best + rng.integers(1, 3, STEPS)) % 3, best)
            logp = np.where(actions == best, np.log(0.6), np.log(0.2))
            episodes.append(SingleAgentEpisode(f"ep{i}", obs=x * scale + offset, actions=actions,
                                               rewards=(actions == best).astype(np.float32), truncated=True,
                                               agent_id=agent, module_id=module_id,
                                               extras={C.ACTION_LOGP: logp.astype(np.float32)}))
    write_dataset(episodes, path, observation_space=OBS, action_space=ACT)
    return path


def team_checkpoint(root: Path, dataset: Path, share_encoder: bool = False) -> Path:
    """BC, 300 updates through ``offlinerl train`` with per-module observation normalisation; its final checkpoint."""
    root.mkdir(parents=True, exist_ok=True)
    job = root / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(dataset), "stop": {"iterations": 3},
        "config": {"updates_per_iteration": 100, "train_batch_size": 32, "lr": 3e-3, "model": {"hidden": [16]},
                   "normalize_observations": True, "share_encoder": share_encoder, "evaluation": {"interval": 0}}}))
    assert main(["train", str(job), "--no-progress", "-o", str(root / "run")]) == 0  # its output: the test's
    return root / "run" / "checkpoints" / "final"


@pytest.fixture(scope="module")
def team(tmp_path_factory, ray_session):
    """{"independent" | "shared-encoder": checkpoint} trained on one two-agent dataset."""
    root = tmp_path_factory.mktemp("team")
    data = write_team_dataset(root / "data")
    return {name: team_checkpoint(root / name, data, share_encoder=name == "shared-encoder")
            for name in ("independent", "shared-encoder")}


def _observations(seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {a: (rng.normal(size=(N_OBS[a], 2)) * scale + offset).astype(np.float32)
            for a, (scale, offset) in AGENTS.items()}


def reference_actions(ckpt_path: Path, obs: dict[str, np.ndarray], stats: dict[str, str] | None = None
                      ) -> dict[str, np.ndarray]:
    """Each module's actions on its observations through the Python path: the checkpoint's inference-only module
    after its own env-to-module pipeline (``stats``: module -> whose statistics to use instead)."""
    ckpt = load_checkpoint(ckpt_path)
    modules = ckpt.build_module(inference_only=True)
    to_env = module_to_env_pipeline(ckpt.action_space)
    out = {}
    for mid, x in obs.items():
        batch = ckpt.env_to_module((stats or {}).get(mid, mid))({C.OBS: x})
        with torch.no_grad():
            actions = modules[mid].eval().forward_inference({C.OBS: torch.as_tensor(batch[C.OBS])})[C.ACTIONS]
        out[mid] = to_env({C.ACTIONS: actions})[C.ACTIONS]
    return out


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main(["export", "policy", *map(str, args)])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out, out.err


def _onnx_session(path: Path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'offlinerl[export]')")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _torchscript(path: Path) -> tuple[torch.jit.ScriptModule, dict]:
    extra = {f"{METADATA_KEY}.json": ""}
    policy = torch.jit.load(str(path), _extra_files=extra)
    return policy, json.loads(extra[f"{METADATA_KEY}.json"])


def test_the_reference_depends_on_each_modules_own_statistics(team):
    """The parity tests below would catch a file that normalised a1's observations with a0's statistics."""
    obs = _observations()
    own = reference_actions(team["independent"], obs)
    swapped = reference_actions(team["independent"], obs, stats={"a1": "a0"})
    assert np.mean(own["a1"] != swapped["a1"]) > 0.2
    accuracy = {a: np.mean(own[a] == _label(a, (obs[a] - AGENTS[a][1]) / AGENTS[a][0])) for a in AGENTS}
    assert min(accuracy.values()) > 0.6, accuracy  # trained on 96 steps per agent (a uniform choice: 1/3)


@pytest.mark.parametrize("fmt,suffix", [("onnx", ".onnx"), ("torchscript", ".pt")])
@pytest.mark.parametrize("name", ["independent", "shared-encoder"])
def test_all_modules_writes_a_file_per_module_that_acts_as_that_module(capsys, team, tmp_path, fmt, suffix, name):
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="onnx is not installed (pip install 'offlinerl[export]')")
    code, out, err = _run(capsys, team[name], "--format", fmt, "--all-modules", "-o", tmp_path / "policies")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "policies").iterdir()) == [
        f"a0{suffix}", f"a0{suffix}.json", f"a1{suffix}", f"a1{suffix}.json"]  # no temporary file left
    assert out.splitlines() == [f"wrote {fmt} policy of module {a} to {tmp_path / 'policies' / (a + suffix)} "
                                f"(description: {tmp_path / 'policies' / (a + suffix)}.json)" for a in AGENTS]
    obs = _observations()
    expected = reference_actions(team[name], obs)
    for agent in AGENTS:
        file = tmp_path / "policies" / f"{agent}{suffix}"
        sidecar = json.loads(Path(f"{file}.json").read_text())
        assert sidecar["module_id"] == agent and sidecar["normalize_observations"] is True
        assert [i["name"] for i in sidecar["inputs"]] == ["obs"] and sidecar["outputs"][0]["name"] == "actions"
        if fmt == "onnx":
            session = _onnx_session(file)
            assert json.loads(session.get_modelmeta().custom_metadata_map[METADATA_KEY]) == sidecar
            (got,) = session.run(["actions"], {"obs": obs[agent]})
        else:
            policy, meta = _torchscript(file)
            assert meta == sidecar
            got = policy(torch.from_numpy(obs[agent])).numpy()
        assert got.dtype == np.int64 and got.shape == (N_OBS[agent],)
        np.testing.assert_array_equal(got, expected[agent])


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("name", ["independent", "shared-encoder"])
def test_joint_writes_one_file_with_an_input_and_an_output_per_module(capsys, team, tmp_path, fmt, name):
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="onnx is not installed (pip install 'offlinerl[export]')")
    file = tmp_path / ("joint.onnx" if fmt == "onnx" else "joint.pt")
    code, out, err = _run(capsys, team[name], "--format", fmt, "--joint", "-o", file)
    assert code == 0, err
    assert out == f"wrote the joint {fmt} policy to {file} (description: {file}.json)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [file.name, f"{file.name}.json"]
    meta = json.loads(Path(f"{file}.json").read_text())
    assert meta["module_ids"] == ["a0", "a1"] and "module_id" not in meta
    assert [(i["name"], i["module_id"], i["shape"], i["dtype"]) for i in meta["inputs"]] == [
        ("a0", "a0", ["batch_a0", 2], "float32"), ("a1", "a1", ["batch_a1", 2], "float32")]
    assert [(o["name"], o["module_id"], o["shape"], o["dtype"]) for o in meta["outputs"]] == [
        ("actions_a0", "a0", ["batch_a0"], "int64"), ("actions_a1", "a1", ["batch_a1"], "int64")]
    obs = _observations(seed=11)
    expected = reference_actions(team[name], obs)
    if fmt == "onnx":
        session = _onnx_session(file)
        assert json.loads(session.get_modelmeta().custom_metadata_map[METADATA_KEY]) == meta
        assert [i.name for i in session.get_inputs()] == ["a0", "a1"]
        got = dict(zip(["a0", "a1"], session.run(["actions_a0", "actions_a1"], {a: obs[a] for a in AGENTS})))
    else:
        policy, embedded = _torchscript(file)
        assert embedded == meta
        got = dict(zip(["a0", "a1"], (t.numpy() for t in policy(*(torch.from_numpy(obs[a]) for a in AGENTS)))))
    for agent in AGENTS:
        assert got[agent].dtype == np.int64 and got[agent].shape == (N_OBS[agent],)
        np.testing.assert_array_equal(got[agent], expected[agent])


def test_module_id_exports_that_module_as_before(capsys, team, tmp_path):
    code, out, err = _run(capsys, team["independent"], "--format", "torchscript", "--module-id", "a1", "-o",
                          tmp_path / "a1.pt")
    assert code == 0, err
    policy, meta = _torchscript(tmp_path / "a1.pt")
    assert meta["module_id"] == "a1"
    obs = _observations()
    np.testing.assert_array_equal(policy(torch.from_numpy(obs["a1"])).numpy(),
                                  reference_actions(team["independent"], {"a1": obs["a1"]})["a1"])


def test_several_modules_without_a_choice_list_the_three(capsys, team, tmp_path):
    ckpt = team["independent"]
    code, out, err = _run(capsys, ckpt, "--format", "onnx", "-o", tmp_path / "p.onnx")
    assert code == 1 and not out and err == (
        f"{PROG}: error: {ckpt} holds the modules ['a0', 'a1']; choose what to export: --module-id ID (one module's "
        "policy), --all-modules (a file per module, in the directory -o names) or --joint (one file acting for every "
        "module: an input and an output per module); in Python: module_id=, export_module_policies, "
        "export_joint_policy\n")
    code, _, err = _run(capsys, ckpt, "--format", "onnx", "--module-id", "a9", "-o", tmp_path / "p.onnx")
    assert code == 1 and err == f"{PROG}: error: {ckpt} has no module 'a9'; it holds ['a0', 'a1']\n"
    with pytest.raises(SystemExit) as exc:
        main(["export", "policy", str(ckpt), "--format", "onnx", "--joint", "--all-modules", "-o", str(tmp_path)])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_all_modules_replaces_nothing_without_overwrite_and_never_writes_into_the_checkpoint(capsys, team, tmp_path):
    ckpt = team["independent"]
    out_dir = tmp_path / "policies"
    out_dir.mkdir()
    (out_dir / "a1.pt").write_bytes(b"keep me")
    (out_dir / "notes.txt").write_text("mine")
    code, _, err = _run(capsys, ckpt, "--format", "torchscript", "--all-modules", "-o", out_dir)
    assert code == 2 and "a1.pt already exists" in err and "--overwrite" in err and err.count("\n") == 1
    assert sorted(p.name for p in out_dir.iterdir()) == ["a1.pt", "notes.txt"]  # a0 was not written either
    code, _, err = _run(capsys, ckpt, "--format", "torchscript", "--all-modules", "-o", out_dir, "--overwrite")
    assert code == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == ["a0.pt", "a0.pt.json", "a1.pt", "a1.pt.json", "notes.txt"]
    assert (out_dir / "a1.pt").read_bytes() != b"keep me" and (out_dir / "notes.txt").read_text() == "mine"
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    for target in (ckpt, ckpt / "policies"):
        code, _, err = _run(capsys, ckpt, "--format", "torchscript", "--all-modules", "-o", target, "--overwrite")
        assert code == 2 and "checkpoint" in err and err.count("\n") == 1
    code, _, err = _run(capsys, ckpt, "--format", "torchscript", "--joint", "-o", ckpt / "joint.pt", "--overwrite")
    assert code == 2 and "checkpoint" in err
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before
    (tmp_path / "file").write_text("x")
    code, _, err = _run(capsys, ckpt, "--format", "torchscript", "--all-modules", "-o", tmp_path / "file")
    assert code == 2 and err == (f"{PROG}: error: {tmp_path / 'file'} exists and is not a directory; --all-modules "
                                 "writes a file per module into the directory -o names\n")


def test_python_api_returns_the_files(team, tmp_path):
    files = export_module_policies(team["independent"], tmp_path / "d", "torchscript")
    assert files == {a: (tmp_path / "d" / f"{a}.pt").resolve() for a in AGENTS}
    assert export_joint_policy(team["independent"], tmp_path / "j.pt", "torchscript") == (tmp_path / "j.pt").resolve()


DICT_OBS = gym.spaces.Dict({"pos": gym.spaces.Box(-5.0, 5.0, (2,), np.float32), "mode": gym.spaces.Discrete(3)})
BOX_ACT = gym.spaces.Box(np.array([-2.0, -1.0], np.float32), np.array([2.0, 0.5], np.float32))


def write_untrained_team_checkpoint(path: Path) -> Path:
    """What a two-module CQL job saves, for seeded fresh modules over a Dict observation space, each module with
    statistics fitted on observations of its own (a1's shifted and scaled)."""
    from offlinerl.algorithms.registry import get_algorithm
    from offlinerl.connectors import observation_connectors
    from offlinerl.core.flatten import flatten_batch
    from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
    from offlinerl.episodes.spaces import space_to_json
    from offlinerl.training.checkpoint import class_path, write_checkpoint
    from tests.episodes.builders import sample_batch
    from tests.export.test_export_policy import CONFIG

    spec = get_algorithm("cql")
    config = spec.config_cls.from_dict({**CONFIG, "normalize_observations": True})
    torch.manual_seed(0)
    module = MultiRLModuleSpec({a: RLModuleSpec(spec.module_cls, DICT_OBS, BOX_ACT, config.module_config())
                                for a in AGENTS}).build()
    state = {}
    for i, a in enumerate(AGENTS):
        obs = observation_connectors(DICT_OBS, True)
        obs.normalize.fit(flatten_batch(sample_batch(DICT_OBS, 50, seed=1 + i), DICT_OBS) * (1 + 3 * i) + 2 * i)
        state[a] = obs.get_state()
    meta = {"algorithm": "cql", "config": config.to_dict(), "observation_space": space_to_json(DICT_OBS),
            "action_space": space_to_json(BOX_ACT), "module_class": class_path(spec.module_cls),
            "module_ids": list(AGENTS), "learner_class": class_path(spec.learner_cls), "connector_state": state,
            "iteration": 0, "num_updates": 0}
    return write_checkpoint(path, {"learners": [{"learner": {"module": module.state_dict()}}]}, meta)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_joint_names_each_leaf_after_its_module_and_acts_as_the_modules_on_box_actions(tmp_path, fmt):
    """Dict observations, Box actions: TorchScript identical, ONNX within 1e-5 (float arithmetic of another
    runtime), every action within the bounds."""
    from offlinerl.export import policy_inputs
    from tests.episodes.builders import sample_batch
    from tests.export.test_export_policy import ATOL, input_arrays

    if fmt == "onnx":
        pytest.importorskip("onnx", reason="onnx is not installed (pip install 'offlinerl[export]')")
    ckpt = write_untrained_team_checkpoint(tmp_path / "ckpt")
    file = export_joint_policy(ckpt, tmp_path / "joint", fmt)
    meta = json.loads(Path(f"{file}.json").read_text())
    names = ["a0.mode", "a0.pos", "a1.mode", "a1.pos"]  # module by module, leaves in the space's (sorted) order
    assert [i["name"] for i in meta["inputs"]] == names
    assert [i["shape"] for i in meta["inputs"]] == [["batch_a0"], ["batch_a0", 2], ["batch_a1"], ["batch_a1", 2]]
    assert [o["shape"] for o in meta["outputs"]] == [["batch_a0", 2], ["batch_a1", 2]]
    obs = {a: sample_batch(DICT_OBS, n, seed=20 + i) for i, (a, n) in enumerate(N_OBS.items())}
    feeds = {}
    for a in AGENTS:
        leaves = input_arrays(DICT_OBS, obs[a])
        feeds.update({f"{a}.{spec.path}": leaves[spec.name] for spec in policy_inputs(DICT_OBS)})
    expected = reference_actions(ckpt, obs)
    if fmt == "onnx":
        got = dict(zip(AGENTS, _onnx_session(file).run(None, feeds)))
    else:
        policy, _ = _torchscript(file)
        got = dict(zip(AGENTS, (t.numpy() for t in policy(*(torch.from_numpy(feeds[n]) for n in names)))))
    for a in AGENTS:
        assert got[a].dtype == np.float32 and got[a].shape == (N_OBS[a], 2)
        assert np.all(got[a] >= BOX_ACT.low) and np.all(got[a] <= BOX_ACT.high)
        if fmt == "torchscript":
            np.testing.assert_array_equal(got[a], expected[a])
        else:
            assert float(np.max(np.abs(got[a] - expected[a]))) <= ATOL
    swapped = reference_actions(ckpt, obs, stats={"a1": "a0"})
    assert float(np.max(np.abs(swapped["a1"] - expected["a1"]))) > 0.01  # a1's statistics matter
