"""The README's Python API block runs in a Jupyter notebook (nbclient, a real ipykernel) from a directory that is
not the repository, beside a folder named ``offlinerl/`` holding a ``data/`` folder: what a clone looks like from
its parent directory, which once made ``import offlinerl`` a namespace package whose ``offlinerl.data`` was that
folder (issue 27). The kernel joins the test session's Ray; the block's budget is cut to seconds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: README text -> what the test runs instead (each must occur exactly once, so a changed README fails here).
SHRINK = {
    "updates_per_iteration=1000": "updates_per_iteration=20, train_batch_size=32, num_sampled_actions=2",
    "updates=4000": "updates=20",
    "episodes=5": "episodes=1",
    '"datasets/': f'"{REPO}/datasets/',
}

CHECKS = f"""
import json, pathlib, offlinerl
run = pathlib.Path(result["run_dir"])
one = policy.predict(np.array([1.0, 0.0, 0.0]))
batch = policy.predict(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -2.0]]))
print(json.dumps({{"package": offlinerl.__file__, "run_parent": str(run.parent.resolve()),
                  "files": sorted(p.name for p in run.iterdir()), "updates": result["updates"],
                  "one": one.tolist(), "batch": batch.tolist(), "dtype": str(batch.dtype),
                  "first": batch[0].tolist()}}))
algo.close()
"""


def _readme_block() -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(r"<!-- python-api -->\n```python\n(.*?)```", text, re.S)
    assert match, "README.md: the Python API block (after <!-- python-api -->) is missing"
    code = match.group(1)
    for old, new in SHRINK.items():
        assert code.count(old) == 1, f"README's Python API block no longer has {old!r} once"
        code = code.replace(old, new)
    return code


def test_readme_python_api_runs_in_a_notebook_from_any_directory(tmp_path, ray_session, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    (tmp_path / "offlinerl" / "data").mkdir(parents=True)  # a clone named offlinerl, seen from its parent
    monkeypatch.setenv("RAY_ADDRESS", ray_session.get_runtime_context().gcs_address)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_readme_block()),
                                         nbformat.v4.new_code_cell(CHECKS)])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.get("output_type") == "stream")
    got = json.loads(out.strip().splitlines()[-1])
    assert got["package"] == str(REPO / "src" / "offlinerl" / "__init__.py")
    assert got["run_parent"] == str((tmp_path / "runs").resolve())  # fit's default output, from the notebook's cwd
    assert {"config.yaml", "metrics.jsonl", "tensorboard", "checkpoints", "learning_curve.png",
            "result.json"} <= set(got["files"])
    assert got["updates"] == 20
    assert got["dtype"] == "float32" and len(got["one"]) == 1 and len(got["batch"]) == 2
    assert got["one"] == pytest.approx(got["first"], rel=1e-5)  # as in a batch (up to float rounding of the batch size)
    assert all(-2.0 <= a[0] <= 2.0 for a in got["batch"])  # Pendulum's torque bounds
