"""``offlinerl convert samplebatch``: RLlib old-stack ``JsonWriter`` recordings
(SampleBatch / MultiAgentBatch JSON lines) → an episode parquet dataset.

The work runs on Ray Data and streams: byte ranges of the input files are
parsed into per-episode fragments (``samplebatch_stages.read_ranges``), a
distributed ``groupby(key).map_groups`` stitches each episode
(``stitch_group``) into a staging area inside the output's temporary
directory, the driver reads only the small per-episode metadata to decide the
layout (spaces, extra columns) and count, and a second Ray pass encodes the
staged episodes into the final parquet files. Unreadable lines and ambiguous
episodes go to ``OUT/_quarantine/records.jsonl`` (:mod:`offlinerl.convert.quarantine`). ``docs/convert.md``
describes what is read, inferred, kept and dropped.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq

from offlinerl.convert.grouped import sort_shuffle
from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.limits import DEFAULT_MAX_VALUE_BYTES, DecodeLimits
from offlinerl.convert.quarantine import QuarantineWriter, raw_excerpt
from offlinerl.convert.report import ConversionReport
from offlinerl.convert.spaces import env_spaces
from offlinerl.convert.samplebatch.files import (
    DEFAULT_RANGE_BYTES,
    InputError,
    line_numbers,
    plan_ranges,
    resolve_inputs,
)
from offlinerl.convert.samplebatch.layout import ColumnStats, conforms, extra_spec, infer_space, out_of_bounds
from offlinerl.convert.samplebatch.output import SOURCE_FORMAT, dataset_info
from offlinerl.convert.samplebatch.stages import encode_stage_files, read_ranges, stitch_group
from offlinerl.episodes.episode import episodes_to_table
from offlinerl.episodes.atomic import atomic_directory, check_output, refuse_quarantine_over_existing
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW
from offlinerl.episodes.spaces import space_to_json

__all__ = ["SampleBatchConvertConfig", "ConversionReport", "convert_samplebatch"]

#: Staged episodes per parquet row group: bounds what one encode task reads at once.
_STAGE_ROW_GROUP = 128


@dataclass(frozen=True, kw_only=True)
class SampleBatchConvertConfig:
    """What to convert and how."""

    inputs: tuple[str, ...]
    """Files, directories (their ``output-*.json[.gz]``) or globs."""
    output: str
    """Dataset directory to create."""
    env_id: str | None = None
    """Gymnasium id whose spaces describe the data (``gym.make(env_id)``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """``gym.make`` keyword arguments of the recorded task (stored in the dataset's env spec)."""
    observation_space: gym.Space | None = None
    """Observation space, when not taken from ``env_id``; inferred from the data if neither is given."""
    action_space: gym.Space | None = None
    """Action space, when not taken from ``env_id``; inferred from the data if neither is given."""
    unsquash_actions: bool = False
    """Map actions from RLlib's normalised [-1, 1] space to the Box bounds: ``clip(low + (a+1)(high-low)/2)``."""
    overwrite: bool = False
    """Replace an existing output dataset (never an input, a file or another kind of directory)."""
    allow_quarantine: bool = False
    """With ``overwrite``: replace an existing dataset even though records were quarantined."""
    max_steps_per_row: int = DEFAULT_MAX_STEPS_PER_ROW
    """Episodes longer than this are stored as several chunk rows."""
    check_obs: bool = True
    """Quarantine episodes where ``new_obs[i] != obs[i+1]`` (fragments that do not belong together)."""
    range_bytes: int = DEFAULT_RANGE_BYTES
    """Uncompressed files larger than this are read in parallel byte ranges of this size."""
    num_partitions: int | None = None
    """Partitions of the episode group-by shuffle (default: from the input size)."""
    progress: bool | None = None
    """Show Ray Data progress bars (None: leave Ray Data's setting as it is)."""
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    """Cap on one packed value once decompressed and on one array it declares (checked before allocating);
    a line over it is quarantined as ``too_large``. Raise it only for a trusted recording."""

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ConvertUsageError("inputs: give at least one file, directory or glob")
        if self.env_id and (self.observation_space is not None or self.action_space is not None):
            raise ConvertUsageError("env_id: give either an env id or explicit spaces, not both")
        if self.max_steps_per_row < 1:
            raise ConvertUsageError(f"max_steps_per_row must be >= 1, got {self.max_steps_per_row}")
        if self.range_bytes < 1:
            raise ConvertUsageError(f"range_bytes must be >= 1, got {self.range_bytes}")
        if self.max_value_bytes < 1:
            raise ConvertUsageError(f"max_value_bytes must be >= 1, got {self.max_value_bytes}")

    @property
    def decode_limits(self) -> DecodeLimits:
        """The caps on decoded values (:mod:`offlinerl.convert.limits`)."""
        return DecodeLimits(max_value_bytes=self.max_value_bytes)


def _is_bounded_box(space: gym.Space | None) -> bool:
    return isinstance(space, gym.spaces.Box) and bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))


def _stage_rows(stage: Path, columns: list[str], kind: str | None = None) -> Iterator[dict[str, Any]]:
    for f in sorted(stage.glob("*.parquet")):
        filters = [("kind", "=", kind)] if kind else None
        table = pq.read_table(f, columns=columns, filters=filters)
        for batch in table.to_batches(max_chunksize=4096):
            yield from batch.to_pylist()


@dataclass
class _Layout:
    """What the staged episodes hold, gathered from their metadata."""

    obs: ColumnStats = field(default_factory=ColumnStats)
    actions: ColumnStats = field(default_factory=ColumnStats)
    extras: dict[str, ColumnStats] = field(default_factory=lambda: defaultdict(ColumnStats))
    episodes: int = 0
    policies: set[str | None] = field(default_factory=set)
    agents: set[int] = field(default_factory=set)


def _scan_layout(stage: Path, report: ConversionReport) -> _Layout:
    """First pass over the staged metadata: column layouts, line stats, policies."""
    layout = _Layout()
    dropped: set[str] = set()
    for row in _stage_rows(stage, ["kind", "meta"]):
        meta = json.loads(row["meta"])
        if row["kind"] == "episode":
            layout.episodes += 1
            layout.obs.add(meta["layout"]["obs"])
            layout.actions.add(meta["layout"]["actions"])
            for name, desc in meta["layout"]["extras"].items():
                layout.extras[name].add(desc)
            layout.policies.add(meta["policy"])
            layout.agents.add(meta["agent"])
        elif row["kind"] == "stats":
            if meta.get("node"):
                report.ray_nodes = sorted({*report.ray_nodes, meta["node"]})
            report.records_read += meta["lines"]
            report.details["legacy_dones_lines"] += meta["legacy_dones_lines"]
            dropped.update(meta["dropped"])
    report.dropped_columns = sorted(dropped)
    return layout


def _write_quarantine(stage: Path, out_dir: Path, files: list[Path], extra_records: list[dict[str, Any]],
                      report: ConversionReport) -> None:
    """Count quarantine rows and write them (with 1-based line numbers) to the quarantine file."""
    offsets: dict[int, list[int]] = defaultdict(list)
    episodes: dict[str, list[Any]] = {}
    for row in _stage_rows(stage, ["key", "file_index", "offset", "meta"], kind="quarantine"):
        offsets[row["file_index"]].append(row["offset"])
        meta = json.loads(row["meta"])
        if meta["level"] == "line":
            report.add_record_reason(meta["reason"])
        else:
            entry = episodes.setdefault(row["key"], [meta["reason"], 0])
            entry[1] += meta["steps"]
    for reason, steps in episodes.values():
        report.add_episode_reason(reason, steps)
    for rec in extra_records:
        offsets[rec["file_index"]].append(rec["offset"])
        report.add_episode_reason(rec["reason"], rec["steps"])
    if not offsets:
        return
    numbers = {fi: line_numbers(str(files[fi]), offs) for fi, offs in offsets.items()}

    def where(fi: int, off: int) -> dict[str, Any]:
        return {"file": str(files[fi]), "line": numbers[fi].get(off), "byte_offset": off}

    with QuarantineWriter(out_dir) as out:
        for row in _stage_rows(stage, ["file_index", "offset", "payload", "meta"], kind="quarantine"):
            meta = json.loads(row["meta"])
            rec = {**where(row["file_index"], row["offset"]), "level": meta["level"], "reason": meta["reason"],
                   "message": meta["message"]}
            if meta["level"] == "line":
                rec.update(raw_excerpt(row["payload"].decode("utf-8", errors="replace").rstrip("\n")))
            else:
                rec["episode"] = meta["episode"]
            out.write(rec)
        for rec in extra_records:
            out.write({**where(rec["file_index"], rec["offset"]), "level": "episode",
                       "reason": rec["reason"], "message": rec["message"], "episode": rec["episode"]})
    report.quarantine_file = out.relative_path


def _check_episodes(stage: Path, obs_space: gym.Space, act_space: gym.Space, max_steps: int, unsquash: bool,
                    report: ConversionReport) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """Second pass over the staged metadata: episodes that do not fit the spaces, and the counts."""
    rejected: list[dict[str, Any]] = []
    for row in _stage_rows(stage, ["key", "file_index", "offset", "meta"], kind="episode"):
        meta = json.loads(row["meta"])
        problem = conforms(meta["layout"]["obs"], obs_space)
        what = "observations"
        if problem is None:
            problem, what = conforms(meta["layout"]["actions"], act_space), "actions"
        if problem is not None:
            rejected.append({
                "key": row["key"], "file_index": row["file_index"], "offset": row["offset"], "steps": meta["steps"],
                "reason": "space_mismatch", "message": f"{what} do not fit the space: {problem}",
                "episode": {k: meta[k] for k in ("policy", "eps_id", "agent", "t_start", "steps")},
            })
            continue
        report.episodes += 1
        report.steps += meta["steps"]
        report.rows += math.ceil(meta["steps"] / max_steps)
        report.terminated += meta["terminated"]
        report.truncated += meta["truncated"]
        report.truncated_by_recording += meta["by_recording"]
        report.details["observations_out_of_bounds"] += out_of_bounds(meta["layout"]["obs"], obs_space)
        report.details["actions_out_of_bounds"] += not unsquash and out_of_bounds(meta["layout"]["actions"], act_space)
    if report.details["observations_out_of_bounds"]:
        report.notes.append(f"{report.details['observations_out_of_bounds']} episode(s) have observations outside "
                            "the observation space bounds")
    if report.details["actions_out_of_bounds"]:
        report.notes.append(f"{report.details['actions_out_of_bounds']} episode(s) have actions outside the action "
                            "space bounds (recorded in RLlib's normalised space? see --unsquash-actions)")
    if report.details["legacy_dones_lines"]:
        report.notes.append(f"{report.details['legacy_dones_lines']} line(s) hold legacy 'dones' only: terminated/"
                            "truncated inferred")
    return rejected, frozenset(r["key"] for r in rejected)


def _default_partitions(files: list[Path]) -> int:
    """About one shuffle partition per 32 MiB of input, so a partition's share stays bounded."""
    total = sum(f.stat().st_size for f in files)
    return max(2, min(512, -(-total // (32 * 1024 * 1024))))


def _stage_episodes(files: list[Path], stage: Path, config: SampleBatchConvertConfig) -> None:
    """Ray pass 1: byte ranges → fragments → group-by episode → stitched episodes, staged as parquet (grouped with
    the sort shuffle, as the other converters: ``grouped.sort_shuffle``)."""
    import ray.data

    with sort_shuffle():  # entered before the dataset is made: a Ray Dataset keeps the DataContext it was made in
        ranges = plan_ranges(files, config.range_bytes)
        parts = ray.data.from_items([asdict(r) for r in ranges], override_num_blocks=len(ranges))
        fragments = parts.map_batches(read_ranges, batch_size=1, batch_format="pyarrow",
                                      fn_kwargs={"limits": config.decode_limits})
        grouped = fragments.groupby("key", num_partitions=config.num_partitions or _default_partitions(files))
        stitched = grouped.map_groups(stitch_group, batch_format="pyarrow", fn_kwargs={"check_obs": config.check_obs})
        # Without row_group_size every group's output becomes its own row group (thousands per file).
        stitched.write_parquet(str(stage), row_group_size=_STAGE_ROW_GROUP)


def _choose_spaces(layout: _Layout, obs_space: gym.Space | None, act_space: gym.Space | None,
                   report: ConversionReport) -> tuple[gym.Space, gym.Space]:
    """The given spaces, else spaces inferred from the data (an empty placeholder, said so, if no episode)."""
    if layout.episodes:
        try:
            obs_space = obs_space if obs_space is not None else infer_space(layout.obs, "observations")
            act_space = act_space if act_space is not None else infer_space(layout.actions, "actions")
        except ValueError as exc:
            raise ConvertUsageError(f"{exc}; pass --env or --observation-space/--action-space") from exc
        return obs_space, act_space
    if obs_space is None:
        obs_space = gym.spaces.Box(-np.inf, np.inf, shape=(0,), dtype=np.float32)
        report.observation_space_from = "unknown (no episode to infer it from)"
    if act_space is None:
        act_space = gym.spaces.Box(-np.inf, np.inf, shape=(0,), dtype=np.float32)
        report.action_space_from = "unknown (no episode to infer it from)"
    return obs_space, act_space


def _encode_staged(stage: Path, out_dir: Path, layout_kwargs: dict[str, Any],
                   report: ConversionReport) -> list[dict[str, Any]]:
    """Ray pass 2: each staged file → one parquet file of the episode schema; returns what the tasks say of the
    files they wrote (``stages.encode_stage_files``: path, rows, fingerprint part, module ids), sorted by path (and
    adds the nodes that wrote them to ``report.ray_nodes``)."""
    import ray.data

    out_dir.mkdir()
    items = [{"index": i, "path": str(p)} for i, p in enumerate(sorted(stage.glob("*.parquet")))]
    encoded = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        encode_stage_files, batch_size=1, batch_format="pyarrow", fn_kwargs={"out_dir": str(out_dir), **layout_kwargs},
    )
    rows = list(encoded.iter_rows())
    report.ray_nodes = sorted({*report.ray_nodes, *(row["node"] for row in rows if row["node"])})
    return sorted(rows, key=lambda row: row["path"])


def convert_samplebatch(config: SampleBatchConvertConfig) -> ConversionReport:
    """Convert legacy RLlib SampleBatch JSON recordings; returns the report (also in ``dataset.json``).

    Raises :class:`ConvertUsageError` for bad inputs/flags, ``OutputExistsError`` when the output
    exists without ``overwrite``, ``UnsafeOutputError`` for an output that may not be written (an
    input, or something that is not a dataset) and ``QuarantineKeptError`` when quarantined records
    would replace an existing dataset without ``allow_quarantine``. Bad *data* never raises: it is
    quarantined.
    """
    import ray.data

    from offlinerl.ray_utils import init_ray

    try:
        files = resolve_inputs(list(config.inputs))
    except InputError as exc:
        raise ConvertUsageError(str(exc)) from exc
    out = Path(config.output)
    inputs = [*files, *(item for item in config.inputs if Path(item).is_dir())]
    check_output(out, config.overwrite, kind="dataset", inputs=inputs)
    report = ConversionReport(
        source_format=SOURCE_FORMAT, record_unit="lines",
        output=str(out.resolve()), files=len(files),
        details={"legacy_dones_lines": 0, "observations_out_of_bounds": 0, "actions_out_of_bounds": 0,
                 "multi_agent": False, "policies": [], "actions_unsquashed": False},
    )
    obs_space, act_space, env_spec = config.observation_space, config.action_space, None
    if config.env_id:
        env = env_spaces(config.env_id, config.env_kwargs)
        obs_space, act_space, env_spec = env.observation_space, env.action_space, env.env_spec
        report.observation_space_from = report.action_space_from = f"env {config.env_id}"
    else:
        report.observation_space_from = "given" if obs_space is not None else "inferred"
        report.action_space_from = "given" if act_space is not None else "inferred"
    for what, space in (("observation", obs_space), ("action", act_space)):
        if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
            raise ConvertUsageError(
                f"{what} space {space}: legacy recordings hold flattened arrays; give the flattened Box instead"
            )
    if config.unsquash_actions and not _is_bounded_box(act_space):
        raise ConvertUsageError(
            "--unsquash-actions needs a bounded Box action space from --env or --action-space "
            f"(got {act_space if act_space is not None else 'an inferred, unbounded space'})"
        )
    report.details["actions_unsquashed"] = config.unsquash_actions
    init_ray()
    if config.progress is not None:
        ray.data.DataContext.get_current().enable_progress_bars = config.progress
    with atomic_directory(out, overwrite=config.overwrite, kind="dataset", inputs=inputs) as tmp:
        stage = tmp / ".stage"
        _stage_episodes(files, stage, config)
        layout = _scan_layout(stage, report)
        multi_agent = bool(layout.policies - {None, "default_policy"}) or bool(layout.agents - {0})
        report.details["multi_agent"] = multi_agent
        report.details["policies"] = sorted(p for p in layout.policies if p is not None)
        obs_space, act_space = _choose_spaces(layout, obs_space, act_space, report)
        extras = {name: extra_spec(stats, layout.episodes) for name, stats in layout.extras.items()}
        report.kept_columns = {n: s["dtype"] + (f"{s['shape']}" if s["shape"] else "") for n, s in extras.items()}
        rejected, excluded = _check_episodes(stage, obs_space, act_space, config.max_steps_per_row,
                                             config.unsquash_actions, report)
        _write_quarantine(stage, tmp, files, rejected, report)
        refuse_quarantine_over_existing(out, report.quarantined, config.allow_quarantine, episodes=report.episodes)
        layout_kwargs = {
            "observation_space": json.dumps(space_to_json(obs_space)),
            "action_space": json.dumps(space_to_json(act_space)),
            "extra_columns": extras, "multi_agent": multi_agent,
            "unsquash_actions": config.unsquash_actions, "max_steps_per_row": config.max_steps_per_row,
            "excluded": excluded,
        }
        written = _encode_staged(stage, tmp / ".encoded", layout_kwargs, report) if report.episodes else []
        for i, f in enumerate(written):
            os.rename(f["path"], tmp / f"part-{i:05d}.parquet")
        if not written:
            pq.write_table(episodes_to_table([], obs_space, act_space, extras), tmp / "part-00000.parquet")
        shutil.rmtree(tmp / ".encoded", ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)

        dataset_info(config, files, report, written, observation_space=obs_space, action_space=act_space,
                     env_spec=env_spec, extra_columns=extras).write(tmp)
    return report
