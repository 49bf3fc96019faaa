"""One line of an RLlib ``JsonWriter`` recording → per-episode fragments.

A line is a ``SampleBatch`` (columns at the top level) or a ``MultiAgentBatch``
(``policy_batches``: one SampleBatch per policy). Each column is a JSON list
with one entry per step, or a packed string (``pack()``: base64 of an LZ4
frame of a pickled numpy array), decoded with the numpy-only unpickler within
the line's :class:`~offlinerl.convert.limits.DecodeBudget`. The
rows of one (policy, ``eps_id``, ``agent_index``) with consecutive ``t`` form a
*fragment*; stitching fragments into episodes happens later, after a group-by.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from offlinerl.convert.limits import TOO_LARGE, DecodeBudget, DecodeLimits, ValueTooLargeError
from offlinerl.convert.packing import PackedDecodeError, RefusedPickleError, unpack

__all__ = ["LineError", "Fragment", "parse_line", "DROPPED_COLUMNS", "SINGLE_AGENT_POLICY"]

#: Policy id RLlib uses for single-agent data written as a MultiAgentBatch.
SINGLE_AGENT_POLICY = "default_policy"

#: Bookkeeping columns that are derivable from what we keep (or are folded into
#: the episode's layout: ids, ``t``, ``new_obs``, the end flags) and are not stored.
DROPPED_COLUMNS = frozenset({
    "eps_id", "agent_index", "t", "unroll_id", "new_obs", "prev_actions", "prev_rewards",
    "dones", "terminateds", "truncateds", "seq_lens",
})
_NOT_COLUMNS = frozenset({"type", "count"})
_REQUIRED = ("obs", "new_obs", "actions", "rewards", "eps_id", "t")


class LineError(ValueError):
    """A line that cannot be read; ``reason`` is a short category (``bad_json``, ``bad_encoding``, ``refused_pickle``,
    ``too_large`` …)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass
class Fragment:
    """Consecutive steps of one agent's episode found in one line."""

    policy: str | None
    eps_id: str
    agent_index: int
    t_first: int
    columns: dict[str, Any]
    """``obs``, ``actions``, ``rewards``, ``terminated``, ``truncated`` (per step), ``next_obs`` (1 entry) and extras."""
    obs_continuous: bool = True
    """Whether ``new_obs[i] == obs[i+1]`` holds inside the fragment."""
    legacy_dones: bool = False
    dropped: tuple[str, ...] = ()
    """Bookkeeping columns the line had that are not stored."""

    @property
    def length(self) -> int:
        return len(self.columns["rewards"])


def _nan_for_null(value: Any) -> Any:
    if isinstance(value, list):
        return [_nan_for_null(v) for v in value]
    if value is None or value == "null" or value == "NaN":
        return math.nan
    return value


def _json_column(values: list) -> np.ndarray | list:
    """A JSON list as a numeric array when it is one (``"null"``/``null`` read as NaN), else as is."""
    try:
        arr = np.asarray(values)
    except ValueError:  # ragged
        return values
    if arr.dtype.kind in "biuf":
        return arr
    if arr.dtype.kind in "OUS":
        try:
            return np.asarray(_nan_for_null(values), dtype=np.float64)
        except (ValueError, TypeError):
            return values
    return values


def _decode_column(name: str, value: Any, budget: DecodeBudget) -> np.ndarray | list:
    if isinstance(value, str):
        try:
            return unpack(value, budget)
        except ValueTooLargeError as exc:
            raise LineError(TOO_LARGE, f"column {name!r}: {exc}") from exc
        except RefusedPickleError as exc:
            raise LineError("refused_pickle", f"column {name!r}: {exc}") from exc
        except PackedDecodeError as exc:
            reason = "bad_base64" if "base64" in str(exc) else "bad_packed_value"
            raise LineError(reason, f"column {name!r}: {exc}") from exc
    if isinstance(value, list):
        return _json_column(value)
    raise LineError("bad_column", f"column {name!r}: expected a list or a packed string, got {type(value).__name__}")


def _eps_ids(values: Any) -> list[str]:
    """Episode ids as exact decimal strings (never through float)."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "iu":
            raise LineError("bad_column", f"column 'eps_id': expected integers, got {values.dtype}")
        return [str(v) for v in values.tolist()]
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise LineError("bad_column", f"column 'eps_id': expected integers, got {v!r:.40}")
        out.append(str(v))
    return out


def _batches(record: Any) -> list[tuple[str | None, dict[str, Any]]]:
    if not isinstance(record, dict):
        raise LineError("bad_record", f"expected a JSON object, got {type(record).__name__}")
    kind = record.get("type", "SampleBatch")
    if kind == "MultiAgentBatch":
        batches = record.get("policy_batches")
        if not isinstance(batches, dict):
            raise LineError("bad_record", "MultiAgentBatch without a 'policy_batches' object")
        return [(str(pid), b) for pid, b in batches.items()]
    if kind == "SampleBatch":
        return [(None, record)]
    raise LineError("bad_record", f"unknown record type {kind!r} (expected SampleBatch or MultiAgentBatch)")


def _end_flags(cols: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(terminated, truncated, legacy) per step; legacy ``dones`` split by ``infos['TimeLimit.truncated']``."""
    if "terminateds" in cols or "truncateds" in cols:
        term = np.asarray(cols.get("terminateds", np.zeros(n)), dtype=bool).reshape(-1)
        trunc = np.asarray(cols.get("truncateds", np.zeros(n)), dtype=bool).reshape(-1)
        return term, trunc, False
    if "dones" in cols:
        done = np.asarray(cols["dones"], dtype=bool).reshape(-1)
        infos = cols.get("infos")
        time_limit = np.zeros(n, dtype=bool)
        if isinstance(infos, list):
            time_limit = np.array([isinstance(i, dict) and bool(i.get("TimeLimit.truncated", False)) for i in infos])
        return done & ~time_limit, done & time_limit, True
    return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), False


def _take(value: np.ndarray | list, idx: np.ndarray) -> np.ndarray | list:
    return value[idx] if isinstance(value, np.ndarray) else [value[i] for i in idx.tolist()]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f" and b.dtype.kind == "f"))


def _policy_fragments(policy: str | None, raw: dict[str, Any], budget: DecodeBudget) -> list[Fragment]:
    if not isinstance(raw, dict):
        raise LineError("bad_record", f"policy batch {policy!r} is not a JSON object")
    missing = [c for c in _REQUIRED if c not in raw]
    if missing:
        raise LineError("missing_column", f"policy {policy!r}: missing column(s) {', '.join(missing)}")
    cols: dict[str, Any] = {}
    for k, v in raw.items():
        if k in _NOT_COLUMNS or k.startswith("state_in_"):  # state_in_*: one entry per sequence, not per step
            continue
        cols[k] = list(v) if k == "eps_id" and isinstance(v, list) else _decode_column(k, v, budget)
    eps = _eps_ids(cols["eps_id"])
    n = len(eps)
    lengths = {k: len(v) for k, v in cols.items()}
    bad = {k: m for k, m in lengths.items() if m != n}
    if bad:
        shown = ", ".join(f"{k}={m}" for k, m in sorted(bad.items()))
        raise LineError("inconsistent_lengths", f"policy {policy!r}: eps_id has {n} entries but {shown}")
    for name in ("obs", "new_obs", "actions", "rewards", "t"):
        if not isinstance(cols[name], np.ndarray):
            raise LineError("bad_column", f"policy {policy!r}: column {name!r} is not a numeric array")
    t = cols["t"].astype(np.int64).reshape(-1)
    agents = np.asarray(cols.get("agent_index", np.zeros(n)), dtype=np.int64).reshape(-1)
    term, trunc, legacy = _end_flags(cols, n)
    extras = {k: v for k, v in cols.items() if k not in DROPPED_COLUMNS and k not in ("obs", "actions", "rewards")}
    dropped = tuple(sorted(k for k in raw if k in DROPPED_COLUMNS or k.startswith("state_in_")))
    order: dict[tuple[str, int], list[int]] = {}
    for i, key in enumerate(zip(eps, agents.tolist())):
        order.setdefault(key, []).append(i)
    fragments = []
    for (eps_id, agent), rows in order.items():
        rows_arr = np.asarray(rows)
        breaks = np.flatnonzero(np.diff(t[rows_arr]) != 1) + 1
        for run in np.split(rows_arr, breaks):
            obs = cols["obs"][run]
            new_obs = cols["new_obs"][run]
            columns = {
                "obs": obs,
                "next_obs": new_obs[-1:],
                "actions": cols["actions"][run],
                "rewards": cols["rewards"][run].astype(np.float64).reshape(-1),
                "terminated": term[run],
                "truncated": trunc[run],
            }
            columns.update({k: _take(v, run) for k, v in extras.items()})
            fragments.append(Fragment(
                policy=policy, eps_id=eps_id, agent_index=int(agent), t_first=int(t[run[0]]), columns=columns,
                obs_continuous=_same(new_obs[:-1], obs[1:]), legacy_dones=legacy, dropped=dropped,
            ))
    return fragments


def parse_line(text: str | bytes, limits: DecodeLimits | None = None) -> list[Fragment]:
    """Parse one line into fragments; raises :class:`LineError` when the line cannot be read.

    Packed values are decoded within ``limits`` (default :class:`DecodeLimits`): a value over
    a cap makes the line unreadable with reason ``too_large``.
    """
    budget = (limits or DecodeLimits()).budget(len(text))
    try:
        record = json.loads(text)  # ints stay exact Python ints; NaN/Infinity tokens are accepted
    except UnicodeDecodeError as exc:  # one line only: the lines after it are read as usual
        raise LineError("bad_encoding", f"byte 0x{exc.object[exc.start]:02x} (byte {exc.start + 1} of the line) "
                                        "is not UTF-8 (a recording is UTF-8 JSON)") from exc
    except json.JSONDecodeError as exc:
        raise LineError("bad_json", f"not valid JSON: {exc}") from exc
    fragments = []
    for policy, raw in _batches(record):
        fragments.extend(_policy_fragments(policy, raw, budget))
    return fragments
