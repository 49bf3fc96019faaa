"""The plain-pyarrow example in docs/episode-format.md writes a dataset that validates and loads."""

from __future__ import annotations

import re
import runpy

import numpy as np

from offlinerl.episodes import load_episodes
from offlinerl.episodes.validate import validate_dataset
from tests.conftest import REPO


def test_doc_pyarrow_example_produces_a_valid_dataset(tmp_path, ray_session, monkeypatch):
    text = (REPO / "docs" / "episode-format.md").read_text()
    section = text[text.index("### With plain pyarrow"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "example.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(tmp_path / "example.py"), run_name="__main__")

    report = validate_dataset(tmp_path / "my-dataset")
    assert report.exit_code == 0, report.format()
    (ep,) = load_episodes(tmp_path / "my-dataset")
    assert ep.obs.shape == (4, 4) and ep.obs.dtype == np.float32
    assert ep.actions.tolist() == [0, 1, 1] and ep.terminated and not ep.truncated
    assert np.allclose(ep.extras["action_logp"], np.log(0.5))
