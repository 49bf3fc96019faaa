"""Crafting RLlib JsonWriter-style recordings in tests (the real encoding:
``json.dumps`` of ``tolist()`` for plain columns, base64(lz4(pickle)) for packed ones)."""

from __future__ import annotations

import base64
import gzip
import json
import pickle
from pathlib import Path
from typing import Any

import lz4.frame
import numpy as np


def pack(value: Any, bytes_repr: bool = False) -> str:
    """RLlib's ``pack()``; ``bytes_repr`` writes the text ``b'…'`` as some versions did."""
    text = base64.b64encode(lz4.frame.compress(pickle.dumps(value, protocol=5))).decode("ascii")
    return f"b'{text}'" if bytes_repr else text


def obs_sequence(eps_seed: int, n: int, dim: int = 2) -> np.ndarray:
    """n+1 float32 observations of one episode (values exactly representable in float32)."""
    rng = np.random.default_rng(eps_seed)
    return rng.standard_normal((n + 1, dim)).astype(np.float32)


def batch(eps_id: int, t0: int, n: int, *, end: str | None = None, dim: int = 2, seed: int | None = None,
          total: int | None = None, dones: bool = False, agent_index: int = 0) -> dict[str, Any]:
    """Columns of steps ``t0 .. t0+n-1`` of one episode (obs taken from one per-episode sequence).

    ``end``: "terminated", "truncated" or None (flag on the last step of this batch).
    """
    total = total or t0 + n
    full = obs_sequence(seed if seed is not None else eps_id % (2**32), total, dim)
    obs, new_obs = full[t0:t0 + n], full[t0 + 1:t0 + n + 1]
    term = [False] * n
    trunc = [False] * n
    if end == "terminated":
        term[-1] = True
    elif end == "truncated":
        trunc[-1] = True
    cols: dict[str, Any] = {
        "obs": obs.tolist(),
        "new_obs": new_obs.tolist(),
        "actions": [(t * 7 + eps_id) % 3 for t in range(t0, t0 + n)],
        "prev_actions": [0] * n,
        "rewards": [float(np.float32(0.5 + t)) for t in range(t0, t0 + n)],
        "prev_rewards": [0.0] * n,
        "infos": [{"step": t} for t in range(t0, t0 + n)],
        "eps_id": [eps_id] * n,
        "unroll_id": [1] * n,
        "agent_index": [agent_index] * n,
        "t": list(range(t0, t0 + n)),
        "action_logp": [float(np.float32(-0.25 * (t + 1))) for t in range(t0, t0 + n)],
    }
    if dones:
        cols["dones"] = [a or b for a, b in zip(term, trunc)]
        if trunc[-1]:
            cols["infos"][-1]["TimeLimit.truncated"] = True
    else:
        cols["terminateds"], cols["truncateds"] = term, trunc
    return cols


def merge(*batches: dict[str, Any]) -> dict[str, Any]:
    """Concatenate the columns of several batches (one line holding several episodes)."""
    return {k: [v for b in batches for v in b[k]] for k in batches[0]}


def sample_batch_line(cols: dict[str, Any], packed: tuple[str, ...] = (), bytes_repr: bool = False) -> str:
    out: dict[str, Any] = {"type": "SampleBatch"}
    for k, v in cols.items():
        out[k] = pack(np.asarray(v, dtype=np.float32), bytes_repr) if k in packed else v
    return json.dumps(out)


def write_lines(path: Path, lines: list[str]) -> Path:
    data = "".join(line + "\n" for line in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path
