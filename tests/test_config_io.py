"""Configs: frozen, documented, validated; YAML/JSON loading; overrides."""

import dataclasses
import json

import pytest

from offlinerl.algorithms.algorithm_config import AlgorithmConfig, ConfigError
from offlinerl.algorithms.marwil import MARWILConfig
from offlinerl.config_io import apply_overrides, parse_override


def test_every_field_has_a_docstring():
    import ast
    import inspect

    from offlinerl.algorithms.algorithm_config import EvaluationConfig, ModelConfig
    from offlinerl.data.config import DataConfig
    from offlinerl.algorithms.bc import BCConfig

    for cls in (AlgorithmConfig, ModelConfig, DataConfig, EvaluationConfig, BCConfig, MARWILConfig):
        src = ast.parse(inspect.getsource(cls))
        body = src.body[0].body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign):
                nxt = body[i + 1]
                assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant), node.target.id


def test_yaml_and_json_round_trip(tmp_path):
    cfg = MARWILConfig(beta=2.0)
    (tmp_path / "c.json").write_text(json.dumps(cfg.to_dict()))
    (tmp_path / "c.yaml").write_text("beta: 2.0\nmodel: {hidden: [8, 8]}\ndata: {mode: streaming}\nlr: 1e-3\n")
    assert MARWILConfig.from_file(tmp_path / "c.json") == cfg
    y = MARWILConfig.from_file(tmp_path / "c.yaml")
    assert y.model.hidden == (8, 8) and y.data.mode == "streaming" and y.lr == 1e-3  # "1e-3" is a YAML string
    with pytest.raises(dataclasses.FrozenInstanceError):
        y.beta = 3.0
    assert dataclasses.replace(y, beta=3.0).beta == 3.0


@pytest.mark.parametrize("data,field", [
    ({"beta": -1}, "beta"),
    ({"data": {"mode": "disk"}}, "data.mode"),
    ({"model": {"hidden": [0]}}, "model.hidden"),
    ({"train_batch_size": 1.5}, "train_batch_size"),
    ({"evaluation": {"episodes": 0}}, "evaluation.episodes"),
    ({"nope": 1}, "nope"),
])
def test_errors_name_the_field(data, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        MARWILConfig.from_dict(data)


def test_overrides():
    assert parse_override("config.model.hidden=[32, 32]") == (["config", "model", "hidden"], [32, 32])
    out = apply_overrides({"config": {"lr": 1.0}}, ["config.lr=0.5", "stop.updates=10"])
    assert out == {"config": {"lr": 0.5}, "stop": {"updates": 10}}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("config.lr")


def test_merge_keeps_what_nested_overrides_do_not_name():
    from offlinerl.config_io import merge

    base = {"lr": 1e-3, "evaluation": {"episodes": 20, "seed": 7, "env_kwargs": {"g": 9.8}}, "model": {"hidden": [8]}}
    out = merge(base, {"evaluation": {"episodes": 50, "env_kwargs": {"m": 2}}, "model": None, "beta": 3})
    assert out == {"lr": 1e-3, "evaluation": {"episodes": 50, "seed": 7, "env_kwargs": {"g": 9.8, "m": 2}},
                   "model": None, "beta": 3}
    assert base["evaluation"]["episodes"] == 20  # a copy
