"""The Ray Data user functions of ``convert samplebatch``, stage by stage.

1. ``read_ranges``: one byte range of one file → fragment rows (one per
   episode piece found in a line), quarantine rows (unreadable lines, with the
   raw text) and one stats row per range. A generator: it yields a block every
   few thousand lines, so a task never holds a whole file.
2. ``stitch_group``: after ``groupby("key")``, all fragments of one
   (eps_id, agent_index) → one episode row, or quarantine rows when the
   fragments come from several policies, name a policy that cannot be a module,
   overlap, leave gaps or disagree. Other rows pass through.
3. ``encode_stage_files``: each staged file's episode rows → a parquet file of
   the episode schema (``encode_episodes``), once the layout (spaces, extra
   columns) is known.

Every stage row has the same schema (``STAGE_SCHEMA``); per-row details travel
as a small JSON ``meta`` text and the data as a pickle-free ``payload``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from offlinerl.convert.limits import TOO_LARGE, DecodeLimits
from offlinerl.convert.payload import decode_columns, encode_columns
from offlinerl.convert.samplebatch.files import FileRange, LongLine, iter_range_lines
from offlinerl.convert.samplebatch.layout import describe
from offlinerl.convert.samplebatch.lines import LineError, parse_line
from offlinerl.convert.stitch import Piece, Stitched, stitch
from offlinerl.episodes import schema as S
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table
from offlinerl.episodes.fingerprint import table_digests
from offlinerl.episodes.schema import JSON_DTYPE
from offlinerl.episodes.spaces import space_from_json
from offlinerl.ray_utils import node_id

__all__ = [
    "STAGE_SCHEMA", "read_ranges", "stitch_group", "encode_episodes", "encode_stage_files", "fragment_key", "group_key",
    "unsquash",
]

STAGE_SCHEMA = pa.schema([
    pa.field("key", pa.string()),
    pa.field("kind", pa.string()),  # fragment | episode | quarantine | stats
    pa.field("file_index", pa.int64()),
    pa.field("offset", pa.int64()),
    pa.field("t_first", pa.int64()),
    pa.field("payload", pa.binary()),
    pa.field("meta", pa.string()),
])

_FLUSH_BYTES = 16 * 1024 * 1024
_FLUSH_ROWS = 4096


def fragment_key(policy: str | None, eps_id: str, agent_index: int) -> str:
    """The key of one policy's agent-episode: the unit that is written, excluded or quarantined."""
    return f"{policy or ''}\x1f{eps_id}\x1f{agent_index}"


def group_key(eps_id: str, agent_index: int) -> str:
    """The group-by key of a fragment: one agent of one episode, whatever the policy, so that fragments of two
    policies meet in one group and are caught there (``policy_conflict``) instead of becoming two rows that share
    one ``(episode_id, agent_id)``."""
    return f"\x1f{eps_id}\x1f{agent_index}"


def _table(rows: list[tuple]) -> pa.Table:
    cols = list(zip(*rows)) if rows else [[] for _ in STAGE_SCHEMA]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, STAGE_SCHEMA)], schema=STAGE_SCHEMA)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def read_ranges(batch: pa.Table, limits: DecodeLimits | None = None) -> Iterator[pa.Table]:
    """Stage 1 (``map_batches`` generator, one :class:`FileRange` per input row).

    Lines and packed values are read within ``limits``: a line longer than ``max_value_bytes`` is
    quarantined (``too_large``, with its first bytes) without ever being held whole.
    """
    limits = limits or DecodeLimits()
    for r in batch.to_pylist():
        rng = FileRange(**r)
        aux_key = f"\x00aux/{rng.file_index}/{rng.start}"
        rows: list[tuple] = []
        size = lines = legacy = 0
        dropped: set[str] = set()
        for offset, raw in iter_range_lines(rng, limits.max_value_bytes):
            if isinstance(raw, LongLine):
                raw, error = raw.head + b"...", limits.value_error("the line", raw.length)
            elif not raw.strip():
                continue
            else:
                error = None
            lines += 1
            try:
                if error is not None:
                    raise LineError(TOO_LARGE, str(error))
                fragments = parse_line(raw, limits)
                new_rows = [
                    (group_key(f.eps_id, f.agent_index), "fragment", rng.file_index, offset, f.t_first,
                     encode_columns(f.columns),
                     _dumps({"policy": f.policy, "eps_id": f.eps_id, "agent": f.agent_index, "cont": f.obs_continuous}))
                    for f in fragments
                ]
            except Exception as exc:  # anything wrong with one line must not stop the conversion
                reason = exc.reason if isinstance(exc, LineError) else "unreadable"
                message = str(exc) if isinstance(exc, LineError) else f"{type(exc).__name__}: {exc}"
                fragments = []
                new_rows = [(aux_key, "quarantine", rng.file_index, offset, -1, raw,
                             _dumps({"level": "line", "reason": reason, "message": message}))]
            rows.extend(new_rows)
            size += sum(len(r[5]) for r in new_rows)
            legacy += any(f.legacy_dones for f in fragments)
            for f in fragments:
                dropped.update(f.dropped)
            if size >= _FLUSH_BYTES or len(rows) >= _FLUSH_ROWS:
                yield _table(rows)
                rows, size = [], 0
        stats = {"lines": lines, "legacy_dones_lines": legacy, "dropped": sorted(dropped), "node": node_id()}
        rows.append((aux_key, "stats", rng.file_index, max(rng.start, 0), -1, b"", _dumps(stats)))
        yield _table(rows)


def stitch_group(group: pa.Table, check_obs: bool = True) -> pa.Table:
    """Stage 2 (``map_groups``): stitch one agent-episode's fragments, or pass aux rows through.

    Before stitching, the group is refused whole when its fragments come from several policies
    (``policy_conflict``) or its policy id cannot name a module (``bad_policy_id``): both would write rows that
    ``offlinerl validate`` fails or that training cannot use.
    """
    kinds = group.column("kind").to_pylist()
    if kinds[0] != "fragment":
        return group.select(STAGE_SCHEMA.names)
    metas = [json.loads(m) for m in group.column("meta").to_pylist()]
    files = group.column("file_index").to_pylist()
    offsets = group.column("offset").to_pylist()
    t_first = group.column("t_first").to_pylist()
    payloads = group.column("payload").to_pylist()
    pieces = [
        Piece(t_first=t, source=(fi, off), columns=decode_columns(p), obs_continuous=m["cont"])
        for t, fi, off, p, m in zip(t_first, files, offsets, payloads, metas)
    ]
    first = metas[0]
    ident = {"policy": first["policy"], "eps_id": first["eps_id"], "agent": first["agent"]}
    key = fragment_key(first["policy"], first["eps_id"], first["agent"])

    def quarantined(reason: str, message: str) -> pa.Table:
        return _table([
            (fragment_key(m["policy"], m["eps_id"], m["agent"]), "quarantine", p.source[0], p.source[1], p.t_first,
             b"", _dumps({
                 "level": "episode", "reason": reason, "message": message,
                 "episode": {"policy": m["policy"], "eps_id": m["eps_id"], "agent": m["agent"],
                             "t_first": p.t_first, "t_last": p.t_stop - 1}, "steps": p.length,
             }))
            for p, m in sorted(zip(pieces, metas), key=lambda pm: (pm[0].t_first, pm[0].source))
        ])

    refused = _policy_problem(metas)
    if refused is not None:
        return quarantined(*refused)
    try:
        result = stitch(pieces, check_obs=check_obs)
        if not isinstance(result, Stitched):
            return quarantined(result.reason, result.message)
        cols = result.columns
        problem = _non_finite(cols, result.t_start)
        if problem is not None:
            return quarantined("non_finite", problem)
        layout = {"obs": describe(cols["obs"]), "actions": describe(cols["actions"]),
                  "extras": {k: describe(v) for k, v in cols.items() if k not in ("obs", "actions", "rewards")}}
        payload = encode_columns(cols)
    except Exception as exc:  # e.g. fragments whose observations have different shapes
        return quarantined("unstitchable", f"{type(exc).__name__}: {exc}")
    meta = {**ident, "t_start": result.t_start, "steps": len(cols["rewards"]), "terminated": result.terminated,
            "truncated": result.truncated, "by_recording": result.truncated_by_recording,
            "fragments": result.num_fragments, "layout": layout}
    src = min(p.source for p in pieces)
    return _table([(key, "episode", src[0], src[1], result.t_start, payload, _dumps(meta))])


def _policy_problem(metas: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(reason, message)`` when one agent-episode's fragments cannot be written as one row of one module.

    RLlib's old stack maps an agent to one policy per episode; fragments of two policies are neither one episode
    nor two (both would be stored as the same ``(episode_id, agent_id)``, and which policy acted is unknown). A
    policy id becomes the rows' ``module_id``, which must be a valid module id (``episodes.schema.module_id_problem``).
    """
    first = metas[0]
    policies = sorted({m["policy"] for m in metas}, key=lambda p: (p is not None, p or ""))
    if len(policies) > 1:
        names = ", ".join("none (a SampleBatch line)" if p is None else repr(p) for p in policies)
        return ("policy_conflict", f"agent_index {first['agent']} of episode {first['eps_id']} is recorded under "
                                   f"{len(policies)} policies ({names}); an agent belongs to one policy within an "
                                   "episode, so these steps are not one episode, and as two they would share one "
                                   "(episode_id, agent_id)")
    if policies[0] is not None and (problem := S.module_id_problem(policies[0])) is not None:
        return "bad_policy_id", f"policy id {policies[0]!r} is stored as the rows' module_id, and {problem}"
    return None


def _non_finite(cols: dict[str, Any], t_start: int) -> str | None:
    """Why an episode cannot be trained on as stored (NaN/inf rewards, NaN observations or actions), or None."""
    checks = (("rewards", ~np.isfinite(np.asarray(cols["rewards"], dtype=np.float64))),
              ("obs", _nan_rows(cols["obs"])), ("actions", _nan_rows(cols["actions"])))
    for name, bad in checks:
        if bad.any():
            t = t_start + int(np.flatnonzero(bad)[0])
            return f"{name} at t={t} is not finite ({int(bad.sum())} step(s)); NaN was recorded (NaN token or \"null\")"
    return None


def _nan_rows(values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind != "f":
        return np.zeros(len(arr), dtype=bool)
    return np.isnan(arr.reshape(len(arr), -1)).any(axis=1)


@functools.lru_cache(maxsize=16)
def _space(text: str) -> gym.Space:
    return space_from_json(json.loads(text))


def _as_space(value: Any, space: gym.Space) -> np.ndarray:
    arr = np.asarray(value)
    if isinstance(space, gym.spaces.Discrete):
        return arr.reshape(-1).astype(np.int64)
    dtype = np.int8 if isinstance(space, gym.spaces.MultiBinary) else space.dtype
    return arr.astype(dtype).reshape((len(arr), *space.shape))


def unsquash(actions: np.ndarray, space: gym.spaces.Box) -> np.ndarray:
    """RLlib's ``normalize_actions`` inverse: ``clip(low + (a + 1)(high - low) / 2, low, high)``."""
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    a = np.asarray(actions, dtype=np.float64)
    return np.clip(low + (a + 1.0) * (high - low) / 2.0, low, high).astype(space.dtype)


def _extra_values(value: Any, spec: dict[str, Any], steps: int) -> Any:
    if spec["dtype"] != JSON_DTYPE:
        return np.asarray(value).astype(spec["dtype"]).reshape((steps, *spec["shape"]))
    if value is None:  # this episode did not record the column
        return ["null"] * steps
    items = value.tolist() if isinstance(value, np.ndarray) else value
    return [json.dumps(v) for v in items]


def encode_episodes(
    batch: pa.Table,
    *,
    observation_space: str,
    action_space: str,
    extra_columns: dict[str, dict[str, Any]],
    multi_agent: bool,
    unsquash_actions: bool,
    max_steps_per_row: int,
    excluded: frozenset[str] = frozenset(),
) -> pa.Table:
    """Stage 3 (``map_batches``): episode rows → episode-schema rows (long episodes split into chunks)."""
    obs_space, act_space = _space(observation_space), _space(action_space)
    episodes = []
    for key, kind, payload, meta in zip(*(batch.column(n).to_pylist() for n in ("key", "kind", "payload", "meta"))):
        if kind != "episode" or key in excluded:
            continue
        m = json.loads(meta)
        cols = decode_columns(payload)
        steps = int(m["steps"])
        actions = _as_space(cols["actions"], act_space)
        if unsquash_actions:
            actions = unsquash(actions, act_space)
        ep = SingleAgentEpisode(
            id=m["eps_id"],
            obs=_as_space(cols["obs"], obs_space),
            actions=actions,
            rewards=cols["rewards"],
            terminated=m["terminated"],
            truncated=m["truncated"],
            t_start=m["t_start"],
            agent_id=str(m["agent"]) if multi_agent else None,
            module_id=m["policy"] if multi_agent else None,
            extras={n: _extra_values(cols.get(n), spec, steps) for n, spec in extra_columns.items()},
        )
        ep.check()
        episodes.extend(ep.split(max_steps_per_row))
    return episodes_to_table(episodes, obs_space, act_space, extra_columns)


def encode_stage_files(batch: pa.Table, *, out_dir: str, batch_rows: int = 64, **layout: Any) -> pa.Table:
    """Stage 3 (``map_batches``, one staged file per input row): encode and write ``out_dir/enc-<i>.parquet``.

    Reads the staged file in small batches and appends row groups, so a task holds
    ``batch_rows`` episodes at a time. Returns ``{"path", "rows", "node", "digest", "modules"}`` per written file
    (``node``: the Ray node that wrote it; ``digest``: the hex sum of its row digests, the part of the dataset's
    fingerprint it makes, hashed as it is written as ``write_dataset`` does; ``modules``: the module ids of its
    rows), so that the driver never reads the data back.
    """
    paths, counts, digests, modules = [], [], [], []
    node = node_id()
    for index, stage_path in zip(batch.column("index").to_pylist(), batch.column("path").to_pylist()):
        target = f"{out_dir}/enc-{index:05d}.parquet"
        writer, rows, total, mine = None, 0, 0, set()
        source = pq.ParquetFile(stage_path)
        for rb in source.iter_batches(batch_size=batch_rows, columns=["key", "kind", "payload", "meta"]):
            table = encode_episodes(pa.Table.from_batches([rb]), **layout)
            if table.num_rows == 0:
                continue
            if writer is None:
                writer = pq.ParquetWriter(target, table.schema)
            writer.write_table(table)
            rows += table.num_rows
            total += table_digests(table)[0]
            mine.update(map(S.row_module_id, table.column(S.MODULE_ID).to_pylist(),
                            table.column(S.AGENT_ID).to_pylist()))
        if writer is not None:
            writer.close()
            paths.append(target)
            counts.append(rows)
            digests.append(f"{total:x}")  # summed mod 2^256 by fingerprint.combine
            modules.append(sorted(mine))
    return pa.table({"path": pa.array(paths, pa.string()), "rows": pa.array(counts, pa.int64()),
                     "node": pa.array([node] * len(paths), pa.string()), "digest": pa.array(digests, pa.string()),
                     "modules": pa.array(modules, pa.list_(pa.string()))})
