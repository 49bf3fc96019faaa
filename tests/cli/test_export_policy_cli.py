"""``offlinerl export policy``: help, exit codes and one-line messages, atomic output, refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.cli import main
from tests.export.test_export_policy import BOX, write_untrained_checkpoint

PROG = "offlinerl export policy"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("c") / "ckpt"
    return write_untrained_checkpoint(path, gym.spaces.Box(-1.0, 1.0, (3,), np.float32), BOX, "bc", True)


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main(["export", "policy", *map(str, args)])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out, out.err


def test_help_names_formats_inputs_and_the_extra(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["export", "policy", "--help"])
    text = capsys.readouterr().out
    assert exc.value.code == 0
    for words in ("--format", "onnx", "torchscript", "--overwrite", "obs.<key>", "offlinerl[export]", "FILE.json"):
        assert words in text


@pytest.mark.parametrize("fmt,name", [("torchscript", "policy.pt"), ("onnx", "policy.onnx")])
def test_writes_the_file_and_its_description(capsys, ckpt, tmp_path, fmt, name):
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="onnx is not installed (pip install 'offlinerl[export]')")
    code, out, _ = _run(capsys, ckpt, "--format", fmt, "-o", tmp_path / name)
    assert code == 0 and str(tmp_path / name) in out
    assert (tmp_path / name).stat().st_size > 0 and (tmp_path / f"{name}.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, f"{name}.json"]  # no temporary file left


@pytest.mark.parametrize("fmt,name,why", [
    ("onnx", "policy.onnx.json", "the description is written beside the policy as FILE.json"),
    ("torchscript", "policy.onnx", "a onnx file's name for a --format torchscript file"),
    ("onnx", "policy.pt", "a torchscript file's name for a --format onnx file"),
])
def test_a_name_that_is_a_slip_is_refused_before_anything_is_read(capsys, ckpt, tmp_path, fmt, name, why):
    code, _, err = _run(capsys, ckpt, "--format", fmt, "-o", tmp_path / name, "--overwrite")
    assert code == 2 and why in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_refuses_to_overwrite_without_overwrite(capsys, ckpt, tmp_path):
    target = tmp_path / "policy.pt"
    target.write_bytes(b"keep me")
    code, _, err = _run(capsys, ckpt, "--format", "torchscript", "-o", target)
    assert code == 2 and "exists" in err and "--overwrite" in err and err.count("\n") == 1
    assert target.read_bytes() == b"keep me" and not (tmp_path / "policy.pt.json").exists()
    code, _, _ = _run(capsys, ckpt, "--format", "torchscript", "-o", target, "--overwrite")
    assert code == 0 and target.read_bytes() != b"keep me"


@pytest.mark.parametrize("inside", ["", "learner_group.pt", "policy.pt"])
def test_never_writes_over_or_into_the_checkpoint(capsys, ckpt, inside):
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    code, _, err = _run(capsys, ckpt, "--format", "torchscript", "-o", ckpt / inside if inside else ckpt, "--overwrite")
    assert code == 2 and "checkpoint" in err
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before


@pytest.mark.parametrize("bad", ["missing", "file", "empty-dir"])
def test_bad_checkpoint_is_one_line_and_exit_1(capsys, tmp_path, bad):
    path = tmp_path / "ckpt"
    if bad == "file":
        path.write_text("not a checkpoint")
    elif bad == "empty-dir":
        path.mkdir()
    code, _, err = _run(capsys, path, "--format", "torchscript", "-o", tmp_path / "policy.pt")
    assert code == 1 and err.startswith(f"{PROG}: error: {path}") and err.count("\n") == 1
    assert not (tmp_path / "policy.pt").exists()


def test_missing_onnx_says_how_to_install_it(capsys, ckpt, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "onnx", None)  # `import onnx` raises ImportError
    code, _, err = _run(capsys, ckpt, "--format", "onnx", "-o", tmp_path / "policy.onnx")
    assert code == 1 and "pip install 'offlinerl[export]'" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_unknown_format_is_a_usage_error(capsys, ckpt, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["export", "policy", str(ckpt), "--format", "tflite", "-o", str(tmp_path / "p")])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
