"""Convert step tables (CSV, parquet, JSON lines) into an episode dataset, as a Ray Data job.

1. ``from_items(files).map_batches(read_file)``: each file is read by one task into typed step rows
   (:mod:`offlinerl.convert.table.rows`), materialised.
2. Spaces: declared in the spec, else the env's (``env``), else inferred from those rows
   (:mod:`offlinerl.convert.table.infer`) and written into the dataset and the report for the user to check.
   With the spec's ``agent``, agents of different spaces (``agent_spaces`` in the spec, a PettingZoo env's, or
   inferred per agent where their widths differ) make a version-2 dataset (``offlinerl.episodes.agent_spaces``);
   agents that differ from one declared space, or in a way no storage space holds, are refused.
3. ``groupby(episode id[, agent id]).map_groups(build_episode)`` (:mod:`offlinerl.convert.table.episodes`).
4. Tally, then write atomically with the quarantine file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.report import ConversionReport
from offlinerl.convert.grouped import BY_RECORDING, QUARANTINE, STATUS, STEPS, GroupSettings, sort_shuffle, write_grouped
from offlinerl.convert.limits import DEFAULT_MAX_VALUE_BYTES, DecodeLimits
from offlinerl.convert.spaces import env_spaces
from offlinerl.convert.table.episodes import LOGP_COLUMN, EpisodeSettings, build_episode, leaf_spaces
from offlinerl.convert.table.infer import check_agents_agree, infer_spaces, merged, seen_by_agent
from offlinerl.convert.table.rows import NO_EPISODE, ReadSettings, find_table_files, group_keys, read_file
from offlinerl.convert.table.spec import TableSpec
from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import (AgentSpacesError, agent_spaces_from_json, agent_spaces_json,
                                             storage_spaces)
from offlinerl.episodes.atomic import atomic_directory, check_output, refuse_quarantine_over_existing
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW
from offlinerl.episodes.spaces import SpaceError, space_from_json, space_to_json

__all__ = ["convert_table"]

CONVERTER = "offlinerl.convert.table.convert"


def _storage(agent_spaces: dict[str, tuple[gym.Space, gym.Space]], what: str) -> tuple[gym.Space, gym.Space, Any]:
    """``(observation storage, action storage, agent spaces or None)`` (``ConvertUsageError`` when no storage
    space holds them)."""
    try:
        return storage_spaces({a: o for a, (o, _) in agent_spaces.items()},
                              {a: s for a, (_, s) in agent_spaces.items()}, what=what)
    except AgentSpacesError as exc:
        raise ConvertUsageError(str(exc)) from None


def _declared(spec: TableSpec, report: ConversionReport) -> tuple[gym.Space | None, gym.Space | None, dict | None,
                                                                   Any]:
    obs = act = env_spec = agent_spaces = None
    try:
        obs = space_from_json(spec.observation_space) if spec.observation_space else None
        act = space_from_json(spec.action_space) if spec.action_space else None
        if spec.agent_spaces:
            declared = agent_spaces_from_json(spec.agent_spaces, "spec")
            obs, act, agent_spaces = _storage(declared, "spec: agent_spaces")
            agent_spaces = agent_spaces or declared  # one space for all: still, only the agents named convert
    except (SpaceError, ValueError, KeyError, TypeError) as exc:
        raise ConvertUsageError(f"spec: a declared space is not a space in JSON form ({exc})") from exc
    given = "given (agent_spaces)" if agent_spaces is not None else "given"
    report.observation_space_from = given if obs else report.observation_space_from
    report.action_space_from = given if act else report.action_space_from
    if spec.env:
        env = env_spaces(spec.env, spec.env_kwargs, trusted=False, what="spec: env")  # a spec is a file: it chooses no module
        if obs is None and act is None and env.agent_spaces is not None:
            agent_spaces = env.agent_spaces
        if obs is None:
            obs, report.observation_space_from = env.observation_space, f"env {spec.env}"
        if act is None:
            act, report.action_space_from = env.action_space, f"env {spec.env}"
        env_spec = env.env_spec
    if obs is not None and {k for k, _ in leaf_spaces(obs)} != {k for k, _ in spec.observation.leaves}:
        raise ConvertUsageError(f"spec: observation has keys {[k for k, _ in spec.observation.leaves]}, "
                                f"the observation space {obs} has others")
    if act is not None and isinstance(act, (gym.spaces.Dict, gym.spaces.Tuple)):
        raise ConvertUsageError(f"spec: action space {act}: Dict/Tuple actions are not supported")
    return obs, act, env_spec, agent_spaces


def _per_agent(by_agent: dict, spec: TableSpec, unread: Sequence[str], report: ConversionReport) -> Any:
    """Agents whose inferred spaces differ: ``(storage spaces..., agent spaces)``; None when every agent's rows
    fit one inferred space (``check_agents_agree``), or for a Dict observation (refused as before)."""
    try:
        check_agents_agree(by_agent, spec, infer_action=True)
        return None
    except ConvertUsageError as exc:
        refusal = exc
    inferred = {a: infer_spaces(seen, spec, unread=unread)[:2] for a, seen in by_agent.items() if seen.readable}
    if spec.observation.is_dict or len({type(act) for _, act in inferred.values()}) > 1:
        raise refusal  # no storage space holds them: the refusal as it was
    obs, act, agent_spaces = _storage(inferred, f"the agents of column {spec.agent!r}") if inferred else (None,) * 3
    if agent_spaces is None:  # the agents whose rows hold actions agree: the others differ without a space to infer
        raise refusal
    report.notes.append("agents of different spaces, each inferred from its own rows: " + "; ".join(
        f"{a}: observation {o}, action {s}" for a, (o, s) in agent_spaces.items())
        + " (check them; declare agent_spaces in the spec for the real bounds)")
    report.observation_space_from = report.action_space_from = "inferred per agent from the data"
    return obs, act, agent_spaces


def convert_table(
    inputs: Sequence[str | Path], output: str | Path, spec: TableSpec, *,
    max_steps_per_row: int = DEFAULT_MAX_STEPS_PER_ROW, overwrite: bool = False, allow_quarantine: bool = False,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
) -> ConversionReport:
    """Convert step tables at ``inputs`` (files, directories, globs) into an episode dataset at ``output``.

    ``max_value_bytes`` caps a CSV cell and a JSON line, and (with 64x the file's size, if larger) what the
    spec's columns of a parquet file may decode to (:mod:`offlinerl.convert.table.sources`)."""
    import ray.data

    limits = DecodeLimits(max_value_bytes=max_value_bytes)
    items = [str(i) for i in inputs]
    files = [str(f) for f in find_table_files(items)]
    input_paths = [Path(f) for f in files] + [Path(i) for i in items if Path(i).is_dir()]
    check_output(output, overwrite, kind="dataset", inputs=input_paths)
    report = ConversionReport(source_format="step table (CSV / parquet / JSON lines)", record_unit="step rows",
                              output=str(Path(output).resolve()), files=len(files))
    obs_space, act_space, env_spec, agent_spaces = _declared(spec, report)
    read = ReadSettings(spec, tuple(files), limits)
    with sort_shuffle():  # entered before the read: a Ray Dataset keeps the DataContext it was made in
        rows = (ray.data.from_items([{"file_index": i} for i in range(len(files))])
                .map_batches(read_file, batch_size=1, batch_format="pyarrow", fn_kwargs={"settings": read})
                .materialize())
        if agent_spaces is None and (spec.agent or obs_space is None or act_space is None):
            by_agent, unread = seen_by_agent(rows, spec, files)
            per_agent = None
            if spec.agent and obs_space is None and act_space is None:
                per_agent = _per_agent(by_agent, spec, unread, report)
            if per_agent is not None:
                obs_space, act_space, agent_spaces = per_agent
            else:
                check_agents_agree(by_agent, spec, infer_action=act_space is None)
        if obs_space is None or act_space is None:
            obs_space, act_space, notes = infer_spaces(merged(by_agent), spec, obs_space, act_space, unread)
            report.notes += notes
            for what in ("observation", "action"):
                if getattr(report, f"{what}_space_from") == "inferred":
                    setattr(report, f"{what}_space_from", "inferred from the data")
        extra = {LOGP_COLUMN: {"dtype": "float32", "shape": []}} if spec.logp_column else {}
        group = GroupSettings(obs_space, act_space, extra, max_steps_per_row, agent_spaces)
        episodes = (rows.groupby(group_keys(spec), num_partitions=max(1, min(len(files) * 4, 64)))
                    .map_groups(build_episode, batch_format="pyarrow",
                                fn_kwargs={"settings": EpisodeSettings(spec, tuple(files), group)})
                    .materialize())
    quarantine, written, agents = _tally(episodes, report)
    if spec.agent:
        report.details["agents"] = len(agents)
    report.records_read = sum(1 for r in quarantine if r["level"] != "file") + report.steps + (
        0 if spec.next_observation else written)
    with atomic_directory(output, overwrite, kind="dataset", inputs=input_paths) as tmp:
        refuse_quarantine_over_existing(output, len(quarantine), allow_quarantine, episodes=written)
        _write(episodes, tmp, report, quarantine, group, spec, env_spec, files)
    return report


def _tally(ds, report: ConversionReport) -> tuple[list[dict], int, set[str]]:
    """Count what the group stage did; every quarantine record, the number of episodes written (an episode is
    one agent's, with the spec's ``agent``) and the agents they hold."""
    quarantine: list[dict] = []
    written, agents = 0, set()
    columns = [STATUS, QUARANTINE, BY_RECORDING, STEPS, S.TERMINATED, S.TRUNCATED, S.CHUNK_INDEX, S.EPISODE_ID,
               S.AGENT_ID]
    for batch in ds.select_columns(columns).iter_batches(batch_format="pyarrow", batch_size=4096):
        for row in batch.to_pylist():
            records = json.loads(row[QUARANTINE]) if row[QUARANTINE] else []
            quarantine.extend(records)
            if row[STATUS] != "ok":
                if row[S.EPISODE_ID] != NO_EPISODE:
                    episode_level = [r["reason"] for r in records if r["level"] == "episode"]
                    report.add_episode_reason(episode_level[0] if episode_level else "partly_unreadable",
                                              len(records))
                continue
            report.rows += 1
            report.steps += row[STEPS]
            written += row[S.CHUNK_INDEX] == 0
            agents.add(row[S.AGENT_ID])
            report.terminated += row[S.TERMINATED]
            if row[S.TRUNCATED]:
                report.truncated += 1
                report.truncated_by_recording += row[BY_RECORDING]
    files_bad = {r["file"]: r for r in quarantine if r["level"] == "file"}
    report.files_unreadable = len(files_bad)
    report.notes += [f"file not read: {path}: {r['reason']}: {r['message']}" for path, r in files_bad.items()]
    for rec in quarantine:
        if rec["level"] != "file":
            report.add_record_reason(rec["reason"])
    return quarantine, written, agents - {None}


def _write(ds, tmp: Path, report: ConversionReport, quarantine: list[dict], group: GroupSettings,
           spec: TableSpec, env_spec: dict | None, sources: Sequence[str]) -> None:
    """Write the dataset, its quarantine file and ``dataset.json`` into the output's temporary directory."""
    report.details["final_observation"] = ("next_observation column" if spec.next_observation
                                           else "last row of each episode")
    report.details["observation_space_json"] = space_to_json(group.observation_space)
    report.details["action_space_json"] = space_to_json(group.action_space)
    if group.agent_spaces is not None:
        report.details["agent_spaces_json"] = agent_spaces_json(group.agent_spaces)
    provenance = {
        "converter": CONVERTER, "source_format": "step table",
        "sources": list(sources) if len(sources) <= 100 else [*sources[:100], f"... {len(sources) - 100} more"],
    }
    write_grouped(ds, tmp, report, quarantine, group, env_id=spec.env, env_spec=env_spec, provenance=provenance)
